/**
 * How Ollie's own clients (ollie-9p, o, ollie run, ollie mcp) reach olliesrv: on the Unix socket the daemon knows
 * its owner by the peer's credentials and nothing is sent; elsewhere (TCP) they present the owner token the daemon
 * wrote to the runtime directory. $OLLIE_TOKEN, set for workflows and for the tools that dial back, wins over both.
 *
 * `ssh![user@]host[:port][!/path/to.sock]` reaches a daemon on another machine through the system's ssh (so the
 * user's agent, keys, known_hosts, ~/.ssh/config Host aliases and ProxyJump apply), forwarding a private local
 * Unix socket to the remote one (the remote user's default socket unless a path is given). No TCP port is opened; the
 * daemon there sees the remote user's sshd session as its peer, so its owner rules apply: the remote user is its
 * owner when the daemon is theirs. No token of this machine is sent there. $OLLIE_SSH names the ssh binary and
 * $OLLIE_SSH_CONFIG an ssh config file (`-F`) used instead of ~/.ssh/config.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { Client, parseAddress, type ByteChannel, type ClientOptions } from '../ninep/index.js';
import { dial, socketChannel } from '../ninep/node.js';
import { runtimeDir } from './paths.js';

/** A daemon reached over SSH. */
export interface SshAddress {
  /** What ssh connects to: `[user@]host`, a Host alias included. */
  dest: string;
  port?: number;
  /** The remote Unix socket; the remote user's default socket when absent. */
  socket?: string;
}

const DEST = /^(?:[A-Za-z0-9_][A-Za-z0-9._%+-]*@)?(?:[A-Za-z0-9_][A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\])$/;

/** Parses `ssh![user@]host[:port][!/path]`; undefined for other addresses; throws naming what is wrong. */
export function parseSshAddress(addr: string): SshAddress | undefined {
  if (!addr.startsWith('ssh!')) return undefined;
  const rest = addr.slice(4);
  const bang = rest.indexOf('!');
  const hostPart = bang === -1 ? rest : rest.slice(0, bang);
  const socket = bang === -1 ? undefined : rest.slice(bang + 1);
  const m = /^((?:[^@\s]+@)?(?:\[[^\]]+\]|[^:[\]\s]+))(?::(\d+))?$/.exec(hostPart);
  const dest = m?.[1] ?? '';
  // A destination starting with '-' would be an ssh option: the DEST pattern refuses it.
  if (!DEST.test(dest))
    throw new Error(`bad ssh address ${JSON.stringify(addr)}: expected ssh![user@]host[:port][!/path/to.sock]`);
  const port = m?.[2] !== undefined ? Number(m[2]) : undefined;
  if (port !== undefined && (port < 1 || port > 65535))
    throw new Error(`bad ssh address ${JSON.stringify(addr)}: port ${port} out of range`);
  if (socket !== undefined && (!socket.startsWith('/') || /[\0\n]/.test(socket)))
    throw new Error(`bad ssh address ${JSON.stringify(addr)}: the socket must be an absolute path`);
  // ssh takes an IPv6 address without its brackets (the port goes in -p).
  return {
    dest: dest.replace(/\[([^\]]+)\]$/, '$1'),
    ...(port !== undefined && { port }),
    ...(socket !== undefined && { socket }),
  };
}

/** The credential to present on `addr`, if any. */
export function credentialFor(addr: string): string | undefined {
  if (addr.startsWith('ssh!')) return undefined;
  const env = process.env.OLLIE_TOKEN?.trim();
  if (env) return env;
  if (parseAddress(addr).kind === 'unix') return undefined;
  try {
    return readFileSync(join(runtimeDir(), 'owner.token'), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

export function dialOllie(addr: string): Promise<Client> {
  const ssh = parseSshAddress(addr);
  if (ssh) return dialSsh(ssh, { uname: userInfo().username });
  const token = credentialFor(addr);
  return dial(addr, { uname: userInfo().username, ...(token !== undefined && { authData: token }) });
}

function sshLabel(a: SshAddress): string {
  return `ssh!${a.dest}${a.port !== undefined ? `:${a.port}` : ''}${a.socket ? `!${a.socket}` : ''}`;
}

/** ssh's arguments before the destination: the config file, the port, and never a question on a terminal. */
function sshOptions(a: SshAddress): string[] {
  const config = process.env.OLLIE_SSH_CONFIG;
  return [
    ...(config ? ['-F', config] : []),
    ...(a.port !== undefined ? ['-p', String(a.port)] : []),
    '-o',
    'BatchMode=yes',
    '-o',
    'ConnectTimeout=15',
    '-o',
    'ServerAliveInterval=15',
  ];
}

/**
 * The remote user's default socket, as the daemon there computes it ($XDG_RUNTIME_DIR/ollie, else
 * ${TMPDIR:-/tmp}/ollie-UID): asked of the remote's shell, since a forwarding takes a path and expands nothing.
 */
function remoteDefaultSocket(a: SshAddress): Promise<string> {
  const script =
    'if [ -n "$XDG_RUNTIME_DIR" ]; then printf "%s/ollie/ollie.sock" "$XDG_RUNTIME_DIR"; else printf "%s/ollie-%s/ollie.sock" "${TMPDIR:-/tmp}" "$(id -u)"; fi';
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.env.OLLIE_SSH || 'ssh',
      [...sshOptions(a), '-T', '-o', 'ClearAllForwardings=yes', '--', a.dest, script],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-2000)));
    child.once('error', (e) =>
      reject(new Error(`${sshLabel(a)}: cannot run ${process.env.OLLIE_SSH || 'ssh'}: ${e.message}`)),
    );
    child.once('close', (code) => {
      const path = out.trim();
      if (code === 0 && path.startsWith('/')) resolve(path);
      else
        reject(
          new Error(
            `${sshLabel(a)}: could not learn the remote user's socket (ssh exit ${code}): ${err.trim() || out.trim() || 'no output'}`,
          ),
        );
    });
  });
}

