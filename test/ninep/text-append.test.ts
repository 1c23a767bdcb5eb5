/**
 * A text file's stat gives its true length, so a client appending at the end (echo >> plan through a FUSE mount)
 * writes there — and is refused as leaving a hole, with the value intact — instead of writing at 0 and replacing
 * the value it meant to extend.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { build, Dir, Leaf, OWRITE } from '../../src/ninep/index.js';
import { serve, type TestServer } from './helpers.js';

let t: TestServer<unknown> | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe('text files', () => {
  it('stat gives the value\'s length; a write past what this fid wrote is refused and the value stays', async () => {
    let value = 'first line\n';
    const ns = build(Dir('/', Leaf('plan', { text: { get: () => value, set: (_c, v) => void (value = v) } })), { uid: 'alice' });
    t = await serve({ fs: ns as never });
    const c = await t.client();
    expect((await c.stat('plan')).length).toBe(Buffer.byteLength(value));
    const f = await c.open('plan', OWRITE);
    await expect(f.write(Buffer.byteLength(value), new TextEncoder().encode('appended\n'))).rejects.toThrow(/would leave a hole/);
    await f.clunk();
    expect(value).toBe('first line\n');
  });
});
