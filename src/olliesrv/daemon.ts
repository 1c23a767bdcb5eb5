/**
 * olliesrv as a whole: the store, the sessions, the event bus and the namespace, served over 9P on a
 * private Unix socket (and TCP when asked). Runs the same under `ollie serve` and inside the Electron app.
 */
import { homedir, userInfo } from 'node:os';
import { join } from 'node:path';
import { Server, type Address } from '../ninep/index.js';
import { listen, type Listener } from '../ninep/node.js';
import { EventBus } from './event/bus.js';
import { olliesrvNamespace } from './fs/spec.js';
import { Sessions } from './session/registry.js';
import { openDatabase, type DB } from './store/db.js';
import { SessionStore } from './store/sessions.js';

export interface DaemonOptions {
  /** Unix socket path. */
  socket: string;
  /** Also serve TCP, e.g. { kind: 'tcp', host: '127.0.0.1', port: 5640 }. */
  tcp?: Address & { kind: 'tcp' };
  dataDir: string;
  configDir: string;
  log?: (msg: string) => void;
}

export interface Daemon {
  readonly addresses: Address[];
  readonly server: Server<unknown>;
  readonly sessions: Sessions;
  readonly bus: EventBus;
  close(): Promise<void>;
}

export async function startDaemon(opts: DaemonOptions): Promise<Daemon> {
  const log = opts.log ?? ((m: string) => process.stderr.write(`olliesrv: ${m}\n`));
  const db: DB = openDatabase(join(opts.dataDir, 'ollie.db'));
  const listeners: Listener[] = [];
  try {
    const bus = new EventBus();
    const sessions = new Sessions(new SessionStore(db), bus, homedir());
    const ns = olliesrvNamespace({ sessions, bus, backends: () => [] }, userInfo().username);
    const server = new Server({ fs: ns, onProtocolError: (m) => log(`closed a connection: ${m}`) });
    listeners.push(await listen(server, { kind: 'unix', path: opts.socket }));
    if (opts.tcp) {
      if (!['127.0.0.1', '::1', 'localhost'].includes(opts.tcp.host)) {
        log(`warning: serving 9P without authentication on ${opts.tcp.host}, reachable beyond this machine`);
      }
      listeners.push(await listen(server, opts.tcp));
    }
    let closed = false;
    return {
      addresses: listeners.map((l) => l.address),
      server: server as Server<unknown>,
      sessions,
      bus,
      async close() {
        if (closed) return;
        closed = true;
        // Connections first: a listening socket only finishes closing once its connections have.
        server.close();
        await Promise.all(listeners.map((l) => l.close()));
        sessions.save();
        db.close();
      },
    };
  } catch (e) {
    await Promise.all(listeners.map((l) => l.close()));
    db.close();
    throw e;
  }
}
