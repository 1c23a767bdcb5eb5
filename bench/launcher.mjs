#!/usr/bin/env node
// The one process launcher (src/platform/launcher.ts), both ways: through the spawner and through its fallback
// (Node's child_process.spawn). For `/bin/true`, launched one after another: the time from launch() to the exit and
// the end of output, and the time launch() holds the event loop (the synchronous part of the call, which is where
// Node's spawn forks the whole process). Needs `npm run build:node` and `node scripts/build-native.mjs`.
//
//   node bench/launcher.mjs [--n 300] [--warmup 30] [--json]
import { tmpdir } from 'node:os';
import { benchArgs } from './lib/args.mjs';
import { fromDist } from './lib/dist.mjs';
import { timedLaunch } from './lib/launch.mjs';
import { stats } from './timing.mjs';

const { Launcher } = await fromDist('platform/launcher.js');
const { n: N, warmup: WARMUP, json } = benchArgs({ n: 300, warmup: 30, json: false });
const median = (xs) => stats(xs).median;

const once = (l) =>
  timedLaunch((cb) =>
    l.launch({ file: '/bin/true', args: [], cwd: tmpdir(), env: { PATH: '/usr/bin:/bin' }, stdin: '' }, cb),
  );

const out = {};
for (const native of [true, false]) {
  const l = Launcher.create({ native });
  if (native && !l.native)
    throw new Error('native/build/ollie-spawner is not built: run node scripts/build-native.mjs');
  for (let i = 0; i < WARMUP; i++) await once(l);
  const runs = [];
  for (let i = 0; i < N; i++) runs.push(await once(l));
  l.close();
  out[native ? 'spawner' : 'fallback'] = {
    launch_to_end_ms: median(runs.map((r) => r.total)),
    event_loop_held_ms: median(runs.map((r) => r.sync)),
    n: N,
  };
}
if (json) console.log(JSON.stringify(out));
else
  for (const [k, v] of Object.entries(out))
    console.log(
      `${k.padEnd(9)} /bin/true: launch to end ${v.launch_to_end_ms.toFixed(3)} ms, event loop held ${v.event_loop_held_ms.toFixed(3)} ms (medians of ${v.n})`,
    );
