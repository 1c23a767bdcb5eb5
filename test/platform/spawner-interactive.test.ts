/**
 * The spawner's long-lived processes (native/ollie-spawner.c frames 'T', 'I', 'D', 'R', 'Q'; spawner.ts
 * spawnInteractive; launcher.ts launchInteractive), with the real spawner and real processes: a stdin that stays
 * open across round trips, stderr apart from stdout, end of input, a child that never reads (bounded, said, and
 * the spawner stays small and serving), the order of output, exit and end of output, containment and limits —
 * and the one-shot 'S' spawns unchanged beside them.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { Launcher, longLivedLimits } from '../../src/platform/launcher.js';
import { SPAWNER, Spawner, type InteractiveHandlers } from '../../src/platform/spawner.js';
import { alive } from '../helpers/processes.js';
import { endOf } from '../helpers/spawn-end.js';
import { until } from '../toolsrv/helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';

const ENV = { PATH: '/usr/local/bin:/usr/bin:/bin' };
const MiB = 1024 * 1024;

/** Everything one process reported, in order, and its stdout and stderr as text. */
function recorder() {
  const events: string[] = [];
  const r = { out: '', err: '', events, dropped: 0 };
  const end = endOf(events);
  const dec = new TextDecoder();
  const edec = new TextDecoder();
  const handlers: InteractiveHandlers = {
    running: (pid) => events.push(`running ${pid > 0}`),
    output: (b) => {
      r.out += dec.decode(b, { stream: true });
      if (events.at(-1) !== 'output') events.push('output');
    },
    errorOutput: (b) => (r.err += edec.decode(b, { stream: true })),
    ...end.handlers,
    inputDropped: () => r.dropped++,
  };
  return { r, handlers, ended: end.ended };
}

let spawner: Spawner | undefined;
let launcher: Launcher | undefined;
beforeAll(() => buildNative());
afterEach(() => {
  spawner?.close();
  spawner = undefined;
  launcher?.close();
  launcher = undefined;
});

/** The fork server itself: the process Node started is its guardian, whose one child it is. */
function forkServer(s: Spawner): number {
  const kids = readFileSync(`/proc/${s.pid}/task/${s.pid}/children`, 'utf8').trim().split(' ');
  expect(kids).toHaveLength(1);
  return Number(kids[0]);
}

function start(): Spawner {
  spawner = Spawner.find(SPAWNER);
  if (!spawner) throw new Error(`${SPAWNER} is not built: run node scripts/build-native.mjs`);
  return spawner;
}

/** A line-by-line echo: each line back on stdout, and a note of it on stderr. */
const ECHO = `while IFS= read -r l; do echo "out $l"; echo "err $l" >&2; done; echo bye`;

