#!/usr/bin/env node
/**
 * Sub-agents in parallel: one agent's 8 sub-agents, spawned at once through `agent/new` with `prompt=`
 * and `parent=` (as the agent itself would), each doing ROUNDS tool rounds (file_read of a small file, sandboxed,
 * through toolsrv) against the mock LLM answering at once; the total wall time of the 8, side by side with one
 * sub-agent alone, each the median of RUNS runs. Target: 8 in parallel ≤ 2.5 × one alone, on 2 cores.
 *
 * With CHUNK_MS > 0 the mock sends each chunk of its streams CHUNK_MS apart, like a model that takes time to
 * answer: this shows how the sub-agents overlap when they wait, which the instant mock (all CPU) cannot.
 *
 *   node bench/subagents.mjs [N=8] [ROUNDS=5] [RUNS=5] [CHUNK_MS=0]     (after npm run build:node)
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { startMockLlm } from '../dist/devtools/mock-llm/server.js';
import { dial } from '../dist/ninep/node.js';
import { writeMockBackend } from './lib/backend.mjs';

const N = Number(process.argv[2] ?? 8);
const ROUNDS = Number(process.argv[3] ?? 5);
const RUNS = Number(process.argv[4] ?? 5);
const CHUNK_MS = Number(process.argv[5] ?? 0);
const paced = (steps) => (CHUNK_MS > 0 ? [...steps, { delayMs: CHUNK_MS }] : steps);
const OLLIE = new URL('../dist/cli/ollie.js', import.meta.url).pathname;
const NODE_FLAGS =
  /^#!\/usr\/bin\/env -S node (.*)$/m.exec(readFileSync(OLLIE, 'utf8').split('\n')[0])?.[1]?.split(' ') ?? [];
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const TICK = 1000 / 100; // ms per clock tick (USER_HZ is 100 on Linux)

/** CPU ms used so far by a process and its reaped children (fields 14-17 of /proc/PID/stat). */
function cpuOf(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICK;
  } catch {
    return 0;
  }
}
/** The pids of a process's children (toolsrv under ollie serve). */
function childrenOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

const dir = mkdtempSync(join(tmpdir(), 'ollie-bench-sub-'));
// A file per round: the same call five rounds running would draw the loop's stall nudge.
for (let i = 0; i < ROUNDS; i++) writeFileSync(join(dir, `small-${i}.txt`), `one\ntwo\nthree ${i}\n`);
// Each request is answered by where its agent stands: ROUNDS tool calls after its prompt, then the answer. Several
// agents ask at once, so the reply is chosen per request rather than taken from a fixed script.
const mock = await startMockLlm({
  onRequest: (r) => {
    if (r.path !== '/v1/chat/completions') return;
    const msgs = r.body.messages ?? [];
    let last = msgs.length - 1;
    while (last >= 0 && !(msgs[last].role === 'user' && /^(hello|read the files)/.test(msgs[last].content))) last--;
    const rounds = msgs.slice(last + 1).filter((m) => m.role === 'tool').length;
    if (msgs[last]?.content === 'hello') return void mock.script([{ text: 'ready' }]);
    mock.script(
      paced(
        rounds < ROUNDS
          ? [{ toolCalls: [{ name: 'file_read', args: { path: join(dir, `small-${rounds}.txt`) } }] }]
          : [{ text: 'done' }],
      ),
    );
  },
});
const config = join(dir, 'config');
mkdirSync(join(config, 'agents'), { recursive: true });
writeMockBackend(config, mock.url, 1000000);
writeFileSync(
  join(config, 'agents', 'bench.json'),
  JSON.stringify({ prompt: 'You are a benchmark.', autoLoad: ['file_read'], maxSteps: ROUNDS + 10 }),
);

