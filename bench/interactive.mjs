#!/usr/bin/env node
// Long-lived processes through the spawner (src/platform/launcher.ts launchInteractive, frames 'T'/'I'/'D'):
// the round trip of a line to an echoing child and back, and what the spawner itself costs while such a child idles
// with limits (it counts the child's processes and memory every 50 ms for as long as it lives), in CPU time of the
// spawner per second of idling. Needs `npm run build:node`.
//
//   node bench/interactive.mjs [--n 2000] [--idle-s 5]
import { readFileSync } from 'node:fs';
import { benchArgs } from './lib/args.mjs';
import { fromDist } from './lib/dist.mjs';

const { Launcher } = await fromDist('platform/launcher.js');
const { n, 'idle-s': idleS } = benchArgs({ n: 2000, 'idle-s': 5 });

const launcher = Launcher.create();
if (!launcher.native) throw new Error('native/build/ollie-spawner is not built: run node scripts/build-native.mjs');
let pending;
let done = false;
let buf = '';
const limits = { processes: 64, memory: 1 << 30, cpu: 600, fileSize: 1 << 30, openFiles: 1024 };
const p = launcher.launchInteractive(
  { file: '/bin/cat', args: [], cwd: '/', env: { PATH: '/usr/bin:/bin' }, limits },
  {
    output: (b) => {
      buf += Buffer.from(b).toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0 && pending) {
        buf = buf.slice(nl + 1);
        const r = pending;
        pending = undefined;
        r();
      }
    },
    errorOutput: () => undefined,
    exited: () => undefined,
    closed: () => undefined,
    lost: (why) => {
      if (!done) throw new Error(why);
    },
  },
);
const line = () =>
  new Promise((resolve) => {
    pending = resolve;
    p.write('ping\n');
  });
for (let i = 0; i < 100; i++) await line();
const t0 = process.hrtime.bigint();
for (let i = 0; i < n; i++) await line();
const rtt = Number(process.hrtime.bigint() - t0) / 1e6 / n;

// utime + stime of the spawner, in clock ticks (100 a second on Linux).
const cpuTicks = () => {
  const f = readFileSync(`/proc/${launcher.spawnerPid}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  return Number(f[11]) + Number(f[12]);
};
const c0 = cpuTicks();
await new Promise((r) => setTimeout(r, idleS * 1000));
const idleMs = ((cpuTicks() - c0) * 10) / idleS;

console.log(`round trip of a line through the spawner to /bin/cat and back: ${rtt.toFixed(3)} ms (mean of ${n})`);
// A clock tick is 10 ms: over idleS seconds, less than one tick is less than 10 / idleS ms a second.
const idle = idleMs > 0 ? `${idleMs.toFixed(1)}` : `< ${(10 / idleS).toFixed(1)}`;
console.log(`spawner CPU while it idles with limits: ${idle} ms per second (over ${idleS} s)`);
done = true;
p.endInput();
launcher.close();
