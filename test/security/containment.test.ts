/**
 * Containment and limits, attacked the way a model would: scripted `shell` calls to a real
 * sandboxed toolsrv (the shipped tools, the real helper and spawner, the real kernel) that try to outlive their
 * call, their toolsrv and their spawner, fork 300 processes, allocate 2 GiB and leave files in /dev/shm; and
 * controls showing that honest work (npm test spawning children, a background process) still runs.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ToolClient } from '../../src/olliesrv/toolclient/client.js';
import { spawnToolsrv, TOOLSRV_ENTRY, type ToolsrvProcess } from '../../src/olliesrv/toolclient/spawn.js';
import type { ProcResult } from '../../src/toolsrv/protocol.js';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { SPAWNER, Spawner } from '../../src/platform/spawner.js';
import { alive, withArg } from '../helpers/processes.js';
import { startEnv, until, type Env } from '../toolsrv/helpers.js';
import { useShippedPolicy, writeLimits } from './shipped-policy.js';
import { fixtureServer, writeMcpConfig } from '../toolsrv/mcp-helpers.js';

const readPid = (file: string): number => Number(readFileSync(file, 'utf8').trim());

const { userPolicy } = useShippedPolicy('ollie-contain-xdg-');
beforeAll(() => {
  if (!existsSync(TOOLSRV_ENTRY)) throw new Error(`${TOOLSRV_ENTRY} is missing: run npm run build:node first`);
});

let env: Env | undefined;
const procs: ToolsrvProcess[] = [];
const clients: ToolClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const p of procs.splice(0)) await p.stop(500);
  await env?.close();
  env = undefined;
});

/**
 * A sandboxed in-process toolsrv with the shipped tools (the real spawner, helper and policy); the agent works
 * in `dir` (beside the runtime dir, not above it: the sandbox denies the runtime dir, which would leave the
 * directory above it without the right to create files).
 */
async function sandboxed(): Promise<{
  env: Env;
  dir: string;
  shell(command: string, flags?: Record<string, unknown>): Promise<ProcResult>;
  c: Awaited<ReturnType<Env['client']>>;
}> {
  env = await startEnv({}, { yolo: false, toolDirs: [SHIPPED_TOOLS] });
  const dir = join(env.dir, 'proj');
  mkdirSync(dir);
  const c = await env.client('agent1');
  await c.write('ctl', `load shell\ncwd ${dir}`);
  const e = env;
  return { env: e, dir, c, shell: (command, flags = {}) => e.call(c, { tool: 'shell', args: { command }, flags }) };
}

/** A sandboxed toolsrv process, as olliesrv runs one per session. */
async function sessionToolsrv(): Promise<{ p: ToolsrvProcess; host: ToolClient; cwd: string }> {
  const cwd = mkdtempSync(join(tmpdir(), 'ollie-contain-session-'));
  const p = await spawnToolsrv({
    runtimeDir: `${cwd}.run`,
    name: 'contain',
    toolDirs: [SHIPPED_TOOLS],
    cwd,
    log: () => undefined,
  });
  procs.push(p);
  const host = await ToolClient.connect(p, 'agent1');
  clients.push(host);
  await host.ctl('load shell');
  return { p, host, cwd };
}