const socket = join(dir, 'run', 'ollie.sock');
const serve = spawn(
  process.execPath,
  [
    ...NODE_FLAGS,
    ...(process.env.BENCH_PROF ? ['--cpu-prof', '--cpu-prof-dir=' + process.env.BENCH_PROF] : []),
    OLLIE,
    'serve',
    '--socket',
    socket,
    '--config',
    config,
    '--data',
    join(dir, 'data'),
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
try {
  await new Promise((resolve, reject) => {
    serve.stdout.on('data', (d) => d.toString().includes('serving 9P') && resolve());
    serve.once('exit', (c) => reject(new Error(`ollie serve exited ${c}`)));
  });
  const c = await dial(`unix!${socket}`, { uname: userInfo().username });
  const session = (await c.rdwrText('session/new', `cwd=${dir}`)).trim();
  const parent = (await c.rdwrText(`session/${session}/agent/new`, 'name=parent agent=bench')).trim();
  // The parent has a short history, which each sub-agent gets a snapshot of.
  const events = await c.open('event', 2);
  const pid = (await c.readText(`session/${session}/agent/${parent}/id`)).trim();
  await events.writeAll(new TextEncoder().encode(`session.*.agent.${pid}.state`));
  await c.write(`session/${session}/agent/${parent}/prompt`, 'hello');
  let buf = '';
  for (let off = 0; !/ idle\n/.test(buf);) {
    const chunk = await events.read(off, 8192);
    off += chunk.length;
    buf += new TextDecoder().decode(chunk);
  }
  await events.clunk();

  const sub = (i) =>
    c.rdwrText(
      `session/${session}/agent/new`,
      `agent=bench parent=${parent} name=sub-${i} prompt=read the files, one a round`,
    );
  const timed = async (n) => {
    const chats = () => mock.requests.filter((r) => r.path === '/v1/chat/completions').length;
    const from = chats();
    const t0 = performance.now();
    const replies = await Promise.all(Array.from({ length: n }, (_, i) => sub(i)));
    const ms = performance.now() - t0;
    const requests = chats() - from;
    if (replies.some((r) => r.trim() !== 'done') || requests !== n * (ROUNDS + 1)) {
      throw new Error(
        `unexpected run: replies ${JSON.stringify(replies)}, ${requests} LLM requests for ${n * (ROUNDS + 1)}`,
      );
    }
    return ms;
  };
  await timed(1); // warm-up: toolsrv spawn, first compilations
  await timed(N);
  const one = [];
  const many = [];
  // CPU of the three parties while the N run: the daemon, its toolsrv (with the reaped sandboxed tool processes),
  // and this process (the mock LLM and the 9P client).
  const cpu = { daemon: 0, toolsrv: 0, mock: 0 };
  const cpu1 = { daemon: 0, toolsrv: 0, mock: 0 };
  const measured = async (n, into) => {
    const kids = childrenOf(serve.pid);
    const before = {
      daemon: cpuOf(serve.pid),
      toolsrv: kids.reduce((a, k) => a + cpuOf(k), 0),
      mock: process.cpuUsage(),
    };
    const ms = await timed(n);
    into.daemon += cpuOf(serve.pid) - before.daemon;
    into.toolsrv += kids.reduce((a, k) => a + cpuOf(k), 0) - before.toolsrv;
    const m = process.cpuUsage(before.mock);
    into.mock += (m.user + m.system) / 1000;
    return ms;
  };
  for (let i = 0; i < RUNS; i++) {
    one.push(await measured(1, cpu1));
    many.push(await measured(N, cpu));
  }
  c.close();
  const f = (n) => n.toFixed(0);
  const ratio = median(many) / median(one);
  // The best runs too: on a machine doing other work the medians carry its noise, the minima less so.
  const best = Math.min(...many) / Math.min(...one);
  const pace = CHUNK_MS > 0 ? `mock LLM sending a stream chunk every ${CHUNK_MS} ms` : 'mock LLM answering at once';
  console.log(
    `sub-agents: ${ROUNDS} tool rounds each (file_read through a sandboxed toolsrv), ${pace}, ${availableParallelism()} cores`,
  );
  console.log(
    `  1 alone:           median ${f(median(one))} ms, best ${f(Math.min(...one))} ms   (runs ${one.map(f).join(' ')})`,
  );
  console.log(
    `  ${N} in parallel:     median ${f(median(many))} ms, best ${f(Math.min(...many))} ms   (runs ${many.map(f).join(' ')})`,
  );
  console.log(
    `  ${N} in parallel / 1 alone: ${ratio.toFixed(2)}× (medians), ${best.toFixed(2)}× (best runs)   (target ≤ 2.5× on 2 cores; ${N}× would be no parallelism at all)`,
  );
  const per = (ms) => (ms / RUNS).toFixed(0);
  console.log(
    `  CPU per run of 1: daemon ${per(cpu1.daemon)} ms, toolsrv + tools ${per(cpu1.toolsrv)} ms, mock + client ${per(cpu1.mock)} ms (wall ${f(one.reduce((a, b) => a + b, 0) / RUNS)} ms)`,
  );
  console.log(
    `  CPU per run of ${N}: daemon ${per(cpu.daemon)} ms, toolsrv + tools ${per(cpu.toolsrv)} ms, mock + client ${per(cpu.mock)} ms (wall ${f(many.reduce((a, b) => a + b, 0) / RUNS)} ms × ${availableParallelism()} cores available)`,
  );
  // The least the ratio can be with this much CPU: the run of N cannot end before its CPU is spread over every core,
  // nor before the daemon's one thread has done its part; one alone ends after its own (mostly serial) CPU.
  const oneMean = one.reduce((a, b) => a + b, 0) / RUNS;
  const spread = (cpu.daemon + cpu.toolsrv + cpu.mock) / RUNS / availableParallelism() / oneMean;
  const daemonThread = cpu.daemon / RUNS / oneMean;
  console.log(
    `  floor set by CPU: ${Math.max(spread, daemonThread).toFixed(2)}× (all CPU over ${availableParallelism()} cores: ${spread.toFixed(2)}×; the daemon's thread: ${daemonThread.toFixed(2)}×)`,
  );
} finally {
  serve.kill('SIGTERM');
  await new Promise((r) => serve.once('exit', r));
  await mock.close();
  rmSync(dir, { recursive: true, force: true });
}
