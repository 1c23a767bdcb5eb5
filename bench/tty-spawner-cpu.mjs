#!/usr/bin/env node
// The spawner's CPU while a tty tool does what could make it spin: idles; idles with 10 MiB of keystrokes waiting on a
// raw terminal it never reads; has closed its terminal (the master reads EIO) and sleeps on; has hung its terminal up
// (vhangup: root only, else it is refused and the run is an idle one); closes and reopens /dev/tty without pause; and
// once it has exited. Each for `--seconds`, with the call limits toolsrv gives a sandboxed call (so the spawner also
// counts the call's processes every 50 ms). CPU is the spawner's own (not its guardian's), from /proc, in percent of
// one core. Needs `npm run build:node` and `node scripts/build-native.mjs`.
//
//   node bench/tty-spawner-cpu.mjs [--seconds 2] [--json]
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { benchArgs } from './lib/args.mjs';
import { fromDist } from './lib/dist.mjs';

const { Launcher } = await fromDist('platform/launcher.js');
const { seconds, json } = benchArgs({ seconds: 2, json: false });
const HZ = 100; // USER_HZ: the unit of /proc/PID/stat's times on Linux
const LIMITS = { processes: 256, memory: 2 * 1024 ** 3, cpu: 600 };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** CPU ticks (user + system) of the spawner, the child of the process the launcher started (its guardian). */
function spawnerTicks(guardian) {
  const spawner = readFileSync(`/proc/${guardian}/task/${guardian}/children`, 'utf8').trim().split(' ')[0];
  const fields = readFileSync(`/proc/${spawner}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

const CASES = {
  idle: { script: 'sleep 600' },
  'idle, 10 MiB typed, never read': { script: 'stty raw -echo; sleep 600', typed: 10 },
  'terminal closed, sleeping on': { script: 'exec 0<&- 1>&- 2>&-; sleep 600' },
  'terminal hung up (vhangup)': {
    script: `exec python3 -c 'import ctypes, signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); ctypes.CDLL(None).vhangup(); time.sleep(600)'`,
  },
  'reopening /dev/tty without pause': {
    script: `exec python3 -c '
import os
while True:
    os.close(0); os.close(1); os.close(2); fd = os.open("/dev/tty", os.O_RDWR); os.dup2(fd, 1); os.dup2(fd, 2)'`,
  },
};

const launcher = Launcher.create();
if (!launcher.native) throw new Error('the spawner is not built: run node scripts/build-native.mjs');
const results = {};
try {
  for (const [name, c] of Object.entries(CASES)) {
    let exited;
    const ended = new Promise((r) => (exited = r));
    const t = await launcher.launchTty(
      {
        file: '/bin/sh',
        args: ['-c', c.script],
        cwd: tmpdir(),
        env: { PATH: '/usr/bin:/bin' },
        stdin: '',
        limits: LIMITS,
      },
      { cols: 80, rows: 24 },
      { output: () => undefined, exited: () => exited(), closed: () => undefined, lost: (why) => exited(why) },
    );
    for (let i = 0; i < (c.typed ?? 0); i++) t.write('x'.repeat(1 << 20));
    // Let it settle into what it does.
    await sleep(300);
    const guardian = launcher.spawnerPid;
    const before = spawnerTicks(guardian);
    await sleep(seconds * 1000);
    results[name] = ((spawnerTicks(guardian) - before) / HZ / seconds) * 100;
    try {
      process.kill(-t.pid, 'SIGKILL');
    } catch {
      results[name] = `${results[name].toFixed(1)} (it had exited)`;
    }
    await ended;
    if (name === 'reopening /dev/tty without pause') {
      const after = spawnerTicks(guardian);
      await sleep(seconds * 1000);
      results['after the calls exited'] = ((spawnerTicks(guardian) - after) / HZ / seconds) * 100;
    }
  }
} finally {
  launcher.close();
}
if (json) console.log(JSON.stringify(results));
else
  for (const [name, pct] of Object.entries(results))
    console.log(`${name.padEnd(36)} ${typeof pct === 'number' ? pct.toFixed(1) : pct}% of a core`);
