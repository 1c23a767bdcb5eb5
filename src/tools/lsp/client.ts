/**
 * Language servers for the lsp host: which server serves a file (typescript-language-server from Ollie's own
 * node_modules for TS/JS; gopls, clangd, pyright, rust-analyzer when on PATH), one server per language and
 * workspace root, started on first use and kept warm, shut down after `idleMs` without a request. Documents
 * are opened on first use and re-sent (full text) when the file changed on disk since.
 *
 * The servers run inside the host's sandbox (they are its children): they read what the policy lets them read
 * and write only the project and the private tmp.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, dirname, extname, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CancellationTokenSource, createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node.js';
import type { Diagnostic, InitializeResult } from 'vscode-languageserver-protocol';
import { ToolError } from '../hosts/runtime.js';

const require = createRequire(import.meta.url);

interface ServerSpec {
  id: string;
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
    exts: ['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs'],
    command: () => [process.execPath, require.resolve('typescript-language-server/lib/cli.mjs'), '--stdio'],
    markers: ['tsconfig.json', 'jsconfig.json', 'package.json'],
    languageId: (e) => (e === '.tsx' ? 'typescriptreact' : e === '.jsx' ? 'javascriptreact' : ['.js', '.mjs', '.cjs'].includes(e) ? 'javascript' : 'typescript'),
    // Typings acquisition would download @types packages: no network in the sandbox, and not wanted anyway.
    init: { disableAutomaticTypingAcquisition: true, tsserver: { useSyntaxServer: 'never' }, hostInfo: 'ollie' },
    install: 'typescript-language-server ships with Ollie',
  },
  { id: 'go', exts: ['.go'], command: () => ['gopls'], markers: ['go.work', 'go.mod'], languageId: () => 'go', install: 'install gopls (go install golang.org/x/tools/gopls@latest) and put it on PATH' },
  {
    id: 'clangd',
    exts: ['.c', '.h', '.cc', '.cpp', '.cxx', '.hpp', '.hh', '.hxx'],
    command: () => ['clangd'],
    markers: ['compile_commands.json', 'compile_flags.txt', '.clangd'],
    languageId: (e) => (e === '.c' || e === '.h' ? 'c' : 'cpp'),
    install: 'install clangd (apt install clangd) and put it on PATH',
  },
  { id: 'pyright', exts: ['.py', '.pyi'], command: () => ['pyright-langserver', '--stdio'], markers: ['pyrightconfig.json', 'pyproject.toml', 'setup.py', 'setup.cfg'], languageId: () => 'python', install: 'install pyright (npm install -g pyright) and put pyright-langserver on PATH' },
  { id: 'rust-analyzer', exts: ['.rs'], command: () => ['rust-analyzer'], markers: ['Cargo.toml'], languageId: () => 'rust', install: 'install rust-analyzer (rustup component add rust-analyzer) and put it on PATH' },
];

export function specFor(file: string): ServerSpec {
  const ext = extname(file).toLowerCase();
  const s = SERVERS.find((x) => x.exts.includes(ext));
  if (!s) throw new ToolError(`no language server for ${ext || 'files without an extension'} (known: ${SERVERS.map((x) => x.exts.join(' ')).join(', ')})`);
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
  private stderr = '';
  lastUsed = Date.now();
  /** Requests (and starts) in progress: a busy server is never idle. */
  busy = 0;

  constructor(readonly spec: ServerSpec, readonly root: string, env: Record<string, string>) {
    const [cmd, ...args] = spec.command();
    const bin = which(cmd!, env.PATH ?? process.env.PATH ?? '');
    if (!bin) throw new ToolError(`no ${spec.id} language server here: ${cmd} is not on PATH (${spec.install})`);
    this.child = spawn(bin, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => (this.stderr = (this.stderr + d).slice(-4096)));
    this.child.stdin!.on('error', () => undefined);
    this.conn = createMessageConnection(new StreamMessageReader(this.child.stdout!), new StreamMessageWriter(this.child.stdin!));
    this.conn.onNotification('textDocument/publishDiagnostics', (p: { uri: string; diagnostics: Diagnostic[] }) => {
      this.diags.set(p.uri, { items: p.diagnostics, gen: ++this.diagGen });
      for (const w of [...this.diagWaiters]) w();
    });
    this.conn.onRequest('workspace/configuration', (p: { items: unknown[] }) => p.items.map(() => ({ tabSize: 2, insertSpaces: true })));
    this.conn.onRequest('client/registerCapability', () => null);
    this.conn.onRequest('client/unregisterCapability', () => null);
    this.conn.onRequest('window/workDoneProgress/create', () => null);
    this.conn.onRequest('workspace/applyEdit', () => ({ applied: false, failureReason: 'edits are returned to the model, not applied by the server' }));
    this.conn.onNotification(() => undefined);
    this.conn.onError(() => undefined);
    this.conn.listen();
    const exited = new Promise<never>((_, reject) => {
      this.child.once('exit', (code, sig) => {
        this.dead = true;
        reject(new ToolError(`the ${spec.id} language server exited (${sig ?? `code ${code}`})${this.stderr.trim() ? `: ${this.stderr.trim().split('\n').slice(-3).join(' | ')}` : ''}`));
      });
      this.child.once('error', (e) => {
        this.dead = true;
        reject(new ToolError(`the ${spec.id} language server could not start: ${e.message}`));
      });
    });
    exited.catch(() => undefined);
    this.ready = Promise.race([exited, this.initialize()]);
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
        workspace: { workspaceEdit: { documentChanges: true }, symbol: {}, configuration: true, workspaceFolders: true },
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
    const uri = uriOf(file);
    const st = statSync(file);
    const d = this.docs.get(uri);
    if (d && d.mtimeMs === st.mtimeMs && d.size === st.size) return { uri, sent: false };
    const text = readFileSync(file, 'utf8');
    if (!d) {
      this.docs.set(uri, { version: 1, text, mtimeMs: st.mtimeMs, size: st.size });
      await this.conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: this.spec.languageId(extname(file).toLowerCase()), version: 1, text } });
    } else {
      d.version++;
      d.text = text;
      d.mtimeMs = st.mtimeMs;
      d.size = st.size;
      await this.conn.sendNotification('textDocument/didChange', { textDocument: { uri, version: d.version }, contentChanges: [{ text }] });
    }
    return { uri, sent: true };
  }

  async request<T>(method: string, params: unknown, signal: AbortSignal): Promise<T> {
    this.busy++;
    const cts = new CancellationTokenSource();
    const onAbort = (): void => cts.cancel();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      return (await this.conn.sendRequest(method, params, cts.token)) as T;
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
  async diagnostics(uri: string, since: number, signal: AbortSignal, maxMs = 20_000, settleMs = 500): Promise<Diagnostic[] | undefined> {
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
    while (!fresh() && Date.now() < end && !signal.aborted) await wait(end - Date.now());
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
    if (this.dead) return;
    this.dead = true;
    const kill = setTimeout(() => this.child.kill('SIGKILL'), 2000);
    try {
      await Promise.race([this.conn.sendRequest('shutdown'), new Promise((r) => setTimeout(r, 1500))]);
      await this.conn.sendNotification('exit');
    } catch {
      // it may be gone already
    }
    this.conn.dispose();
    this.child.stdin?.end();
    await new Promise<void>((r) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) return r();
      this.child.once('exit', () => r());
    });
    clearTimeout(kill);
  }
}

