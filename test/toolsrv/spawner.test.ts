import { spawn } from 'node:child_process';
import { chmodSync, closeSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Proc } from '../../src/toolsrv/exec/proc.js';
import { Launcher } from '../../src/platform/launcher.js';
import { SPAWNER, Spawner, type SpawnedHandlers } from '../../src/platform/spawner.js';
import { alive } from '../helpers/processes.js';
import { endOf } from '../helpers/spawn-end.js';
import { startEnv, until, type Env } from './helpers.js';

/** What one process reported, in order. */
function recorder() {
  const events: string[] = [];
  let out = '';
  const dec = new TextDecoder();
  const end = endOf(events);
  const handlers: SpawnedHandlers = { output: (b) => (out += dec.decode(b)), ...end.handlers };
  return { handlers, events, ended: end.ended, out: () => out };
}

const ppidOf = (pid: number): number =>
  Number(
    readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /, '')
      .split(' ')[1],
  );

const ENV = { PATH: '/usr/local/bin:/usr/bin:/bin' };
let spawner: Spawner | undefined;
let dir: string | undefined;
let env: Env | undefined;
let launcher: Launcher | undefined;

afterEach(async () => {
  spawner?.close();
  spawner = undefined;
  launcher?.close();
  launcher = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
  await env?.close();
  env = undefined;
});

/** The launcher toolsrv uses, on the spawner (Proc starts its calls through it). */
function startLauncher(): Launcher {
  launcher = Launcher.create();
  if (!launcher.native) throw new Error(`${SPAWNER} is not built: run node scripts/build-native.mjs`);
  return launcher;
}

function start(): Spawner {
  spawner = Spawner.find(SPAWNER);
  if (!spawner) throw new Error(`${SPAWNER} is not built: run node scripts/build-native.mjs`);
  return spawner;
}

