#!/usr/bin/env node
// What the threads of a watched call cost the spawner. The spawner counts a call's processes every 50 ms by
// reading the children of every thread of every process below it (native/ollie-spawner.c, tree()), so a call
// that holds many idle threads costs the spawner CPU and slows every other spawn of the session; it may hold 16
// per process of its `processes` limit (4,096 under 256), past which it is killed. Prints, for `--procs` processes of `--threads` sleeping threads each (under
// a process limit, so watched): the spawner's CPU use and the time a `/bin/true` spawn takes meanwhile.
// Needs `npm run build:node` and /usr/bin/python3.
//
//   node bench/spawner-threads.mjs [--threads 4000] [--procs 1] [--spawns 10]
import { readFileSync } from 'node:fs';
import { benchArgs } from './lib/args.mjs';
import { fromDist } from './lib/dist.mjs';

const { Spawner, SPAWNER } = await fromDist('platform/spawner.js');
const { threads, procs, spawns } = benchArgs({ threads: 4000, procs: 1, spawns: 10 });
const s = Spawner.find(SPAWNER);
if (!s) throw new Error(`${SPAWNER} is not built: npm run build:node`);

const spawnOnce = () =>
  new Promise((resolve) => {
    const t0 = performance.now();
    const done = () => resolve(performance.now() - t0);
    void s.spawn(
      { file: '/bin/true', args: [], cwd: '/', env: {}, stdin: '' },
      { output: () => {}, exited: done, closed: () => {}, lost: done },
    );
  });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function measure(label) {
  // The fork server proper is the guardian's one child.
  const fs = Number(readFileSync(`/proc/${s.pid}/task/${s.pid}/children`, 'utf8').trim());
  const cpu = () => {
    const f = readFileSync(`/proc/${fs}/stat`, 'utf8')
      .replace(/^.*\) /, '')
      .split(' ');
    return Number(f[11]) + Number(f[12]); // utime + stime, in clock ticks (100 a second)
  };
  const c0 = cpu();
  const t0 = Date.now();
  const lat = [];
  for (let i = 0; i < spawns; i++) {
    lat.push(await spawnOnce());
    await new Promise((r) => setTimeout(r, 200));
  }
  const pct = (cpu() - c0) / ((Date.now() - t0) / 1000);
  console.log(
    `${label}: spawner CPU ${pct.toFixed(0)} %, /bin/true spawn median ${median(lat).toFixed(1)} ms, max ${Math.max(...lat).toFixed(1)} ms`,
  );
}

await spawnOnce(); // the spawner runs
await measure('no threaded call');
let up = '';
let closing = false;
let ended = false;
const py = `
import threading, time, os
threading.stack_size(65536)
ev = threading.Event()
for p in range(${procs} - 1):
    if os.fork() == 0: break
for i in range(${threads}):
    threading.Thread(target=ev.wait, daemon=True).start()
print('up', flush=True)
time.sleep(3600)
`;
const call = await s.spawnInteractive(
  {
    file: '/usr/bin/python3',
    args: ['-c', py],
    cwd: '/',
    env: { PATH: '/usr/bin:/bin' },
    stdin: '',
    limits: { processes: 256, memory: 2 * 1024 ** 3 },
  },
  {
    output: (b) => (up += Buffer.from(b).toString()),
    errorOutput: (b) => process.stderr.write(b),
    exited: (code, signal, limit) => {
      ended = true;
      if (!closing)
        console.log(`the threaded call ended: ${code} ${signal} ${limit ? `killed for its ${limit} limit` : ''}`);
    },
    closed: () => {},
    lost: (why) => closing || console.log(`lost: ${why}`),
  },
);
while (!ended && (up.match(/up/g) ?? []).length < procs) await new Promise((r) => setTimeout(r, 50));
await measure(`${procs} process(es) of ${threads} idle threads, watched${ended ? ' (killed)' : ''}`);
closing = true;
if (!ended) process.kill(-call.pid, 'SIGKILL');
s.close();
