/**
 * A tty tool's terminal, attacked from inside the sandbox the way a model would: scripted calls of a tty tool to a
 * real sandboxed toolsrv (the real spawner, helper, policy and kernel). The spawner holds the terminal's master and
 * the frame socket toolsrv drives it by; the tool holds only the terminal. The attacks: the ioctls that reach past
 * a terminal (pushing input, taking the console, stealing a terminal, hanging one up), the spawner's and the
 * guardian's descriptors through /proc and pidfd_getfd, SIGIO aimed at the spawner through the terminal's
 * asynchronous I/O, and another call's terminal through its /proc entry. Each must fail, and the spawner must keep
 * serving. (Another call's terminal by its /dev/pts name is a matter of the policy's /dev/pts grant, not tested
 * here.)
 *
 * Who may reach what: the master and the frame socket are the spawner's alone; a call's terminal is that call's;
 * its keyboard (proc/{pid}/in) is the owner's.
 */
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import type { ProcResult } from '../../src/toolsrv/protocol.js';
import { until, type Env } from '../toolsrv/helpers.js';
import { useShippedPolicy, writeLimits } from './shipped-policy.js';
import { termEnv } from './tty-tool.js';

/** Python run by the tool: `attempt(name, fn)` records fn's result or its errno under `name` in results.json. */
const PRELUDE = `import ctypes, errno, fcntl, json, os, signal, struct, termios, time
libc = ctypes.CDLL(None, use_errno=True)
results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = "ok"
    except OSError as e:
        results[name] = errno.errorcode.get(e.errno, str(e.errno))
def call(r):
    if r < 0:
        raise OSError(ctypes.get_errno(), "")
    return r
def ppid_of(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1].split()[1])
# The tool is sh -c's child here: its parent leads the call's session, and the spawner started that one.
spawner = ppid_of(os.getppid())
guardian = ppid_of(spawner)
assert open(f"/proc/{spawner}/cmdline").read().split("\\0")[0].endswith("ollie-spawner")
def done():
    json.dump(results, open("results.json", "w"))
`;

const { userPolicy } = useShippedPolicy('ollie-ttyatk-xdg-');

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** A sandboxed toolsrv with the shipped policy and the tty tool; the agent works in `dir`. */
async function sandboxed(): Promise<{
  dir: string;
  c: Client;
  term(command: string, c2?: Client): Promise<ProcResult>;
}> {
  const t = await termEnv();
  env = t.env;
  const { dir, c } = t;
  const e = env;
  return {
    dir,
    c,
    term: (command, c2 = c) => e.call(c2, { tool: 'term', args: { command }, flags: { timeout: 30 } }),
  };
}

/** The spawner still serves: a plain call runs and says so. */
async function stillServing(term: (command: string) => Promise<ProcResult>): Promise<void> {
  const r = await term('echo still serving');
  expect(r).toMatchObject({ status: 'exited', exit: 0 });
  expect(r.output.replace(/\r/g, '')).toBe('still serving\n');
}

