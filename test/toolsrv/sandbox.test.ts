/**
 * The native sandbox, for real: every escape the policy forbids is attempted inside ollie-sandbox and must
 * fail, and the same command must work unsandboxed (what an approved bypass runs). Then fail-closed behaviour,
 * the environment filter. (What the helper costs is measured by bench/toolsrv.mjs.)
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync, symlinkSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import {
  landlockStatus,
  loadPolicy,
  PACKAGE_ROOT,
  SANDBOX_EXIT,
  SANDBOX_HELPER,
  sandboxCommand,
  SandboxUnavailableError,
  unavailableReason,
  type SandboxPolicy,
} from '../../src/toolsrv/sandbox/index.js';
import { buildNative, makeWorld, run, runSandboxed, writePolicy, type World } from './sandbox-helpers.js';

const SYSTEM = `  rox: [/usr, /bin, /sbin, /lib, /lib64]\n`;
/** A user policy that lets tools read all of HOME: the denied paths inside it must stay closed. */
const HOME_READABLE = `filesystem:\n${SYSTEM}  ro: [/etc, /proc, "{HOME}"]\n  rw: ["{CWD}", "{TMPDIR}", /dev/null]\n`;

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

// HOME is the fake one, as toolsrv gives tools the session's HOME (and bash reads ~/.bashrc when its stdin is a
// socket, which Node's pipes are).
const env = () => ({ ...process.env, HOME: w.home });
const bash = (policy: SandboxPolicy | null, script: string) =>
  runSandboxed(policy, ['/bin/bash', '-c', script], { cwd: w.cwd, env: env() });
const node = (policy: SandboxPolicy | null, script: string) =>
  runSandboxed(policy, [process.execPath, '-e', script], { cwd: w.cwd, env: env() });

describe('the kernel', () => {
  test('offers a Landlock ABI with network rules and scoping (this suite needs ABI 6 or later)', () => {
    const s = landlockStatus();
    expect(s.abi).toBeGreaterThanOrEqual(6);
    expect(s.enforces).toEqual(
      expect.arrayContaining([
        'filesystem',
        'truncate',
        'tcp',
        'scope_signals',
        'scope_abstract_unix',
        'socket_families',
      ]),
    );
    const probe = JSON.parse(spawnSync(SANDBOX_HELPER, ['--probe'], { encoding: 'utf8' }).stdout) as { abi: number };
    expect(probe.abi).toBe(s.abi);
  });
});

