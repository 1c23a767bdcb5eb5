#!/usr/bin/env node
/**
 * bench/ninep: the 9P library's speed over a real Unix socket, server in its own process.
 *   - pipelined small reads per second on one connection, 32 outstanding (target ≥ 50,000/s)
 *   - streaming throughput of a Stream file in MB/s (target ≥ 200 MB/s)
 * Usage: node bench/ninep.mjs [seconds-per-figure]   (needs `npm run build:node`)
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, Dir, Leaf, OREAD, Server } from '../dist/ninep/index.js';
import { dial, listen } from '../dist/ninep/node.js';

const CHUNK = new Uint8Array(1024 * 1024).fill(120);

if (process.argv[2] === '--server') {
  const ns = build(Dir('/',
    Leaf('small', { read: () => 'a small file of about sixty-four bytes, like a state or id file\n' }),
    Leaf('stream', { stream: async function* (_ctx, signal) { while (!signal.aborted) yield CHUNK; } }),
  ), { uid: 'bench' });
  const l = await listen(new Server({ fs: ns }), { kind: 'unix', path: process.argv[3] });
  process.send('ready');
  process.on('disconnect', () => l.close().then(() => process.exit(0)));
} else {
  const seconds = Number(process.argv[2] ?? 3);
  const dir = mkdtempSync(join(tmpdir(), 'ninep-bench-'));
  const path = join(dir, 'bench.sock');
  const child = fork(fileURLToPath(import.meta.url), ['--server', path]);
  await new Promise((r) => child.once('message', r));
  const c = await dial({ kind: 'unix', path }, { uname: 'bench' });

  // Pipelined small reads: 32 requests always in flight on one fid.
  const f = await c.open('small', OREAD);
  let reads = 0;
  const until = performance.now() + seconds * 1000;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (performance.now() < until) {
      await f.read(0, 4096);
      reads++;
    }
  }));
  const readsPerSec = reads / seconds;
  await f.clunk();

  // Streaming: read a Stream file with the full iounit until the time is up.
  const s = await c.open('stream', OREAD);
  let bytes = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  while (performance.now() < end) bytes += (await s.read(0, s.iounit)).length;
  const mbPerSec = bytes / 1e6 / ((performance.now() - t0) / 1000);
  await s.clunk();
  c.close();
  child.disconnect();
  rmSync(dir, { recursive: true, force: true });

  console.log(`small reads, 32 outstanding, one connection: ${Math.round(readsPerSec).toLocaleString('en')} reads/s (target ≥ 50,000)`);
  console.log(`stream throughput, iounit ${s.iounit} bytes:    ${mbPerSec.toFixed(0)} MB/s (target ≥ 200)`);
}
