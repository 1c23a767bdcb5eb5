/**
 * The machine's terminals. /dev/pts holds every pseudo-terminal of the machine, and a tool runs as the user: with
 * the policy's rule on /dev/pts it could write into the terminal the owner types in (text that looks like their
 * shell's prompt) or read it and take the keystrokes waiting there (a password typed to sudo). The tool gets a devpts
 * instance of its own instead: the owner's terminals are not there, and the terminals it makes itself (Python's
 * pty, script, tmux) work. Real olliesrv, toolsrv and sandbox helper, the mock LLM scripting the calls; and the
 * helper under the default policy as root and as another user (`nobody`).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { landlockStatus, SANDBOX_HELPER } from '../../src/toolsrv/sandbox/index.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { testDir } from '../helpers/temp-dir.js';
import { ATTACKER, results, script, sh } from './scripted-calls.js';
import { runInHome, type RunAs } from './sandboxed-home.js';
import { ownerTerminal, UNTOUCHED } from './owner-terminal.js';

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
    expect(await t.report()).toBe(UNTOUCHED);
  }, 60_000);

  it.each(['root', 'nobody'] as RunAs[])('under the default policy, as %s: the same', async (as) => {
    const t = await ownerTerminal(as === 'root' ? 0 : 65534);
    const dir = testDir('ollie-sec-pts-');
    mkdirSync(join(dir, 'home'));
    const out = runInHome(as, dir, attack(t.name));
    expect(out).not.toContain('wrote-owner-terminal');
    expect(out).not.toContain('read-owner-terminal');
    expect(out).toContain("own terminal b'own\\r\\n'");
    expect(await t.report()).toBe(UNTOUCHED);
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
    expect(await t.report()).toBe(UNTOUCHED);
  });
});
