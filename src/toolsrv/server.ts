/**
 * toolsrv served: the Core behind its namespace, on a private Unix socket, every attach authenticated with
 * the shared secret. Tracks connections for the idle rule (see main.ts). Used by main.ts and, in-process, by
 * tests that do not need the process around it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { Server, sharedSecretAuth } from '../ninep/index.js';
import { prepareUnixSocket, socketChannel } from '../ninep/node.js';
import { configDir, dataDir } from '../platform/paths.js';
import { Core } from './core.js';
import { Confinement } from './exec/confine.js';
import { Launcher } from '../platform/launcher.js';
import { toolsrvNamespace } from './fs/spec.js';

/** The shipped tools: data/tools of the installation (two levels above src/toolsrv or dist/toolsrv). */
export const SHIPPED_TOOLS = join(dirname(dirname(dirname(fileURLToPath(import.meta.url)))), 'data', 'tools');

export interface ToolsrvOptions {
  socket: string;
  secret: string;
  /** Tool directories, highest precedence first. Default: $XDG_CONFIG_HOME/ollie/tools, then the shipped data/tools. */
  toolDirs?: string[];
  cwd?: string;
  /** Ollie's config and data dirs (default: the XDG ones): the user's tools and policy, and what tools are denied. */
  configDir?: string;
  dataDir?: string;
  /** Directories no tool may write (PolicyContext.sealed): a remote toolsrv's package cache. */
  sealed?: string[];
  yolo?: boolean;
  sessionId?: string;
  ollieAddr?: string;
  procTtlMs?: number;
  /** Resident tool hosts stop after this long without a call (default 10 minutes). */
  hostIdleMs?: number;
  /** The sandbox module to load (tests point it elsewhere); default src/toolsrv/sandbox. */
  sandboxModule?: string;
  /** Environment tools start from; default toolsrv's own. */
  baseEnv?: Record<string, string>;
  /** false: start tool processes with Node's spawn even where native/build/ollie-spawner is built. */
  spawner?: false;
  log?: (m: string) => void;
}

export interface Toolsrv {
  readonly core: Core;
  readonly socket: string;
  /** Open connections. */
  connections(): number;
  /** Called with the count whenever a connection opens or closes. */
  onConnections?: (n: number) => void;
  close(): Promise<void>;
}

export async function startToolsrv(o: ToolsrvOptions): Promise<Toolsrv> {
  const log = o.log ?? ((m: string) => process.stderr.write(`toolsrv: ${m}\n`));
  // A private tmp for the tools: the sandbox policy's {TMPDIR}, removed when toolsrv ends.
  const tmpDir = mkdtempSync(join(tmpdir(), 'ollie-tools-'));
  const dirs = { configDir: o.configDir ?? configDir(), dataDir: o.dataDir ?? dataDir() };
  const toolDirs = o.toolDirs ?? [join(dirs.configDir, 'tools'), SHIPPED_TOOLS];
  const confinement = await Confinement.create({
    yolo: !!o.yolo,
    toolDirs,
    log,
    ...(o.sandboxModule && { module: o.sandboxModule }),
    // The runtime dir the sandbox denies is where our socket (and, as olliesrv places it, the Ollie socket) lives.
    dirs: { ...dirs, home: homedir(), runtimeDir: dirname(o.socket), tmpDir, ...(o.sealed && { sealed: o.sealed }) },
  });
  // Tool processes start from the fork server when it is built (it is wherever the sandbox helper is).
  const launcher = Launcher.create({ native: o.spawner !== false });
  const baseEnv =
    o.baseEnv ??
    (Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined)) as Record<string, string>);
  const core = new Core({
    toolDirs,
    cwd: o.cwd ?? process.cwd(),
    confinement,
    baseEnv: { ...baseEnv, TMPDIR: tmpDir },
    ...(o.sessionId && { sessionId: o.sessionId }),
    ...(o.ollieAddr && { ollieAddr: o.ollieAddr }),
    ...(o.procTtlMs !== undefined && { procTtlMs: o.procTtlMs }),
    ...(o.hostIdleMs !== undefined && { hostIdleMs: o.hostIdleMs }),
    launcher,
    mcp: { configDir: dirs.configDir },
    log,
  });
  const server = new Server({
    fs: toolsrvNamespace(core, userInfo().username),
    auth: sharedSecretAuth(o.secret),
    onProtocolError: (m) => log(`closed a connection: ${m}`),
  });
  await prepareUnixSocket(o.socket);
  let open = 0;
  const ts: Toolsrv = {
    core,
    socket: o.socket,
    connections: () => open,
    async close() {
      core.close();
      server.close();
      await new Promise<void>((r) => ns.close(() => r()));
      rmSync(o.socket, { force: true });
      rmSync(tmpDir, { recursive: true, force: true });
    },
  };
  const ns = net.createServer((sock) => {
    open++;
    ts.onConnections?.(open);
    sock.once('close', () => {
      open--;
      ts.onConnections?.(open);
    });
    server.serve(socketChannel(sock));
  });
  // The socket is born 0600: no window in which another user could connect.
  const umask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      ns.once('error', reject);
      ns.listen(o.socket, resolve);
    });
  } catch (e) {
    core.close();
    rmSync(tmpDir, { recursive: true, force: true });
    throw e;
  } finally {
    process.umask(umask);
  }
  return ts;
}
