/**
 * `ollie-9p` as a Unix tool: the built CLI (dist/cli/ollie-9p.js, run as a child process) against a
 * test 9P server. Quiet when its reader goes away; rdwr on a streaming file prints the stream as it comes.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, Dir, Leaf, Server } from '../../src/ninep/index.js';
import { listen, type Listener } from '../../src/ninep/node.js';

const CLI = new URL('../../dist/cli/ollie-9p.js', import.meta.url).pathname;
const big = new Uint8Array(8 * 1024 * 1024).fill(0x61);

let dir: string;
let addr: string;
let listener: Listener;
let server: Server<unknown>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ollie-9p-cli-'));
  const path = join(dir, 's.sock');
  addr = `unix!${path}`;
  server = new Server({
    fs: build(
      Dir(
        '/',
        Leaf('big', { read: () => big }),
        // Like `event`: a filter is written, then matches stream and the file never ends by itself.
        Leaf('events', {
          async *rdwrStream(_ctx, request, signal) {
            for (let i = 0; !signal.aborted; i++) {
              yield `${request.trim()} ${i}\n`;
              await new Promise((r) => setTimeout(r, 20));
            }
          },
        }),
      ),
      { uid: process.env.USER ?? 'me' },
    ) as never,
  });
  listener = await listen(server, { kind: 'unix', path });
});

afterAll(async () => {
  server.close();
  await listener.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('ollie-9p', () => {
  it('read BIG | head exits quietly (0 or 141), with no stack trace', async () => {
    // A real shell pipeline: head exits after 10 bytes and the pipe closes under the CLI.
    const errFile = join(dir, 'stderr');
    const p = spawn('bash', [
      '-c',
      `"${process.execPath}" "${CLI}" -a '${addr}' read big 2>"${errFile}" | head -c 10 >/dev/null; echo "\${PIPESTATUS[0]}"`,
    ]);
    let rc = '';
    p.stdout.on('data', (d: Buffer) => (rc += d.toString()));
    await new Promise((r) => p.once('exit', r));
    expect(['0', '141']).toContain(rc.trim());
    expect(readFileSync(errFile, 'utf8')).toBe('');
  }, 20_000);

  it('rdwr on a streaming file prints the replies as they come', async () => {
    const p = spawn(process.execPath, [CLI, '-a', addr, 'rdwr', 'events'], { stdio: ['pipe', 'pipe', 'pipe'] });
    p.stdin.end('tick\n');
    let got = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${JSON.stringify(got)} after 5 s`)), 5000);
      p.stdout.on('data', (d: Buffer) => {
        got += d.toString();
        if (got.includes('tick 2\n')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    expect(got.startsWith('tick 0\ntick 1\ntick 2\n')).toBe(true);
    p.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => p.once('exit', (c) => resolve(c)));
    expect(code).toBe(0);
  }, 20_000);
});
