/**
 * olliesrv as a whole: the store, the sessions, the event bus and the namespace, served over 9P on a
 * private Unix socket (and TCP when asked). Runs the same under `ollie serve` and inside the Electron app.
 */
import { EVENTS } from '../formats/olliesrv.js';
import { homedir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { Server, tokenAuth, type Address } from '../ninep/index.js';
import { listen, type Listener } from '../ninep/node.js';
import { cacheDir, shippedDataDir, spillRoot } from '../platform/paths.js';
import { ToolCache } from './agent/toolcache.js';
import type { BackendPool } from './agent/deps.js';
import { Profiles } from './agent/profiles.js';
import { Backends } from './backend/pool.js';
import { EventBus } from './event/bus.js';
import { olliesrvNamespace } from './fs/spec.js';
import { Agents } from './session/agents.js';
import { Sessions } from './session/registry.js';
import { Workflows } from './session/workflows.js';
import { ConfigFiles } from './config/files.js';
import { Checkpoints } from './checkpoint/service.js';
import { AgentStore } from './store/agents.js';
import { openDatabase, type DB } from './store/db.js';
import { SessionStore } from './store/sessions.js';
import { BypassRuleStore } from './store/bypass.js';
import type { SessionTools } from './toolclient/host.js';
import { ToolsrvSessionTools } from './toolclient/session-tools.js';
import { ToolsrvKeeper, type ToolsrvProcess } from './toolclient/spawn.js';
import { SessionRemotes } from './toolclient/remotes.js';
import { sshSettingsFromEnv } from './toolclient/remote.js';
import { SkillMatcher, type SkillMatcherOptions } from './skills/matcher.js';
import { Principals, type Origin, type Principal } from './auth/principals.js';
import { confinedPids } from './auth/confined.js';
import { peerCredentials, peerCredentialsUnavailable } from '../platform/peercred.js';
import { rmSync, writeFileSync } from 'node:fs';
import { Hooks } from './hooks/hooks.js';
import { notificationHooks } from './hooks/agent.js';
import { McpMirror } from './mcp/mirror.js';

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
  /**
   * How sessions get their toolsrv: spawned (the default; `shared` = one for all sessions, `yolo` = no sandbox,
   * `toolDirs` = extra tool directories), or `false` for none (agents then run without tools).
   */
  toolsrv?:
    false | { shared?: boolean; yolo?: boolean; toolDirs?: string[]; spare?: boolean | Promise<ToolsrvProcess> };
  /**
   * Skills and tool hints matched to each user prompt (src/olliesrv/skills): on by default, with the config dir's
   * embedding.conf and skills/; `false` turns matching off. Tests point `modelsDir`/`shippedDir` elsewhere.
   */
  skills?: false | Omit<SkillMatcherOptions, 'configDir' | 'log'>;
  /** Where tool schemas are remembered between runs ($XDG_CACHE_HOME/ollie/tools.json); false: not at all. */
  toolCacheFile?: string | false;
  /** Overrides the LLM retry policy (tests use short waits). */
  retryDelay?: (err: unknown, attempt: number) => number | null;
}