/**
 * 9P through an ssh forwarding of a local Unix socket to the remote one (`ssh -L LOCAL:REMOTE`: OpenSSH's `-W`
 * forwards stdio to TCP ports only). The local socket lives in a fresh 0700 directory and is unlinked as soon as
 * this client is connected through it, so nothing else can use the forwarding. ssh runs `cat` there, which ends
 * when our end of its stdin closes: if this process dies, ssh goes too.
 */
export async function dialSsh(a: SshAddress, opts: ClientOptions = {}): Promise<Client> {
  const channel = await sshChannel(a);
  try {
    return await Client.connect(channel, opts);
  } catch (e) {
    channel.close();
    throw await channel.failure(e as Error);
  }
}

/** A byte stream to the daemon at `a`, and the words for a failure on it (ssh's own, which name the cause). */
export interface SshChannel extends ByteChannel {
  failure(e: Error): Promise<Error>;
}

/**
 * The raw byte stream of dialSsh, for whoever speaks 9P over it (dialSsh's client, or the GUI's channel bridged
 * to it by the owner's side of the app).
 */
export async function sshChannel(a: SshAddress): Promise<SshChannel> {
  const socket = a.socket ?? (await remoteDefaultSocket(a));
  const dir = mkdtempSync(join(tmpdir(), 'ollie-ssh-'));
  const local = join(dir, 'fwd.sock');
  const child = spawn(
    process.env.OLLIE_SSH || 'ssh',
    [
      // LogLevel INFO: a refused forwarding (no daemon on that socket) is logged at INFO; stderr is only shown on failure.
      ...sshOptions(a),
      '-T',
      '-o',
      'LogLevel=INFO',
      '-o',
      'ExitOnForwardFailure=yes',
      '-o',
      'StreamLocalBindMask=0177',
      '-L',
      `${local}:${socket}`,
      '--',
      a.dest,
      'cat >/dev/null',
    ],
    { stdio: ['pipe', 'ignore', 'pipe'] },
  );
  const kill = (): void => void child.kill();
  process.once('exit', kill);
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-2000)));
  child.stdin.on('error', () => undefined);
  let exited: number | null | undefined;
  const closed = new Promise<void>((r) =>
    child.once('close', (code) => {
      exited = code;
      process.removeListener('exit', kill);
      rmSync(dir, { recursive: true, force: true });
      r();
    }),
  );
  const why = async (): Promise<string> => {
    await Promise.race([closed, new Promise((r) => setTimeout(r, 1000))]);
    return err.trim().split('\n').slice(-3).join(' / ');
  };
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('error', (e) => reject(new Error(`cannot run ${process.env.OLLIE_SSH || 'ssh'}: ${e.message}`)));
      const started = Date.now();
      const poll = (): void => {
        if (existsSync(local)) return resolve();
        if (exited !== undefined) return reject(new Error(`ssh exited (${exited}) before forwarding`));
        if (Date.now() - started > 30_000) return reject(new Error('ssh did not set up the forwarding within 30 s'));
        setTimeout(poll, 10);
      };
      poll();
    });
    const sock = net.connect(local);
    await new Promise<void>((resolve, reject) => {
      sock.once('connect', resolve);
      sock.once('error', reject);
    });
    rmSync(dir, { recursive: true, force: true });
    const base = socketChannel(sock);
    const channel: SshChannel = {
      ...base,
      start(onData, onClose, onDrain) {
        base.start(
          onData,
          (e) => {
            kill();
            // The remote side's refusal (no daemon on that socket) is only in ssh's words.
            void why().then((detail) => onClose(detail ? new Error(`${sshLabel(a)}: ${detail}`) : e));
          },
          onDrain,
        );
      },
      close() {
        base.close();
        kill();
      },
      failure: async (e) => new Error(`${sshLabel(a)}: ${(await why()) || e.message}`),
    };
    return channel;
  } catch (e) {
    kill();
    const detail = await why();
    throw new Error(`${sshLabel(a)}: ${detail || (e as Error).message}`);
  }
}