describe('spawnInteractive', () => {
  test('round trips over a stdin that stays open; stderr comes apart; endInput ends it', async () => {
    const s = start();
    const { r, handlers, ended } = recorder();
    const p = await s.spawnInteractive(
      { file: '/bin/sh', args: ['-c', ECHO], cwd: '/', env: ENV, stdin: '' },
      handlers,
    );
    expect(p.pid).toBeGreaterThan(0);
    for (const word of ['one', 'two', 'three']) {
      p.write(`${word}\n`);
      await until(() => r.out.endsWith(`out ${word}\n`), `the answer to ${word}`, 5000);
    }
    expect(r.out).toBe('out one\nout two\nout three\n');
    await until(() => r.err === 'err one\nerr two\nerr three\n', 'the stderr lines', 5000);
    // Bytes, split across frames: a 3 MiB line arrives whole (the spawner gets it in 1 MiB 'I' frames).
    const big = 'x'.repeat(3 * MiB);
    p.write(new TextEncoder().encode(`${big}\n`));
    await until(() => r.out.endsWith(`out ${big}\n`), 'the big line back', 10_000);
    p.endInput();
    await ended;
    expect(r.out.endsWith('bye\n')).toBe(true);
    // The exit and the end of output come in either order; the output before both.
    expect(r.events.filter((e) => e !== 'closed')).toEqual(['running true', 'output', 'exit 0 null']);
    expect(r.events.indexOf('closed')).toBeGreaterThan(r.events.indexOf('output'));
    // Written after the end: dropped, no error.
    p.write('late\n');
  });

  test('output written before the exit is heard before it; stdout and stderr each whole', async () => {
    const s = start();
    const { r, handlers, ended } = recorder();
    const script = `i=0; while [ $i -lt 2000 ]; do echo "line $i"; echo "e$i" >&2; i=$((i+1)); done; exit 3`;
    await s.spawnInteractive({ file: '/bin/sh', args: ['-c', script], cwd: '/', env: ENV, stdin: '' }, handlers);
    await ended;
    const lines = r.out.trim().split('\n');
    expect(lines).toHaveLength(2000);
    expect(lines[1999]).toBe('line 1999');
    expect(r.err.trim().split('\n')).toHaveLength(2000);
    expect(r.events.filter((e) => e !== 'output' && e !== 'closed')).toEqual(['running true', 'exit 3 null']);
    expect(r.events.lastIndexOf('output')).toBeLessThan(r.events.indexOf('exit 3 null'));
    expect(r.events.lastIndexOf('output')).toBeLessThan(r.events.indexOf('closed'));
  });

  test('initial stdin in the start frame, then more; a child that exits on its own closes its stdin', async () => {
    const s = start();
    const { r, handlers, ended } = recorder();
    const p = await s.spawnInteractive(
      { file: '/bin/sh', args: ['-c', 'read a; read b; echo "$a+$b"'], cwd: '/', env: ENV, stdin: 'first\n' },
      handlers,
    );
    p.write('second\n');
    await ended;
    expect(r.out).toBe('first+second\n');
    p.write('after the exit\n');
    p.endInput();
  });

  test('a child that exits with its stdin open leaves no descriptor behind in the spawner', async () => {
    const s = start();
    const warm = recorder();
    await s.spawnInteractive({ file: '/bin/true', args: [], cwd: '/', env: ENV, stdin: '' }, warm.handlers);
    await warm.ended;
    const fds = (): number => readdirSync(`/proc/${forkServer(s)}/fd`).length;
    const before = fds();
    const runs = Array.from({ length: 20 }, () => recorder());
    await Promise.all(
      runs.map((r) =>
        s.spawnInteractive({ file: '/bin/sh', args: ['-c', 'exit 0'], cwd: '/', env: ENV, stdin: '' }, r.handlers),
      ),
    );
    await Promise.all(runs.map((r) => r.ended));
    // Their stdin pipes were closed when they were reaped, though nobody sent 'D'.
    await until(() => fds() === before, `the spawner's descriptors back to ${before}`, 5000);
  });

  test('a child that never reads: past 16 MiB waiting its stdin is closed and it is told; the spawner stays small and serves others', async () => {
    const s = start();
    // /bin/sleep never reads: 40 MiB for it, in 1 MiB writes.
    const never = recorder();
    const q = await s.spawnInteractive(
      { file: '/bin/sleep', args: ['1000'], cwd: '/', env: ENV, stdin: '' },
      never.handlers,
    );
    const chunk = new Uint8Array(MiB).fill(97);
    for (let i = 0; i < 40; i++) q.write(chunk);
    await until(() => never.r.dropped === 1, 'the spawner to drop the unread input', 10_000);
    const status = readFileSync(`/proc/${forkServer(s)}/status`, 'utf8');
    const rss = Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
    expect(rss).toBeLessThan(48 * MiB);
    // Still serving: a one-shot spawn beside it.
    let out = '';
    const done = new Promise<void>(
      (resolve) =>
        void s.spawn(
          { file: '/bin/cat', args: [], cwd: '/', env: ENV, stdin: 'still serving' },
          {
            output: (b) => (out += new TextDecoder().decode(b)),
            exited: () => resolve(),
            closed: () => undefined,
            lost: () => resolve(),
          },
        ),
    );
    await done;
    expect(out).toBe('still serving');
    process.kill(-q.pid, 'SIGKILL');
    await never.ended;
    expect(never.r.events).toContain('exit null SIGKILL');
  });

  test('the first bytes, in the start frame, are bounded the same way', async () => {
    const s = start();
    const never = recorder();
    const q = await s.spawnInteractive(
      { file: '/bin/sleep', args: ['1000'], cwd: '/', env: ENV, stdin: 'x'.repeat(17 * MiB) },
      never.handlers,
    );
    await until(() => never.r.dropped === 1, 'the spawner to drop the unread first bytes', 10_000);
    process.kill(-q.pid, 'SIGKILL');
    await never.ended;
  });

  test('whatever it starts in a session of its own dies with it; its memory limit holds', async () => {
    const s = start();
    const { r, handlers, ended } = recorder();
    const p = await s.spawnInteractive(
      {
        file: '/bin/sh',
        args: ['-c', '(setsid /bin/sleep 1000 </dev/null >/dev/null 2>&1 & echo $!); read -r x; echo "got $x"'],
        cwd: '/',
        env: ENV,
        stdin: '',
      },
      handlers,
    );
    await until(() => /^\d+\n$/.test(r.out), 'the pid of the escaped sleep', 5000);
    const escaped = Number(r.out.trim());
    await until(
      () => alive(escaped) && readFileSync(`/proc/${escaped}/cmdline`, 'utf8').startsWith('/bin/sleep'),
      'it to run',
      5000,
    );
    p.write('done\n');
    await ended;
    expect(r.out).toMatch(/got done\n$/);
    expect(alive(escaped)).toBe(false);

    // Three processes of 120 MiB: each under the 256 MiB per-process rlimit, together over the limit of the whole.
    const hog = recorder();
    const eat = `${process.execPath} -e 'globalThis.b = Buffer.alloc(120 * 1024 * 1024, 1); setTimeout(() => {}, 60000)'`;
    await s.spawnInteractive(
      {
        file: '/bin/sh',
        args: ['-c', `for i in 1 2 3; do ${eat} & done; read -r x`],
        cwd: '/',
        env: ENV,
        stdin: '',
        limits: longLivedLimits({ memory: 256 * MiB, processes: 8, cpu: 1 }),
      },
      hog.handlers,
    );
    await hog.ended;
    expect(hog.r.events, hog.r.err).toContain('exit null SIGKILL memory');
  });

  test('a start that fails rejects with the reason; one-shot spawns are unchanged', async () => {
    const s = start();
    await expect(
      s.spawnInteractive({ file: '/nonexistent/server', args: [], cwd: '/', env: ENV, stdin: '' }, recorder().handlers),
    ).rejects.toThrow(/cannot start \/nonexistent\/server: exec: ENOENT/);
    // 'S': stdin written and closed, stdout and stderr merged in one stream.
    let out = '';
    const events: string[] = [];
    await new Promise<void>((resolve) => {
      let n = 0;
      const settle = (): void => void (++n === 2 && resolve());
      void s.spawn(
        { file: '/bin/sh', args: ['-c', 'cat; echo to-err >&2'], cwd: '/', env: ENV, stdin: 'in\n' },
        {
          output: (b) => (out += new TextDecoder().decode(b)),
          exited: (code) => (events.push(`exit ${code}`), settle()),
          closed: () => (events.push('closed'), settle()),
          lost: (why) => (events.push(why), resolve()),
        },
      );
    });
    expect(out).toBe('in\nto-err\n');
    expect(events.sort()).toEqual(['closed', 'exit 0']);
  });
});

