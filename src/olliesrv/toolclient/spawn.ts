/**
 * Starting toolsrv: `node dist/toolsrv/main.js` with a pipe on its stdin that carries a fresh secret (the
 * first line) and then stays open, so toolsrv sees EOF and exits when we die, however we die. A toolsrv left
 * by an earlier olliesrv (its pid file names it) is killed first. One per session by default; the keeper's
 * `shared` mode runs one per host, so that path locks hold across sessions.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ToolsrvAddress } from './client.js';
import { handshakeToolsrv } from './handshake.js';
import { parseRemote, spawnRemoteToolsrv, type SshSettings } from './remote.js';

/** The built entry point: dist/toolsrv/main.js of this installation (whether we run from src or dist). */
export const TOOLSRV_ENTRY = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  '..',
  'dist',
  'toolsrv',
  'main.js',
);

export interface SpawnOptions {
  /** Private directory for the socket and the pid file ($XDG_RUNTIME_DIR/ollie). */
  runtimeDir: string;
  /** Names the socket and pid file: the session id, or 'shared'. */
  name: string;
  yolo?: boolean;
  sessionId?: string;
  /** The Ollie socket address, handed to tools as OLLIE_ADDR. */
  ollieAddr?: string;
  cwd?: string;
  toolDirs?: string[];
  /**
   * Ollie's config and data dirs when not the XDG defaults (`ollie serve --config/--data`): toolsrv reads the
   * user's tools and policy there, and denies them to tools like the defaults.
   */
  configDir?: string;
  dataDir?: string;
  idleMs?: number;
  graceMs?: number;
  procTtlMs?: number;
  entry?: string;
  /** How long to wait for `ready` (default 10 s). */
  startTimeoutMs?: number;
  log?: (m: string) => void;
}

export interface ToolsrvProcess extends ToolsrvAddress {
  readonly pid: number;
  readonly pidFile: string;
  readonly child: ChildProcess;
  /** Resolves when the process has exited. */
  readonly exited: Promise<void>;
  readonly alive: boolean;
  /** Closes the pipe (toolsrv exits and kills its procs); SIGKILL if it has not exited within `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether `pid` runs toolsrv (so a recycled pid of an unrelated process is never killed). */
function isToolsrv(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('toolsrv');
  } catch {
    // No /proc (macOS): trust the pid file, which only toolsrv writes and removes on exit.
    return process.platform !== 'linux';
  }
}

/** Kills the toolsrv named by `pidFile`, if it still runs. Returns whether one was killed. */
export async function killStale(pidFile: string, log: (m: string) => void = () => undefined): Promise<boolean> {
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').trim());
  } catch {
    return false;
  }
  rmSync(pidFile, { force: true });
  if (!Number.isInteger(pid) || pid <= 1 || !processAlive(pid) || !isToolsrv(pid)) return false;
  log(`killing stale toolsrv ${pid} (from ${pidFile})`);
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 40 && processAlive(pid); i++) await new Promise((r) => setTimeout(r, 50));
  if (processAlive(pid)) process.kill(pid, 'SIGKILL');
  return true;
}

export async function spawnToolsrv(o: SpawnOptions): Promise<ToolsrvProcess> {
  const log = o.log ?? ((m: string) => process.stderr.write(`olliesrv: ${m}\n`));
  mkdirSync(o.runtimeDir, { recursive: true, mode: 0o700 });
  const socket = join(o.runtimeDir, `toolsrv-${o.name}.sock`);
  const pidFile = join(o.runtimeDir, `toolsrv-${o.name}.pid`);
  // sun_path holds 108 bytes with its NUL; a longer path would fail later with a less helpful error.
  if (Buffer.byteLength(socket) > 107)
    throw new Error(
      `toolsrv socket path too long for a Unix socket (${Buffer.byteLength(socket)} > 107 bytes): ${socket}`,
    );
  await killStale(pidFile, log);
  rmSync(socket, { force: true });
  const secret = randomBytes(32).toString('hex');
  const args = [o.entry ?? TOOLSRV_ENTRY, '--socket', socket, '--pid-file', pidFile];
  if (o.yolo) args.push('--yolo');
  if (o.sessionId) args.push('--session', o.sessionId);
  if (o.ollieAddr) args.push('--ollie-addr', o.ollieAddr);
  if (o.cwd) args.push('--cwd', o.cwd);
  for (const d of o.toolDirs ?? []) args.push('--tools-dir', d);
  if (o.configDir) args.push('--config-dir', o.configDir);
  if (o.dataDir) args.push('--data-dir', o.dataDir);
  if (o.idleMs !== undefined) args.push('--idle-ms', String(o.idleMs));
  if (o.graceMs !== undefined) args.push('--grace-ms', String(o.graceMs));
  if (o.procTtlMs !== undefined) args.push('--proc-ttl-ms', String(o.procTtlMs));
  // Inside Electron, execPath is the Electron binary: ELECTRON_RUN_AS_NODE makes it plain Node for this child only.
  const env = process.versions.electron ? { ...process.env, ELECTRON_RUN_AS_NODE: '1' } : process.env;
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'], env });
  const started = await handshakeToolsrv(child, {
    secret,
    timeoutMs: o.startTimeoutMs ?? 10000,
    log,
    timeoutMessage: `toolsrv did not start within ${o.startTimeoutMs ?? 10000} ms`,
    spawnError: (e) => e,
    exitMessage: (code, errTail) => `toolsrv exited during start (code ${code}): ${errTail.trim()}`,
  });
  return {
    socket,
    secret,
    pidFile,
    child,
    exited: started.exited,
    pid: child.pid!,
    get alive() {
      return started.alive;
    },
    stop: (graceMs?: number) => started.stop(graceMs),
  };
}

