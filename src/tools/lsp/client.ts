/**
 * Language servers for the lsp host: which server serves a file (typescript-language-server from Ollie's own
 * node_modules for TS/JS; gopls, clangd, pyright, rust-analyzer when on PATH), one server per language and
 * workspace root, started on first use and kept warm, shut down after `idleMs` without a request. Documents
 * are opened on first use and re-sent (full text) when the file changed on disk since.
 *
 * The servers run inside the host's sandbox (they are its children): they read what the policy lets them read
 * and write only the project and the private tmp.
 *
 * A server that cannot start (not executable, exits at once, never answers `initialize`) or dies later is an
 * error for its language and root only: the host and the other servers go on. Its calls fail with the
 * server's name and the reason, and it is started again on a later call, after a pause that doubles with each
 * failure in a row (1 s … 60 s) so that a server crashing at every start is not restarted at every call.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { Writable } from 'node:stream';
import { createRequire } from 'node:module';
import { delimiter, dirname, extname, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  CancellationTokenSource,
  createMessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  type MessageConnection,
} from 'vscode-jsonrpc/node.js';
import type { Diagnostic, InitializeResult } from 'vscode-languageserver-protocol';
import { ToolError } from '../hosts/runtime.js';

const require = createRequire(import.meta.url);

/** The TypeScript Ollie ships (see the typescript server's `init`), or undefined where it is not installed. */
function shippedTsserver(): string | undefined {
  try {
    return require.resolve('typescript/lib/tsserver.js');
  } catch {
    return undefined;
  }
}

interface ServerSpec {
  id: string;
  /** The program's name, for messages. */
  name: string;
  exts: string[];
  /** The command; a bare name is looked up on PATH. */
  command: () => string[];
  /** Files or directories that mark a workspace root, nearest first. */
  markers: string[];
  languageId: (ext: string) => string;
  init?: Record<string, unknown>;
  /** What to say when the server is not installed. */
  install: string;
}

export const SERVERS: ServerSpec[] = [
  {
    id: 'typescript',
    name: 'typescript-language-server',
    exts: ['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs'],
    command: () => {
      if (!shippedTsserver())
        throw new ToolError(
          "no typescript package beside typescript-language-server: reinstall Ollie (a workspace's own TypeScript is not run)",
        );
      return [process.execPath, require.resolve('typescript-language-server/lib/cli.mjs'), '--stdio'];
    },
    markers: ['tsconfig.json', 'jsconfig.json', 'package.json'],
    languageId: (e) =>
      e === '.tsx'
        ? 'typescriptreact'
        : e === '.jsx'
          ? 'javascriptreact'
          : ['.js', '.mjs', '.cjs'].includes(e)
            ? 'javascript'
            : 'typescript',
    // Typings acquisition would download @types packages: no network in the sandbox, and not wanted anyway.
    // The TypeScript Ollie ships, by path: left to itself the server runs a workspace's own
    // node_modules/typescript/lib/tsserver.js, code an agent can write, in a host the spawner does not contain.
    init: {
      disableAutomaticTypingAcquisition: true,
      tsserver: { useSyntaxServer: 'never', path: shippedTsserver() },
      hostInfo: 'ollie',
    },
    install: 'typescript-language-server ships with Ollie',
  },
  {
    id: 'go',
    name: 'gopls',
    exts: ['.go'],
    command: () => ['gopls'],
    markers: ['go.work', 'go.mod'],
    languageId: () => 'go',
    install: 'install gopls (go install golang.org/x/tools/gopls@latest) and put it on PATH',
  },
  {
    id: 'clangd',
    name: 'clangd',
    exts: ['.c', '.h', '.cc', '.cpp', '.cxx', '.hpp', '.hh', '.hxx'],
    command: () => ['clangd'],
    markers: ['compile_commands.json', 'compile_flags.txt', '.clangd'],
    languageId: (e) => (e === '.c' || e === '.h' ? 'c' : 'cpp'),
    install: 'install clangd (apt install clangd) and put it on PATH',
  },
  {
    id: 'pyright',
    name: 'pyright-langserver',
    exts: ['.py', '.pyi'],
    command: () => ['pyright-langserver', '--stdio'],
    markers: ['pyrightconfig.json', 'pyproject.toml', 'setup.py', 'setup.cfg'],
    languageId: () => 'python',
    install: 'install pyright (npm install -g pyright) and put pyright-langserver on PATH',
  },
  {
    id: 'rust-analyzer',
    name: 'rust-analyzer',
    exts: ['.rs'],
    command: () => ['rust-analyzer'],
    markers: ['Cargo.toml'],
    languageId: () => 'rust',
    install: 'install rust-analyzer (rustup component add rust-analyzer) and put it on PATH',
  },
];

