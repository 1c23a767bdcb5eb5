/**
 * A real OpenSSH server on a loopback port, for tests and benchmarks (bench/remote.mjs loads it from dist/), with
 * everything throwaway: a host key and a user key made with ssh-keygen, an authorized_keys file, and an ssh client
 * config (`-F`, e.g. $OLLIE_SSH_CONFIG) that uses only those. Nothing reads or writes ~/.ssh. The remote user is the
 * user running it, with its own HOME (and XDG dirs) set by the server (sshd's SetEnv), so a test can tell what
 * happened "there" from "here".
 *
 * Needs /usr/sbin/sshd (Debian openssh-server) and root (sshd changes user; its privilege-separation directory
 * /run/sshd is made when missing).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export const SSHD = process.env.OLLIE_SSHD ?? '/usr/sbin/sshd';

export interface Sshd {
  /** The Host alias of the client config (`ssh -F sshConfig HOST`). */
  readonly host: string;
  readonly port: number;
  /** The ssh client config file: give it as $OLLIE_SSH_CONFIG or `ssh -F`. */
  readonly sshConfig: string;
  /** HOME of the remote sessions (made by the helper). */
  readonly remoteHome: string;
  readonly dir: string;
  /** Kills every connection's sshd process (the listener stays): clients see the connection drop. */
  cutConnections(): number;
  /** Stops the listener (SIGSTOP): new connections hang until resume(), like a host that went away. */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

/** Whether the tests can run a real sshd here (the binary, and root to run it). */
export function sshdAvailable(): boolean {
  return process.getuid?.() === 0 && spawnSync(SSHD, ['-V'], { stdio: 'ignore' }).error === undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

function keygen(file: string): void {
  const r = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'ollie-test', '-f', file], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  if (r.status !== 0) throw new Error(`ssh-keygen failed: ${r.stderr?.toString() ?? r.error?.message}`);
}

/** Children of `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'latin1');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export async function startSshd(opts: { host?: string; env?: Record<string, string> } = {}): Promise<Sshd> {
  const dir = mkdtempSync(join(tmpdir(), 'ollie-sshd-'));
  const host = opts.host ?? 'ollie-test-remote';
  const remoteHome = join(dir, 'home');
  mkdirSync(join(remoteHome, 'run'), { recursive: true, mode: 0o700 });
  keygen(join(dir, 'host_key'));
  keygen(join(dir, 'user_key'));
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'user_key.pub')));
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const port = await freePort();
  const env = {
    HOME: remoteHome,
    XDG_RUNTIME_DIR: join(remoteHome, 'run'),
    XDG_CACHE_HOME: join(remoteHome, '.cache'),
    ...opts.env,
  };
  const config = join(dir, 'sshd_config');
  writeFileSync(
    config,
    [
      `ListenAddress 127.0.0.1`,
      `HostKey ${join(dir, 'host_key')}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'StrictModes no',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      'UsePAM no',
      'AllowStreamLocalForwarding yes',
      'X11Forwarding no',
      'PrintMotd no',
      'LogLevel INFO',
      `SetEnv ${Object.entries(env)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
      '',
    ].join('\n'),
  );
  const sshConfig = join(dir, 'ssh_config');
  const hostKey = readFileSync(join(dir, 'host_key.pub'), 'utf8').trim().split(' ').slice(0, 2).join(' ');
  writeFileSync(join(dir, 'known_hosts'), `[127.0.0.1]:${port} ${hostKey}\n`);
  writeFileSync(
    sshConfig,
    [
      `Host ${host}`,
      '  HostName 127.0.0.1',
      `  Port ${port}`,
      `  User ${userInfo().username}`,
      `  IdentityFile ${join(dir, 'user_key')}`,
      '  IdentitiesOnly yes',
      '  IdentityAgent none',
      `  UserKnownHostsFile ${join(dir, 'known_hosts')}`,
      '  GlobalKnownHostsFile /dev/null',
      '  StrictHostKeyChecking yes',
      '  UpdateHostKeys no',
      '  ControlMaster no',
      '  ControlPath none',
      '  LogLevel ERROR',
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(SSHD, ['-D', '-e', '-f', config, '-p', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sshd did not start within 10 s: ${log}`)), 10000);
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      log = (log + d).slice(-4000);
      if (process.env.OLLIE_TEST_LOG) process.stderr.write(`sshd: ${d}`);
      if (log.includes('Server listening')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sshd exited (${code}): ${log}`));
    });
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    host,
    port,
    sshConfig,
    remoteHome,
    dir,
    cutConnections: () => {
      // Every sshd process below the listener (the per-connection monitor and the session process): the
      // network side of each connection goes; what runs in the sessions loses its stdin and ends.
      const kids: number[] = [];
      const walk = (pid: number): void => {
        for (const k of childrenOf(pid)) {
          let comm = '';
          try {
            comm = readFileSync(`/proc/${k}/comm`, 'latin1');
          } catch {
            continue;
          }
          if (comm.startsWith('sshd')) kids.push(k);
          walk(k);
        }
      };
      walk(child.pid!);
      for (const k of kids) {
        try {
          process.kill(k, 'SIGKILL');
        } catch {
          // ended by itself meanwhile
        }
      }
      return kids.length;
    },
    pause: () => void child.kill('SIGSTOP'),
    resume: () => void child.kill('SIGCONT'),
    async stop() {
      child.kill('SIGCONT');
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