/** The warm servers of this host, by language and root; each stops after `idleMs` without a request. */
export class Servers {
  private readonly servers = new Map<string, Server>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Servers started, per language: the stats show that a warm server is reused. */
  readonly started: Record<string, number> = {};
  readonly stopped: Record<string, number> = {};

  constructor(readonly idleMs: number) {}

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
      s = new Server(spec, root, env);
      this.started[spec.id] = (this.started[spec.id] ?? 0) + 1;
      this.servers.set(key, s);
      const started = s;
      started.child.once('exit', () => {
        if (this.servers.get(key) === started) this.servers.delete(key);
      });
    }
    s.busy++;
    try {
      await s.ready;
    } catch (e) {
      this.servers.delete(key);
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
      this.stopped[s.spec.id] = (this.stopped[s.spec.id] ?? 0) + 1;
      void s.stop();
    }, ms);
    t.unref();
    this.timers.set(key, t);
  }

  list(): Array<{ id: string; root: string; pid: number; docs: number }> {
    return [...this.servers.values()].map((s) => ({ id: s.spec.id, root: s.root, pid: s.child.pid ?? 0, docs: s.docs.size }));
  }

  async stopAll(): Promise<void> {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    const all = [...this.servers.values()];
    this.servers.clear();
    await Promise.all(all.map((s) => s.stop()));
  }
}
