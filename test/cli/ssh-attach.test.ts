/**
 * Remote attach: `ollie-9p -a ssh!HOST` and `o -a ssh!HOST` (the built CLIs, run as child processes) reach an
 * olliesrv "on another machine" through a real sshd on a loopback port (throwaway host and user keys, its own
 * ssh config given as $OLLIE_SSH_CONFIG; ~/.ssh is never read): 9P runs through ssh to the remote Unix socket —
 * the remote user's default one, or the path given — and the daemon there takes the sshd session as its peer.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir, userInfo } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dial } from '../../src/ninep/node.js';
import type { Daemon } from '../../src/olliesrv/daemon.js';
import { parseSshAddress } from '../../src/platform/dial.js';
import { startBareDaemon, useSshHost } from '../helpers/sshd.js';

const NINEP = new URL('../../dist/cli/ollie-9p.js', import.meta.url).pathname;
const O = new URL('../../dist/cli/o.js', import.meta.url).pathname;

/** The daemon on the remote user's default socket. */
const there = useSshHost();
/** A second daemon there, on a socket of its own. */
let other: Daemon;
let otherSocket: string;

beforeAll(async () => {
  otherSocket = join(there.sshd.dir, 'other-run', 'ollie.sock');
  other = await startBareDaemon(join(there.sshd.dir, 'other'), otherSocket);
}, 30_000);
afterAll(async () => {
  await other?.close();
});

interface Run {
  code: number | null;
  out: string;
  err: string;
}

function run(cli: string, args: string[], input = ''): Promise<Run> {
  const env: Record<string, string | undefined> = { ...process.env, OLLIE_SSH_CONFIG: there.sshd.sshConfig };
  for (const k of ['OLLIE_ADDR', 'OLLIE_TOKEN', 'OLLIE_SESSION', 'OLLIE_AGENT', 'OLLIE_SESSION_ID', 'OLLIE_UNAME'])
    delete env[k];
  const p = spawn(process.execPath, [cli, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => (err += d.toString()));
  p.stdin.end(input);
  return new Promise((resolve) => p.on('close', (code) => resolve({ code, out, err })));
}

describe('attach over ssh', () => {
  it("ollie-9p -a ssh!HOST reaches the daemon on the remote user's default socket, as its owner", async () => {
    there.daemon.sessions.create({ name: 'over-there' });
    const idx = await run(NINEP, ['-a', `ssh!${there.sshd.host}`, 'read', 'session/idx']);
    expect(idx).toMatchObject({ code: 0, err: '' });
    expect(idx.out).toMatch(/\tover-there\t/);
    // The owner's files: config is the owner's alone, and a write lands there, not here.
    expect((await run(NINEP, ['-a', `ssh!${there.sshd.host}`, 'read', 'config/profile'])).code).toBe(0);
    expect(
      await run(NINEP, ['-a', `ssh!${there.sshd.host}`, 'rdwr', 'session/new'], 'name=made-over-ssh'),
    ).toMatchObject({ code: 0, out: 'made-over-ssh\n' });
    expect(there.daemon.sessions.has('made-over-ssh')).toBe(true);
    expect(other.sessions.has('made-over-ssh')).toBe(false);
  });

  it('o -a ssh!HOST!/path reaches another daemon on that socket; user@host:port works like the alias', async () => {
    expect(await run(O, ['-a', `ssh!${there.sshd.host}!${otherSocket}`, 'sess', 'new', 'second'])).toMatchObject({
      code: 0,
      out: 'second\n',
    });
    expect(other.sessions.has('second')).toBe(true);
    expect(there.daemon.sessions.has('second')).toBe(false);
    // The alias's user and port spelled out (HostName stays the alias's: the config maps ssh's destination).
    const explicit = await run(O, [
      '-a',
      `ssh!${userInfo().username}@${there.sshd.host}:${there.sshd.port}!${otherSocket}`,
      'sess',
      'ls',
    ]);
    expect(explicit.code).toBe(0);
    expect(explicit.out).toMatch(/^second\s/m);
  });

  it('says what failed: no daemon on that socket, an unknown host, an address that would be an ssh option', async () => {
    const missing = await run(NINEP, ['-a', `ssh!${there.sshd.host}!/nonexistent/ollie.sock`, 'read', 'session/idx']);
    expect(missing.code).not.toBe(0);
    expect(missing.err).toContain(`ssh!${there.sshd.host}!/nonexistent/ollie.sock`);
    expect(missing.err).toMatch(/open failed|connect failed|No such file/i);
    const unknown = await run(NINEP, ['-a', 'ssh!no-such-host.invalid', 'read', 'session/idx']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.err).toMatch(
      /ssh!no-such-host\.invalid: could not learn the remote user's socket .*no-such-host\.invalid/,
    );
    const option = await run(NINEP, ['-a', 'ssh!-oProxyCommand=touch /tmp/ollie-pwned', 'read', 'session/idx']);
    expect(option.code).not.toBe(0);
    expect(option.err).toMatch(/bad ssh address/);
    expect(() => parseSshAddress('ssh!-o@host')).toThrow(/bad ssh address/);
    expect(parseSshAddress('ssh!bob@[::1]:2222!/run/o.sock')).toEqual({
      dest: 'bob@::1',
      port: 2222,
      socket: '/run/o.sock',
    });
  });

  it('leaves no forwarding behind: its private local socket and the ssh process go with the client', async () => {
    const forwardings = (): string[] => readdirSync(tmpdir()).filter((d) => d.startsWith('ollie-ssh-'));
    const before = forwardings();
    const c = await dial(`unix!${there.socket}`, { uname: userInfo().username });
    try {
      const idx = await c.readText('session/idx');
      expect((await run(NINEP, ['-a', `ssh!${there.sshd.host}`, 'ls', 'session'])).out).toMatch(/over-there/);
      // The daemon's other clients are undisturbed.
      expect(await c.readText('session/idx')).toBe(idx);
    } finally {
      c.close();
    }
    expect(forwardings().filter((d) => !before.includes(d))).toEqual([]);
    const ssh = readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(there.sshd.sshConfig);
        } catch {
          return false;
        }
      });
    expect(ssh).toEqual([]);
  });
});