describe('every process a call starts ends with it', () => {
  it('a setsid double fork, a daemonizing subreaper and a nohup are dead when the call returns', async () => {
    const { dir: d, shell } = await sandboxed();
    // Four ways out of the call's process group and session; the call returns once each has reported its pid.
    const py = `import os, ctypes, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: its own orphans would come to it
open("py.pid", "w").write(str(os.getpid()))
time.sleep(1013.7)`;
    writeFileSync(join(d, 'daemon.py'), py);
    const r = await shell(
      `setsid sh -c 'sleep 1013.7 & echo $! > a.pid; sleep 1013.7' & (setsid sleep 1013.7 & echo $! > b.pid) & nohup sleep 1013.7 > /dev/null 2>&1 & echo $! > c.pid; ` +
        `/usr/bin/python3 daemon.py; kill -KILL $PPID; for f in a b c py; do while [ ! -s $f.pid ]; do sleep 0.01; done; done; echo escaped`,
    );
    expect(r).toMatchObject({ status: 'exited', exit: 0 });
    expect(r.output).toContain('escaped');
    // The tool cannot kill the spawner (its parent) to get away: signals out of the sandbox are scoped.
    expect(r.output).toMatch(/Operation not permitted/);
    // Not "soon": the result comes only once every process of the call is gone.
    for (const f of ['a', 'b', 'c', 'py']) expect(alive(readPid(join(d, `${f}.pid`))), `${f}.pid`).toBe(false);
    // And the next call runs as usual.
    expect(await shell('echo next')).toMatchObject({ status: 'exited', exit: 0, output: 'next\n' });
  });

  it('a killed or timed-out call takes its escaped processes with it', async () => {
    const { dir, shell } = await sandboxed();
    const r = await shell(`setsid sleep 1013.7 & echo $! > esc.pid; sleep 1013.7`, { timeout: 1 });
    expect(r.status).toBe('timeout');
    expect(alive(readPid(join(dir, 'esc.pid')))).toBe(false);
  });

  it("a background call's escaped processes die when its toolsrv exits, and when the toolsrv is killed outright", async () => {
    for (const how of ['exit', 'SIGKILL'] as const) {
      const { p, host, cwd } = await sessionToolsrv();
      const bg = await host.start({
        tool: 'shell',
        args: { command: 'setsid sleep 1013.7 & echo $! > esc.pid; sleep 1013.7' },
      });
      await until(() => existsSync(join(cwd, 'esc.pid')) && readFileSync(join(cwd, 'esc.pid'), 'utf8').trim() !== '');
      const esc = readPid(join(cwd, 'esc.pid'));
      expect(alive(esc)).toBe(true);
      expect((await host.stat(bg)).state).toBe('running');
      if (how === 'exit') await p.stop(5000);
      else {
        process.kill(p.pid, 'SIGKILL');
        await p.exited;
      }
      await until(() => !alive(esc), 'the escapee to die');
      rmSync(cwd, { recursive: true, force: true });
      rmSync(`${cwd}.run`, { recursive: true, force: true });
    }
  });

  it('the spawner killed outright, or its guardian, does not free what they watched over', async () => {
    const { env, dir, c, shell } = await sandboxed();
    const escape = async (name: string): Promise<number> => {
      await c.rdwrText(
        'proc/new.bg',
        JSON.stringify({
          tool: 'shell',
          args: { command: `setsid sleep 1013.7 & echo $! > ${name}.pid; sleep 1013.7` },
        }),
      );
      const file = join(dir, `${name}.pid`);
      await until(() => existsSync(file) && readFileSync(file, 'utf8').trim() !== '');
      return readPid(file);
    };
    // The spawner proper (the guardian's one child): the guardian, a subreaper, inherits its calls and kills them.
    const esc1 = await escape('s1');
    const guardian = env.ts.core.opts.launcher!.spawnerPid!;
    process.kill(Number(readFileSync(`/proc/${guardian}/task/${guardian}/children`, 'utf8').trim()), 'SIGKILL');
    await until(() => !alive(esc1), 'the first escapee to die');
    // The guardian (what toolsrv started): the spawner gets its parent-death signal and kills its calls.
    const esc2 = await escape('s2');
    process.kill(env.ts.core.opts.launcher!.spawnerPid!, 'SIGKILL');
    await until(() => !alive(esc2), 'the second escapee to die');
    expect(await shell('echo still serving')).toMatchObject({ status: 'exited', output: 'still serving\n' });
  });

  it('a sandboxed tool cannot stop being a subreaper (its orphans would be strays, outside its limits); its daemon dies with it', async () => {
    const { dir, shell } = await sandboxed();
    // The tool process itself (exec: python replaces bash as the call's process) tries to clear the flag, so
    // that its orphans would go straight to the spawner, outside the tree its limits count.
    writeFileSync(
      join(dir, 'unreap.py'),
      `import os, ctypes
libc = ctypes.CDLL(None, use_errno=True)
r = libc.prctl(36, 0)
print("prctl", r, ctypes.get_errno() if r else 0, flush=True)
if os.fork() == 0:
    if os.fork(): os._exit(0)
    os.setsid()
    open("d.tmp", "w").write(str(os.getpid()))
    os.rename("d.tmp", "d.pid")
    os.execv("/bin/sleep", ["sleep", "1013.7"])
os.wait()
while not os.path.exists("d.pid"): pass`,
    );
    const r = await shell('exec /usr/bin/python3 unreap.py');
    expect(r).toMatchObject({ status: 'exited', exit: 0, output: 'prctl -1 1\n' }); // EPERM
    expect(alive(readPid(join(dir, 'd.pid')))).toBe(false);
  });

  it('a process that stops being a subreaper (outside the sandbox) loses its daemon within the 50 ms round', async () => {
    // Unsandboxed, through the spawner with a process limit, so that the spawner watches: the orphans come to it
    // as strays and are killed as soon as it sees them, well before the call ends.
    const spawner = Spawner.find(SPAWNER)!;
    const dir = mkdtempSync(join(tmpdir(), 'ollie-unreap-'));
    writeFileSync(
      join(dir, 'unreap.py'),
      `import os, ctypes, time
ctypes.CDLL(None).prctl(36, 0)
if os.fork() == 0:
    if os.fork(): os._exit(0)
    os.setsid()
    # Written whole, then renamed: a reader must never see the file created but still empty.
    open("d.tmp", "w").write(str(os.getpid()))
    os.rename("d.tmp", "d.pid")
    time.sleep(1013.7)
os.wait()
while not os.path.exists("d.pid"): time.sleep(0.01)
pid = open("d.pid").read()
end = time.time() + 5
while os.path.exists("/proc/" + pid) and time.time() < end: time.sleep(0.01)
print("daemon", pid, "alive" if os.path.exists("/proc/" + pid) else "gone")`,
    );
    try {
      let out = '';
      let done!: (v: string) => void;
      const exited = new Promise<string>((resolve) => (done = resolve));
      await spawner.spawn(
        {
          file: '/usr/bin/python3',
          args: ['unreap.py'],
          cwd: dir,
          env: { PATH: '/usr/bin:/bin' },
          stdin: '',
          limits: { processes: 100 },
        },
        {
          output: (b) => (out += Buffer.from(b).toString()),
          exited: (code, signal, limit) => done(`${code} ${signal} ${limit ?? ''}`),
          closed: () => undefined,
          lost: (why) => done(why),
        },
      );
      expect(await exited).toBe('0 null ');
      expect(out).toMatch(/^daemon \d+ gone$/m);
      expect(alive(readPid(join(dir, 'd.pid')))).toBe(false);
    } finally {
      spawner.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('without the spawner', () => {
  it('a sandboxed call is refused, saying why, rather than run uncontained', async () => {
    env = await startEnv({}, { yolo: false, toolDirs: [SHIPPED_TOOLS], spawner: false });
    const c = await env.client('agent1');
    await c.write('ctl', 'load shell');
    const r = await env.call(c, { tool: 'shell', args: { command: 'echo ran' } });
    expect(r.status).toBe('refused');
    expect(r.error).toMatch(
      /^sandbox unavailable: the process spawner \S+ollie-spawner is missing, and without it the processes of a call can be neither contained nor limited/,
    );
    expect(JSON.parse(await c.readText('info'))).toMatchObject({
      containment: { mechanism: 'process-group' },
      unavailable: expect.stringContaining('ollie-spawner is missing'),
    });
  });

  it('a hosted tool call and a stdio MCP server are refused too, rather than run uncontained through Node', async () => {
    const configDir = join(tmpdir(), `ollie-nospawner-${process.pid}-${Date.now()}`);
    writeMcpConfig(configDir, { fx: fixtureServer() });
    try {
      env = await startEnv({}, { yolo: false, toolDirs: [SHIPPED_TOOLS], spawner: false, configDir });
      const c = await env.client('agent1');
      await c.write('ctl', 'load code_outline\nmcp-wait 15000');
      const r = await env.call(c, { tool: 'code_outline', args: { path: '.' } });
      expect(r.status).toBe('refused');
      expect(r.error).toMatch(/^sandbox unavailable: the process spawner \S+ollie-spawner is missing/);
      expect(await c.readText('mcp/fx/status')).toMatch(/sandbox unavailable: the process spawner \S+ is missing/);
    } finally {
      rmSync(configDir, { recursive: true, force: true });
    }
  });

  it('--yolo still runs tool calls and stdio MCP servers without it (nothing is sandboxed there to contain)', async () => {
    const configDir = join(tmpdir(), `ollie-nospawner-yolo-${process.pid}-${Date.now()}`);
    writeMcpConfig(configDir, { fx: fixtureServer() });
    try {
      env = await startEnv({}, { yolo: true, toolDirs: [SHIPPED_TOOLS], spawner: false, configDir });
      const c = await env.client('agent1');
      await c.write('ctl', 'load shell\nmcp-wait 15000');
      expect(await env.call(c, { tool: 'shell', args: { command: 'echo ran' } })).toMatchObject({
        status: 'exited',
        output: 'ran\n',
      });
      expect(await c.readText('mcp/fx/status')).toMatch(/^state=ready$/m);
      expect(await env.call(c, { tool: 'mcp__fx__echo', args: { text: 'abc' } })).toMatchObject({ status: 'exited' });
    } finally {
      rmSync(configDir, { recursive: true, force: true });
    }
  });
});

describe('limits', () => {
  /** A Python program of the given lines, which starts 6,000 idle threads of 64 KiB stacks, runs into the thread bound. */
  async function killedAtThreadLimit(lines: string[]): Promise<ReturnType<typeof sandboxed>> {
    const box = await sandboxed();
    const started = Date.now();
    const r = await box.shell(`/usr/bin/python3 -c '${lines.join('\n')}'`, { timeout: 60 });
    expect(r).toMatchObject({
      status: 'killed',
      error: 'killed: thread limit 4096 (16 per process of the process limit)',
    });
    expect(r.output).not.toContain('all started');
    expect(Date.now() - started).toBeLessThan(25_000);
    return box;
  }
  const THREADS = [
    'import threading, time, ctypes',
    'threading.stack_size(65536)',
    'ev = threading.Event()',
    'def spawn():',
    '    [threading.Thread(target=ev.wait, daemon=True).start() for i in range(6000)]',
    '    print("all started", flush=True)',
    '    time.sleep(30)',
  ];

  it('thousands of small-stacked idle threads in one process are killed at the thread limit (pids are the machine’s)', async () => {
    // Under the memory limit (64 KiB stacks) and the process limit (one process): only the thread bound stops it.
    const { shell } = await killedAtThreadLimit([...THREADS, 'spawn()']);
    expect(await shell('echo after')).toMatchObject({ status: 'exited', exit: 0, output: 'after\n' });
  });

  it('threads whose process’s main thread has exited are counted too (a zombie leader’s statm reads 0)', async () => {
    // The main thread exits at once (pthread_exit): the process's /proc/PID/statm then reads 0, as a zombie's does,
    // while its other thread starts thousands more. Counted as dead, its threads, memory and children would be free.
    await killedAtThreadLimit([
      ...THREADS,
      'threading.Thread(target=lambda: (time.sleep(0.5), spawn())).start()',
      'ctypes.CDLL(None).pthread_exit(None)',
    ]);
  });

  it('a 300-process fork is killed at the process limit with a clear message; other calls and the next one are unaffected', async () => {
    const { shell, c } = await sandboxed();
    const bystander = Number(
      await c.rdwrText(
        'proc/new.bg',
        JSON.stringify({ tool: 'shell', args: { command: 'sleep 3; echo bystander done' } }),
      ),
    );
    const r = await shell('for i in $(seq 300); do sleep 999.25 & done; wait', { timeout: 60 });
    expect(r).toMatchObject({ status: 'killed', error: 'killed: process limit 256' });
    expect(withArg('999.25')).toEqual([]);
    expect(await shell('echo after')).toMatchObject({ status: 'exited', exit: 0, output: 'after\n' });
    expect(await c.readText(`proc/${bystander}/wait`)).toBe('0\n');
    expect(await c.readText(`proc/${bystander}/out`)).toBe('bystander done\n');
  });

  it('a 2 GiB allocation is refused with a clear message (the shipped memory limit, 2 GiB)', async () => {
    const { shell } = await sandboxed();
    for (const cmd of [
      `${process.execPath} -e 'Buffer.alloc(2 * 1024 ** 3, 1); console.log("allocated")'`,
      `/usr/bin/python3 -c 'b = b"x" * (2 * 1024 ** 3); print("allocated")'`,
    ]) {
      const r = await shell(cmd);
      expect(r.output, cmd).not.toContain('allocated');
      expect(r.exit, cmd).not.toBe(0);
      expect(r.error, cmd).toBe(
        'an allocation failed: the memory limit is 2 GiB (per process, and for the whole call)',
      );
    }
  });

  it('memory spread over several processes is counted for the call as a whole (a user limit of 256 MiB)', async () => {
    writeLimits(userPolicy(), { memory: '256 MiB' });
    const { shell } = await sandboxed();
    const eat = `${process.execPath} -e 'globalThis.b = Buffer.alloc(120 * 1024 * 1024, 1); setTimeout(() => {}, 60000)'`;
    const r = await shell(`for i in 1 2 3; do ${eat} & done; wait`, { timeout: 60 });
    expect(r).toMatchObject({ status: 'killed', error: 'killed: memory limit 256 MiB' });
  });

  it('output, file size and CPU time limits end the call with the limit named', async () => {
    writeLimits(userPolicy(), { output: '1 MiB', file_size: '1 MiB', cpu_seconds: '1' });
    const { shell } = await sandboxed();
    expect(await shell('yes', { timeout: 30 })).toMatchObject({
      status: 'killed',
      error: 'killed: output limit 1 MiB',
    });
    expect(await shell('exec head -c 2000000 /dev/zero > big', { timeout: 30 })).toMatchObject({
      status: 'killed',
      error: 'killed: file size limit 1 MiB (per process)',
    });
    expect(await shell('exec sh -c "while :; do :; done"', { timeout: 30 })).toMatchObject({
      status: 'killed',
      error: 'killed: CPU time limit 1 s (per process)',
    });
  });
});

describe('/dev/shm', () => {
  it('is closed to every session: nothing can be left there for another session, nor read from another', async () => {
    const planted = `/dev/shm/ollie-contain-planted-${process.pid}`;
    writeFileSync(planted, "another session's secret\n");
    try {
      const { shell } = await sandboxed();
      const mine = `/dev/shm/ollie-contain-mine-${process.pid}`;
      const r = await shell(
        `echo left > ${mine}; cat ${planted}; ls /dev/shm; /usr/bin/python3 -c 'from multiprocessing import shared_memory as s; s.SharedMemory(create=True, size=16)'; echo end`,
      );
      expect(r.output).not.toContain('secret');
      expect(r.output.match(/Permission denied/g)?.length ?? 0).toBeGreaterThanOrEqual(4);
      expect(r.output).toContain('end');
      expect(existsSync(mine)).toBe(false);
    } finally {
      rmSync(planted, { force: true });
    }
  });
});

describe('honest work still runs', () => {
  it('npm test in a Node project, its test spawning node children', async () => {
    const { dir, shell } = await sandboxed();
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'p', version: '1.0.0', scripts: { test: 'node test.js' } }),
    );
    writeFileSync(
      join(dir, 'test.js'),
      `const { execFileSync, spawn } = require('node:child_process');
const kids = [1, 2, 3].map((i) => new Promise((ok, ko) => spawn(process.execPath, ['-e', 'console.log(' + i + ' * 2)'], { stdio: ['ignore', 'pipe', 'inherit'] })
  .on('exit', (c) => (c === 0 ? ok() : ko(new Error('child ' + i + ' exited ' + c))))));
Promise.all(kids).then(() => console.log('all passed', execFileSync('sh', ['-c', 'echo from sh']).toString().trim()));`,
    );
    const r = await shell('npm test 2>&1', { timeout: 120 });
    expect(r, r.output).toMatchObject({ status: 'exited', exit: 0 });
    expect(r.output).toContain('all passed from sh');
  });

  it('a background process runs for its lifetime, children included, while foreground calls come and go', async () => {
    const { c, shell } = await sandboxed();
    const bg = Number(
      await c.rdwrText(
        'proc/new.bg',
        JSON.stringify({
          tool: 'shell',
          args: { command: '(sleep 0.8; echo child done) & for i in 1 2 3; do echo tick $i; sleep 0.3; done; wait' },
        }),
      ),
    );
    for (let i = 0; i < 3; i++)
      expect(await shell(`sleep 0.1; echo fg ${i}`)).toMatchObject({ status: 'exited', exit: 0 });
    expect(await c.readText(`proc/${bg}/wait`)).toBe('0\n');
    expect(await c.readText(`proc/${bg}/out`)).toBe('tick 1\ntick 2\ntick 3\nchild done\n');
  });

  it('info says how calls are contained and limited', async () => {
    const { c } = await sandboxed();
    const info = JSON.parse(await c.readText('info')) as {
      containment: { mechanism: string; limits: Record<string, string> };
    };
    expect(info.containment.mechanism).toBe('subreaper');
    expect(Object.keys(info.containment.limits).sort()).toEqual([
      'cpu_seconds',
      'file_size',
      'memory',
      'open_files',
      'output',
      'processes',
    ]);
  });
});
