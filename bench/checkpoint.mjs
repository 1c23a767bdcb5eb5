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
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { fromDist, root } from './lib/dist.mjs';
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

// ---- A directory tracked as a whole (checkpoint.whole) against the same directory walked file by file ----------
// A node_modules-like tree of 5,000 files (in 500 package directories, ~1.5 KB each) beside a few
// project files, checkpointed by two services side by side: one whose policy says `whole: [node_modules]`, one
// whose policy walks it file by file (`skip: []`, as node_modules is skipped by default). Each round's change is
// made by this process itself (no sandboxed tool: the tree lies outside the toolsrv's workspace above), so "added
// ms" is the round's time less the writes. Rows "(walked)": the same without watching the directories.
async function wholeScenario() {
  const WHOLE_FILES = 5000;
  const base = mkdtempSync(join(tmpdir(), 'bench-checkpoint-whole-'));
  const ws2 = join(base, 'ws');
  const nmNames = [];
  for (let p = 0; p < WHOLE_FILES / 10; p++) {
    mkdirSync(join(ws2, 'node_modules', `pkg${p}`, 'lib'), { recursive: true });
    for (let f = 0; f < 10; f++) {
      const rel = `node_modules/pkg${p}/${f < 5 ? 'lib/' : ''}f${f}.js`;
      writeFileSync(join(ws2, rel), randomBytes(750).toString('hex'));
      nmNames.push(rel);
    }
  }
  for (let i = 0; i < 20; i++) writeFileSync(join(ws2, `src${i}.ts`), `export const x${i} = ${i};\n`);
  const policy = readFileSync(join(root, 'data', 'sandbox.yaml'), 'utf8');
  const service = (name, section, watch) => {
    const configDir = join(base, `config-${name}`);
    mkdirSync(configDir, { recursive: true });
    writeFileSync(join(configDir, 'sandbox.yaml'), `${policy}\ncheckpoint:\n${section}\n`);
    return {
      svc: new Checkpoints({
        configDir,
        dataDir: join(base, `data-${name}`),
        runtimeDir: join(base, `run-${name}`),
        store: {},
        log: () => undefined,
        ...(watch === false && { watch: false }),
      }),
      who: { ...agent, id: `bench-${name}`, sessionId: 'bench-whole', cfg: { cwd: ws2 } },
    };
  };
  let v = 0;
  const change = (k) => {
    v++;
    for (const n of nmNames.slice(0, k)) writeFileSync(join(ws2, n), `// v${v}\n${'x'.repeat(1400)}\n`);
  };
  const oneRound = async ({ svc, who }, k) => {
    let tool = 0;
    const t = process.hrtime.bigint();
    await svc.round(who, calls, tools, async () => {
      const s = process.hrtime.bigint();
      change(k);
      tool = ms(s);
    });
    const list = svc.list(who);
    return { added: ms(t) - tool, bytes: list[list.length - 1].bytes };
  };
  const out = [];
  try {
    const modes = {
      whole: '  whole: [node_modules]',
      'file by file': '  skip: []',
    };
    for (const watched of [true, false]) {
      for (const [mode, section] of Object.entries(modes)) {
        const s = service(`${mode.replace(/ /g, '-')}-${watched}`, section, watched);
        const t0 = process.hrtime.bigint();
        const first = await oneRound(s, 0);
        const suffix = watched ? '' : ' (walked)';
        if (watched) out.push({ mode, name: 'first (cold)', added: ms(t0), bytes: first.bytes });
        for (const k of [0, 100]) {
          const xs = [];
          for (let i = 0; i < N; i++) xs.push(await oneRound(s, k));
          out.push({
            mode,
            name: `${k} changed${suffix}`,
            added: median(xs.map((x) => x.added)),
            bytes: median(xs.map((x) => x.bytes)),
          });
        }
        if (watched) {
          // Back to before the last round: 100 files of node_modules (the whole directory, rebuilt and swapped in).
          const last = s.svc.list(s.who).at(-1).id;
          const t = process.hrtime.bigint();
          await s.svc.rewind(s.who, `${last} force`);
          out.push({ mode, name: 'rewind 100', added: ms(t), bytes: s.svc.list(s.who).at(-1).bytes });
        }
      }
    }
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
  console.log(
    `\nnode_modules-like tree of ${WHOLE_FILES} files (~${((WHOLE_FILES * 1500) / 1024 / 1024).toFixed(0)} MB) beside 20 files: tracked as a whole vs file by file (median of ${N} rounds), load ${loadavg()[0].toFixed(2)}`,
  );
  console.log(
    `${'round'.padEnd(20)} ${'whole ms'.padStart(10)} ${'whole bytes'.padStart(12)} ${'files ms'.padStart(10)} ${'files bytes'.padStart(12)}`,
  );
  for (const name of [...new Set(out.map((r) => r.name))]) {
    const w = out.find((r) => r.name === name && r.mode === 'whole');
    const f = out.find((r) => r.name === name && r.mode === 'file by file');
    console.log(
      `${name.padEnd(20)} ${w.added.toFixed(1).padStart(10)} ${String(w.bytes).padStart(12)} ${f.added.toFixed(1).padStart(10)} ${String(f.bytes).padStart(12)}`,
    );
  }
}
await wholeScenario();