/**
 * The toolsrv processes of an olliesrv: one per session, or one shared by all (`shared`). A process that died
 * is replaced on the next acquire; a shared one stops when its last session releases it.
 */
const SPARE_DELAY_MS = 2000;

/** Pauses between attempts to reach a remote host that failed: 0.5 s doubling up to 30 s. */
const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 30000;

export interface KeeperOptions extends Omit<SpawnOptions, 'name' | 'sessionId'> {
  shared?: boolean;
  spare?: boolean | Promise<ToolsrvProcess>;
  /** The session's remote host (`[user@]host[:port]`), or undefined for this machine. */
  remoteOf?: (sessionId: string) => string | undefined;
  /** How ssh is run for remote hosts. */
  ssh?: SshSettings;
}

export class ToolsrvKeeper {
  private readonly running = new Map<string, { proc: Promise<ToolsrvProcess>; users: number }>();
  /** Remote hosts that failed: how often in a row, and not before when to try again. */
  private readonly failing = new Map<string, { count: number; until: number; why: string }>();
  /** A toolsrv started ahead of need, taken by the next session (its session id is set per scope with `env`). */
  private spare?: Promise<ToolsrvProcess>;
  private closed = false;

  /**
   * @param opts.spare keep one toolsrv started ahead of need, so a new session's first prompt does not wait the
   *   ~150 ms a toolsrv takes to start (per-session mode only); a promise hands over one its caller already started
   */
  constructor(private readonly opts: KeeperOptions) {
    if (opts.spare instanceof Promise) {
      const p = opts.spare;
      this.spare = p;
      p.catch(() => {
        if (this.spare === p) this.spare = undefined;
      });
    } else if (opts.spare && !opts.shared) this.prewarm();
  }

  private prewarm(): void {
    if (this.closed || this.spare) return;
    const p = spawnToolsrv({ ...this.opts, name: `spare-${randomBytes(4).toString('hex')}` });
    this.spare = p;
    p.catch(() => {
      if (this.spare === p) this.spare = undefined;
    });
  }

  /** The spare if it is alive (and a new one started behind it), else a fresh toolsrv for `sessionId`. */
  private start(name: string, sessionId: string): Promise<ToolsrvProcess> {
    const spare = this.spare;
    if (!spare) return spawnToolsrv({ ...this.opts, name, sessionId });
    this.spare = undefined;
    // The next spare starts a little later: now it would compete for the CPU with the session that starts.
    if (this.opts.spare === true) setTimeout(() => this.prewarm(), SPARE_DELAY_MS).unref();
    return spare.then(
      (p) => (p.alive ? p : spawnToolsrv({ ...this.opts, name, sessionId })),
      () => spawnToolsrv({ ...this.opts, name, sessionId }),
    );
  }

  /**
   * Which toolsrv serves `sessionId`: one per remote host (shared by that host's sessions, so path locks hold
   * across them), the shared local one, or the session's own.
   */
  nameFor(sessionId: string): string {
    const remote = this.opts.remoteOf?.(sessionId);
    return remote ? `remote:${remote}` : this.opts.shared ? 'shared' : sessionId;
  }

