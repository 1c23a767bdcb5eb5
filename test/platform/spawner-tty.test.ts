/**
 * The spawner's terminals (native/ollie-spawner.c frames 'Y' and 'W'; spawner.ts spawnTty; launcher.ts launchTty),
 * with the real spawner and real processes: the terminal as stdin, stdout and stderr and as the controlling
 * terminal, its master in no child, a resize the process hears, keystrokes through the bounded input, everything
 * printed before the exit delivered before the end of output, limits and containment as for any spawn, and no
 * terminal without the spawner.
 */
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { Launcher, NO_SPAWNER_TTY } from '../../src/platform/launcher.js';
import { SPAWNER, Spawner, type InteractiveHandlers } from '../../src/platform/spawner.js';
import { alive } from '../helpers/processes.js';
import { endOf } from '../helpers/spawn-end.js';
import { until } from '../toolsrv/helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';

const ENV = { PATH: '/usr/local/bin:/usr/bin:/bin' };
const SIZE = { cols: 120, rows: 40 };

/** What the terminal printed (carriage returns dropped: the terminal's onlcr adds them), and the events. */
function recorder() {
  const events: string[] = [];
  const r = { out: '', events, dropped: 0 };
  const end = endOf(events);
  const dec = new TextDecoder();
  const handlers: InteractiveHandlers = {
    output: (b) => (r.out += dec.decode(b, { stream: true }).replace(/\r/g, '')),
    errorOutput: () => events.push('stderr apart'),
    ...end.handlers,
    inputDropped: () => r.dropped++,
  };
  return { r, handlers, ended: end.ended };
}

let spawner: Spawner | undefined;
beforeAll(() => buildNative());
afterEach(() => {
  spawner?.close();
  spawner = undefined;
});

function start(): Spawner {
  spawner = Spawner.find(SPAWNER);
  if (!spawner) throw new Error(`${SPAWNER} is not built: run node scripts/build-native.mjs`);
  return spawner;
}

const sh = (script: string, stdin = '') => ({ file: '/bin/sh', args: ['-c', script], cwd: '/', env: ENV, stdin });