export function specFor(file: string): ServerSpec {
  const ext = extname(file).toLowerCase();
  const s = SERVERS.find((x) => x.exts.includes(ext));
  if (!s)
    throw new ToolError(
      `no language server for ${ext || 'files without an extension'} (known: ${SERVERS.map((x) => x.exts.join(' ')).join(', ')})`,
    );
  return s;
}

function which(cmd: string, path: string): string | undefined {
  if (cmd.includes('/')) return cmd;
  for (const d of path.split(delimiter).filter(Boolean)) {
    const p = join(d, cmd);
    try {
      accessSync(p, constants.X_OK);
      if (statSync(p).isFile()) return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The workspace root of `file`: the nearest directory with one of the markers, not above `cwd` when the file is inside it. */
export function rootFor(file: string, spec: ServerSpec, cwd: string): string {
  const inside = !relative(cwd, file).startsWith('..') && !isAbsolute(relative(cwd, file));
  for (let d = dirname(file); ; d = dirname(d)) {
    if (spec.markers.some((m) => exists(join(d, m)))) return d;
    if ((inside && d === cwd) || d === dirname(d)) break;
  }
  return inside ? cwd : dirname(file);
}

const exists = (p: string): boolean => {
  try {
    statSync(p);
    return true;
  } catch {
    return false;
  }
};

export const uriOf = (p: string): string => pathToFileURL(p).href;
export const pathOf = (u: string): string => (u.startsWith('file:') ? fileURLToPath(u) : u);

interface Doc {
  version: number;
  text: string;
  mtimeMs: number;
  size: number;
}

interface Diags {
  items: Diagnostic[];
  gen: number;
}

const seconds = (ms: number): string => `${Math.ceil(ms / 100) / 10} s`;

/** How long a server may take from its start to its answer to `initialize`, by default. */
const START_TIMEOUT_MS = 60_000;

/** Why a process could not be started, in words a person can act on. */
function spawnFailure(e: NodeJS.ErrnoException, bin: string): string {
  if (e.code === 'EACCES')
    return `${bin} cannot be executed (EACCES: it, or the interpreter its #! line names, is not executable, or the sandbox does not let tools run programs from ${dirname(bin)})`;
  if (e.code === 'ENOENT') return `${bin} or the interpreter its #! line names does not exist (ENOENT)`;
  return `${bin}: ${e.message}`;
}

export class Server {
  readonly conn: MessageConnection;
  readonly child: ChildProcess;
  readonly docs = new Map<string, Doc>();
  readonly diags = new Map<string, Diags>();
  private diagGen = 0;
  private readonly diagWaiters = new Set<() => void>();
  caps: InitializeResult['capabilities'] = {};
  ready: Promise<void>;
  dead = false;
  /** Why the server is gone, once it is (undefined while it runs, and after a stop we asked for). */
  failure?: ToolError;
  /** Rejects with `failure` when the server fails: every wait on the server races it. */
  private readonly gone: Promise<never>;
  private rejectGone!: (e: ToolError) => void;
  /** Called once when the process is gone: `failure` unless we stopped it. */
  onGone?: (failure: ToolError | undefined) => void;
  private stopping = false;
  private initialized = false;
  /** The process has exited (its failure is reported a moment later, with what it wrote on stderr). */
  private exited = false;
  readonly startedAt = Date.now();
  private stderr = '';
  lastUsed = Date.now();
  /** Requests (and starts) in progress: a busy server is never idle. */
  busy = 0;

  constructor(
    readonly spec: ServerSpec,
    readonly root: string,
    env: Record<string, string>,
    startTimeoutMs = START_TIMEOUT_MS,
  ) {
    const [cmd, ...args] = spec.command();
    const bin = which(cmd!, env.PATH ?? process.env.PATH ?? '');
    if (!bin) throw new ToolError(`no ${spec.id} language server here: ${cmd} is not on PATH (${spec.install})`);
    this.gone = new Promise<never>((_, reject) => (this.rejectGone = reject));
    this.gone.catch(() => undefined);
    this.child = spawn(bin, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    // Without these a failed spawn, or a write to a server that died (EPIPE, ERR_STREAM_DESTROYED), would be
    // an uncaught error and end the whole host. What went wrong is told by the process's 'error' or 'exit'
    // (and writes go through input(), below).
    this.child.on('error', (e: NodeJS.ErrnoException) =>
      this.fail(this.child.pid === undefined ? `could not start: ${spawnFailure(e, bin)}` : `failed: ${e.message}`),
    );
    for (const stream of [this.child.stdin, this.child.stdout, this.child.stderr]) stream!.on('error', () => undefined);
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => (this.stderr = (this.stderr + d).slice(-4096)));
    this.child.once('exit', (code, sig) => {
      this.exited = true;
      // Its last words may still be in the pipe: wait for stderr to end, briefly (a grandchild may hold it open).
      const how = sig ? `signal ${sig}` : `code ${code}`;
      const report = (): void => {
        clearTimeout(t);
        const words = this.stderr.trim() ? `: ${this.stderr.trim().split('\n').slice(-3).join(' | ')}` : '';
        this.fail(this.initialized ? `exited (${how})${words}` : `exited during start-up (${how})${words}`);
      };
      const t = setTimeout(report, 250);
      this.child.stderr!.once('close', report);
    });
    this.conn = createMessageConnection(
      new StreamMessageReader(this.child.stdout!),
      new StreamMessageWriter(this.input()),
    );
    this.conn.onNotification('textDocument/publishDiagnostics', (p: { uri: string; diagnostics: Diagnostic[] }) => {
      this.diags.set(p.uri, { items: p.diagnostics, gen: ++this.diagGen });
      for (const w of [...this.diagWaiters]) w();
    });
    this.conn.onRequest('workspace/configuration', (p: { items: unknown[] }) =>
      p.items.map(() => ({ tabSize: 2, insertSpaces: true })),
    );
    this.conn.onRequest('client/registerCapability', () => null);
    this.conn.onRequest('client/unregisterCapability', () => null);
    this.conn.onRequest('window/workDoneProgress/create', () => null);
    this.conn.onRequest('workspace/applyEdit', () => ({
      applied: false,
      failureReason: 'edits are returned to the model, not applied by the server',
    }));
    this.conn.onNotification(() => undefined);
    this.conn.onError(() => undefined);
    this.conn.listen();
    // Nothing is written before the process exists: a server that cannot start gets no write to fail.
    const spawned = new Promise<void>((resolve) => this.child.once('spawn', () => resolve()));
    const slow = setTimeout(
      () => this.fail(`did not answer initialize within ${seconds(startTimeoutMs)}`),
      startTimeoutMs,
    );
    slow.unref();
    const init = spawned
      .then(() => this.race(this.initialize()))
      .then(() => {
        this.initialized = true;
      });
    this.ready = Promise.race([this.gone, init]).finally(() => clearTimeout(slow));
    this.ready.catch(() => undefined);
  }

  /**
   * The server's stdin as the connection sees it. A write that fails is not passed on: vscode-jsonrpc turns a
   * failed request write into a rejection nothing can catch (a throw inside an async Promise executor), which
   * would end the host. The write is dropped instead, and the server's failure reaches the caller through
   * `gone`: its exit, which usually follows at once (a pipe breaks when its reader is gone), or, if it lives
   * on without reading, a failure of its own a second later.
   */
  private input(): Writable {
    const stdin = this.child.stdin!;
    return new Writable({
      write: (chunk: Buffer, _enc, done) => {
        if (this.dead || this.exited || stdin.destroyed || !stdin.writable) return done();
        stdin.write(chunk, (err) => {
          if (err)
            setTimeout(
              () =>
                this.exited ||
                this.fail(`stopped reading its input (${(err as NodeJS.ErrnoException).code ?? err.message})`),
              1000,
            ).unref();
          done();
        });
      },
    });
  }

  /** The server's label in messages: `the go language server (gopls)`. */
  get label(): string {
    return `the ${this.spec.id} language server (${this.spec.name})`;
  }

  /** Marks the server gone for `why` (the first reason wins) and ends what waits on it. */
  private fail(why: string): void {
    if (this.failure || (this.stopping && this.dead)) return;
    this.dead = true;
    if (!this.stopping) this.failure = new ToolError(`${this.label} ${why}`);
    this.rejectGone(this.failure ?? new ToolError(`${this.label} was stopped`));
    for (const w of [...this.diagWaiters]) w();
    this.conn.dispose();
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    this.onGone?.(this.failure);
  }

  /**
   * `p`, unless the server dies first: then its failure. An answer never comes from a dead server, and a write
   * to one fails with a stream error that says nothing of why: either way the reason is the server's.
   */
  private race<T>(p: Promise<T>): Promise<T> {
    if (this.dead) {
      p.catch(() => undefined);
      return Promise.reject(this.failure ?? new ToolError(`${this.label} was stopped`));
    }
    const settled = p.catch((e: unknown) => (this.exited || this.dead ? this.gone : Promise.reject(e as Error)));
    return Promise.race([settled, this.gone]);
  }

  private async initialize(): Promise<void> {
    const r = (await this.conn.sendRequest('initialize', {
      processId: process.pid,
      rootUri: uriOf(this.root),
      rootPath: this.root,
      workspaceFolders: [{ uri: uriOf(this.root), name: this.root.split('/').pop() || this.root }],
      initializationOptions: this.spec.init ?? {},
      capabilities: {
        general: { positionEncodings: ['utf-16'] },
        workspace: {
          workspaceEdit: { documentChanges: true },
          symbol: {},
          configuration: true,
          workspaceFolders: true,
        },
        textDocument: {
          synchronization: { didSave: true, dynamicRegistration: false },
          hover: { contentFormat: ['markdown', 'plaintext'] },
          definition: { linkSupport: true },
          references: {},
          documentSymbol: { hierarchicalDocumentSymbolSupport: true },
          completion: { completionItem: { snippetSupport: false, documentationFormat: ['plaintext', 'markdown'] } },
          rename: { prepareSupport: false },
          publishDiagnostics: { relatedInformation: false, versionSupport: true },
        },
      },
    })) as InitializeResult;
    this.caps = r.capabilities ?? {};
    await this.conn.sendNotification('initialized', {});
  }

  /** Opens the file, or sends its new text when it changed on disk. Returns its URI and whether it was (re)sent. */
  async sync(file: string): Promise<{ uri: string; sent: boolean }> {
    if (this.failure) throw this.failure;
    const uri = uriOf(file);
    const st = statSync(file);
    const d = this.docs.get(uri);
    if (d && d.mtimeMs === st.mtimeMs && d.size === st.size) return { uri, sent: false };
    const text = readFileSync(file, 'utf8');
    if (!d) {
      this.docs.set(uri, { version: 1, text, mtimeMs: st.mtimeMs, size: st.size });
      await this.race(
        this.conn.sendNotification('textDocument/didOpen', {
          textDocument: { uri, languageId: this.spec.languageId(extname(file).toLowerCase()), version: 1, text },
        }),
      );
    } else {
      d.version++;
      d.text = text;
      d.mtimeMs = st.mtimeMs;
      d.size = st.size;
      await this.race(
        this.conn.sendNotification('textDocument/didChange', {
          textDocument: { uri, version: d.version },
          contentChanges: [{ text }],
        }),
      );
    }
    return { uri, sent: true };
  }

  async request<T>(method: string, params: unknown, signal: AbortSignal): Promise<T> {
    this.busy++;
    const cts = new CancellationTokenSource();
    const onAbort = (): void => cts.cancel();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      if (this.dead) throw this.failure ?? new ToolError(`${this.label} was stopped`);
      return (await this.race(this.conn.sendRequest(method, params, cts.token))) as T;
    } finally {
      signal.removeEventListener('abort', onAbort);
      cts.dispose();
      this.busy--;
      this.lastUsed = Date.now();
    }
  }

  diagGeneration(): number {
    return this.diagGen;
  }

  /**
   * Diagnostics of `uri` published after generation `since`: waits for the first, then for more as long as
   * they keep coming (servers publish syntax, then semantic results), `settleMs` apart, at most `maxMs` in all.
   */
  async diagnostics(
    uri: string,
    since: number,
    signal: AbortSignal,
    maxMs = 20_000,
    settleMs = 500,
  ): Promise<Diagnostic[] | undefined> {
    const end = Date.now() + maxMs;
    const fresh = (): Diags | undefined => {
      const d = this.diags.get(uri);
      return d && d.gen > since ? d : undefined;
    };
    const wait = (ms: number): Promise<void> =>
      new Promise((resolve) => {
        const done = (): void => {
          clearTimeout(t);
          this.diagWaiters.delete(w);
          signal.removeEventListener('abort', done);
          resolve();
        };
        const w = (): void => done();
        const t = setTimeout(done, Math.max(0, ms));
        this.diagWaiters.add(w);
        signal.addEventListener('abort', done, { once: true });
      });
    while (!fresh() && Date.now() < end && !signal.aborted && !this.dead) await wait(end - Date.now());
    if (this.failure) throw this.failure;
    let last = fresh();
    if (!last) return this.diags.get(uri)?.items;
    for (;;) {
      if (signal.aborted || Date.now() >= end) break;
      await wait(Math.min(settleMs, end - Date.now()));
      const now = this.diags.get(uri)!;
      if (now.gen === last.gen) break;
      last = now;
    }
    return last.items;
  }

  async stop(): Promise<void> {
    if (this.dead || this.stopping) return;
    this.stopping = true;
    const kill = setTimeout(() => this.child.kill('SIGKILL'), 2000);
    try {
      await Promise.race([this.race(this.conn.sendRequest('shutdown')), new Promise((r) => setTimeout(r, 1500))]);
      await this.race(this.conn.sendNotification('exit'));
    } catch {
      // it may be gone already
    }
    this.child.stdin?.end();
    await new Promise<void>((r) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null || this.child.pid === undefined) return r();
      this.child.once('exit', () => r());
    });
    clearTimeout(kill);
    this.dead = true;
    this.conn.dispose();
  }
}