describe('filesystem', () => {
  test('writing outside the rw paths fails; the project and the private tmp are writable', async () => {
    const p = loadPolicy(w);
    const script = `echo a > ${w.cwd}/ok.txt && echo proj-ok; echo b > "$TMPDIR/t" && echo tmp-ok; echo c > ${w.home}/other/x.txt; echo d > ${w.root}/outside.txt`;
    const r = await bash(p, script);
    expect(r.out).toContain('proj-ok');
    expect(r.out).toContain('tmp-ok');
    expect(r.out).toMatch(new RegExp(`${w.home}/other/x.txt: Permission denied`));
    expect(r.out).toMatch(new RegExp(`${w.root}/outside.txt: Permission denied`));
    expect(existsSync(join(w.home, 'other', 'x.txt'))).toBe(false);
    expect(existsSync(join(w.root, 'outside.txt'))).toBe(false);

    const free = await bash(null, `echo c > ${w.home}/other/x.txt && echo d > ${w.root}/outside.txt && echo both-ok`);
    expect(free.out).toBe('both-ok\n');
  });

  test('read-only paths cannot be truncated or removed', async () => {
    writePolicy(w, HOME_READABLE);
    const r = await bash(
      loadPolicy(w),
      `: > ${w.home}/other/notes.txt; rm -f ${w.home}/other/notes.txt; cat ${w.home}/other/notes.txt`,
    );
    expect(r.out).toContain('Permission denied');
    expect(r.out).toContain('notes\n');
  });

  test('~/.ssh, ~/.gnupg and the Ollie config dir stay closed even when the policy grants all of HOME', async () => {
    writePolicy(w, HOME_READABLE);
    const p = loadPolicy(w);
    const secrets = [
      `${w.home}/.ssh/id_ed25519`,
      `${w.home}/ssh-link/id_ed25519`,
      `${w.home}/.gnupg/secring`,
      `${w.configDir}/backends.json`,
    ];
    const r = await bash(
      p,
      `cat ${w.home}/other/notes.txt; for f in ${secrets.join(' ')}; do cat "$f"; done; ls ${w.home}/.ssh`,
    );
    expect(r.out).toContain('notes\n');
    for (const f of secrets) expect(r.out).toContain(`cat: ${f}: Permission denied`);
    expect(r.out).not.toContain('PRIVATE KEY');
    expect(r.out).not.toContain('sk-secret');
    expect(r.out).toMatch(/ls: cannot open directory .*\.ssh.*: Permission denied/);

    const free = await bash(null, `cat ${secrets.join(' ')}`);
    expect(free.out).toBe('PRIVATE KEY\nPRIVATE KEY\nGPG\n{"apiKey":"sk-secret"}\n');
  });

  test('an agent working in HOME itself: its entries are writable, the denied paths are not, not even to create', async () => {
    const p = loadPolicy({ ...w, cwd: w.home });
    rmSync(join(w.home, '.gnupg'), { recursive: true });
    const r = await runSandboxed(
      p,
      [
        '/bin/bash',
        '-c',
        'echo ok > other/new.txt && cat other/new.txt; cat .ssh/id_ed25519; mkdir .gnupg; echo k > .ssh/authorized_keys; echo x > top.txt; ls .config/ollie',
      ],
      { cwd: w.home, env: env() },
    );
    expect(r.out).toContain('ok\n');
    expect(r.out).toContain('cat: .ssh/id_ed25519: Permission denied');
    expect(r.out).toMatch(/mkdir: cannot create directory .\.gnupg.: Permission denied/);
    expect(r.out).toContain('.ssh/authorized_keys: Permission denied');
    expect(r.out).toContain("ls: cannot open directory '.config/ollie': Permission denied");
    // The price of the holes: nothing can be created directly in HOME (a right there would reach ~/.ssh too).
    expect(r.out).toContain('top.txt: Permission denied');
    expect(existsSync(join(w.home, '.gnupg'))).toBe(false);
  });

  test('a denied path below a symlinked directory is still denied', async () => {
    // HOME reached through a link: the helper compares canonical paths, for paths that exist and that do not.
    const linked = join(w.root, 'home-link');
    symlinkSync(w.home, linked);
    rmSync(join(w.home, '.gnupg'), { recursive: true });
    const p = loadPolicy({ ...w, home: linked, cwd: linked });
    const r = await bash(
      p,
      `cat ${linked}/.ssh/id_ed25519; mkdir ${w.home}/.gnupg; echo ok > ${w.home}/other/fine.txt && echo wrote`,
    );
    expect(r.out).toContain('Permission denied');
    expect(r.out).toMatch(/mkdir: cannot create directory .*\/home\/\.gnupg.: Permission denied/);
    expect(existsSync(join(w.home, '.gnupg'))).toBe(false);
    expect(r.out).toContain('wrote');
    expect(r.out).not.toContain('PRIVATE KEY');
  });

  test('the default policy does not grant HOME at all', async () => {
    const r = await bash(loadPolicy(w), `cat ${w.home}/other/notes.txt`);
    expect(r.out).toContain('Permission denied');
    expect(r.code).not.toBe(0);
  });
});

