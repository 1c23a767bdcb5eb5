/**
 * olliesrv as a whole: the store, the sessions, the event bus and the namespace, served over 9P on a
 * private Unix socket (and TCP when asked). Runs the same under `ollie serve` and inside the Electron app.
 */
import { homedir, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { Server, type Address } from '../ninep/index.js';
import { listen, type Listener } from '../ninep/node.js';
import { shippedDataDir } from '../platform/paths.js';
import type { BackendPool } from './agent/deps.js';
import { Profiles } from './agent/profiles.js';
import { Backends } from './backend/pool.js';
import { EventBus } from './event/bus.js';
import { olliesrvNamespace } from './fs/spec.js';
import { Agents } from './session/agents.js';
import { Sessions } from './session/registry.js';
import { AgentStore } from './store/agents.js';
import { openDatabase, type DB } from './store/db.js';
import { SessionStore } from './store/sessions.js';
import type { SessionTools } from './toolclient/host.js';

export interface DaemonOptions {
  /** Unix socket path. */
  socket: string;
  /** Also serve TCP, e.g. { kind: 'tcp', host: '127.0.0.1', port: 5640 }. */
  tcp?: Address & { kind: 'tcp' };
  dataDir: string;
  configDir: string;
  log?: (msg: string) => void;
  /** Environment for `key = env:NAME` in backends.conf and for prompt commands; process.env by default. */
  env?: NodeJS.ProcessEnv;
  /** The toolsrv of a session; without it agents run with no tools. */
  tools?: (sessionId: string) => Promise<SessionTools | undefined>;
}

export interface Daemon {
  readonly addresses: Address[];
  readonly server: Server<unknown>;
  readonly sessions: Sessions;
  readonly agents: Agents;
  readonly backends: Backends;
  readonly bus: EventBus;
  close(): Promise<void>;
}

export async function startDaemon(opts: DaemonOptions): Promise<Daemon> {
  const log = opts.log ?? ((m: string) => process.stderr.write(`olliesrv: ${m}\n`));
  const db: DB = openDatabase(join(opts.dataDir, 'ollie.db'));
  const listeners: Listener[] = [];
  try {
    const env = opts.env ?? process.env;
    const bus = new EventBus();
    const backends = new Backends({ configDir: opts.configDir, env });
    const pool: BackendPool = {
      names: () => backends.names(),
      get defaultName() {
        return backends.defaultBackendName;
      },
      get: (name) => backends.get(name),
    };
    const profiles = new Profiles([join(shippedDataDir(), 'agents'), join(opts.configDir, 'agents')]);
    const sessions = new Sessions(new SessionStore(db), bus, homedir());
    const sessionTools = new Map<string, SessionTools>();
    const agents = new Agents(sessions, {
      store: new AgentStore(db),
      bus,
      backends: pool,
      profiles,
      tools: async (sid) => {
        const st = await opts.tools?.(sid);
        if (st) sessionTools.set(sid, st);
        return st;
      },
      outputDir: join(tmpdir(), `ollie-${userInfo().uid}`, 'output'),
      baseEnv: Object.fromEntries(
        Object.entries({ ...env, OLLIE_DATA: shippedDataDir(), OLLIE_CONFIG: opts.configDir }).filter((e): e is [string, string] => typeof e[1] === 'string'),
      ),
      log,
    });
    sessions.hooks = { kill: (id) => agents.dropSession(id), paused: (id, p) => agents.sessionPaused(id, p) };
    agents.restore();
    const reload = (): string => {
      const err = backends.reload();
      if (err) throw err;
      return `reloaded ${backends.path ?? 'the built-in default'}: ${backends.names().join(', ')}\n`;
    };
    const ns = olliesrvNamespace(
      { sessions, agents, bus, backends: pool, profiles, sessionTools: (sid) => sessionTools.get(sid), reload },
      userInfo().username,
    );
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
      agents,
      backends,
      bus,
      async close() {
        if (closed) return;
        closed = true;
        // Connections first: a listening socket only finishes closing once its connections have.
        server.close();
        await Promise.all(listeners.map((l) => l.close()));
        await Promise.all(agents.all().map((a) => a.kill()));
        await Promise.all([...sessionTools.values()].map((t) => t.close().catch(() => undefined)));
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
