#!/usr/bin/env node
/**
 * Context economy: a default agent works through a scripted 30-round coding task whose tool outputs
 * are 2–40 KiB (shell `cat` of generated source files) and whose writes carry 6–20 KiB of arguments, against
 * mock models that enforce windows of 8k, 16k, 32k and 128k tokens (o200k estimate, backend/tokens.ts) and refuse
 * a longer prompt with OpenAI's real context-length error. Per window it prints: rounds completed, overflows hit,
 * turns that ended in an error, compactions, the first request, peak request tokens and total tokens sent.
 *
 * A turn that ends in an error is followed by the prompt a user would type ("continue"), up to 4 times, so that
 * a window that recovers by itself and one that needs a person are told apart ("errors").
 *
 *   node bench/context.mjs [--save NAME] [--compare NAME]     (after npm run build:node)
 *
 * --save NAME writes the figures to bench/results/context-NAME.json; --compare NAME prints the saved figures of
 * NAME beside this run's (e.g. the branch point's, saved there with --save before).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { promptTokens, startMockLlm } from '../dist/devtools/mock-llm/server.js';
import { writeMockBackend } from './lib/backend.mjs';
import { newAgent, startBenchDaemon } from './lib/daemon.mjs';

const { values: opt } = parseArgs({ options: { save: { type: 'string' }, compare: { type: 'string' } } });
const WINDOWS = [8192, 16384, 32768, 131072];
const ROUNDS = 30;
const RETRIES = 4;
const SIZES_KIB = [2, 6, 12, 40, 4, 24, 8, 32, 16, 3];
const results = join(new URL('.', import.meta.url).pathname, 'results');

/** Deterministic TypeScript-like source of about `bytes` bytes (code tokenizes denser than prose). */
function source(seed, bytes) {
  const lines = [`// generated module ${seed}`, `import { helper${seed} } from './helper${seed}.js';`, ''];
  let n = 0;
  while (lines.join('\n').length < bytes) {
    n++;
    lines.push(
      `export function compute${seed}_${n}(input: number[], options: { scale: number; offset?: number } = { scale: ${n} }): number {`,
      `  const scaled = input.map((value, index) => value * options.scale + (options.offset ?? ${n % 7}) - index);`,
      `  if (scaled.length === 0) throw new Error('compute${seed}_${n}: empty input (expected at least one value)');`,
      `  return helper${seed}(scaled.reduce((sum, v) => sum + v, 0) / scaled.length, ${(n * 31) % 97});`,
      '}',
      '',
    );
  }
  return lines.join('\n').slice(0, bytes);
}

/** Round i of the task: what the model does. */
function round(i, dir) {
  const kib = SIZES_KIB[i % SIZES_KIB.length];
  if (i % 5 === 4) {
    const content = source(100 + i, (6 + (i % 3) * 7) * 1024);
    return [
      { text: `Writing module ${i}.` },
      { toolCalls: [{ name: 'file_write', args: { path: join(dir, 'out', `m${i}.ts`), content } }] },
    ];
  }
  return [
    { text: `Reading src/f${i}.ts (${kib} KiB).` },
    { toolCalls: [{ name: 'shell', args: { command: `cat src/f${i}.ts` } }] },
  ];
}

const SUMMARY =
  '## Goal\nRefactor the generated modules.\n## Decisions\nNone yet.\n## Files\nsrc/f*.ts read; out/m*.ts written.\n## State\nIn progress.\n## Next\nRead the next file.';

/** Where a request comes from: the compaction model, or the agent's loop. */
const isCompaction = (body) => {
  const sys = body.messages?.[0];
  return sys?.role === 'system' && typeof sys.content === 'string' && sys.content.startsWith('You are compacting');
};