describe("a tty tool cannot reach past its terminal, nor into the spawner's descriptors", () => {
  it('the ioctls that push input, take the console, steal or hang up a terminal are refused, from a new session too', async () => {
    const { dir, term } = await sandboxed();
    writeFileSync(
      join(dir, 'ioctls.py'),
      `${PRELUDE}
attempt("TIOCSTI", lambda: fcntl.ioctl(0, termios.TIOCSTI, b"x"))
attempt("TIOCCONS", lambda: fcntl.ioctl(0, termios.TIOCCONS))
attempt("TIOCSCTTY steal", lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 1))
attempt("TIOCVHANGUP", lambda: fcntl.ioctl(0, 0x5437))
attempt("vhangup", lambda: call(libc.vhangup()))
attempt("TIOCLINUX", lambda: fcntl.ioctl(0, 0x541C, b"\\x0b"))
attempt("TIOCSETD", lambda: fcntl.ioctl(0, termios.TIOCSETD, struct.pack("i", 0)))
# A new session has no terminal: /dev/tty is nothing, and this one, the call's session's, cannot become its own.
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.setsid()
    out = {}
    for name, fn in (("setsid /dev/tty", lambda: os.open("/dev/tty", os.O_RDWR)),
                     ("setsid TIOCSCTTY", lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0)),
                     ("setsid TIOCSCTTY steal", lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 1))):
        try:
            fn()
            out[name] = "ok"
        except OSError as e:
            out[name] = errno.errorcode.get(e.errno, str(e.errno))
    os.write(w, json.dumps(out).encode())
    os._exit(0)
os.close(w)
results.update(json.loads(os.read(r, 4096)))
os.waitpid(child, 0)
# The peer of a master: the tool's terminal is no master, so it opens nothing.
attempt("TIOCGPTPEER", lambda: fcntl.ioctl(0, 0x5441, os.O_RDWR))
done()
`,
    );
    const r = await term('/usr/bin/python3 ioctls.py');
    expect(r, r.output).toMatchObject({ status: 'exited', exit: 0 });
    expect(JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8'))).toEqual({
      TIOCSTI: 'EPERM',
      TIOCCONS: 'EPERM',
      'TIOCSCTTY steal': 'EPERM',
      TIOCVHANGUP: 'EPERM',
      vhangup: 'EPERM',
      TIOCLINUX: 'ENOTTY',
      TIOCSETD: 'EPERM',
      'setsid /dev/tty': 'ENXIO',
      'setsid TIOCSCTTY': 'EPERM',
      'setsid TIOCSCTTY steal': 'EPERM',
      TIOCGPTPEER: expect.stringMatching(/^(EIO|EINVAL|ENOTTY)$/),
    });
  });

  it("the spawner's and the guardian's descriptors (masters, the frame socket) are out of reach", async () => {
    const { dir, term } = await sandboxed();
    // The call's own terminal is open then (its master in the spawner), with a second process of the call on it.
    writeFileSync(
      join(dir, 'fds.py'),
      `${PRELUDE}
for who, pid in (("spawner", spawner), ("guardian", guardian)):
    for fd in range(0, 16):
        attempt(f"{who} readlink {fd}", lambda: os.readlink(f"/proc/{pid}/fd/{fd}"))
        attempt(f"{who} open {fd}", lambda: os.close(os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_NONBLOCK)))
    pidfd = os.pidfd_open(pid)
    for fd in range(0, 16):
        # pidfd_getfd(2) is 438 on every architecture.
        attempt(f"{who} pidfd_getfd {fd}", lambda: os.close(call(libc.syscall(438, pidfd, fd, 0))))
    attempt(f"{who} mem", lambda: open(f"/proc/{pid}/mem", "rb").read(1))
done()
`,
    );
    const r = await term('sleep 30 & /usr/bin/python3 fds.py; kill $!');
    expect(r, r.output).toMatchObject({ status: 'exited' });
    const results = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8')) as Record<string, string>;
    const reached = Object.entries(results).filter(([, v]) => v !== 'EACCES' && v !== 'EPERM' && v !== 'ENOENT');
    expect(reached).toEqual([]);
    // The spawner's frame socket (its stdin) and output are there, and were refused rather than absent.
    expect(results['spawner readlink 0']).toBe('EACCES');
    expect(results['spawner pidfd_getfd 0']).toBe('EPERM');
    await stillServing(term);
  });

  it('SIGIO aimed at the spawner and its process group through the terminal does not reach them', async () => {
    const { dir, c, term } = await sandboxed();
    // F_SETSIG makes the terminal's I/O signal SIGKILL; F_SETOWN aims it at the spawner (then at toolsrv's group,
    // which the spawner is in). The owner's keystrokes are the input that raises it.
    writeFileSync(
      join(dir, 'sigio.py'),
      `${PRELUDE}
F_SETSIG = 10
def aim(fd, target):
    fcntl.fcntl(fd, fcntl.F_SETOWN, target)
    fcntl.fcntl(fd, F_SETSIG, signal.SIGKILL)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
aim(0, spawner)
aim(1, -os.getpgid(spawner))
open("ready", "w").write(str(spawner))
got = input()
results["typed"] = got
results["spawner alive"] = os.path.exists(f"/proc/{spawner}")
done()
`,
    );
    const pid = Number(
      (
        await c.rdwrText(
          'proc/new.bg',
          JSON.stringify({ tool: 'term', args: { command: '/usr/bin/python3 sigio.py' } }),
        )
      ).trim(),
    );
    await until(() => existsSync(join(dir, 'ready')), 'the tool to aim its SIGIO');
    const spawner = Number(readFileSync(join(dir, 'ready'), 'utf8'));
    await c.write(`proc/${pid}/in`, 'k');
    await c.write(`proc/${pid}/in`, 'eys\r');
    expect((await c.readText(`proc/${pid}/wait`)).trim()).toBe('0');
    expect(JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8'))).toEqual({
      typed: 'keys',
      'spawner alive': true,
    });
    expect(existsSync(`/proc/${spawner}`)).toBe(true);
    await stillServing(term);
  });

  it("another call's terminal is out of reach through its /proc entry", async () => {
    const { dir, c, term } = await sandboxed();
    const first = Number(
      (
        await c.rdwrText(
          'proc/new.bg',
          JSON.stringify({ tool: 'term', args: { command: 'echo $$ > first.pid; exec sleep 30' } }),
        )
      ).trim(),
    );
    await until(() => existsSync(join(dir, 'first.pid')), 'the first call to run');
    writeFileSync(
      join(dir, 'other.py'),
      `${PRELUDE}
other = int(open("first.pid").read())
for fd in (0, 1, 2):
    attempt(f"readlink {fd}", lambda: os.readlink(f"/proc/{other}/fd/{fd}"))
    attempt(f"open {fd}", lambda: os.close(os.open(f"/proc/{other}/fd/{fd}", os.O_RDWR | os.O_NONBLOCK)))
    attempt(f"pidfd_getfd {fd}", lambda: os.close(call(libc.syscall(438, os.pidfd_open(other), fd, 0))))
attempt("TIOCSPGRP to it", lambda: fcntl.ioctl(0, termios.TIOCSPGRP, struct.pack("i", other)))
done()
`,
    );
    // From another agent's call, and from the same agent's.
    const c2 = await env!.client('agent2');
    await c2.write('ctl', `load term\ncwd ${dir}`);
    for (const who of [c2, c]) {
      const r = await term('/usr/bin/python3 other.py', who);
      expect(r, r.output).toMatchObject({ status: 'exited', exit: 0 });
      expect(JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8'))).toEqual({
        'readlink 0': 'EACCES',
        'open 0': 'EACCES',
        'pidfd_getfd 0': 'EPERM',
        'readlink 1': 'EACCES',
        'open 1': 'EACCES',
        'pidfd_getfd 1': 'EPERM',
        'readlink 2': 'EACCES',
        'open 2': 'EACCES',
        'pidfd_getfd 2': 'EPERM',
        'TIOCSPGRP to it': 'EPERM',
      });
    }
    await c.write(`proc/${first}/ctl`, 'kill');
  });
});