describe('ollie-spawner', () => {
  it('runs a process: stdin written whole (1 MiB, beyond a pipe buffer), stdout and stderr in order, the exit code', async () => {
    const s = start();
    const input = 'x'.repeat(1 << 20);
    const r = recorder();
    const { pid } = await s.spawn(
      { file: 'sh', args: ['-c', 'wc -c; echo err >&2; echo out; exit 3'], cwd: tmpdir(), env: ENV, stdin: input },
      r.handlers,
    );
    expect(pid).toBeGreaterThan(0);
    await r.ended;
    expect(r.out()).toBe(`${1 << 20}\nerr\nout\n`);
    expect(r.events.sort()).toEqual(['closed', 'exit 3 null']);
  });

  it('runs each process as the leader of its own session, in the cwd and with the environment it was given', async () => {
    const s = start();
    dir = mkdtempSync(join(tmpdir(), 'spawner-test-'));
    const r = recorder();
    const { pid } = await s.spawn(
      {
        file: 'sh',
        args: ['-c', 'echo "$(pwd) $FOO $(ps -o sid= -p $$ | tr -d " ")"'],
        cwd: dir,
        env: { ...ENV, FOO: 'bar' },
        stdin: '',
      },
      r.handlers,
    );
    await r.ended;
    expect(r.out()).toBe(`${dir} bar ${pid}\n`);
  });

  it('finds a bare program name on the PATH of the environment it was given, not its own', async () => {
    const s = start();
    dir = mkdtempSync(join(tmpdir(), 'spawner-test-'));
    writeFileSync(join(dir, 'only-here'), '#!/bin/sh\necho found me\n');
    chmodSync(join(dir, 'only-here'), 0o755);
    const r = recorder();
    await s.spawn(
      { file: 'only-here', args: [], cwd: dir, env: { PATH: `/nonexistent:${dir}` }, stdin: '' },
      r.handlers,
    );
    await r.ended;
    expect(r.out()).toBe('found me\n');
  });

  it('refuses a string with a NUL byte in it (it would shift every field after it), and keeps serving', async () => {
    const s = start();
    const r = recorder();
    await expect(
      s.spawn(
        { file: 'sh', args: ['-c', 'echo hi'], cwd: tmpdir(), env: { ...ENV, X: 'a\0/' }, stdin: '' },
        r.handlers,
      ),
    ).rejects.toThrow(/contains a NUL byte/);
    await expect(
      s.spawn({ file: 'echo', args: ['a\0b'], cwd: tmpdir(), env: ENV, stdin: '' }, r.handlers),
    ).rejects.toThrow(/contains a NUL byte/);
    const ok = recorder();
    await s.spawn({ file: 'echo', args: ['fine'], cwd: tmpdir(), env: ENV, stdin: '' }, ok.handlers);
    await ok.ended;
    expect(ok.out()).toBe('fine\n');
  });

  it('ends the groups it started on every way out: a frame it cannot parse too', async () => {
    // Driven by hand here, as toolsrv drives it, to send what toolsrv never would.
    const p = spawn(SPAWNER, [], { stdio: ['pipe', 'pipe', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const frame = (type: string, id: number, payload: Buffer): Buffer => {
      const head = Buffer.alloc(9);
      head.writeUInt32LE(5 + payload.length, 0);
      head.write(type, 4);
      head.writeUInt32LE(id, 5);
      return Buffer.concat([head, payload]);
    };
    const u32 = (n: number): Buffer => {
      const b = Buffer.alloc(4);
      b.writeUInt32LE(n);
      return b;
    };
    const spawnFrame = frame(
      'S',
      1,
      Buffer.concat([
        u32(2),
        Buffer.from('sleep\x0030\x00'),
        u32(1),
        Buffer.from('PATH=/usr/bin:/bin\x00'),
        Buffer.from(`${tmpdir()}\x00`),
        Buffer.alloc(40),
      ]),
    );
    const pid = await new Promise<number>((resolve) => {
      p.stdout.once('data', (b: Buffer) => resolve(b.readUInt32LE(9)));
      p.stdin.write(spawnFrame);
    });
    expect(alive(pid)).toBe(true);
    p.stdin.write(frame('Z', 2, Buffer.alloc(0)));
    const code = await new Promise<number | null>((r) => p.once('close', r));
    expect(code).toBe(1);
    expect(err).toContain('unknown frame type 0x5a');
    await until(() => !alive(pid));
  });

  it('refuses with the reason when the program or the cwd is missing, and nothing runs', async () => {
    const s = start();
    const r = recorder();
    await expect(
      s.spawn({ file: 'no-such-program', args: [], cwd: tmpdir(), env: ENV, stdin: '' }, r.handlers),
    ).rejects.toThrow(/cannot start no-such-program: exec: ENOENT \(No such file or directory\)/);
    await expect(
      s.spawn({ file: 'sh', args: [], cwd: '/no/such/dir', env: ENV, stdin: '' }, r.handlers),
    ).rejects.toThrow(/cannot start sh: chdir \/no\/such\/dir: ENOENT/);
    dir = mkdtempSync(join(tmpdir(), 'spawner-test-'));
    writeFileSync(join(dir, 'not-executable'), 'echo no\n', { mode: 0o644 });
    await expect(
      s.spawn({ file: join(dir, 'not-executable'), args: [], cwd: tmpdir(), env: ENV, stdin: '' }, r.handlers),
    ).rejects.toThrow(/exec: EACCES/);
    // The spawner is still serving.
    const ok = recorder();
    await s.spawn({ file: 'true', args: [], cwd: tmpdir(), env: ENV, stdin: '' }, ok.handlers);
    await ok.ended;
    expect(ok.events).toContain('exit 0 null');
  });

  it('reports a signal, and kills what the leader left in its group when it exits', async () => {
    const s = start();
    dir = mkdtempSync(join(tmpdir(), 'spawner-test-'));
    const r = recorder();
    const { pid } = await s.spawn(
      { file: 'sh', args: ['-c', `sleep 30 & echo $! > ${dir}/pid; kill -TERM $$`], cwd: dir, env: ENV, stdin: '' },
      r.handlers,
    );
    await r.ended;
    expect(r.events).toContain('exit null SIGTERM');
    const grandchild = Number(readFileSync(join(dir, 'pid'), 'utf8'));
    await until(() => !alive(grandchild));
    expect(alive(pid)).toBe(false);
  });

  it('reports the exit of a process whose output another one holds, and lets go of the pipe when asked', async () => {
    const s = start();
    dir = mkdtempSync(join(tmpdir(), 'spawner-test-'));
    const r = recorder();
    // Every process of the call ends with it, so only a process outside the call can hold its output pipe: this
    // test, opening it through /proc while the tool waits for the go-ahead file.
    const spawned = await s.spawn(
      {
        file: 'sh',
        args: ['-c', `while [ ! -e ${dir}/go ]; do sleep 0.01; done; echo bye`],
        cwd: dir,
        env: ENV,
        stdin: '',
      },
      r.handlers,
    );
    const held = openSync(`/proc/${spawned.pid}/fd/1`, 'w');
    try {
      writeFileSync(join(dir, 'go'), '');
      await until(() => r.events.includes('exit 0 null'));
      expect(r.events).not.toContain('closed');
      // The spawner proper is the only child of the process toolsrv started (its guardian).
      const spawnerPid = Number(readFileSync(`/proc/${s.pid}/task/${s.pid}/children`, 'utf8').trim());
      const fds = () => readdirSync(`/proc/${spawnerPid}/fd`).length;
      const before = fds();
      spawned.abandonOutput();
      await until(() => fds() === before - 1);
    } finally {
      closeSync(held);
    }
  });

  it('a call whose spawner is killed outright ends with the reason, and its process group with it', async () => {
    const spawner = startLauncher();
    const proc = new Proc({ id: 1, tool: 'sh', agent: 'a', cmd: 'sleep', background: false, bypassed: false });
    await proc.start(
      { file: 'sleep', args: ['30'], cwd: tmpdir(), env: ENV, stdin: '', tty: false },
      undefined,
      spawner,
    );
    expect(alive(proc.osPid)).toBe(true);
    process.kill(spawner.spawnerPid!, 'SIGKILL');
    await proc.done;
    expect(proc.status).toBe('killed');
    expect(proc.error).toMatch(/the process spawner was killed by SIGKILL/);
    await until(() => !alive(proc.osPid));
  });

  it('a stop asked for while the spawner is still starting the process reaches its group once it exists', async () => {
    const spawner = startLauncher();
    const proc = new Proc({ id: 2, tool: 'sh', agent: 'a', cmd: 'sleep', background: false, bypassed: false });
    const starting = proc.start(
      { file: 'sleep', args: ['30'], cwd: tmpdir(), env: ENV, stdin: '', tty: false },
      undefined,
      spawner,
    );
    // No pid yet: the started frame has not come back.
    expect(proc.osPid).toBe(0);
    proc.terminate('killed', 0);
    await starting;
    await proc.done;
    expect(proc.status).toBe('killed');
    expect(proc.signal).toBe('SIGKILL');
  });

  it('a spawner that dies fails its running processes with the reason, and the next spawn starts a new one', async () => {
    const s = start();
    const r = recorder();
    await s.spawn({ file: 'sleep', args: ['30'], cwd: tmpdir(), env: ENV, stdin: '' }, r.handlers);
    const first = s.pid!;
    process.kill(first, 'SIGKILL');
    await r.ended;
    expect(r.events).toEqual(['lost the process spawner was killed by SIGKILL']);
    const again = recorder();
    await s.spawn({ file: 'echo', args: ['again'], cwd: tmpdir(), env: ENV, stdin: '' }, again.handlers);
    await again.ended;
    expect(again.out()).toBe('again\n');
    expect(s.pid).not.toBe(first);
  });

  it("starts a process with the call's rlimits, as a subreaper, under the spawner and its guardian", async () => {
    const s = start();
    const r = recorder();
    const limits = { memory: 1 << 30, cpu: 7, fileSize: 1 << 20, openFiles: 77 };
    const { pid } = await s.spawn(
      {
        file: 'sh',
        args: [
          '-c',
          'cat /proc/self/limits; grep -E "^PPid" /proc/$PPID/status; (sleep 30 & echo orphan $!); sleep 30',
        ],
        cwd: tmpdir(),
        env: ENV,
        stdin: '',
        limits,
      },
      r.handlers,
    );
    await until(() => r.out().includes('orphan'));
    const line = (name: string): string[] =>
      r
        .out()
        .split('\n')
        .find((l) => l.startsWith(name))!
        .slice(26)
        .trim()
        .split(/\s+/);
    expect(line('Max data size')).toEqual([String(1 << 30), String(1 << 30), 'bytes']);
    expect(line('Max cpu time')).toEqual(['7', '12', 'seconds']);
    expect(line('Max file size')).toEqual([String(1 << 20), String(1 << 20), 'bytes']);
    expect(line('Max open files')).toEqual(['77', '77', 'files']);
    // Its parent is the spawner, whose parent is the process toolsrv started: the guardian.
    expect(Number(/^PPid:\s+(\d+)/m.exec(r.out())![1])).toBe(s.pid);
    // A subreaper: the orphan of its subshell came to it, not to the spawner.
    const orphan = Number(/^orphan (\d+)/m.exec(r.out())![1]);
    await until(() => ppidOf(orphan) === pid);
    process.kill(-pid, 'SIGKILL');
    await r.ended;
  });

  it('kills the whole call when it goes over its process limit, and says so', async () => {
    const s = start();
    const r = recorder();
    await s.spawn(
      {
        file: 'sh',
        args: ['-c', 'for i in $(seq 40); do setsid sleep 30 & done; wait'],
        cwd: tmpdir(),
        env: ENV,
        stdin: '',
        limits: { processes: 20 },
      },
      r.handlers,
    );
    await r.ended;
    expect(r.events).toContain('exit null SIGKILL processes');
  });

  it('hands a process only its stdin, stdout and stderr: no descriptor of toolsrv or the spawner crosses', async () => {
    const s = start();
    const r = recorder();
    await s.spawn({ file: 'ls', args: ['/proc/self/fd'], cwd: tmpdir(), env: ENV, stdin: '' }, r.handlers);
    await r.ended;
    // ls's own directory handle on /proc/self/fd is the only one beyond 0-2.
    expect(
      r
        .out()
        .trim()
        .split('\n')
        .map(Number)
        .filter((fd) => fd > 2),
    ).toHaveLength(1);
  });

  it('kills the process groups it started when toolsrv closes it', async () => {
    const s = start();
    const r = recorder();
    const { pid } = await s.spawn({ file: 'sleep', args: ['30'], cwd: tmpdir(), env: ENV, stdin: '' }, r.handlers);
    const self = s.pid!;
    s.close();
    await until(() => !alive(pid) && !alive(self));
  });
});

describe('toolsrv without the spawner', () => {
  it("runs calls with Node's spawn (where the native build is missing)", async () => {
    env = await startEnv(undefined, { spawner: false });
    expect(env.ts.core).toBeDefined();
    const c = await env.client();
    await c.write('ctl', 'load sh');
    const r = await env.call(c, { tool: 'sh', args: { command: 'echo out; echo err >&2; exit 3' } });
    expect(r).toMatchObject({ status: 'exited', exit: 3 });
    expect(r.output).toContain('out\n');
    expect(r.output).toContain('err\n');
  });
});