/** A server that failed: why, how many times in a row, and when it may be started again. */
interface Failure {
  /** The failure in words: the server and the reason. */
  reason: string;
  count: number;
  retryAt: number;
}

/** A server that ran this long before dying is not "failing in a row": its next failure pauses it 1 s again. */
const STABLE_MS = 60_000;

/** The warm servers of this host, by language and root; each stops after `idleMs` without a request. */
export class Servers {
  private readonly servers = new Map<string, Server>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly failures = new Map<string, Failure>();
  /** Servers started, per language: the stats show that a warm server is reused. */
  readonly started: Record<string, number> = {};
  readonly stopped: Record<string, number> = {};
  /** Servers that failed (could not start, or died), per language. */
  readonly failed: Record<string, number> = {};

  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  readonly startTimeoutMs: number;

  /** `backoffMs`: the pause after a first failure, doubled after each further one, at most `maxBackoffMs`. */
  constructor(
    readonly idleMs: number,
    o: { backoffMs?: number; maxBackoffMs?: number; startTimeoutMs?: number } = {},
  ) {
    this.backoffMs = o.backoffMs ?? 1000;
    this.maxBackoffMs = o.maxBackoffMs ?? 60_000;
    this.startTimeoutMs = o.startTimeoutMs ?? START_TIMEOUT_MS;
  }

