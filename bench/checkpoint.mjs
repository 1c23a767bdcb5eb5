#!/usr/bin/env node
// What checkpoints add to a tool round (docs/checkpoints.md): a workspace of --files files (default 10,000)
// and --mb MB (default 200) in 100 directories, checkpointed around a round that changes 0, 10 and 1,000 files,
// through the daemon's own Checkpoints service (dist/), with the default policy. Each round costs two walks
// (before and after); the time printed is the whole round's time minus the time of the change itself. Beside
// it: a real tool round's tool part, a sandboxed `shell` call through a real toolsrv that makes the same change.
// The rows "(walked)" are the same without watching the directories: every checkpoint walks the whole tree.
// Needs `npm run build:node`.
//
//   node bench/checkpoint.mjs [--files 10000] [--mb 200] [--n 7]
//
// Goals (issue 20): ≤ 30 ms added to an unchanged round; ≤ 5 % of a round's time with 10 files changed.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { fromDist } from './lib/dist.mjs';
import { callOk, connectTools, startToolsrv } from './lib/toolsrv.mjs';

const { Checkpoints } = await fromDist('olliesrv/checkpoint/service.js');

const { files: FILES, mb, n: N } = benchArgs({ files: 10000, mb: 200, n: 7 });
const BYTES = mb * 1024 * 1024;

const dir = mkdtempSync(join(tmpdir(), 'bench-checkpoint-'));
const ws = join(dir, 'ws');
const dirs = 100;
const per = Math.ceil(FILES / dirs);
const size = Math.floor(BYTES / FILES);
const names = [];
for (let d = 0; d < dirs; d++) {
  mkdirSync(join(ws, `d${d}`), { recursive: true });
  for (let f = 0; f < per && names.length < FILES; f++) {
    const rel = `d${d}/f${f}.txt`;
    // Hex text: files that look like source to anything that cares, and do not compress to nothing.
    writeFileSync(join(ws, rel), randomBytes(size / 2).toString('hex'));
    names.push(rel);
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (t) => Number(process.hrtime.bigint() - t) / 1e6;
let seq = 0;
/** Shell text that changes `k` files (appends a line to each). */
const changeCmd = (k) =>
  k
    ? names
        .slice(0, k)
        .map((n) => `echo ${++seq} >> ${n}`)
        .join('; ')
    : 'true';

/** The daemon's Checkpoints service with the default policy, its files under `dir`. */
const checkpoints = (opts) =>
  new Checkpoints({
    configDir: join(dir, 'config'),
    dataDir: join(dir, 'data'),
    runtimeDir: join(dir, 'run'),
    store: {},
    log: () => undefined,
    ...opts,
  });
const cps = checkpoints();
const agent = {
  id: 'bench',
  sessionId: 'bench',
  cfg: { cwd: ws },
  busy: false,
  history: { messages: [], epoch: 0, length: 0 },
  log: { add: () => undefined },
};
const tools = new Map([['shell', { name: 'shell', scope: 'global' }]]);
const calls = [{ id: 'c', name: 'shell', args: '{}' }];

const toolsrv = await startToolsrv(dir, { cwd: ws });
const host = await connectTools(toolsrv, ['load shell']);
const shell = (command) => callOk(host, { tool: 'shell', args: { command } }, 'shell');

/** One checkpointed round: the time added (whole round less the change), the bytes its checkpoint added. */
async function round(k, svc = cps, who = agent) {
  let tool = 0;
  const t = process.hrtime.bigint();
  await svc.round(who, calls, tools, async () => {
    const s = process.hrtime.bigint();
    await shell(changeCmd(k));
    tool = ms(s);
  });
  const total = ms(t);
  const list = svc.list(who);
  return { added: total - tool, tool, bytes: list[list.length - 1].bytes };
}

const rows = [];
try {
  const t0 = process.hrtime.bigint();
  const first = await round(0);
  rows.push({ name: 'first (cold)', added: first.added + 0, tool: first.tool, bytes: first.bytes, coldMs: ms(t0) });
  for (const k of [0, 10, 1000]) {
    const xs = [];
    for (let i = 0; i < N; i++) xs.push(await round(k));
    rows.push({
      name: `${k} changed`,
      added: median(xs.map((x) => x.added)),
      tool: median(xs.map((x) => x.tool)),
      bytes: median(xs.map((x) => x.bytes)),
    });
  }
  // The fallback when the directories are not watched (too many, inotify limits, after a restart): every
  // checkpoint walks the whole tree.
  const walker = checkpoints({ watch: false });
  const other = { ...agent, id: 'bench-walk' };
  await round(0, walker, other);
  for (const k of [0, 10]) {
    const xs = [];
    for (let i = 0; i < N; i++) xs.push(await round(k, walker, other));
    rows.push({
      name: `${k} (walked)`,
      added: median(xs.map((x) => x.added)),
      tool: median(xs.map((x) => x.tool)),
      bytes: median(xs.map((x) => x.bytes)),
    });
  }
  const gc = process.hrtime.bigint();
  const gcOut = await cps.gc();
  rows.push({ name: 'gc', added: ms(gc), tool: 0, bytes: Number(/bytes kept (\d+)/.exec(gcOut)?.[1] ?? 0) });
} finally {
  await host.close();
  await toolsrv.stop();
  rmSync(dir, { recursive: true, force: true });
}

console.log(
  `checkpoint of a ${FILES}-file, ${(BYTES / 1024 / 1024).toFixed(0)} MB workspace (median of ${N} rounds), Node ${process.version}, ${cpus().length} cores, load ${loadavg()[0].toFixed(2)}`,
);
console.log(
  `${'round'.padEnd(14)} ${'added ms'.padStart(10)} ${'tool ms'.padStart(10)} ${'added %'.padStart(9)} ${'bytes'.padStart(12)}`,
);
for (const r of rows) {
  const pct = r.tool ? `${((100 * r.added) / r.tool).toFixed(0)} %` : '';
  console.log(
    `${r.name.padEnd(14)} ${r.added.toFixed(1).padStart(10)} ${r.tool.toFixed(1).padStart(10)} ${pct.padStart(9)} ${String(r.bytes).padStart(12)}`,
  );
}
const unchanged = rows.find((r) => r.name === '0 changed');
const ten = rows.find((r) => r.name === '10 changed');
console.log(
  `\nadded to an unchanged round: ${unchanged.added.toFixed(1)} ms (goal ≤ 30): ${unchanged.added <= 30 ? 'met' : 'MISSED'}`,
);
console.log(
  `added to a round changing 10 files: ${ten.added.toFixed(1)} ms = ${((100 * ten.added) / ten.tool).toFixed(0)} % of its tool call alone (${ten.tool.toFixed(1)} ms); ` +
    `5 % of a round holds when the whole round (model reply included) takes ≥ ${(ten.added / 0.05 / 1000).toFixed(2)} s`,
);
