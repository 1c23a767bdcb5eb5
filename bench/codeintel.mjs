#!/usr/bin/env node
// First-call vs warm-call latency of the resident tool hosts, end to end through a real toolsrv process,
// sandboxed: `code_outline` of a 300-line TypeScript file (codeintel host: tree-sitter runtime and grammar
// load) and `lsp_hover` in a small TypeScript project (lsp host: typescript-language-server and tsserver
// start, project load), side by side in one run. A "first call" starts the host (ctl reload retires the
// running one, so the next call meets none); "warm" calls reuse it. For comparison, `one process per call`
// runs the same code_outline handler in a fresh Node process each time (the host's --call mode, unsandboxed):
// what every call would cost without resident hosts.
//
//   node bench/codeintel.mjs [--rounds 5] [--n 50] [--json]
//
// Needs `npm run build:node` (dist/ and the native sandbox helper).
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { root } from './lib/dist.mjs';
import { connectTools, startToolsrv } from './lib/toolsrv.mjs';
import { medianP95, stats } from './timing.mjs';

const { rounds: ROUNDS, n: N, json } = benchArgs({ rounds: 5, n: 50, json: false });

const dir = mkdtempSync(join(tmpdir(), 'bench-codeintel-'));
cpSync(join(root, 'test', 'lsp', 'fixture'), dir, { recursive: true });
// A 300-line TypeScript file: 30 classes of a few members.
const big = Array.from(
  { length: 30 },
  (_, i) =>
    `export class C${i} {\n  private n = ${i};\n  get(): number {\n    return this.n;\n  }\n  set(v: number): void {\n    this.n = v;\n  }\n}\n\n`,
).join('');
writeFileSync(join(dir, 'src', 'big.ts'), big);

const cases = {
  code_outline: { tool: 'code_outline', args: { path: 'src/big.ts' } },
  lsp_hover: { tool: 'lsp_hover', args: { path: 'src/main.ts', line: 4, column: 27 } },
};

async function timed(fn) {
  const t = process.hrtime.bigint();
  const r = await fn();
  const ms = Number(process.hrtime.bigint() - t) / 1e6;
  if (r && r.status !== undefined && (r.status !== 'exited' || r.exit !== 0))
    throw new Error(`call failed: ${JSON.stringify(r)}`);
  return ms;
}

/** The code_outline handler in a fresh Node process (the host's --call mode). */
function perProcess() {
  return new Promise((resolve, reject) => {
    const c = spawn(
      process.execPath,
      [join(root, 'data', 'tools', 'hosts', 'codeintel.mjs'), '--call', 'code_outline'],
      { cwd: dir, stdio: ['pipe', 'pipe', 'inherit'] },
    );
    c.stdin.end(JSON.stringify(cases.code_outline.args));
    c.stdout.on('data', () => undefined);
    c.once('error', reject);
    c.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
  });
}

const results = {};
const p = await startToolsrv(dir);
try {
  const host = await connectTools(p, ['load code_outline', 'load lsp_hover']);
  const first = { code_outline: [], lsp_hover: [] };
  const per = [];
  const warm = { code_outline: [], lsp_hover: [] };
  for (let r = 0; r < ROUNDS; r++) {
    // No host runs now: the next call of each starts its host.
    await host.ctl('reload');
    for (const [name, req] of Object.entries(cases)) first[name].push(await timed(() => host.call(req)));
    for (let i = 0; i < Math.ceil(N / ROUNDS); i++)
      for (const [name, req] of Object.entries(cases)) warm[name].push(await timed(() => host.call(req)));
    // In the same rounds, so that the load of the machine falls on both alike.
    per.push(await timed(perProcess));
  }
  for (const name of Object.keys(cases)) results[name] = { first: stats(first[name]), warm: stats(warm[name]) };
  results.code_outline.perProcess = stats(per);
  await host.close();
} finally {
  await p.stop();
  rmSync(dir, { recursive: true, force: true });
}

if (json) console.log(JSON.stringify(results, null, 2));
else {
  const f = (s) => medianP95(s, 1, 8);
  console.log(
    `resident tool hosts, end to end through toolsrv, sandboxed (ms, median / p95), Node ${process.version}, load ${loadavg()[0].toFixed(2)}`,
  );
  console.log(`first call: ${ROUNDS} rounds (host started each time); warm: n=${Math.ceil(N / ROUNDS) * ROUNDS}`);
  console.log(
    `${''.padEnd(14)}${'first call'.padStart(19)}   ${'warm call'.padStart(19)}   ${'one process per call'.padStart(20)}`,
  );
  for (const [name, r] of Object.entries(results))
    console.log(
      `${name.padEnd(14)}${f(r.first)}   ${f(r.warm)}   ${r.perProcess ? f(r.perProcess).padStart(20) : '-'.padStart(20)}`,
    );
}
