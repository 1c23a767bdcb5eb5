/**
 * The machine's terminals where /dev/pts is not their only name. The tool's devpts instance on /dev/pts
 * (terminals.test.ts) left the machine's devpts wherever else it was mounted: a build chroot in the project, whose
 * dev/pts schroot, mock or pbuilder bind from the machine's, showed the owner's terminals to the rule on the project,
 * and it was not even made private when the policy had no rule on /dev/pts. A rule on /dev (or /) reached the
 * machine's consoles, virtual consoles and serial lines. And where the tool can have no devpts of its own, the
 * devpts bound elsewhere stayed reachable through a broad rule. The helper under the default policy (or one with a
 * broader rule), as root and as another user (`nobody`: a user namespace), the way toolsrv runs it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  landlockStatus,
  loadPolicy,
  PACKAGE_ROOT,
  SANDBOX_HELPER,
  sandboxCommand,
} from '../../src/toolsrv/sandbox/index.js';
import { testDir } from '../helpers/temp-dir.js';
import { policyContext } from '../toolsrv/sandbox-helpers.js';
import { ownerTerminal, UNTOUCHED } from './owner-terminal.js';
import type { RunAs } from './sandboxed-home.js';

const SHIPPED = readFileSync(join(PACKAGE_ROOT, 'data', 'sandbox.yaml'), 'utf8');
const uidOf = (as: RunAs) => (as === 'root' ? 0 : 65534);

/** The machine's consoles, virtual consoles, their screens and a serial line: those this machine has are tried. */
const CONSOLES = ['/dev/console', '/dev/tty1', '/dev/tty0', '/dev/vcs', '/dev/vcsa1', '/dev/ttyS0'];

/** How many devpts mounts this process's namespace (the daemon's, for the helper) has. */
const devptsMountCount = () =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l.includes(' - devpts ')).length;

/** Binds the machine's devpts (the one /dev/ptmx makes terminals in) at `at`, for the length of `f`. */
function withDevptsAt<T>(at: string, f: () => T): T {
  mkdirSync(at, { recursive: true });
  const m = spawnSync('mount', ['--bind', '/dev/pts', at], { encoding: 'utf8' });
  if (m.status !== 0) throw new Error(`mount --bind /dev/pts ${at}: ${m.stderr}`);
  try {
    return f();
  } finally {
    spawnSync('umount', [at]);
  }
}

/**
 * Runs `lines` under the helper as toolsrv would (cwd and HOME `dir/home`, the owner's sandbox.yaml `policy` if
 * given), with the machine's devpts bound at `devptsAt` once `dir` is the user's (so that it keeps its owner).
 */
function runSandboxed(as: RunAs, dir: string, lines: string[], o: { policy?: string; devptsAt?: string } = {}) {
  const home = join(dir, 'home');
  mkdirSync(home, { recursive: true });
  if (o.devptsAt) mkdirSync(o.devptsAt, { recursive: true });
  const ctx = policyContext(dir, { cwd: home, home });
  if (o.policy) {
    mkdirSync(ctx.configDir, { recursive: true });
    writeFileSync(join(ctx.configDir, 'sandbox.yaml'), o.policy);
  }
  const policy = loadPolicy(ctx);
  if (as === 'nobody') spawnSync('chown', ['-R', '-h', 'nobody:nogroup', dir]);
  const run = () => {
    // Made once it is mounted: whether the tool needs a devpts of its own depends on what is mounted where.
    const cmd = sandboxCommand(policy, ['/bin/sh', '-c', ['cd "$1"', ...lines].join('; '), 'sh', home]);
    const r = spawnSync(
      as === 'nobody' ? 'setpriv' : cmd.file,
      as === 'nobody' ? ['--reuid=nobody', '--regid=nogroup', '--clear-groups', cmd.file, ...cmd.args] : cmd.args,
      { env: cmd.env({ PATH: '/usr/bin:/bin', HOME: home }), encoding: 'utf8', timeout: 30_000 },
    );
    return { out: r.stdout + r.stderr, args: cmd.args };
  };
  return o.devptsAt ? withDevptsAt(o.devptsAt, run) : run();
}