  /** A remote host's toolsrv, after the pause its last failures call for; failures lengthen the pause. */
  private async startRemote(name: string, remote: string): Promise<ToolsrvProcess> {
    const f = this.failing.get(name);
    if (f && f.until > Date.now()) await new Promise((r) => setTimeout(r, f.until - Date.now()));
    if (this.closed) throw new Error('olliesrv is shutting down: no toolsrv is started any more');
    try {
      const { runtimeDir, yolo, idleMs, graceMs, procTtlMs, log } = this.opts;
      const proc = await spawnRemoteToolsrv({
        remote: parseRemote(remote),
        runtimeDir,
        ...(this.opts.ssh && { ssh: this.opts.ssh }),
        ...(yolo !== undefined && { yolo }),
        ...(idleMs !== undefined && { idleMs }),
        ...(graceMs !== undefined && { graceMs }),
        ...(procTtlMs !== undefined && { procTtlMs }),
        ...(log && { log }),
      });
      this.failing.delete(name);
      return proc;
    } catch (e) {
      const count = (f?.count ?? 0) + 1;
      const pause = Math.min(RETRY_FIRST_MS * 2 ** (count - 1), RETRY_MAX_MS);
      this.failing.set(name, { count, until: Date.now() + pause, why: (e as Error).message });
      (this.opts.log ?? (() => undefined))(`${(e as Error).message} (attempt ${count}; next in ${pause} ms)`);
      throw e;
    }
  }

  async acquire(sessionId: string): Promise<{ proc: ToolsrvProcess; release: () => Promise<void>; name: string }> {
    // A toolsrv started after close would outlive its olliesrv (and keep a CLI's event loop alive).
    if (this.closed) throw new Error('olliesrv is shutting down: no toolsrv is started any more');
    const name = this.nameFor(sessionId);
    const remote = name.startsWith('remote:') ? name.slice('remote:'.length) : undefined;
    let entry = this.running.get(name);
    if (entry) {
      const p = await entry.proc.catch(() => undefined);
      if (!p || !p.alive) {
        this.running.delete(name);
        entry = undefined;
      }
    }
    if (!entry) {
      entry = {
        proc: remote
          ? this.startRemote(name, remote)
          : this.opts.shared
            ? spawnToolsrv({ ...this.opts, name })
            : this.start(name, sessionId),
        users: 0,
      };
      this.running.set(name, entry);
      entry.proc.catch(() => this.running.delete(name));
    }
    entry.users++;
    const proc = await entry.proc;
    if (this.closed) {
      // close() came while it started: close stopped what it found running, and this one is stopped here.
      await proc.stop();
      throw new Error('olliesrv is shutting down: no toolsrv is started any more');
    }
    let released = false;
    return {
      proc,
      name,
      release: async () => {
        if (released) return;
        released = true;
        if (--entry.users > 0 || this.running.get(name) !== entry) return;
        this.running.delete(name);
        await proc.stop();
      },
    };
  }

  /**
   * A session's hold on a toolsrv that outlives the process: `address()` returns a live toolsrv, acquiring a
   * new one when the last died. Made for ToolsrvSessionTools' `toolsrv` (a provider) and its `onClose`.
   */
  lease(sessionId: string): { address: () => Promise<ToolsrvProcess>; release: () => Promise<void> } {
    let cur: { proc: ToolsrvProcess; release: () => Promise<void>; name: string } | undefined;
    let pending: Promise<ToolsrvProcess> | undefined;
    let released = false;
    return {
      address: () => {
        if (released) return Promise.reject(new Error(`the toolsrv lease of session ${sessionId} was released`));
        // A session moved to another host (ctl remote) leaves its old toolsrv for the new one.
        if (cur?.proc.alive && cur.name === this.nameFor(sessionId)) return Promise.resolve(cur.proc);
        pending ??= (async () => {
          const old = cur;
          cur = undefined;
          await old?.release();
          const next = await this.acquire(sessionId);
          if (released) {
            await next.release();
            throw new Error(`the toolsrv lease of session ${sessionId} was released`);
          }
          cur = next;
          return next.proc;
        })().finally(() => (pending = undefined));
        return pending;
      },
      release: async () => {
        released = true;
        await cur?.release();
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    const spare = this.spare;
    this.spare = undefined;
    const all = [...this.running.values(), ...(spare ? [{ proc: spare, users: 0 }] : [])];
    this.running.clear();
    await Promise.all(all.map(async (e) => (await e.proc.catch(() => undefined))?.stop()));
  }
}
