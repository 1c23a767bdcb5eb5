/**
 * The one process launcher: the spawner where it is built, Node's spawn as its fallback; the same handlers and
 * the same guarantees either way, except what the fallback is documented to lose (a process that leaves its
 * group outlives the launch).
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Launcher, type LaunchHandlers, type LaunchRequest } from '../../src/platform/launcher.js';
import { testDir } from '../helpers/temp-dir.js';
import { alive, until } from '../toolsrv/helpers.js';

const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
const open: Launcher[] = [];
const strays: number[] = [];

afterEach(() => {
  for (const l of open.splice(0)) l.close();
  for (const pid of strays.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
});

function launcher(native: boolean, adopt?: (c: ChildProcess) => void): Launcher {
  const l = Launcher.create({ native, ...(adopt && { adopt }) });
  open.push(l);
  if (native && !l.native)
    throw new Error('native/build/ollie-spawner is not built: run node scripts/build-native.mjs');
  return l;
}

interface Outcome {
  pid: number;
  out: string;
  err: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  order: string[];
}

/** Launches `req` and waits for its exit and the end of its output. */
async function run(
  l: Launcher,
  req: Omit<LaunchRequest, 'env' | 'cwd' | 'stdin'> & Partial<LaunchRequest>,
): Promise<Outcome> {
  const dec = new TextDecoder();
  const o: Outcome = { pid: 0, out: '', err: '', code: null, signal: null, order: [] };
  let done!: () => void;
  const ended = new Promise<void>((r) => (done = r));
  let exited = false;
  let closed = false;
  const h: LaunchHandlers = {
    output: (b) => (o.out += dec.decode(b)),
    errorOutput: (b) => (o.err += dec.decode(b)),
    exited: (code, signal) => {
      o.order.push('exited');
      Object.assign(o, { code, signal });
      exited = true;
      if (closed) done();
    },
    closed: () => {
      o.order.push('closed');
      closed = true;
      if (exited) done();
    },
    lost: (why) => {
      o.order.push(`lost ${why}`);
      done();
    },
  };
  const started = await l.launch({ cwd: tmpdir(), env: ENV, stdin: '', ...req }, h);
  o.pid = started.pid;
  await ended;
  return o;
}

/** Runs `/bin/sh -c script` through a launcher of its own and waits for it, as `run` does. */
const sh = (native: boolean, script: string, req: Partial<LaunchRequest> = {}): Promise<Outcome> =>
  run(launcher(native), { file: '/bin/sh', args: ['-c', script], ...req });

const gone = (pid: number): Promise<boolean> => until(() => !alive(pid));

for (const native of [true, false]) {
  describe(native ? 'through the spawner' : "through the fallback (Node's spawn)", () => {
    it('passes stdin, merges stdout and stderr in order, reports the exit and the end of its output', async () => {
      const o = await sh(native, 'read x; echo "got $x"; echo err >&2; exit 3', { stdin: 'hello\n' });
      expect(o.out).toBe('got hello\nerr\n');
      expect(o.code).toBe(3);
      expect(o.order.sort()).toEqual(['closed', 'exited']);
      expect(o.pid).toBeGreaterThan(0);
    });

    it('keeps stderr apart when asked', async () => {
      const o = await sh(native, 'echo out; echo err >&2', { stderr: 'separate' });
      expect(o.out).toBe('out\n');
      expect(o.err).toBe('err\n');
      expect(o.code).toBe(0);
    });

    it('refuses a missing program or cwd, saying which', async () => {
      const l = launcher(native);
      const h: LaunchHandlers = {
        output: () => undefined,
        exited: () => undefined,
        closed: () => undefined,
        lost: () => undefined,
      };
      await expect(
        l.launch({ file: '/nonexistent/prog', args: [], cwd: tmpdir(), env: ENV, stdin: '' }, h),
      ).rejects.toThrow(/cannot start \/nonexistent\/prog/);
      await expect(
        l.launch({ file: '/bin/true', args: [], cwd: '/nonexistent-dir', env: ENV, stdin: '' }, h),
      ).rejects.toThrow(/\/nonexistent-dir|ENOENT/);
    });

    it('kills what the process left in its group when it exits', async () => {
      const dir = testDir('ollie-launch-');
      const o = await sh(native, `sleep 1013.1 >/dev/null 2>&1 & echo $! > ${dir}/pid`);
      expect(o.code).toBe(0);
      const pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
      strays.push(pid);
      expect(await gone(pid)).toBe(true);
    });

    it(
      native
        ? "kills a process that left the group too (the spawner's subreapers)"
        : 'cannot reach a process that left the group: what the fallback loses',
      async () => {
        const dir = testDir('ollie-launch-');
        const o = await sh(
          native,
          `setsid sh -c 'echo $$ > ${dir}/pid; exec sleep 1013.2' >/dev/null 2>&1 </dev/null & while [ ! -s ${dir}/pid ]; do :; done`,
        );
        expect(o.code).toBe(0);
        const pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
        strays.push(pid);
        if (native) expect(await gone(pid)).toBe(true);
        else expect(alive(pid)).toBe(true);
      },
    );
  });
}

describe('adopt', () => {
  it('is told of the processes the launcher itself starts: the spawner once, or each fallback process', async () => {
    const seen: number[] = [];
    const l = launcher(true, (c) => seen.push(c.pid!));
    await run(l, { file: '/bin/true', args: [] });
    await run(l, { file: '/bin/true', args: [] });
    expect(seen).toEqual([l.spawnerPid]);
    const f: number[] = [];
    const fb = launcher(false, (c) => f.push(c.pid!));
    const a = await run(fb, { file: '/bin/true', args: [] });
    const b = await run(fb, { file: '/bin/true', args: [] });
    expect(f).toEqual([a.pid, b.pid]);
  });
});
