/**
 * toolsrv's proc/spill: olliesrv saves a long result on the host the tools run on (a remote session's), in the
 * calling agent's spill dir, which its tools may read. Only olliesrv reaches this namespace (the shared secret;
 * sandboxed tools cannot open Unix sockets); the name it gives must not lead the file anywhere else.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startEnv, type Env } from './helpers.js';

let env: Env | undefined;
let data: string | undefined;
afterEach(async () => {
  await env?.close();
  if (data) rmSync(data, { recursive: true, force: true });
  env = data = undefined;
});

describe('proc/spill', () => {
  it("saves the result 0600 in the agent's spill dir and says where; names that would leave it are refused", async () => {
    data = mkdtempSync(join(tmpdir(), 'spill-data-'));
    env = await startEnv(undefined, { dataDir: data, sessionId: 'S1' });
    const c = await env.client('agent1');
    const dir = (await c.readText('proc/spilldir')).trim();
    expect(dir).toBe(join(data, 'output', 'S1', 'agent1'));
    await c.write('proc/spill', `call_1\n${'x'.repeat(200_000)}`);
    const file = join(dir, 'call_1.txt');
    expect(readFileSync(file, 'utf8')).toBe('x'.repeat(200_000));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const name of ['../../escape', '..', 'a/b', '', 'x'.repeat(200)]) {
      await expect(c.write('proc/spill', `${name}\nbody`), name).rejects.toThrow(/proc\/spill: write NAME/);
    }
    // A name used again (a restarted agent reusing a call id) replaces the file, never writes through a link.
    await c.write('proc/spill', 'call_1\nother');
    expect(readFileSync(file, 'utf8')).toBe('other');
    expect(readdirSync(dir)).toEqual(['call_1.txt']);
    expect(readdirSync(data)).toEqual(['output']);
  });
});