export interface Daemon {
  readonly addresses: Address[];
  /** Who may connect as what (tokens for agents, sessions and TCP owners). */
  readonly principals: Principals;
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
    const sessions = new Sessions(new SessionStore(db), bus, homedir(), log);
    // Filled in below, once the agents exist: whether a token's session or agent still does.
    let exists: (p: Principal) => boolean = () => false;
    const principals = new Principals({
      uid: process.getuid?.() ?? -1,
      uname: userInfo().username,
      confinedRoots: confinedPids,
      exists: (p) => exists(p),
    });
    const config = new ConfigFiles({
      configDir: opts.configDir,
      dataDir: opts.dataDir,
      env,
      profiles,
      reloadBackends: () => backends.reload(),
      yolo: opts.toolsrv ? opts.toolsrv.yolo : undefined,
    });
    const sessionTools = new Map<string, SessionTools>();
    const opening = new Map<string, Promise<SessionTools | undefined>>();
    const ts = opts.toolsrv === false ? undefined : (opts.toolsrv ?? {});
    if (ts?.yolo)
      log('WARNING: --yolo: tools, prompt commands and workflows run WITHOUT the sandbox, with all of your rights');
    else if (ts) void config.sandboxStatus().then((st) => log(st.summary));
    const remotes = new SessionRemotes(db, bus, env.OLLIE_SSH_CONFIG ?? join(homedir(), '.ssh', 'config'));
    const keeper =
      ts &&
      new ToolsrvKeeper({
        runtimeDir: dirname(opts.socket),
        remoteOf: (sid) => remotes.get(sid),
        ssh: sshSettingsFromEnv(env),
        shared: ts.shared,
        spare: ts.spare ?? false,
        yolo: ts.yolo,
        // Extra directories come before the config's and the shipped ones, not instead of them (toolsrv takes a list
        // it is given as the whole list), in the order the tool cache below reads them.
        toolDirs: ts.toolDirs && [...ts.toolDirs, join(opts.configDir, 'tools'), join(shippedDataDir(), 'tools')],
        configDir: opts.configDir,
        dataDir: opts.dataDir,
        ollieAddr: `unix!${opts.socket}`,
        log,
      });
    const rules = new BypassRuleStore(db, log);
    const promptCommands = {
      configDir: opts.configDir,
      dataDir: opts.dataDir,
      runtimeDir: dirname(opts.socket),
      env: Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => typeof e[1] === 'string')),
      yolo: ts?.yolo === true,
    };
    const hooks = new Hooks({
      configDir: opts.configDir,
      run: promptCommands,
      bus,
      log,
      offFile: join(opts.dataDir, 'hooks-off'),
    });
    const mcp = new McpMirror(log);
    const agentStore = new AgentStore(db);
    /** The session's toolsrv, started on first use; a dead one is replaced on the next use. */
    let closed = false;
    const toolsFor = (sid: string): Promise<SessionTools | undefined> => {
      if (!keeper) return Promise.resolve(undefined);
      if (closed) return Promise.reject(new Error('olliesrv is shutting down'));
      let p = opening.get(sid);
      if (!p) {
        p = (async () => {
          // A lease, not one process: a toolsrv that dies is replaced on next use and the agents keep their hosts.
          const lease = keeper.lease(sid);
          const st = await ToolsrvSessionTools.open({
            toolsrv: lease.address,
            sessionId: sid,
            rules,
            onClose: lease.release,
            log,
            localEnv: env,
            onState: (up, host, why) =>
              bus.publish(
                `session.${sid}.tools`,
                `${up ? 'connected' : 'disconnected'} ${host ?? '-'}${why ? ` ${why}` : ''}`,
              ),
          });
          st.onBypass((e) => {
            if (e.kind === 'request') {
              const topic = `session.${sid}.agent.${e.req.agent}.bypass.request`;
              bus.publish(
                topic,
                EVENTS.payload(topic, { id: e.req.id, cmd: e.req.cmd, cwd: e.req.cwd, tool: e.req.tool }),
              );
              // Once a remembered approval had its chance (it answers at once): only a request left for a person notifies.
              setImmediate(
                () =>
                  st.pending().some((r) => r.id === e.req.id) &&
                  void notificationHooks(
                    agents.all().find((a) => a.id === e.req.agent),
                    `Ollie needs your approval to run ${e.req.cmd}: ${e.req.reason}`,
                  ),
              );
            } else {
              const topic = `session.${sid}.agent.${e.agent}.bypass.resolved`;
              bus.publish(
                topic,
                EVENTS.payload(topic, {
                  id: e.id,
                  decision: e.approved ? 'approved' : e.cancelled ? 'cancelled' : 'denied',
                }),
              );
            }
          });
          sessionTools.set(sid, st);
          mcp.follow(sid, st);
          return st;
        })();
        opening.set(sid, p);
        p.catch(() => opening.delete(sid));
      }
      return p;
    };
    // Where tools run, their writable roots are checkpointed around each round that can write.
    const checkpoints = ts
      ? new Checkpoints({
          configDir: opts.configDir,
          dataDir: opts.dataDir,
          runtimeDir: dirname(opts.socket),
          store: agentStore,
          log,
          local: (a) => remotes.get(a.sessionId) === undefined,
        })
      : undefined;
    const skills =
      opts.skills === false ? undefined : new SkillMatcher({ ...opts.skills, configDir: opts.configDir, log });
    const agents = new Agents(
      sessions,
      {
        store: agentStore,
        ...(checkpoints && { checkpoints }),
        bus,
        backends: pool,
        profiles,
        tools: toolsFor,
        remoteSession: (sid) => remotes.get(sid) !== undefined,
        ...(ts &&
          opts.toolCacheFile !== false && {
            toolCache: new ToolCache(opts.toolCacheFile ?? join(cacheDir(), 'tools.json'), [
              ...(ts.toolDirs ?? []),
              join(opts.configDir, 'tools'),
              join(shippedDataDir(), 'tools'),
            ]),
          }),
        ...(skills && { enrich: (r) => skills.enrich(r), skills }),
        retryDelay: opts.retryDelay,
        token: (sid, aid) => principals.agentToken(sid, aid),
        outputDir: spillRoot(opts.dataDir),
        baseEnv: Object.fromEntries(
          Object.entries({ ...env, OLLIE_DATA: shippedDataDir(), OLLIE_CONFIG: opts.configDir }).filter(
            (e): e is [string, string] => typeof e[1] === 'string',
          ),
        ),
        promptCommands,
        hooks,
        log,
      },
      () => config.defaultProfile(),
    );
    const workflows = new Workflows({
      dirs: [join(opts.configDir, 'workflows'), join(shippedDataDir(), 'workflows')],
      addr: `unix!${opts.socket}`,
      binDir: join(dirname(opts.socket), 'bin'),
      cliDir: join(shippedDataDir(), '..', 'dist', 'cli'),
      sessions,
      token: (sid) => principals.sessionToken(sid),
      log,
      sandbox: {
        configDir: opts.configDir,
        dataDir: opts.dataDir,
        runtimeDir: dirname(opts.socket),
        yolo: ts?.yolo === true,
      },
    });
    exists = (p) => {
      if (p.kind === 'owner') return true;
      if (!sessions.has(p.session) || sessions.get(p.session).id !== p.session) return false;
      if (p.kind === 'session') return true;
      try {
        return agents.find(p.session, p.agent).id === p.agent;
      } catch {
        return false;
      }
    };
    sessions.hooks = {
      goal: (s) => workflows.start(s),
      kill: (id) => {
        workflows.stop(id);
        agents.dropSession(id);
        hooks.forget(id);
        checkpoints?.forgetSession(id);
        const st = sessionTools.get(id);
        remotes.forget(id);
        sessionTools.delete(id);
        mcp.forget(id);
        opening.delete(id);
        void st?.close().catch(() => undefined);
      },
      paused: (id, p) => agents.sessionPaused(id, p),
    };
    // A session moved to another host: its connections follow (each reconnects to the new host's toolsrv).
    remotes.onMove((sid) => (sessionTools.get(sid) as ToolsrvSessionTools | undefined)?.reconnect());
    agents.restore();
    const reload = (): string => {
      const err = backends.reload();
      if (err) throw err;
      return backends.path
        ? `reloaded ${backends.path}: ${backends.names().join(', ')}\n`
        : `no ${join(opts.configDir, 'backends.conf')}: no backend configured\n`;
    };
    const ns = olliesrvNamespace(
      {
        sessions,
        agents,
        bus,
        backends: pool,
        profiles,
        workflows,
        config,
        sessionTools: (sid) => sessionTools.get(sid),
        rules,
        remotes,
        reload,
        hooks,
        mcp,
        ...(checkpoints && { checkpoints }),
      },
      userInfo().username,
    );
    const server = new Server({
      fs: ns,
      auth: tokenAuth(),
      authorize: (req) => principals.authorize(req),
      onProtocolError: (m) => log(`closed a connection: ${m}`),
    });
    const noPeers = peerCredentialsUnavailable();
    // Fails closed: without peer credentials nobody can be told from a tool, so nobody is the owner there.
    if (noPeers) log(`cannot tell who connects to ${opts.socket}: ${noPeers}; every connection there will be refused`);
    listeners.push(
      await listen(
        server,
        { kind: 'unix', path: opts.socket },
        {
          origin: (sock): Origin => {
            const peer = peerCredentials(sock);
            return 'error' in peer ? principals.unixOrigin(undefined, peer.error) : principals.unixOrigin(peer);
          },
          onRefused: (m) => log(m),
        },
      ),
    );
    // The default provider's SDK takes ~100 ms to load; load it now, while clients connect, not in the first turn.
    if (backends.names().length > 0) void backends.default.prepare?.();
    else
      log(
        `no LLM backend configured (no ${join(opts.configDir, 'backends.conf')}): set one up in the GUI's Settings or with \`ollie setup\``,
      );
    // Skills and the embedding model too (the log then says whether matching uses embeddings or BM25).
    void skills?.method().catch((e: unknown) => log(`skills: ${(e as Error).message}`));
    let tokenFile: string | undefined;
    if (opts.tcp) {
      // Over TCP nothing says who connects: every client must present the owner token, which only the owner
      // can read (0600 in the private runtime directory).
      tokenFile = join(dirname(opts.socket), 'owner.token');
      rmSync(tokenFile, { force: true });
      writeFileSync(tokenFile, `${principals.ownerToken}\n`, { mode: 0o600, flag: 'wx' });
      const l = await listen(server, opts.tcp, {
        origin: (sock): Origin => ({ kind: 'tcp', remote: `${sock.remoteAddress}:${sock.remotePort}` }),
        onRefused: (m) => log(m),
      });
      listeners.push(l);
      const where = l.address.kind === 'tcp' ? `${l.address.host}:${l.address.port}` : '';
      const beyond = !['127.0.0.1', '::1', 'localhost'].includes(opts.tcp.host);
      log(
        `9P on tcp!${where}${beyond ? ' (reachable beyond this machine)' : ''} exposes the whole namespace to clients presenting the owner token in ${tokenFile}; others are refused`,
      );
    }
    return {
      addresses: listeners.map((l) => l.address),
      principals,
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
        workflows.close();
        mcp.close();
        await Promise.all(listeners.map((l) => l.close()));
        await Promise.all(agents.all().map((a) => a.kill()));
        hooks.close();
        // The keeper first: it stops the toolsrvs, and one still starting is stopped as soon as it is up
        // instead of being waited for.
        const keeperClosed = keeper?.close();
        // A session's toolsrv connection may still be opening (a first turn does not wait for it): let it
        // settle, so that it is closed below rather than left open behind a closed daemon.
        await Promise.allSettled([...opening.values()]);
        await Promise.all([...sessionTools.values()].map((t) => t.close().catch(() => undefined)));
        await keeperClosed;
        sessions.save();
        db.close();
        if (tokenFile) rmSync(tokenFile, { force: true });
      },
    };
  } catch (e) {
    await Promise.all(listeners.map((l) => l.close()));
    db.close();
    throw e;
  }
}