/** Runs argv[1:] with mount(2) refused (EPERM) by a seccomp filter; x86-64 and aarch64. */
const NO_MOUNT = `
import ctypes, os, platform, struct, sys
nr = {"x86_64": 165, "aarch64": 40}[platform.machine()]
prog = b"".join(struct.pack("HBBI", *i) for i in [
    (0x20, 0, 0, 0),                # ld [nr]
    (0x15, 0, 1, nr),               # jeq mount
    (0x06, 0, 0, 0x00050000 | 1),   # ret ERRNO(EPERM)
    (0x06, 0, 0, 0x7fff0000),       # ret ALLOW
])
buf = ctypes.create_string_buffer(prog)
fprog = struct.pack("HxxxxxxQ", 4, ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) == 0
os.execv(sys.argv[1], sys.argv[1:])
`;

/** List the terminals at `dir`, write into the owner's there, read what waits on it; make a terminal of its own. */
const attackAt = (dir: string, n: string) => [
  `ls ${dir} | tr '\\n' ' '; echo`,
  `timeout 5 sh -c "echo 'owner@host:~$ ' > ${dir}/${n}" && echo wrote-owner-terminal`,
  `timeout 5 head -c 12 < ${dir}/${n} && echo ' read-owner-terminal'`,
  `/usr/bin/python3 -c 'import os, pty; m, s = pty.openpty(); os.write(s, b"own\\n"); print("own terminal", os.read(m, 10))'`,
];