describe('launchInteractive', () => {
  test('goes through the spawner: writes before it runs reach it, and its pid is known before its output', async () => {
    launcher = Launcher.create();
    expect(launcher.native).toBe(true);
    const { r, handlers, ended } = recorder();
    const p = launcher.launchInteractive({ file: '/bin/sh', args: ['-c', ECHO], cwd: '/', env: ENV }, handlers);
    expect(p.pid).toBe(0);
    p.write('early\n');
    p.endInput();
    await ended;
    expect(r.out).toBe('out early\nbye\n');
    expect(r.err).toBe('err early\n');
    expect(r.events[0]).toBe('running true');
    expect(p.pid).toBeGreaterThan(0);
    // Its parent was the spawner: contained as a call is.
  });

  test('the limits of a long-lived process leave out the CPU seconds and the output', () => {
    expect(longLivedLimits({ processes: 4, memory: 5, cpu: 6, fileSize: 7, openFiles: 8, output: 9 })).toEqual({
      processes: 4,
      memory: 5,
      fileSize: 7,
      openFiles: 8,
    });
    expect(longLivedLimits(undefined)).toBeUndefined();
  });

  test('without the spawner (the documented fallback) it still round-trips', async () => {
    launcher = Launcher.create({ native: false });
    const { r, handlers, ended } = recorder();
    const p = launcher.launchInteractive({ file: '/bin/sh', args: ['-c', ECHO], cwd: '/', env: ENV }, handlers);
    p.write('fallback\n');
    p.endInput();
    await ended;
    expect(r.out).toBe('out fallback\nbye\n');
    expect(r.err).toBe('err fallback\n');
  });

  test('a program that cannot start is reported through lost', async () => {
    launcher = Launcher.create();
    const { r, handlers, ended } = recorder();
    const p = launcher.launchInteractive({ file: '/nonexistent/server', args: [], cwd: '/', env: ENV }, handlers);
    p.write('nobody\n');
    await ended;
    expect(r.events).toEqual([expect.stringMatching(/^lost cannot start \/nonexistent\/server: exec: ENOENT/)]);
    expect(p.pid).toBe(0);
  });
});
