/**
 * The machine's terminals. /dev/pts holds every pseudo-terminal of the machine, and a tool runs as the user: with
 * the policy's rule on /dev/pts it could write into the terminal the owner types in (text that looks like their
 * shell's prompt) or read it and take the keystrokes waiting there (a password typed to sudo). The tool gets a devpts
 * instance of its own instead: the owner's terminals are not there, and the terminals it makes itself (Python's
 * pty, script, tmux) work. Real olliesrv, toolsrv and sandbox helper, the mock LLM scripting the calls; and the
 * helper under the default policy as root and as another user (`nobody`).
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { landlockStatus, SANDBOX_HELPER } from '../../src/toolsrv/sandbox/index.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { testDir } from '../helpers/temp-dir.js';
import { ATTACKER, results, script, sh } from './scripted-calls.js';
import { runInHome, type RunAs } from './sandboxed-home.js';

/**
 * The owner's terminal: a pseudo-terminal whose slave belongs to `uid`, with a line the owner typed waiting on it.
 * It prints the slave's name, and on "report" what was written to the terminal (what its owner would see).
 */
const OWNER_TERMINAL = `
import os, pty, select, sys
m, s = pty.openpty()
os.chown(os.ttyname(s), int(sys.argv[1]), -1)
os.chmod(os.ttyname(s), 0o620)
os.write(m, b"typed-secret\\n")
print(os.ttyname(s), flush=True)
seen = b""
while True:
    r, _, _ = select.select([m, sys.stdin], [], [])
    if m in r:
        seen += os.read(m, 4096)
    if sys.stdin in r:
        sys.stdin.readline()
        while select.select([m], [], [], 0)[0]:
            seen += os.read(m, 4096)
        print(repr(seen), flush=True)
        break
`;

interface OwnerTerminal {
  name: string;
  /** What was written to the terminal (the owner's screen), the echo of the line typed included. */
  report(): Promise<string>;
}

const open: ChildProcessWithoutNullStreams[] = [];
afterEach(() => {
  for (const p of open.splice(0)) p.kill();
});

function ownerTerminal(uid: number): Promise<OwnerTerminal> {
  const p = spawn('/usr/bin/python3', ['-c', OWNER_TERMINAL, String(uid)]);
  open.push(p);
  let out = '';
  let exited: string | undefined;
  const waiting: Array<() => void> = [];
  const wake = () => waiting.splice(0).forEach((w) => w());
  p.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    wake();
  });
  // 'close', not 'exit': what it printed last may come after its exit.
  p.once('close', (c) => {
    exited = `the terminal's helper exited (${c}): ${out}`;
    wake();
  });
  /** Line `n` (from 1) of what the helper printed, once it is whole. */
  const line = async (n: number): Promise<string> => {
    for (;;) {
      const lines = out.split('\n');
      if (lines.length > n) return lines[n - 1]!;
      if (exited) throw new Error(exited);
      await new Promise<void>((r) => waiting.push(r));
    }
  };
  return line(1).then((name) => ({
    name,
    report: () => {
      p.stdin.write('report\n');
      return line(2);
    },
  }));
}

/** The attack: list the terminals, write into the owner's, read what waits on it; then make a terminal of its own. */
const attack = (name: string) => [
  `ls /dev/pts | tr '\\n' ' '; echo`,
  `echo 'owner@host:~$ ' > ${name} && echo wrote-owner-terminal`,
  `head -c 12 < ${name} && echo ' read-owner-terminal'`,
  `/usr/bin/python3 -c 'import os, pty; m, s = pty.openpty(); os.write(s, b"own\\n"); print("own terminal", os.read(m, 10))'`,
];

describe.skipIf(landlockStatus().abi < 1)('an agent reaching for the owner terminal', () => {
  it('cannot see, write or read it; a terminal of its own works', async () => {
    const t = await ownerTerminal(0);
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const work = join(h.dir, 'work');
    mkdirSync(work);
    const session = (await h.c.rdwrText('session/new', `cwd=${work}`)).trim();
    const a = await h.agent({ session, profile: 'attacker' });
    h.mock.script(...script(...attack(t.name).map(sh)));
    const r = results(await h.turn(a.path, 'go', 60_000));
    expect(r[0]).not.toContain(t.name.split('/').at(-1)! + ' ');
    expect(r[1]).not.toContain('wrote-owner-terminal');
    expect(r[2]).not.toContain('typed-secret');
    expect(r[3]).toContain("own terminal b'own\\r\\n'");
    // The owner's screen shows the line they typed (the echo), nothing the agent wrote; the line still waits.
    expect(await t.report()).toBe(String.raw`b'typed-secret\r\n'`);
  }, 60_000);

  it.each(['root', 'nobody'] as RunAs[])('under the default policy, as %s: the same', async (as) => {
    const t = await ownerTerminal(as === 'root' ? 0 : 65534);
    const dir = testDir('ollie-sec-pts-');
    mkdirSync(join(dir, 'home'));
    const out = runInHome(as, dir, attack(t.name));
    expect(out).not.toContain('wrote-owner-terminal');
    expect(out).not.toContain('read-owner-terminal');
    expect(out).toContain("own terminal b'own\\r\\n'");
    expect(await t.report()).toBe(String.raw`b'typed-secret\r\n'`);
  });

  it("cannot take the machine's terminals away from other calls and the user: at most 64 of its own at once", () => {
    const dir = testDir('ollie-sec-pts-max-');
    mkdirSync(join(dir, 'home'));
    const out = runInHome('root', dir, [
      `/usr/bin/python3 -c 'import os, pty
held = []
try:
    while len(held) < 5000: held.append(pty.openpty())
except OSError as e: print("refused", e.strerror)
print("held", len(held))'`,
    ]);
    expect(out).toContain('refused');
    expect(out).toMatch(/^held 64$/m);
  });

  it('where the tool can have no devpts of its own, it gets no terminals at all, even through a rule on /dev', async () => {
    const t = await ownerTerminal(65534);
    // Inside another sandbox, whose system call filter refuses namespaces (as a kernel without user namespaces
    // would): the inner helper cannot mount a devpts of its own.
    const inner = [SANDBOX_HELPER, '--rox', '/usr', '--ro', '/proc', '--rw', '/dev', '--private-pts', '--'];
    const run = spawnSync(
      'setpriv',
      [
        '--reuid=nobody',
        '--regid=nogroup',
        '--clear-groups',
        SANDBOX_HELPER,
        ...['--rox', '/usr', '--rox', SANDBOX_HELPER, '--ro', '/proc', '--rw', '/dev', '--'],
        ...inner,
        '/bin/sh',
        '-c',
        attack(t.name).join('; ') + '; echo null >/dev/null && echo devices-work',
      ],
      { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } },
    );
    const out = run.stdout + run.stderr;
    expect(out).not.toContain('wrote-owner-terminal');
    expect(out).not.toContain('read-owner-terminal');
    expect(out).not.toContain('own terminal');
    expect(out).toContain('devices-work');
    expect(await t.report()).toBe(String.raw`b'typed-secret\r\n'`);
  });
});