describe('network', () => {
  let server: net.Server;
  let port: number;
  beforeAll(async () => {
    server = net.createServer((s) => s.end('hello\n'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(() => server.close());

  test('connecting to a TCP port on loopback fails with the network off', async () => {
    const script = `exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3`;
    const r = await bash(loadPolicy(w), script);
    expect(r.out).toContain('Permission denied');
    expect(r.out).not.toContain('hello');
    expect((await bash(null, script)).out).toBe('hello\n');
  });

  test('binding a TCP port fails with the network off', async () => {
    const script = `require('net').createServer().on('error', (e) => { console.log(e.code); process.exit(3); }).listen(0, '127.0.0.1', () => { console.log('bound'); process.exit(0); })`;
    const r = await node(loadPolicy(w), script);
    expect(r.out).toBe('EACCES\n');
    expect(r.code).toBe(3);
    expect((await node(null, script)).out).toBe('bound\n');
  });

  test('UDP and other socket families are refused with the network off', async () => {
    const script = `const s = require('dgram').createSocket('udp4'); s.on('error', (e) => { console.log(e.code); process.exit(3); }); s.bind(0, () => { console.log('udp'); process.exit(0); })`;
    const r = await node(loadPolicy(w), script);
    expect(r.out).toBe('EACCES\n');
    expect((await node(null, script)).out).toBe('udp\n');
  });

  test('port lists open exactly the listed ports', async () => {
    const other = net.createServer((s) => s.end('other\n'));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const otherPort = (other.address() as net.AddressInfo).port;
    try {
      writePolicy(
        w,
        `filesystem:\n${SYSTEM}  ro: [/etc, /proc]\n  rw: ["{CWD}", /dev/null]\nnetwork:\n  enabled: true\n  connect_tcp: [${port}]\n`,
      );
      const p = loadPolicy(w);
      const r = await bash(
        p,
        `exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3; exec 4<>/dev/tcp/127.0.0.1/${otherPort} && head -1 <&4`,
      );
      expect(r.out).toContain('hello\n');
      expect(r.out).toContain('Permission denied');
      expect(r.out).not.toContain('other');
      // Listing only connect ports leaves binding closed.
      const b = await node(
        p,
        `require('net').createServer().on('error', (e) => console.log(e.code)).listen(0, '127.0.0.1', () => { console.log('bound'); process.exit(0); })`,
      );
      expect(b.out).toBe('EACCES\n');
      // With ports listed, TCP is Landlock's and UDP stays (name lookups); a raw or packet socket, which would go
      // around the port rules, is refused by the sandbox (EACCES, where the kernel alone says EPERM to non-root).
      const sock = (policy: SandboxPolicy | null, family: string, type: string, proto: number) =>
        runSandboxed(
          policy,
          [
            '/usr/bin/perl',
            '-e',
            `use Socket; socket(my $s, ${family}, ${type}, ${proto}) or die "$!\\n"; print "ok\\n"`,
          ],
          { cwd: w.cwd, env: env() },
        );
      expect((await sock(p, 'PF_INET', 'SOCK_DGRAM', 17)).out).toBe('ok\n');
      expect((await sock(p, 'PF_INET', 'SOCK_RAW', 1)).out).toBe('Permission denied\n');
      expect((await sock(p, '17', 'SOCK_RAW', 0)).out).toBe('Permission denied\n');
      if (process.getuid?.() === 0) expect((await sock(null, 'PF_INET', 'SOCK_RAW', 1)).out).toBe('ok\n');
    } finally {
      other.close();
    }
  });
});

describe('isolation', () => {
  let victim: ChildProcess;
  beforeEach(() => {
    victim = spawn('sleep', ['30'], { stdio: 'ignore' });
  });
  afterEach(() => {
    victim.kill('SIGKILL');
  });

  test('sending a signal to a process outside the sandbox fails', async () => {
    const r = await bash(loadPolicy(w), `kill -TERM ${victim.pid}`);
    expect(r.out).toContain('Operation not permitted');
    expect(r.code).not.toBe(0);
    expect(victim.exitCode).toBe(null);
    expect(victim.signalCode).toBe(null);

    const died = new Promise((resolve) => victim.once('exit', (_c, sig) => resolve(sig)));
    expect((await bash(null, `kill -TERM ${victim.pid}`)).code).toBe(0);
    expect(await died).toBe('SIGTERM');
  });

  test('a process can still signal its own children inside the sandbox', async () => {
    const r = await bash(loadPolicy(w), 'sleep 30 & kill -TERM $! && wait $!; echo "status $?"');
    expect(r.out).toBe('status 143\n');
  });

  describe('Unix sockets', () => {
    let abstract: net.Server;
    let named: net.Server;
    const abstractName = `\0ollie-sandbox-test-${process.pid}`;
    beforeEach(async () => {
      abstract = net.createServer((s) => s.end());
      await new Promise<void>((resolve) => abstract.listen(abstractName, resolve));
      named = net.createServer((s) => s.end());
      await new Promise<void>((resolve) => named.listen(join(w.runtimeDir, 'ollie.sock'), resolve));
    });
    afterEach(() => {
      abstract.close();
      named.close();
    });
    const connect = (addr: string) =>
      `const s = require('net').connect(${JSON.stringify(addr)}); s.on('connect', () => { console.log('connected'); process.exit(0); }); s.on('error', (e) => { console.log(e.code); process.exit(3); })`;

    test('connecting to an abstract Unix socket outside fails (seccomp by default, Landlock scoping with Unix sockets allowed)', async () => {
      expect((await node(loadPolicy(w), connect(abstractName))).out).toBe('EACCES\n');

      writePolicy(w, `filesystem:\n${SYSTEM}  ro: [/etc, /proc]\n  rw: ["{CWD}", /dev/null]\nnetwork:\n  unix: true\n`);
      const scoped = await node(loadPolicy(w), connect(abstractName));
      expect(scoped.out).toBe('EPERM\n');

      expect((await node(null, connect(abstractName))).out).toBe('connected\n');
    });

    test('the Ollie socket is reachable only with the ollieSocket rule', async () => {
      const sock = join(w.runtimeDir, 'ollie.sock');
      const p = loadPolicy(w);
      expect((await node(p, connect(sock))).out).toBe('EACCES\n');
      const cmd = sandboxCommand(p, [process.execPath, '-e', connect(sock)], { allowOllieSocket: true });
      expect((await run(cmd.file, cmd.args, { cwd: w.cwd, env: cmd.env(process.env) })).out).toBe('connected\n');
    });
  });
});

describe('fails closed', () => {
  const helper = (args: string[]) => spawnSync(SANDBOX_HELPER, [...args, '--', '/bin/true'], { encoding: 'utf8' });

  test('a kernel ABI too weak for the policy: a distinct exit code and exactly what is missing', () => {
    let r = helper(['--abi-max', '5', '--rox', '/usr', '--scope-signals']);
    expect(r.status).toBe(SANDBOX_EXIT.unavailable);
    expect(r.stderr).toBe(
      'ollie-sandbox: unavailable: the policy scopes signals but Landlock ABI 5 cannot (needs ABI 6, Linux 6.12)\n',
    );

    r = helper(['--abi-max', '3', '--no-net']);
    expect(r.status).toBe(SANDBOX_EXIT.unavailable);
    expect(r.stderr).toBe(
      'ollie-sandbox: unavailable: the policy restricts the network but Landlock ABI 3 has no network rules (needs ABI 4, Linux 6.7)\n',
    );

    r = helper(['--abi-max', '2']);
    expect(r.stderr).toBe(
      'ollie-sandbox: unavailable: Landlock ABI 2 cannot keep read-only files from being truncated (needs ABI 3, Linux 6.2)\n',
    );

    r = helper(['--abi-max', '0']);
    expect(r.status).toBe(SANDBOX_EXIT.unavailable);
    expect(r.stderr).toBe('ollie-sandbox: unavailable: Landlock is not available: switched off by --abi-max\n');
  });

  test('the shipped policy on a kernel with ABI 5: refused before spawning, and by the helper itself', async () => {
    const p = loadPolicy(w);
    expect(unavailableReason(p, { abi: 5, enforces: [] })).toBe(
      'the policy scopes signals and abstract Unix sockets (needs ABI 6, Linux 6.12), but the kernel offers Landlock ABI 5',
    );
    expect(unavailableReason(p, { abi: 0, enforces: [], reason: 'Landlock is not available: no' })).toBe(
      'Landlock is not available: no',
    );
    expect(unavailableReason(p, { abi: 7, enforces: [] })).toBeUndefined();

    const cmd = sandboxCommand(p, ['/bin/bash', '-c', `echo ran > ${w.cwd}/ran`]);
    const r = await run(cmd.file, ['--abi-max', '5', ...cmd.args], { cwd: w.cwd, env: cmd.env(process.env) });
    expect(r.code).toBe(SANDBOX_EXIT.unavailable);
    expect(r.out).toBe(
      'ollie-sandbox: unavailable: the policy scopes signals and abstract Unix sockets but Landlock ABI 5 cannot (needs ABI 6, Linux 6.12)\n',
    );
    expect(existsSync(join(w.cwd, 'ran'))).toBe(false);
  });

  test('a tool built into the helper runs in-process only where the policy would let it be executed', () => {
    const tool = join(PACKAGE_ROOT, 'data', 'tools', 'file_read');
    const input = JSON.stringify({ path: '/etc/hostname' });
    const denied = spawnSync(SANDBOX_HELPER, ['--ro', '/', '--', tool], { encoding: 'utf8', input });
    expect(denied.status).toBe(126);
    expect(denied.stderr).toBe(`ollie-sandbox: cannot execute ${tool}: Permission denied\n`);
    const allowed = spawnSync(
      SANDBOX_HELPER,
      ['--ro', '/', '--rox', join(PACKAGE_ROOT, 'native', 'build'), '--', tool],
      { encoding: 'utf8', input },
    );
    expect(allowed.status).toBe(0);
    expect(allowed.stdout).toMatch(/^ {5}1\t/);
  });

  test('a bad policy on the command line is refused with its own exit code', () => {
    let r = helper(['--ro', 'relative/path']);
    expect(r.status).toBe(SANDBOX_EXIT.policy);
    expect(r.stderr).toBe('ollie-sandbox: --ro relative/path: paths must be absolute\n');
    r = helper(['--net-connect', '99999']);
    expect(r.status).toBe(SANDBOX_EXIT.policy);
    expect(r.stderr).toBe('ollie-sandbox: bad port "99999"\n');
    r = helper(['--frobnicate']);
    expect(r.stderr).toBe('ollie-sandbox: unknown option --frobnicate (try --help)\n');
  });

  test('sandboxCommand throws SandboxUnavailableError rather than returning an unsandboxed command', () => {
    const p = loadPolicy(w);
    expect(() => sandboxCommand(p, [])).toThrow('empty argv');
    const err = new SandboxUnavailableError('x');
    expect(err).toBeInstanceOf(Error);
    expect(sandboxCommand(p, ['/bin/true']).file).toBe(SANDBOX_HELPER);
  });
});

describe('environment', () => {
  test("only the policy's variables pass, with TMPDIR set to the private tmp", async () => {
    const p = loadPolicy(w);
    const env = {
      ...process.env,
      SECRET_TOKEN: 'hunter2',
      AWS_SECRET_ACCESS_KEY: 'k',
      LANG: 'C.UTF-8',
      LC_ALL: 'C',
      OLLIE_SESSION_ID: 's1',
      OLLIE_ADDR: 'unix!/x',
    };
    const cmd = sandboxCommand(p, ['/usr/bin/env']);
    // Unfiltered on purpose: the helper filters by itself.
    const r = await run(cmd.file, cmd.args, { cwd: w.cwd, env });
    const vars = Object.fromEntries(
      r.out
        .trim()
        .split('\n')
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    expect(vars.SECRET_TOKEN).toBeUndefined();
    expect(vars.AWS_SECRET_ACCESS_KEY).toBeUndefined();
    expect(vars.OLLIE_ADDR).toBeUndefined();
    expect(vars).toMatchObject({
      LANG: 'C.UTF-8',
      LC_ALL: 'C',
      OLLIE_SESSION_ID: 's1',
      TMPDIR: w.tmpDir,
      PATH: process.env.PATH,
    });
    expect(cmd.env(env)).toEqual(vars);

    const withSocket = sandboxCommand(p, ['/usr/bin/env'], { allowOllieSocket: true });
    expect(withSocket.env(env).OLLIE_ADDR).toBe('unix!/x');
  });
});