describe('spawnTty', () => {
  test('the terminal is stdin, stdout, stderr and the controlling terminal; no other descriptor, no master, crosses', async () => {
    const s = start();
    const { r, handlers, ended } = recorder();
    // Every descriptor the tool has, but the one listing them.
    const fds = `/usr/bin/python3 -c 'import os; print(*sorted(os.readlink(f"/proc/self/fd/{f}") for f in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{f}") and not os.readlink(f"/proc/self/fd/{f}").startswith("/proc/")))'`;
    await s.spawnTty(sh(`echo err >&2; tty; ${fds}; ps -o tty= -p $$`), SIZE, handlers);
    await ended;
    const [err, tty, own, ctty] = r.out.trim().split('\n');
    expect(err).toBe('err');
    expect(tty).toMatch(/^\/dev\/pts\/\d+$/);
    expect(r.events).not.toContain('stderr apart');
    // Its terminal three times, and nothing else: no master (/dev/ptmx, /dev/pts/ptmx), no pipe, no file.
    expect(own).toBe(`${tty} ${tty} ${tty}`);
    expect(`/dev/${ctty!.trim()}`).toBe(tty);
  });

  test('starts at its size; a resize sets it and the process gets SIGWINCH; keystrokes reach it', async () => {
    const s = start();
    const { r, handlers, ended } = recorder();
    const py = [
      'import signal, shutil, sys, os',
      'signal.signal(signal.SIGWINCH, lambda *a: print("winch", *os.get_terminal_size(0), flush=True))',
      'print("size", *os.get_terminal_size(0), flush=True)',
      'print("got", sys.stdin.readline().strip(), flush=True)',
    ].join('\n');
    const t = await s.spawnTty(
      { file: '/usr/bin/python3', args: ['-c', py], cwd: '/', env: ENV, stdin: '' },
      SIZE,
      handlers,
    );
    await until(() => r.out.includes('size 120 40\n'), 'the first size', 5000);
    t.resize({ cols: 81, rows: 23 });
    await until(() => r.out.includes('winch 81 23\n'), 'the SIGWINCH', 5000);
    t.write('typed words\r');
    await ended;
    // The terminal echoes what was typed, as one would.
    expect(r.out).toBe('size 120 40\nwinch 81 23\ntyped words\ngot typed words\n');
    expect(r.events).toEqual(expect.arrayContaining(['exit 0 null', 'closed']));
    expect(() => t.resize({ cols: 0, rows: 10 })).toThrow(/1 to 65535/);
  });

  test('everything printed before the exit comes before the end of output (the master reads EIO after)', async () => {
    const s = start();
    const { r, handlers, ended } = recorder();
    await s.spawnTty(sh(`head -c 300000 /dev/zero | tr '\\0' x; exit 3`), SIZE, handlers);
    await ended;
    expect(r.out.length).toBe(300000);
    expect(r.events).toEqual(expect.arrayContaining(['exit 3 null', 'closed']));
  });

  test('a process that never reads: what waits is bounded, the input is dropped and said; the spawner keeps serving', async () => {
    const s = start();
    const { r, handlers } = recorder();
    const t = await s.spawnTty(sh('sleep 60'), SIZE, handlers);
    const chunk = 'x'.repeat(1 << 20);
    for (let i = 0; i < 17; i++) t.write(chunk);
    await until(() => r.dropped === 1, 'the input to be dropped', 10000);
    const other = recorder();
    await s.spawn(sh('echo still serving'), other.handlers);
    await other.ended;
    expect(other.r.out).toBe('still serving\n');
    process.kill(-t.pid, 'SIGKILL');
  });

  test('contained and limited as any spawn: a setsid daemon dies with it, a fork past the process limit is killed', async () => {
    const s = start();
    const a = recorder();
    await s.spawnTty(sh('setsid sleep 1013.3 & echo $!'), SIZE, a.handlers);
    await a.ended;
    const daemon = Number(a.r.out.trim());
    expect(daemon).toBeGreaterThan(0);
    expect(alive(daemon)).toBe(false);
    const b = recorder();
    await s.spawnTty(
      { ...sh('for i in $(seq 40); do sleep 1013.4 & done; wait'), limits: { processes: 20 } },
      SIZE,
      b.handlers,
    );
    await b.ended;
    expect(b.r.events).toContain('exit null SIGKILL processes');
  });

  test('a missing program is refused with the reason, and nothing runs', async () => {
    const s = start();
    const { handlers } = recorder();
    await expect(
      s.spawnTty({ file: '/nonexistent/prog', args: [], cwd: '/', env: ENV, stdin: '' }, SIZE, handlers),
    ).rejects.toThrow(/cannot start \/nonexistent\/prog: exec: ENOENT/);
    await expect(s.spawnTty(sh('true'), { cols: 70000, rows: 1 }, handlers)).rejects.toThrow(/1 to 65535/);
  });
});

describe('launchTty', () => {
  test('starts on a terminal through the spawner, with the call limits', async () => {
    const launcher = Launcher.create();
    try {
      const { r, handlers, ended } = recorder();
      const t = await launcher.launchTty(sh('test -t 0 && test -t 1 && stty size; ulimit -t'), SIZE, handlers);
      expect(t.pid).toBeGreaterThan(0);
      await ended;
      expect(r.out).toBe('40 120\nunlimited\n');
      const c = recorder();
      await launcher.launchTty({ ...sh('ulimit -t'), limits: { cpu: 7 } }, SIZE, c.handlers);
      await c.ended;
      // Unlike a long-lived launch, a tty call keeps its CPU-seconds limit.
      expect(c.r.out).toBe('7\n');
    } finally {
      launcher.close();
    }
  });

  test('is refused without the spawner: no other way gives a terminal', async () => {
    const launcher = Launcher.create({ native: false });
    const { handlers } = recorder();
    await expect(launcher.launchTty(sh('echo ran'), SIZE, handlers)).rejects.toThrow(NO_SPAWNER_TTY);
    expect(NO_SPAWNER_TTY).toMatch(/^a tty tool's terminal comes from the process spawner: the process spawner /);
  });
});
