/**
 * The remote tests' fixtures: the loopback sshd (src/devtools/sshd.ts, which bench/remote.mjs uses too) and the
 * daemons the tests reach through it or run tools through it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, vi } from 'vitest';
import { startMockLlm, type MockLlm } from '../../src/devtools/mock-llm/server.js';
import { startSshd, type Sshd } from '../../src/devtools/sshd.js';
import type { Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import type { Agent } from '../../src/olliesrv/agent/agent.js';
import { startDaemon, type Daemon } from '../../src/olliesrv/daemon.js';
import { mockBackends, rmrf, socketPath, tempDir } from '../../e2e/helpers.js';

export { startSshd, sshdAvailable, type Sshd } from '../../src/devtools/sshd.js';

/**
 * A daemon to attach to, and nothing more: no model (its one backend answers nothing), no toolsrv, no skills. Its
 * config and data go under `base`.
 */
export function startBareDaemon(base: string, socket: string): Promise<Daemon> {
  mkdirSync(join(base, 'config'), { recursive: true });
  writeFileSync(
    join(base, 'config', 'backends.conf'),
    '[default]\nbackend = none\n\n[none]\ntype = openai\nurl = http://127.0.0.1:9/v1\nkey = x\nmodel = m\n',
  );
  return startDaemon({
    socket,
    dataDir: join(base, 'data'),
    configDir: join(base, 'config'),
    toolsrv: false,
    skills: false,
    toolCacheFile: false,
    log: () => undefined,
  });
}

/** Another machine to attach to: a loopback sshd, and a bare daemon "there" on the remote user's default socket. */
export interface SshHost {
  sshd: Sshd;
  daemon: Daemon;
  /** The daemon's socket: the default for sshd's sessions (their XDG_RUNTIME_DIR is remoteHome/run). */
  socket: string;
}

/**
 * The other machine for a describe block (or a file): started in its beforeAll, closed in its afterAll. With `env`,
 * $OLLIE_SSH_CONFIG names the sshd's client config in this process meanwhile, for what runs ssh from the test's own
 * process (the web UI's server, bridgeToDaemon).
 */
export function useSshHost(o: { host?: string; env?: boolean } = {}): SshHost {
  const h = {} as SshHost;
  beforeAll(async () => {
    h.sshd = await startSshd({ host: o.host });
    if (o.env) vi.stubEnv('OLLIE_SSH_CONFIG', h.sshd.sshConfig);
    h.socket = join(h.sshd.remoteHome, 'run', 'ollie', 'ollie.sock');
    h.daemon = await startBareDaemon(join(h.sshd.dir, 'there'), h.socket);
  }, 30_000);
  afterAll(async () => {
    await h.daemon?.close();
    await h.sshd?.stop();
    if (o.env) vi.unstubAllEnvs();
  });
  return h;
}

/**
 * A daemon here whose sessions may run their tools on the sshd's host (a session made with `remote=${sshd.host}`):
 * the mock LLM as its model, an `e2e` agent profile with shell loaded, the test's ssh config as $OLLIE_SSH_CONFIG,
 * and a HOME of its own (`local`) apart from the remote user's, so that what happened there is told apart from here.
 */
export interface RemoteRig {
  sshd: Sshd;
  mock: MockLlm;
  /** The temp dir: config, data, the daemon's socket and HOME. */
  dir: string;
  /** The daemon's HOME (dir/local). */
  local: string;
  sock: string;
  /** The daemon, and a 9P client of its owner's (new ones after restart()). */
  daemon: Daemon;
  c: Client;
  /** The agent behind a 9P agent path (session/S/agent/A). */
  agent(path: string): Promise<Agent>;
  /** Makes session `name` on the sshd's host, working in `cwd` there, with agent `coder` (profile e2e). */
  remoteSession(name: string, cwd: string): Promise<void>;
  /** Closes the client and the daemon and starts both again, on the same config and data. */
  restart(): Promise<void>;
}

/**
 * The rig for a describe block: started in its beforeAll (its fields are there from then), closed in its afterAll.
 * `log` gets the daemon's log (default: stderr with $OLLIE_TEST_LOG, else nowhere).
 */
export function useRemoteRig(o: { prefix: string; log?: (m: string) => void }): RemoteRig {
  const r = {} as RemoteRig;
  const start = async (): Promise<void> => {
    r.daemon = await startDaemon({
      socket: r.sock,
      dataDir: join(r.dir, 'data'),
      configDir: join(r.dir, 'config'),
      skills: false,
      toolCacheFile: false,
      env: { ...process.env, HOME: r.local, OLLIE_SSH_CONFIG: r.sshd.sshConfig },
      log: o.log ?? ((m) => void (process.env.OLLIE_TEST_LOG && process.stderr.write(`olliesrv: ${m}\n`))),
      retryDelay: () => 10,
    });
    r.c = await dial(`unix!${r.sock}`, { uname: userInfo().username });
  };
  beforeAll(async () => {
    [r.sshd, r.mock] = await Promise.all([startSshd(), startMockLlm()]);
    r.dir = tempDir(o.prefix);
    r.local = join(r.dir, 'local');
    mkdirSync(r.local);
    mkdirSync(join(r.dir, 'config', 'agents'), { recursive: true });
    writeFileSync(join(r.dir, 'config', 'backends.conf'), mockBackends(r.mock.url));
    writeFileSync(
      join(r.dir, 'config', 'agents', 'e2e.json'),
      JSON.stringify({ description: 'e2e agent', prompt: 'You are a test agent.', autoLoad: ['shell'], maxSteps: 20 }),
    );
    r.sock = socketPath(r.dir);
    await start();
  }, 60_000);
  afterAll(async () => {
    r.c?.close();
    await r.daemon?.close();
    await r.mock?.close();
    await r.sshd?.stop();
    rmrf(r.dir);
  });
  r.agent = async (path) => {
    const aid = (await r.c.readText(`${path}/id`)).trim();
    return r.daemon.agents.all().find((a) => a.id === aid)!;
  };
  r.remoteSession = async (name, cwd) => {
    await r.c.rdwrText('session/new', `name=${name} cwd=${cwd} remote=${r.sshd.host}`);
    await r.c.rdwrText(`session/${name}/agent/new`, 'name=coder agent=e2e backend=mock');
  };
  r.restart = async () => {
    r.c.close();
    await r.daemon.close();
    await start();
  };
  return r;
}
