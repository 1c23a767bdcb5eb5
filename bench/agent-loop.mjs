#!/usr/bin/env node
/**
 * Figures of the agent loop:
 *   - per-round overhead: a turn of ROUNDS rounds where the mock LLM answers at once with one call of a trivial
 *     tool (file_read of a small file, sandboxed, through toolsrv); the time between consecutive LLM requests is
 *     one whole round: parse the reply, dispatch over 9P, run the tool, append, build the next request;
 *   - startup of `ollie run` to its first LLM request (side by side with a bare `node -e ""` on this machine);
 *   - peak RSS (VmHWM) of the `ollie serve` process that ran the rounds.
 * Targets: per-round median ≤ 15 ms, startup ≤ 300 ms, RSS ≤ 120 MB.
 *
 *   node bench/agent-loop.mjs [ROUNDS=200] [STARTS=7]     (after npm run build:node)
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { startMockLlm } from '../dist/devtools/mock-llm/server.js';
import { dial } from '../dist/ninep/node.js';
import { writeMockBackend } from './lib/backend.mjs';

const ROUNDS = Number(process.argv[2] ?? 200);
const STARTS = Number(process.argv[3] ?? 7);
const OLLIE = new URL('../dist/cli/ollie.js', import.meta.url).pathname;
// Run the CLI as its shebang does (node with the flags on its first line).
const NODE_FLAGS =
  /^#!\/usr\/bin\/env -S node (.*)$/m.exec(readFileSync(OLLIE, 'utf8').split('\n')[0])?.[1]?.split(' ') ?? [];

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

const dir = mkdtempSync(join(tmpdir(), 'ollie-bench-loop-'));
const mock = await startMockLlm();
const config = join(dir, 'config');
mkdirSync(join(config, 'agents'), { recursive: true });
writeMockBackend(config, mock.url, 1000000);
writeFileSync(
  join(config, 'agents', 'bench.json'),
  JSON.stringify({ prompt: 'You are a benchmark.', autoLoad: ['file_read', 'shell'], maxSteps: ROUNDS + 10 }),
);
writeFileSync(join(dir, 'small.txt'), 'one\ntwo\nthree\n');

try {
  // ---- per-round overhead, in an `ollie serve` child ----
  const socket = join(dir, 'run', 'ollie.sock');
  const serve = spawn(
    process.execPath,
    [...NODE_FLAGS, OLLIE, 'serve', '--socket', socket, '--config', config, '--data', join(dir, 'data')],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise((resolve, reject) => {
    serve.stdout.on('data', (d) => d.toString().includes('serving 9P') && resolve());
    serve.once('exit', (c) => reject(new Error(`ollie serve exited ${c}`)));
  });
  const c = await dial(`unix!${socket}`, { uname: userInfo().username });
  const session = (await c.rdwrText('session/new', `cwd=${dir}`)).trim();
  const agent = (await c.rdwrText(`session/${session}/agent/new`, 'agent=bench')).trim();
  const base = `session/${session}/agent/${agent}`;
  const turn = async (rounds) => {
    for (let i = 0; i < rounds; i++)
      mock.script([{ toolCalls: [{ name: 'file_read', args: { path: join(dir, 'small.txt') } }] }]);
    mock.script([{ text: 'done' }]);
    const from = mock.requests.length;
    const events = await c.open('event', 2);
    const aid = (await c.readText(`${base}/id`)).trim();
    await events.writeAll(new TextEncoder().encode(`session.*.agent.${aid}.state`));
    await c.write(`${base}/prompt`, 'go');
    let buf = '';
    for (let off = 0; !/ idle\n/.test(buf);) {
      const chunk = await events.read(off, 8192);
      off += chunk.length;
      buf += new TextDecoder().decode(chunk);
    }
    await events.clunk();
    return mock.requests
      .slice(from)
      .filter((r) => r.protocol === 'openai')
      .map((r) => r.time);
  };
  await turn(5); // warm-up: toolsrv spawn, first compilations
  const times = await turn(ROUNDS);
  const deltas = times.slice(1).map((t, i) => t - times[i]);
  const rss = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${serve.pid}/status`, 'utf8'))[1]) / 1024;
  c.close();
  serve.kill('SIGTERM');
  await new Promise((r) => serve.once('exit', r));

  // ---- startup of `ollie run` to the first LLM request ----
  const bare = [];
  for (let i = 0; i < STARTS; i++) {
    const t0 = performance.now();
    spawnSync(process.execPath, ['-e', '']);
    bare.push(performance.now() - t0);
  }
  const starts = [];
  for (let i = 0; i < STARTS; i++) {
    mock.script([{ text: 'hi' }]);
    const n = mock.requests.length;
    const t0 = Date.now();
    const p = spawn(
      process.execPath,
      [...NODE_FLAGS, OLLIE, 'run', '--config', config, '--agent', 'bench', '--cwd', dir, 'hello'],
      { stdio: 'ignore' },
    );
    await new Promise((r) => p.once('exit', r));
    const first = mock.requests.slice(n).find((r) => r.protocol === 'openai');
    if (first) starts.push(first.time - t0);
  }

  const f = (n) => n.toFixed(1);
  console.log(`agent loop (${ROUNDS} rounds of file_read through a sandboxed toolsrv, mock LLM answering at once)`);
  console.log(
    `  per round: median ${f(median(deltas))} ms, p90 ${f(pct(deltas, 0.9))} ms, p99 ${f(pct(deltas, 0.99))} ms   (target: median ≤ 15 ms)`,
  );
  console.log(`  peak RSS of ollie serve: ${f(rss)} MB   (target ≤ 120 MB)`);
  console.log(
    `startup of ollie run to its first LLM request: median ${f(median(starts))} ms over ${starts.length} runs (bare node -e "": ${f(median(bare))} ms)   (target ≤ 300 ms)`,
  );
} finally {
  await mock.close();
  rmSync(dir, { recursive: true, force: true });
}