describe.skipIf(landlockStatus().abi < 1)('the machine terminals under another name', () => {
  it.each(['root', 'nobody'] as RunAs[])(
    'a build chroot in the project, its dev/pts bound from the machine: not through it, as %s',
    async (as) => {
      const t = await ownerTerminal(uidOf(as));
      const n = t.name.split('/').at(-1)!;
      const dir = testDir('ollie-sec-pts-chroot-');
      const pts = join(dir, 'home', 'chroot', 'dev', 'pts');
      const before = devptsMountCount();
      const { out, args } = runSandboxed(as, dir, attackAt('chroot/dev/pts', n), { devptsAt: pts });
      // What the helper mounted stayed in the tool's namespace: none of it is the daemon's.
      expect(devptsMountCount()).toBe(before);
      expect(args).toContain('--private-pts');
      expect(out).not.toMatch(new RegExp(`(^| )${n} `, 'm'));
      expect(out).not.toContain('wrote-owner-terminal');
      expect(out).not.toContain('read-owner-terminal');
      expect(out).toContain("own terminal b'own\\r\\n'");
      expect(await t.report()).toBe(UNTOUCHED);
    },
  );

  it('the same where the policy has no rule on /dev/pts nor /dev/ptmx: the chroot alone makes the tool its own', async () => {
    const t = await ownerTerminal(65534);
    const n = t.name.split('/').at(-1)!;
    const dir = testDir('ollie-sec-pts-chroot-');
    const pts = join(dir, 'home', 'chroot', 'dev', 'pts');
    const policy = SHIPPED.replace(/^ {4}- \/dev\/ptmx\n {4}- \/dev\/pts\n/m, '');
    expect(policy).not.toMatch(/^ {4}- \/dev\/pt/m);
    const { out, args } = runSandboxed('nobody', dir, attackAt('chroot/dev/pts', n).slice(0, 3), {
      policy,
      devptsAt: pts,
    });
    expect(args).toContain('--private-pts');
    expect(out).not.toContain('wrote-owner-terminal');
    expect(out).not.toContain('read-owner-terminal');
    expect(await t.report()).toBe(UNTOUCHED);
  });

  it("a rule on /dev, as root: the machine's consoles, virtual consoles and serial lines are not the tool's", () => {
    const devices = CONSOLES.filter((d) => existsSync(d));
    expect(devices.length).toBeGreaterThan(0);
    const dir = testDir('ollie-sec-dev-');
    const policy = SHIPPED.replace(/^ {4}- \/dev\/null\n/m, '    - /dev\n    - /dev/null\n');
    const { out, args } = runSandboxed(
      'root',
      dir,
      [
        // Opened for writing only (nothing is written): a console's or a serial line's reader is the machine's.
        ...devices.map((d) => `(: > ${d}) 2>/dev/null && echo "opened ${d}"`),
        'echo x > /dev/null && echo devices-work',
        `/usr/bin/python3 -c 'import os, pty; m, s = pty.openpty(); os.write(s, b"own\\n"); print("own terminal", os.read(m, 10))'`,
      ],
      { policy },
    );
    expect(args).toEqual(expect.arrayContaining(['--rw', '/dev']));
    expect(out).not.toContain('opened ');
    expect(out).toContain('devices-work');
    expect(out).toContain("own terminal b'own\\r\\n'");
  });

  it("the machine's /dev bound in a build chroot of the project, as root: not its consoles and serial lines", () => {
    const devices = CONSOLES.filter((d) => existsSync(d));
    expect(devices.length).toBeGreaterThan(0);
    const dir = testDir('ollie-sec-dev-chroot-');
    const dev = join(dir, 'home', 'chroot', 'dev');
    mkdirSync(dev, { recursive: true });
    expect(spawnSync('mount', ['--bind', '/dev', dev]).status).toBe(0);
    let out: string;
    try {
      out = runSandboxed('root', dir, [
        ...devices.map((d) => `(: > chroot${d}) 2>/dev/null && echo "opened chroot${d}"`),
        'echo x > chroot/dev/null && echo devices-work',
      ]).out;
    } finally {
      spawnSync('umount', [dev]);
    }
    expect(out).not.toContain('opened ');
    expect(out).toContain('devices-work');
  });

  it('where a user namespace can be made but nothing mounted in it, the tool runs, without terminals', async () => {
    const t = await ownerTerminal(65534);
    const n = t.name.split('/').at(-1)!;
    const dir = testDir('ollie-sec-pts-nomount-');
    const home = join(dir, 'home');
    mkdirSync(home);
    const ctx = policyContext(dir, { cwd: home, home });
    const policy = loadPolicy(ctx);
    spawnSync('chown', ['-R', '-h', 'nobody:nogroup', dir]);
    const cmd = sandboxCommand(policy, ['/bin/sh', '-c', [...attackAt('/dev/pts', n), 'echo ran'].join('; ')]);
    expect(cmd.args).toContain('--private-pts');
    // As Ubuntu's AppArmor does with an unprivileged user namespace (it may be made, but holds no capability):
    // mount(2) is refused, unshare(2) is not.
    const run = spawnSync(
      'setpriv',
      [
        '--reuid=nobody',
        '--regid=nogroup',
        '--clear-groups',
        '/usr/bin/python3',
        '-c',
        NO_MOUNT,
        cmd.file,
        ...cmd.args,
      ],
      { env: cmd.env({ PATH: '/usr/bin:/bin', HOME: home }), encoding: 'utf8', timeout: 30_000 },
    );
    const out = run.stdout + run.stderr;
    expect(out).toContain('ran');
    expect(out).not.toContain('wrote-owner-terminal');
    expect(out).not.toContain('read-owner-terminal');
    expect(out).not.toContain('own terminal');
    expect(await t.report()).toBe(UNTOUCHED);
  });

  it('where the tool can have no devpts of its own, a rule on / does not reach the machine devpts bound elsewhere', async () => {
    const t = await ownerTerminal(65534);
    const n = t.name.split('/').at(-1)!;
    const dir = testDir('ollie-sec-pts-closed-');
    spawnSync('chmod', ['755', dir]);
    const pts = join(dir, 'pts');
    // Inside another sandbox, whose system call filter refuses namespaces (as a kernel without user namespaces
    // would): the inner helper cannot mount a devpts of its own.
    const inner = [SANDBOX_HELPER, '--rwx', '/', '--private-pts', '--'];
    const out = withDevptsAt(pts, () => {
      const run = spawnSync(
        'setpriv',
        [
          '--reuid=nobody',
          '--regid=nogroup',
          '--clear-groups',
          SANDBOX_HELPER,
          ...['--rox', '/', '--rw', '/dev', '--'],
          ...inner,
          '/bin/sh',
          '-c',
          attackAt(pts, n).slice(0, 3).join('; ') + '; echo null >/dev/null && echo devices-work',
        ],
        { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' }, timeout: 30_000 },
      );
      return run.stdout + run.stderr;
    });
    expect(out).not.toContain('wrote-owner-terminal');
    expect(out).not.toContain('read-owner-terminal');
    expect(out).toContain('devices-work');
    expect(await t.report()).toBe(UNTOUCHED);
  });
});
