/**
 * 9P over Node sockets: Unix sockets that are private to their user, and TCP on loopback unless asked.
 */
import { chmodSync, lstatSync, mkdirSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import { dirname } from 'node:path';
import type { ByteChannel } from '../common/channel.js';
import { parseAddress, type Address } from '../common/address.js';
import { Client, type ClientOptions } from '../common/client.js';
import type { Server } from '../common/server.js';

/**
 * A channel over a socket. Frames sent in one turn of the event loop are corked into one write, which is
 * what makes pipelined small requests cheap.
 */
export function socketChannel(sock: net.Socket): ByteChannel {
  let corked = false;
  sock.setNoDelay?.(true);
  return {
    send(data) {
      if (sock.destroyed) return;
      if (!corked) {
        corked = true;
        sock.cork();
        process.nextTick(() => {
          corked = false;
          sock.uncork();
        });
      }
      sock.write(data);
    },
    start(onData, onClose, onDrain) {
      sock.on('data', onData);
      if (onDrain) sock.on('drain', onDrain);
      sock.on('error', () => undefined);
      sock.on('close', () => onClose());
    },
    close() {
      sock.destroy();
    },
    backlog: () => sock.writableLength,
    pause: () => void sock.pause(),
    resume: () => void sock.resume(),
  };
}

export class SocketInUseError extends Error {
  override name = 'SocketInUseError';
}

/**
 * Makes `path`'s directory private (0700, ours) and clears a stale socket left by a dead daemon. A socket
 * that still answers belongs to a live daemon and is refused.
 */
export async function prepareUnixSocket(path: string): Promise<void> {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (!st.isDirectory()) throw new Error(`${dir} is not a directory`);
  if (typeof process.getuid === 'function' && st.uid !== process.getuid()) {
    throw new Error(`${dir} belongs to uid ${st.uid}, not to this user; refusing to put a socket there`);
  }
  if ((st.mode & 0o077) !== 0) {
    throw new Error(
      `${dir} is open to other users (mode ${(st.mode & 0o7777).toString(8)}); a socket must live in a private (0700) directory`,
    );
  }
  let existing;
  try {
    existing = lstatSync(path);
  } catch {
    return;
  }
  if (!existing.isSocket()) throw new Error(`${path} exists and is not a socket; refusing to replace it`);
  const alive = await new Promise<boolean>((resolve) => {
    const s = net.connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
  if (alive) throw new SocketInUseError(`another server is already listening on ${path}`);
  unlinkSync(path);
}

export interface Listener {
  readonly address: Address;
  close(): Promise<void>;
}

export interface ListenOptions {
  /**
   * What the server should know of each connection (Server.serve's origin), e.g. the peer's credentials. A
   * throw refuses the connection: it is closed before any 9P is read from it.
   */
  origin?: (sock: net.Socket, address: Address) => unknown;
  /** Connections served at once; one more is closed at once (and reported to onRefused). Default 1024. */
  maxConnections?: number;
  /** Told why a connection was refused (over maxConnections), so the daemon can log it. */
  onRefused?: (reason: string) => void;
}

export const DEFAULT_MAX_CONNECTIONS = 1024;

/** Serves `server` on a Unix socket (created 0600) or on TCP (loopback unless a host is given). */
export async function listen<N>(
  server: Server<N>,
  address: Address | string,
  opts: ListenOptions = {},
): Promise<Listener> {
  const addr = typeof address === 'string' ? parseAddress(address) : address;
  if (addr.kind === 'unix') await prepareUnixSocket(addr.path);
  const maxConnections = opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  let open = 0;
  const ns = net.createServer((sock) => {
    if (open >= maxConnections) {
      sock.destroy();
      opts.onRefused?.(`connection refused: ${open} connections open (limit ${maxConnections})`);
      return;
    }
    open++;
    sock.once('close', () => open--);
    let origin: unknown;
    try {
      origin = opts.origin?.(sock, addr);
    } catch {
      sock.destroy();
      return;
    }
    server.serve(socketChannel(sock), origin);
  });
  await new Promise<void>((resolve, reject) => {
    ns.once('error', reject);
    if (addr.kind === 'unix') ns.listen(addr.path, resolve);
    else ns.listen(addr.port, addr.host, resolve);
  });
  let bound = addr;
  if (addr.kind === 'unix') chmodSync(addr.path, 0o600);
  else bound = { ...addr, port: (ns.address() as net.AddressInfo).port };
  return {
    address: bound,
    close: () =>
      new Promise<void>((resolve) => {
        ns.close(() => resolve());
        if (addr.kind === 'unix') {
          try {
            unlinkSync(addr.path);
          } catch {
            // Already gone.
          }
        }
      }),
  };
}

/** Opens a socket to `address` and resolves once it is connected. */
export function connectSocket(address: Address | string): Promise<net.Socket> {
  const addr = typeof address === 'string' ? parseAddress(address) : address;
  return new Promise((resolve, reject) => {
    const s = addr.kind === 'unix' ? net.connect(addr.path) : net.connect(addr.port, addr.host);
    s.once('connect', () => {
      s.removeListener('error', reject);
      resolve(s);
    });
    s.once('error', (e: NodeJS.ErrnoException) => {
      const where = addr.kind === 'unix' ? addr.path : `${addr.host}:${addr.port}`;
      const hint = e.code === 'ENOENT' || e.code === 'ECONNREFUSED' ? ' (is the server running?)' : '';
      reject(new Error(`cannot connect to ${where}: ${e.code ?? e.message}${hint}`));
    });
  });
}

/** Connects a 9P client to a dial string or address. */
export async function dial(address: Address | string, opts: ClientOptions = {}): Promise<Client> {
  return Client.connect(socketChannel(await connectSocket(address)), opts);
}