  async get(file: string, cwd: string, env: Record<string, string>): Promise<Server> {
    const spec = specFor(file);
    const root = rootFor(file, spec, cwd);
    const key = `${spec.id}\0${root}`;
    let s = this.servers.get(key);
    if (s?.dead) {
      this.servers.delete(key);
      s = undefined;
    }
    if (!s) {
      const f = this.failures.get(key);
      const wait = f ? f.retryAt - Date.now() : 0;
      if (f && wait > 0)
        throw new ToolError(
          `${f.reason}; it is started again on a call after ${seconds(wait)} (${f.count} failure${f.count === 1 ? '' : 's'} in a row)`,
        );
      s = new Server(spec, root, env, this.startTimeoutMs);
      this.started[spec.id] = (this.started[spec.id] ?? 0) + 1;
      this.servers.set(key, s);
      const started = s;
      started.onGone = (failure) => {
        if (this.servers.get(key) === started) this.servers.delete(key);
        if (failure) this.failed[spec.id] = (this.failed[spec.id] ?? 0) + 1;
        if (!failure) return;
        const prev = this.failures.get(key);
        const count = prev && Date.now() - started.startedAt < STABLE_MS ? prev.count + 1 : 1;
        const pause = Math.min(this.maxBackoffMs, this.backoffMs * 2 ** (count - 1));
        this.failures.set(key, { reason: failure.message, count, retryAt: Date.now() + pause });
        // The calls this failure ends (the start, requests in flight) say when the server comes back.
        failure.message = `${failure.message}; it is started again on a call after ${seconds(pause)}`;
      };
    }
    s.busy++;
    try {
      await s.ready;
    } catch (e) {
      if (this.servers.get(key) === s) this.servers.delete(key);
      throw e;
    } finally {
      s.busy--;
      s.lastUsed = Date.now();
    }
    this.touch(key, s);
    return s;
  }

  /** (Re)arms the idle clock of a server: it stops `idleMs` after its last request ended, never while busy. */
  private touch(key: string, s: Server, ms = this.idleMs): void {
    clearTimeout(this.timers.get(key));
    const t = setTimeout(() => {
      this.timers.delete(key);
      if (this.servers.get(key) !== s) return;
      const quiet = Date.now() - s.lastUsed;
      if (s.busy > 0 || quiet < this.idleMs) return this.touch(key, s, s.busy > 0 ? this.idleMs : this.idleMs - quiet);
      this.servers.delete(key);
      this.failures.delete(key);
      this.stopped[s.spec.id] = (this.stopped[s.spec.id] ?? 0) + 1;
      void s.stop();
    }, ms);
    t.unref();
    this.timers.set(key, t);
  }

  list(): Array<{ id: string; root: string; pid: number; docs: number }> {
    return [...this.servers.values()].map((s) => ({
      id: s.spec.id,
      root: s.root,
      pid: s.child.pid ?? 0,
      docs: s.docs.size,
    }));
  }

  async stopAll(): Promise<void> {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    const all = [...this.servers.values()];
    this.servers.clear();
    await Promise.all(all.map((s) => s.stop()));
  }
}