describe('a tty call is held to the limits the process and memory ones leave (tty-containment.test.ts has those)', () => {
  it('the thread, CPU time and output limits end it with the limit named; a file stops at the file size limit', async () => {
    writeLimits(userPolicy(), { output: '1 MiB', file_size: '1 MiB', cpu_seconds: '1' });
    const { dir, term } = await sandboxed();
    // Under the memory limit (64 KiB stacks) and the process limit (one process): only the thread bound stops it.
    writeFileSync(
      join(dir, 'threads.py'),
      `import threading, time
threading.stack_size(65536)
ev = threading.Event()
[threading.Thread(target=ev.wait, daemon=True).start() for i in range(6000)]
print("all started", flush=True)
time.sleep(30)
`,
    );
    const threads = await term('exec /usr/bin/python3 threads.py');
    expect(threads, threads.output).toMatchObject({
      status: 'killed',
      error: 'killed: thread limit 4096 (16 per process of the process limit)',
    });
    expect(threads.output).not.toContain('all started');
    // The file stops at the limit. This tool starts in Python, which ignores SIGXFSZ, and what it execs inherits that:
    // so the write is refused (EFBIG) rather than the process killed, and the call ends in the tool's own error.
    const fsz = await term('exec head -c 2000000 /dev/zero > big');
    expect(fsz).toMatchObject({ status: 'exited', exit: 1 });
    expect(fsz.output).toMatch(/File too large/);
    expect(statSync(join(dir, 'big')).size).toBe(1024 * 1024);
    expect(await term('exec sh -c "while :; do :; done"')).toMatchObject({
      status: 'killed',
      error: 'killed: CPU time limit 1 s (per process)',
    });
    // What the terminal prints counts, as a pipe's output does.
    expect(await term('yes')).toMatchObject({ status: 'killed', error: 'killed: output limit 1 MiB' });
  });
});
