/**
 * Text files (plan, env, config files) under the writes real clients send:
 *  - an append (`echo >> plan` through 9pfuse or a Linux v9fs mount): stat for the length, Topen OWRITE without
 *    OTRUNC, Twrite at offset == length (the kernel puts an O_APPEND write at the size it has), Tclunk;
 *  - plan9port's `9p write`: Topen OWRITE|OTRUNC, then 4 KiB Twrites from 0;
 *  - chunked appends: many Twrites, each at the end of the one before.
 * Each open's writes are assembled and committed once, at clunk.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { build, Dir, Leaf, ORDWR, OTRUNC, OWRITE, type Client } from '../../src/ninep/index.js';
import { serve, type TestServer } from './helpers.js';

let t: TestServer<unknown> | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const enc = new TextEncoder();

/** A server whose one text file, `plan`, holds `initial`; its value and commits, and a client's open and stat of it. */
async function textServer(initial: string): Promise<{
  value: () => string;
  commits: string[];
  open: (mode: number) => ReturnType<Client['open']>;
  stat: () => ReturnType<Client['stat']>;
}> {
  let value = initial;
  const commits: string[] = [];
  const ns = build(
    Dir('/', Leaf('plan', { text: { get: () => value, set: (_c, v) => void (commits.push(v), (value = v)) } })),
    { uid: 'alice' },
  );
  t = await serve({ fs: ns as never });
  const c = await t.client();
  return { value: () => value, commits, open: (mode) => c.open('plan', mode), stat: () => c.stat('plan') };
}

describe('text files take appends and chunked writes', () => {
  it('an append at the length stat gave (as 9pfuse and v9fs send echo >>) extends the value, committed once', async () => {
    const s = await textServer('- [ ] first\n');
    const len = (await s.stat()).length;
    expect(len).toBe(12);
    const f = await s.open(OWRITE);
    await f.write(len, enc.encode('- [ ] second\n'));
    expect(s.commits).toEqual([]);
    await f.clunk();
    expect(s.value()).toBe('- [ ] first\n- [ ] second\n');
    expect(s.commits).toHaveLength(1);
    expect((await s.stat()).length).toBe(Buffer.byteLength(s.value()));
  });

  it('a chunked append (4 KiB writes, each at the end of the last) is one commit of the whole', async () => {
    const s = await textServer('head\n');
    const tail = 'line of an appended plan\n'.repeat(12_000);
    const bytes = enc.encode(tail);
    const f = await s.open(OWRITE);
    const start = Number((await s.stat()).length);
    const pending: Promise<number>[] = [];
    for (let off = 0; off < bytes.length; off += 4096)
      pending.push(f.write(start + off, bytes.subarray(off, off + 4096)));
    await Promise.all(pending);
    await f.clunk();
    expect(s.value()).toBe(`head\n${tail}`);
    expect(s.commits).toHaveLength(1);
  });

  it("plan9port's 9p write (OTRUNC, 4 KiB writes from 0) replaces a longer value with a shorter one", async () => {
    const s = await textServer('x'.repeat(50_000));
    const next = enc.encode('y'.repeat(10_000));
    const f = await s.open(OWRITE | OTRUNC);
    for (let off = 0; off < next.length; off += 4096) await f.write(off, next.subarray(off, off + 4096));
    await f.clunk();
    expect(s.value()).toBe('y'.repeat(10_000));
    expect(s.commits).toHaveLength(1);
  });

  it('a first write at 0 without OTRUNC replaces the value (a text file takes a new value whole)', async () => {
    const s = await textServer('a long old value\n');
    const f = await s.open(OWRITE);
    await f.write(0, enc.encode('new\n'));
    await f.clunk();
    expect(s.value()).toBe('new\n');
  });

  it('a first write inside the value without OTRUNC edits it in place; a read on the fid sees the edit', async () => {
    const s = await textServer('- [ ] step one\n');
    const f = await s.open(ORDWR);
    await f.write(3, enc.encode('x'));
    expect(new TextDecoder().decode(await f.read(0, 100))).toBe('- [x] step one\n');
    await f.clunk();
    expect(s.value()).toBe('- [x] step one\n');
  });

  it('a write past the end is refused (a hole) and the value stays; so is a first write past 0 after OTRUNC', async () => {
    const s = await textServer('first line\n');
    const f = await s.open(OWRITE);
    await expect(f.write(100, enc.encode('far\n'))).rejects.toThrow(/would leave a hole \(value is 11 bytes\)/);
    await f.clunk();
    expect(s.value()).toBe('first line\n');
    const g = await s.open(OWRITE | OTRUNC);
    await expect(g.write(11, enc.encode('appended\n'))).rejects.toThrow(/would leave a hole \(value is 0 bytes\)/);
    await g.clunk();
    expect(s.value()).toBe('');
  });
});
