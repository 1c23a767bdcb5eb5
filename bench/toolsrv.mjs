#!/usr/bin/env node
// End-to-end latency of toolsrv's proc/new (a 9P Rdwr from olliesrv's client to a real toolsrv process and
// back, with the tool spawned, run and collected) for `file_read` of a small file and `shell true`, sandboxed
// and unsandboxed (--yolo), side by side with a bare child_process.spawn of the same tool executable with the
// same JSON on stdin, all in the same run. Needs `npm run build:node` and the native tools
// (`node scripts/build-native.mjs`).
//
//   node bench/toolsrv.mjs [--n 300] [--warmup 30] [--json]
//
// Targets: file_read ≤ 5 ms median; sandboxed `shell true` ≤ 1.5 × bare spawn + 2 ms.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { root } from './lib/dist.mjs';
import { callOk, connectTools, startToolsrv } from './lib/toolsrv.mjs';
import { medianP95, timeTogether } from './timing.mjs';

const { n: N, warmup: WARMUP, json } = benchArgs({ n: 300, warmup: 30, json: false });

const dir = mkdtempSync(join(tmpdir(), 'bench-toolsrv-'));
const file = join(dir, 'small.txt');
writeFileSync(file, Array.from({ length: 20 }, (_, i) => `line ${i + 1} of a small file`).join('\n') + '\n');
const tools = join(root, 'data', 'tools');
const cases = [
  { name: 'file_read', args: { path: file } },
  { name: 'shell true', tool: 'shell', args: { command: 'true' } },
];

/** Spawns the tool executable itself with the JSON on stdin and waits for its output to end. */
function bare(exe, args) {
  return new Promise((resolve, reject) => {
    const c = spawn(exe, [], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
    c.stdin.on('error', () => undefined);
    c.stdin.end(JSON.stringify(args));
    c.stdout.on('data', () => undefined);
    c.stderr.on('data', () => undefined);
    c.once('error', reject);
    c.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${exe} exited ${code}`))));
  });
}

const results = {};
const servers = [];
try {
  const hosts = {};
  for (const mode of ['sandboxed', 'unsandboxed']) {
    const p = await startToolsrv(dir, { name: mode, yolo: mode === 'unsandboxed' });
    servers.push(p);
    hosts[mode] = await connectTools(p, ['load file_read', 'load shell']);
  }
  for (const c of cases) {
    const req = { tool: c.tool ?? c.name, args: c.args };
    for (const [mode, host] of Object.entries(hosts)) await callOk(host, req, `${mode} ${c.name}`);
    results[c.name] = await timeTogether(
      {
        sandboxed: () => hosts.sandboxed.call(req),
        unsandboxed: () => hosts.unsandboxed.call(req),
        bare: () => bare(join(tools, req.tool), c.args),
      },
      { warmup: WARMUP, n: N },
    );
  }
  for (const h of Object.values(hosts)) await h.close();
} finally {
  for (const p of servers) await p.stop();
  rmSync(dir, { recursive: true, force: true });
}

if (json) {
  console.log(JSON.stringify(results, null, 2));
} else {
  const f = (s) => medianP95(s, 2, 6);
  console.log(
    `toolsrv proc/new, end to end (ms, median / p95, n=${N} each, round-robin, after ${WARMUP} warm-up rounds), Node ${process.version}, load ${loadavg()[0].toFixed(2)}`,
  );
  console.log(
    `${''.padEnd(12)} ${'sandboxed'.padStart(15)}   ${'unsandboxed'.padStart(15)}   ${'bare spawn'.padStart(15)}`,
  );
  for (const c of cases) {
    const r = results[c.name];
    console.log(`${c.name.padEnd(12)} ${f(r.sandboxed)}   ${f(r.unsandboxed)}   ${f(r.bare)}`);
  }
  const fr = results.file_read.sandboxed.median;
  const sh = results['shell true'];
  const limit = 1.5 * sh.bare.median + 2;
  console.log(`\nfile_read sandboxed median ${fr.toFixed(2)} ms (target ≤ 5): ${fr <= 5 ? 'met' : 'MISSED'}`);
  console.log(
    `shell true sandboxed median ${sh.sandboxed.median.toFixed(2)} ms (target ≤ 1.5 × ${sh.bare.median.toFixed(2)} + 2 = ${limit.toFixed(2)}): ${sh.sandboxed.median <= limit ? 'met' : 'MISSED'}`,
  );
}