async function run(window) {
  const dir = mkdtempSync(join(tmpdir(), `ollie-bench-ctx-${window}-`));
  const work = join(dir, 'work');
  mkdirSync(join(work, 'src'), { recursive: true });
  mkdirSync(join(work, 'out'), { recursive: true });
  for (let i = 0; i < ROUNDS; i++)
    writeFileSync(join(work, 'src', `f${i}.ts`), source(i, SIZES_KIB[i % SIZES_KIB.length] * 1024));
  let served = 0;
  const stats = {
    window,
    rounds: 0,
    overflows: 0,
    errors: 0,
    compactions: 0,
    first: 0,
    firstTools: 0,
    peak: 0,
    total: 0,
    requests: 0,
  };
  const mock = await startMockLlm({
    window,
    respond: (body) => {
      if (isCompaction(body)) return [{ text: SUMMARY }];
      if (served < ROUNDS) return round(served++, work);
      served++;
      return [{ text: 'All modules are done.' }];
    },
    onRequest: (r) => {
      if (r.method !== 'POST' || typeof r.body !== 'object') return;
      const n = promptTokens(r.body);
      if (stats.requests === 0) {
        stats.first = n;
        stats.firstTools = r.body.tools ? promptTokens({ tools: r.body.tools }) : 0;
      }
      stats.requests++;
      stats.peak = Math.max(stats.peak, n);
      stats.total += n;
      if (n > window) stats.overflows++;
      if (isCompaction(r.body)) stats.compactions++;
    },
  });
  const config = join(dir, 'config');
  writeMockBackend(config, mock.url, window);
  const { daemon, client: c } = await startBenchDaemon(dir, { configDir: config, toolsrv: {}, toolCacheFile: false });
  try {
    const { path, agent } = await newAgent(c, daemon, work);
    let prompt = `Read each of the ${ROUNDS} files under src/ one by one and write the refactored modules to out/.`;
    for (let attempt = 0; attempt <= RETRIES && served <= ROUNDS; attempt++) {
      const done = agent.nextTurn();
      await c.write(`${path}/prompt`, prompt);
      const r = await done;
      if (!r.error) break;
      stats.errors++;
      prompt = 'continue';
    }
    stats.rounds = Math.min(served, ROUNDS);
    stats.statsFile = (await c.readText(`${path}/stats`)).trim().split('\n');
  } finally {
    c.close();
    await daemon.close();
    await mock.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return stats;
}

const all = [];
for (const w of WINDOWS) all.push(await run(w));

const k = (n) => `${Math.round(n / 1024)}k`;
const pad = (s, n) => String(s).padStart(n);
console.log(
  `context economy: default agent, ${ROUNDS}-round task, tool outputs 2–40 KiB, mock windows enforced (o200k estimate)`,
);
console.log(
  `${'window'.padEnd(8)}${pad('rounds', 8)}${pad('overflows', 11)}${pad('errors', 8)}${pad('compactions', 13)}${pad('first req', 11)}${pad('(tools)', 9)}${pad('peak req', 10)}${pad('total sent', 12)}${pad('requests', 10)}`,
);
for (const s of all) {
  console.log(
    `${k(s.window).padEnd(8)}${pad(`${s.rounds}/${ROUNDS}`, 8)}${pad(s.overflows, 11)}${pad(s.errors, 8)}${pad(s.compactions, 13)}${pad(s.first, 11)}${pad(s.firstTools, 9)}${pad(s.peak, 10)}${pad(s.total, 12)}${pad(s.requests, 10)}`,
  );
}
const last = all.at(-1);
console.log(`stats of the 128k agent after the task: ${last.statsFile.filter((l) => /^context/.test(l)).join(' ')}`);
if (opt.compare) {
  const file = join(results, `context-${opt.compare}.json`);
  if (!existsSync(file))
    throw new Error(`${file}: no saved figures named ${opt.compare} (save them with --save ${opt.compare})`);
  const before = JSON.parse(readFileSync(file, 'utf8'));
  console.log(`\nbefore (${opt.compare}) → now:`);
  for (const s of all) {
    const b = before.find((x) => x.window === s.window);
    if (!b) continue;
    const pct = b.total ? ((100 * (s.total - b.total)) / b.total).toFixed(1) : 'n/a';
    console.log(
      `  ${k(s.window).padEnd(6)} rounds ${b.rounds} → ${s.rounds}, overflows ${b.overflows} → ${s.overflows}, errors ${b.errors} → ${s.errors}, first request ${b.first} → ${s.first}, peak ${b.peak} → ${s.peak}, total sent ${b.total} → ${s.total} (${pct} %)`,
    );
  }
}
if (opt.save) {
  mkdirSync(results, { recursive: true });
  writeFileSync(join(results, `context-${opt.save}.json`), JSON.stringify(all, null, 1));
}
