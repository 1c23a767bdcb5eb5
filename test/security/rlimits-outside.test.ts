/**
 * A tool changing the rlimits of processes outside its call (review of the kernel and contain branches).
 * prlimit64(2) on another process is checked by uid alone: Landlock scopes signals and ptrace, not rlimits, and
 * the tool has the same uid as the spawner, its guardian, toolsrv and the daemon. A tool that sets the
 * spawner's and the guardian's RLIMIT_NOFILE to 0 leaves them unable to open /proc, so they find no process to
 * kill: a daemon it starts outlives its call, and the call's process and memory limits count nothing. Setting
 * RLIMIT_CPU to 1 s on toolsrv or the daemon kills them (SIGKILL at once, they have used more). Attacked with
 * the real toolsrv, spawner and helper.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { startEnv, until, type Env } from '../toolsrv/helpers.js';
import { useShippedPolicy } from './shipped-policy.js';

const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

useShippedPolicy('ollie-rlimits-xdg-');
let env: Env | undefined;
const leftovers: number[] = [];

afterEach(async () => {
  for (const pid of leftovers.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  await env?.close();
  env = undefined;
});

describe('rlimits of processes outside the call', () => {
  it("a tool cannot lower the spawner's and guardian's open-file limit to keep its daemon alive, nor set anyone else's", async () => {
    env = await startEnv({}, { yolo: false, toolDirs: [SHIPPED_TOOLS] });
    const dir = join(env.dir, 'proj');
    mkdirSync(dir);
    const c = await env.client('agent1');
    await c.write('ctl', `load shell\ncwd ${dir}`);
    writeFileSync(
      join(dir, 'attack.py'),
      `import os, resource, time
spawner = os.getppid()
guardian = int(open("/proc/%d/stat" % spawner).read().rsplit(")", 1)[1].split()[1])
for name, pid in (("spawner", spawner), ("guardian", guardian)):
    try:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (0, 0))
        print(name, "lowered")
    except OSError as e:
        print(name, "refused", e.errno)
# A process's own limits stay its own to change, by pid 0 (what setrlimit does).
resource.prlimit(0, resource.RLIMIT_NOFILE, (64, 64))
print("own", resource.getrlimit(resource.RLIMIT_NOFILE))
# Reading another's is harmless and stays.
print("read", resource.prlimit(spawner, resource.RLIMIT_NOFILE)[0] > 0)
if os.fork() == 0:
    os.setsid()
    if os.fork(): os._exit(0)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2): os.dup2(null, fd)
    open("d.pid", "w").write(str(os.getpid()))
    time.sleep(1013.7)
os.wait()
while not os.path.exists("d.pid") or not open("d.pid").read(): time.sleep(0.01)
`,
    );
    const r = await env.call(c, {
      tool: 'shell',
      args: { command: 'exec /usr/bin/python3 attack.py' },
      flags: { timeout: 10 },
    });
    const daemon = Number(readFileSync(join(dir, 'd.pid'), 'utf8'));
    leftovers.push(daemon);
    expect(r).toMatchObject({ status: 'exited', exit: 0 });
    expect(r.output).toContain('spawner refused 1');
    expect(r.output).toContain('guardian refused 1');
    expect(r.output).toContain('own (64, 64)');
    expect(r.output).toContain('read True');
    // The call has returned: nothing it started may run.
    await new Promise((ok) => setTimeout(ok, 300));
    expect(alive(daemon)).toBe(false);
    // And the next call still starts (the spawner can still open its pipes).
    expect(await env.call(c, { tool: 'shell', args: { command: 'echo next' } })).toMatchObject({
      status: 'exited',
      output: 'next\n',
    });
  }, 60000);

  it('a tool cannot kill a process of its user outside the sandbox (toolsrv, the daemon) by its CPU time limit', async () => {
    env = await startEnv({}, { yolo: false, toolDirs: [SHIPPED_TOOLS] });
    const dir = join(env.dir, 'proj');
    mkdirSync(dir);
    const c = await env.client('agent1');
    await c.write('ctl', `load shell\ncwd ${dir}`);
    // The in-process toolsrv is this test's own process: RLIMIT_CPU 1 s on it would kill the test runner, so the
    // tool aims at a stand-in of the same uid outside the sandbox instead.
    const { spawn } = await import('node:child_process');
    const victim = spawn(
      process.execPath,
      [
        '-e',
        'for (;;) { const e = Date.now() + 100; while (Date.now() < e); if (process.cpuUsage().user > 1.3e6) break; } setInterval(() => {}, 1e6)',
      ],
      { stdio: 'ignore' },
    );
    leftovers.push(victim.pid!);
    await until(
      () => {
        const f = readFileSync(`/proc/${victim.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
        return Number(f[11]) + Number(f[12]) > 120; // utime + stime in ticks: > 1.2 s of CPU
      },
      'the victim to use 1.2 s of CPU',
      30000,
    );
    const r = await env.call(c, {
      tool: 'shell',
      args: {
        command: `/usr/bin/python3 -c 'import resource; resource.prlimit(${victim.pid}, resource.RLIMIT_CPU, (1, 1)); print("set")' 2>&1`,
      },
    });
    expect(r.output).toMatch(/Operation not permitted/);
    await new Promise((ok) => setTimeout(ok, 300));
    expect(alive(victim.pid!)).toBe(true);
  }, 60000);
});
