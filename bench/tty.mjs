#!/usr/bin/env node
// A tty tool's start: a process on a pseudo-terminal of its own, launched one after another, from the call to its
// first output (`echo ready`), and how long the call holds the event loop. Through the spawner's 'Y' frame
// (Launcher.launchTty, how toolsrv starts tty tools); and, where the package is still installed (a checkout from
// before it was dropped), through node-pty, which toolsrv used before. Needs `npm run build:node` and
// `node scripts/build-native.mjs`.
//
//   node bench/tty.mjs [--n 200] [--warmup 20] [--json]
import { tmpdir } from 'node:os';
import { benchArgs } from './lib/args.mjs';
import { fromDist } from './lib/dist.mjs';
import { timedLaunch } from './lib/launch.mjs';
import { stats } from './timing.mjs';

const { Launcher } = await fromDist('platform/launcher.js');
const { n: N, warmup: WARMUP, json } = benchArgs({ n: 200, warmup: 20, json: false });
const median = (xs) => stats(xs).median;
const REQ = { file: '/bin/sh', args: ['-c', 'echo ready'], cwd: tmpdir(), env: { PATH: '/usr/bin:/bin' } };
const SIZE = { cols: 120, rows: 40 };

/** One start through the spawner: until the first output, then until it has ended (so runs do not overlap). */
const viaSpawner = (l) => timedLaunch((cb) => l.launchTty({ ...REQ, stdin: '' }, SIZE, cb));

/** The same through node-pty. */
async function viaNodePty(pty) {
  let sync = 0;
  let first = 0;
  const t0 = performance.now();
  await new Promise((resolve) => {
    const s0 = performance.now();
    const t = pty.spawn(REQ.file, REQ.args, { name: 'xterm-256color', ...SIZE, cwd: REQ.cwd, env: REQ.env });
    sync = performance.now() - s0;
    t.onData(() => (first ||= performance.now() - t0));
    t.onExit(() => resolve());
  });
  return { first, sync };
}

async function measure(once) {
  for (let i = 0; i < WARMUP; i++) await once();
  const runs = [];
  for (let i = 0; i < N; i++) runs.push(await once());
  return {
    to_first_output_ms: median(runs.map((r) => r.first)),
    event_loop_held_ms: median(runs.map((r) => r.sync)),
    n: N,
  };
}

const out = {};
const l = Launcher.create();
if (!l.native) throw new Error('native/build/ollie-spawner is not built: run node scripts/build-native.mjs');
out.spawner = await measure(() => viaSpawner(l));
l.close();
// A package name in a variable: it is no dependency of the project any more, and may well be missing.
const name = 'node-pty';
const pty = await import(name).catch(() => undefined);
if (pty) out['node-pty'] = await measure(() => viaNodePty(pty.default ?? pty));
if (json) console.log(JSON.stringify(out));
else {
  for (const [k, v] of Object.entries(out))
    console.log(
      `${k.padEnd(8)} tty start: to first output ${v.to_first_output_ms.toFixed(3)} ms, event loop held ${v.event_loop_held_ms.toFixed(3)} ms (medians of ${v.n})`,
    );
  if (!pty) console.log('node-pty is not installed: nothing to compare with');
}
