/**
 * The namespace as data: a tree of Dir, Leaf and Each (template directory) declarations, each with a mode,
 * an owner and a doc string, and leaves with handlers of a few kinds. build() validates the whole tree once
 * and returns a FileServer for the protocol core; adding a file is adding one Leaf.
 *
 * Handler kinds (at most one that produces what a read returns; `write` may join read, stream or blockOnce):
 *   read        content made on each read at offset 0, served by offset (ctl status, idx files)
 *   write       every Twrite is one message to the handler (prompt, fifo)
 *   text        a value read whole and replaced by the writes of one open, committed once (name, plan, env):
 *               a first write at 0 starts a new value, a first write further on (an append) edits the current one
 *   rdwr        write a request, read its reply on the same fid (new, ctl)
 *   stream      reads block for the next chunk; EOF only when the object dies (log.raw)
 *   blockOnce   the first read blocks until the handler resolves (state changes)
 *   rdwrStream  write a request (a filter), then stream (event)
 */
import { DMDIR, OTRUNC, QTDIR, QTFILE } from './constants.js';
import { modeString, NOLENGTH, type Qid, type Stat } from './codec.js';
import { Ename, NinepError } from './errors.js';
import type { FileServer, OpenFile, Pending, User } from './server.js';

export type Content = string | Uint8Array;

export interface Ctx {
  /** Values of the template directories on the path, by parameter name. */
  readonly params: Readonly<Record<string, string>>;
  readonly user: User;
  /** The path as walked, for error messages. */
  readonly path: string;
}

/**
 * What a client is about to do to a node: `walk` (reach it at all: walking into it, seeing it listed, statting
 * it), `read` and `write` (opening it so), `create` (in a directory), `remove`, `rename`.
 */
export type AccessOp = 'walk' | 'read' | 'write' | 'create' | 'remove' | 'rename';

/**
 * Decides whether `ctx.user` may do `op` here: undefined allows, a string refuses with that reason (the 9P
 * error the client sees). A node's own rule applies to that node only; nodes without one get the namespace's
 * default rule (BuildOptions.access), so a file added without a rule gets the default, never more.
 */
export type Access = (ctx: Ctx, op: AccessOp) => string | undefined;

export interface LeafHandlers {
  read?: (ctx: Ctx) => Content;
  /**
   * `signal` aborts when the write is flushed: a handler that takes time either finishes (its effect stands, and
   * the client gets the reply before the Rflush) or rejects without having had any effect.
   */
  write?: (ctx: Ctx, data: Uint8Array, offset: number, signal: AbortSignal) => void | Promise<void>;
  /**
   * With `write`: a message is everything one client writes on one open fid, however its writes split it (real
   * clients cut large writes at 4 KiB, 64 KiB…). The writes are assembled per fid and `write` gets the whole at
   * clunk (offset 0; its error is the Tclunk's), or when a write at offset 0 follows earlier ones.
   */
  whole?: boolean;
  text?: { get: (ctx: Ctx) => Content; set: (ctx: Ctx, value: string) => void | Promise<void> };
  rdwr?: (ctx: Ctx, request: string, signal: AbortSignal) => Content | Promise<Content>;
  stream?: (ctx: Ctx, signal: AbortSignal) => AsyncIterable<Content>;
  blockOnce?: (ctx: Ctx, signal: AbortSignal) => Promise<Content>;
  rdwrStream?: (ctx: Ctx, request: string, signal: AbortSignal) => AsyncIterable<Content>;
  /**
   * qid.vers, for files that change by themselves. A stat never runs a read handler: without this hook qid.vers
   * counts the writes made to the file through this namespace.
   */
  version?: (ctx: Ctx) => number;
  /** The length a stat reports; 0 when absent, as Plan 9's synthetic files (a stat never runs a read handler). */
  size?: (ctx: Ctx) => number;
  remove?: (ctx: Ctx) => void | Promise<void>;
}

/**
 * What a file contains, declared beside its handlers by whoever builds the namespace; `help` prints
 * its description, and gateways find it on the declared tree.
 */
export interface ContentFormat {
  readonly kind: string;
  describe(): string;
}

const HELP_FORMAT: ContentFormat & { format(v: string): string; parse(t: string): string } = {
  kind: 'text',
  describe: () => 'text: one line per file (mode, path pattern, what a read does, doc), its format below it',
  format: (v) => v,
  parse: (t) => t,
};

interface Common {
  /** Permission bits (0o777); derived from the handlers when absent. */
  mode?: number;
  uid?: string;
  gid?: string;
  doc?: string;
  /** The content's format. */
  format?: ContentFormat;
  /** What a write or the request of a rdwr takes, when it is not the content's format. */
  request?: ContentFormat;
  /**
   * Withheld from gateways that re-export the namespace to other protocols (the HTTP gateway): a 9P client sees
   * the file as usual. On a directory it covers everything below.
   */
  internal?: boolean;
  /** Who may reach this node and how (see Access); the namespace's default rule when absent. */
  access?: Access;
}

export interface LeafSpec extends Common, LeafHandlers {
  kind: 'leaf';
  name: string;
}

export interface DirSpec extends Common {
  kind: 'dir';
  name: string;
  children: NodeSpec[];
  /** Makes a file or directory `name` in this directory (Tcreate); it must then be walkable. */
  create?: (ctx: Ctx, name: string, perm: number, mode: number) => void | Promise<void>;
}

export interface EachSpec extends Common {
  kind: 'each';
  /** The parameter name the instance's name is bound to in Ctx.params. */
  param: string;
  list: (ctx: Ctx) => string[];
  /** Faster membership test than list().includes(). */
  has?: (ctx: Ctx, name: string) => boolean;
  /** A stable identity for qid.path, so a renamed instance keeps its qids. */
  key?: (ctx: Ctx, name: string) => string;
  /**
   * With `key`: the instance's name now, undefined once it is gone. Fids below an instance are then bound to it,
   * not to the name they walked: after a rename they reach the same object under its new name.
   */
  nameOf?: (ctx: Ctx, key: string) => string | undefined;
  rename?: (ctx: Ctx, newName: string) => void | Promise<void>;
  remove?: (ctx: Ctx) => void | Promise<void>;
  children: NodeSpec[];
  /** Makes the instances files with these handlers instead of directories (see EachFile). */
  file?: Common & LeafHandlers;
}

export type NodeSpec = LeafSpec | DirSpec | EachSpec;
type DirOptions = Common & { create?: DirSpec['create'] };
type EachOptions = Common & Omit<EachSpec, 'kind' | 'param' | 'children' | keyof Common>;

function isSpec(x: unknown): x is NodeSpec {
  return typeof x === 'object' && x !== null && 'kind' in x;
}

export function Dir(name: string, opts?: DirOptions | NodeSpec, ...children: NodeSpec[]): DirSpec {
  if (isSpec(opts)) return { kind: 'dir', name, children: [opts, ...children] };
  return { kind: 'dir', name, ...opts, children };
}

export function Leaf(name: string, opts: Common & LeafHandlers): LeafSpec {
  return { kind: 'leaf', name, ...opts };
}

/** A template directory: one instance per name that `list` returns, e.g. Each('session', {list}, ...). */
export function Each(param: string, opts: EachOptions, ...children: NodeSpec[]): EachSpec {
  return { kind: 'each', param, ...opts, children };
}

/** A template file: one file per name that `list` returns, all with the same handlers, e.g. an agent's peer/{name}. */
export function EachFile(param: string, opts: EachOptions & { file: Common & LeafHandlers }): EachSpec {
  return { kind: 'each', param, ...opts, children: [] };
}

const READ_KINDS = ['read', 'text', 'rdwr', 'stream', 'blockOnce', 'rdwrStream'] as const;
const WRITE_KINDS = ['write', 'text', 'rdwr', 'rdwrStream'] as const;
const MAY_JOIN_WRITE = new Set(['read', 'stream', 'blockOnce']);

interface Built {
  spec: NodeSpec;
  /** Pattern path for docs and errors, e.g. /session/{session}/ctl. */
  pattern: string;
  mode: number;
  uid: string;
  gid: string;
  statics: Map<string, Built>;
  each?: Built;
  readKind?: (typeof READ_KINDS)[number];
  /** For the instances of an EachFile: the template (its list/has/key), while `spec` is the leaf they are. */
  template?: EachSpec;
  /** The node's own rule, else the namespace's default. */
  access?: Access;
}

/** The declaration as data, for tools that describe or re-export the namespace (OpenAPI, the HTTP gateway). */
export interface DeclaredNode {
  kind: 'dir' | 'leaf' | 'each';
  /** The static name; for a template (Each, EachFile), the parameter name. */
  name: string;
  /** Set on templates (a template directory, or the files of an EachFile): any listed name walks to them. */
  param?: string;
  /** e.g. /session/{session}/ctl */
  pattern: string;
  mode: number;
  doc?: string;
  /** The content's format, when declared. */
  format?: ContentFormat;
  /** The format of what it takes, when declared apart from the content's. */
  request?: ContentFormat;
  /** Declared internal here or on a directory above. */
  internal: boolean;
  /** What a read does: the leaf's read handler kind, 'list' for directories, undefined for write-only leaves. */
  read?: (typeof READ_KINDS)[number] | 'list';
  /** What a write does: the leaf's write handler kind, if any. */
  write?: (typeof WRITE_KINDS)[number];
  removable: boolean;
  renamable: boolean;
  /** A directory accepting Tcreate. */
  creatable: boolean;
  children: DeclaredNode[];
}

export class NamespaceError extends Error {
  override name = 'NamespaceError';
}

export interface BuildOptions {
  uid: string;
  gid?: string;
  /** Adds /help, generated from the doc strings. */
  help?: boolean;
  /** The rule of every node that declares none (see Access). Without one, every node allows everything. */
  access?: Access;
}

/** A template instance a node is bound to by its key (EachSpec.nameOf). */
interface Binding {
  readonly param: string;
  readonly key: string;
  readonly nameOf: (ctx: Ctx, key: string) => string | undefined;
}

/** A walked file: a declaration plus the template values that led to it. */
export interface Node {
  readonly built: Built;
  readonly name: string;
  /** The template values as walked; handlers get them as they are now (see bindings). */
  readonly params: Readonly<Record<string, string>>;
  /** The instances above, outermost first, whose current names replace the walked ones in `params`. */
  readonly bindings?: readonly Binding[];
  readonly parent: Node | undefined;
  readonly keyPath: string;
  readonly path: string;
  /** Who walked here: a stat runs the file's size and version hooks as them. */
  readonly user?: User;
  qidPath?: bigint;
}

const utf8 = new TextEncoder();
const toBytes = (c: Content): Uint8Array => (typeof c === 'string' ? utf8.encode(c) : c);
const EMPTY = new Uint8Array(0);
/** Largest message (LeafHandlers.whole) one fid assembles. */
const MAX_MESSAGE = 16 * 1024 * 1024;
function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
/** Largest value a text file takes: these are names, plans and settings, not bulk data. */
const MAX_TEXT = 16 * 1024 * 1024;

/** FNV-1a over two lanes with different bases: a 64-bit path that is stable across restarts. */
function hash64(s: string): bigint {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
  }
  return (BigInt(a >>> 0) << 32n) | BigInt(b >>> 0);
}

/** Validates a namespace declaration and returns the file server that serves it. */
export function build(root: DirSpec, opts: BuildOptions): Namespace {
  const problems: string[] = [];
  const withHelp: DirSpec = opts.help
    ? {
        ...root,
        children: [
          ...root.children,
          Leaf('help', {
            doc: 'This text: every file of the namespace and what it does.',
            format: HELP_FORMAT,
            read: () => ns.help(),
            access: () => undefined,
          }),
        ],
      }
    : root;
  const top = compile(
    withHelp,
    '',
    { uid: opts.uid, gid: opts.gid ?? opts.uid, access: opts.access },
    new Set(),
    problems,
  );
  if (problems.length) throw new NamespaceError(`invalid namespace:\n  ${problems.join('\n  ')}`);
  const ns = new Namespace(top);
  return ns;
}

function compile(
  spec: NodeSpec,
  parentPattern: string,
  owner: { uid: string; gid: string; access?: Access },
  params: Set<string>,
  problems: string[],
): Built {
  const label = spec.kind === 'each' ? `{${spec.param}}` : spec.name;
  const pattern =
    spec.kind === 'dir' && parentPattern === '' ? '/' : `${parentPattern === '/' ? '' : parentPattern}/${label}`;
  const uid = spec.uid ?? owner.uid;
  const gid = spec.gid ?? owner.gid;
  const access = spec.access ?? owner.access;
  if (spec.kind !== 'each' && !(parentPattern === '' && spec.kind === 'dir')) {
    if (!spec.name || spec.name === '.' || spec.name === '..' || spec.name.includes('/'))
      problems.push(`${pattern}: bad name ${JSON.stringify(spec.name)}`);
  }
  if (spec.mode !== undefined && (spec.mode < 0 || spec.mode > 0o777 || !Number.isInteger(spec.mode))) {
    problems.push(`${pattern}: mode ${spec.mode} is not permission bits (0..0o777)`);
  }
  if (spec.kind === 'leaf') {
    const reads = READ_KINDS.filter((k) => spec[k] !== undefined);
    const writes = WRITE_KINDS.filter((k) => spec[k] !== undefined);
    if (reads.length > 1) problems.push(`${pattern}: more than one read handler (${reads.join(', ')})`);
    if (spec.whole && !spec.write) problems.push(`${pattern}: whole needs a write handler`);
    if (spec.write && reads.some((k) => !MAY_JOIN_WRITE.has(k)))
      problems.push(`${pattern}: write cannot be combined with ${reads.join(', ')}`);
    if (reads.length === 0 && writes.length === 0) problems.push(`${pattern}: a leaf needs a handler`);
    const derived = (reads.length ? 0o444 : 0) | (writes.length ? 0o222 : 0);
    const mode = spec.mode ?? derived;
    if (mode & 0o444 && !reads.length)
      problems.push(`${pattern}: mode ${mode.toString(8)} allows reading but there is no read handler`);
    if (mode & 0o222 && !writes.length)
      problems.push(`${pattern}: mode ${mode.toString(8)} allows writing but there is no write handler`);
    return { spec, pattern, mode, uid, gid, statics: new Map(), readKind: reads[0], access };
  }
  if (spec.kind === 'each') {
    if (!spec.param) problems.push(`${pattern}: template parameter needs a name`);
    if (params.has(spec.param)) problems.push(`${pattern}: parameter {${spec.param}} is already bound above`);
    if (typeof spec.list !== 'function') problems.push(`${pattern}: template directory needs a list function`);
    if (spec.file) {
      if (spec.children.length) problems.push(`${pattern}: a template file cannot have children`);
      const leaf: LeafSpec = {
        kind: 'leaf',
        name: label,
        uid: spec.uid,
        gid: spec.gid,
        doc: spec.doc,
        remove: spec.remove,
        access: spec.access,
        ...spec.file,
      };
      const b = compile(leaf, parentPattern, owner, new Set([...params, spec.param]), problems);
      b.template = spec;
      return b;
    }
  }
  const inner = new Set(params);
  if (spec.kind === 'each') inner.add(spec.param);
  const built: Built = { spec, pattern, mode: 0, uid, gid, statics: new Map(), access };
  let writableChildren = false;
  for (const c of spec.children) {
    const b = compile(c, pattern, { uid, gid, access: owner.access }, inner, problems);
    if (c.kind === 'each') {
      if (built.each) problems.push(`${pattern}: more than one template directory`);
      built.each = b;
      if (c.rename || c.remove) writableChildren = true;
    } else {
      if (built.statics.has(c.name)) problems.push(`${b.pattern}: duplicate name`);
      built.statics.set(c.name, b);
      if (c.kind === 'leaf' && c.remove) writableChildren = true;
    }
  }
  const canWrite = (spec.kind === 'dir' && spec.create !== undefined) || writableChildren;
  built.mode = spec.mode ?? (canWrite ? 0o755 : 0o555);
  return built;
}

export class Namespace implements FileServer<Node> {
  private readonly started = Math.floor(Date.now() / 1000);
  /**
   * qid.vers of files without a version hook: bumped by each write (or truncation) through this namespace. By
   * key path, so a count follows its file through renames.
   */
  private readonly writes = new Map<string, number>();
  private bump(n: Node): void {
    this.writes.set(n.keyPath, ((this.writes.get(n.keyPath) ?? 0) + 1) >>> 0);
  }
  constructor(readonly top: Built) {}

  /** One line per file: mode, path pattern, doc. */
  help(): string {
    const lines: string[] = [];
    const visit = (b: Built): void => {
      const dir = b.spec.kind !== 'leaf';
      const kind = b.spec.kind === 'leaf' ? (b.readKind ?? 'write') : 'dir';
      lines.push(
        `${modeString((dir ? DMDIR : 0) | b.mode)}  ${(b.pattern + (dir && b.pattern !== '/' ? '/' : '')).padEnd(34)} ${kind.padEnd(10)} ${b.spec.doc ?? ''}`.trimEnd(),
      );
      if (b.spec.format) lines.push(`${' '.repeat(58)}Format: ${b.spec.format.describe()}`);
      if (b.spec.request) lines.push(`${' '.repeat(58)}Request: ${b.spec.request.describe()}`);
      for (const c of b.statics.values()) visit(c);
      if (b.each) visit(b.each);
    };
    visit(this.top);
    return `${lines.join('\n')}\n`;
  }

  /** The declared tree (statics first, then the template directory), with internal inherited downwards. */
  declared(): DeclaredNode {
    const visit = (b: Built, inherited: boolean): DeclaredNode => {
      const spec = b.spec;
      const internal = inherited || spec.internal === true || b.template?.internal === true;
      const children = [...b.statics.values(), ...(b.each ? [b.each] : [])].map((c) => visit(c, internal));
      const base = {
        pattern: b.pattern,
        mode: b.mode,
        doc: spec.doc,
        ...(spec.format && { format: spec.format }),
        ...(spec.request && { request: spec.request }),
        internal,
        children,
      };
      if (spec.kind === 'leaf') {
        const t = b.template;
        return {
          ...base,
          kind: 'leaf',
          name: t ? t.param : spec.name,
          ...(t ? { param: t.param } : {}),
          read: b.readKind,
          write: WRITE_KINDS.find((k) => spec[k] !== undefined),
          removable: spec.remove !== undefined,
          renamable: t?.rename !== undefined,
          creatable: false,
        };
      }
      if (spec.kind === 'each') {
        return {
          ...base,
          kind: 'each',
          name: spec.param,
          param: spec.param,
          read: 'list',
          removable: spec.remove !== undefined,
          renamable: spec.rename !== undefined,
          creatable: false,
        };
      }
      return {
        ...base,
        kind: 'dir',
        name: spec.name,
        read: 'list',
        removable: false,
        renamable: false,
        creatable: spec.create !== undefined,
      };
    };
    return visit(this.top, false);
  }

  attach(user: User): Node {
    const root: Node = { built: this.top, name: '/', params: {}, parent: undefined, keyPath: '', path: '/', user };
    this.check(root, user, 'walk');
    return root;
  }

  private ctx(n: Node, user: User): Ctx {
    return { params: this.params(n, user), user, path: n.path };
  }

  /** The template values of `n` now: a node bound to instances follows them through renames. */
  private params(n: Node, user: User): Readonly<Record<string, string>> {
    if (!n.bindings) return n.params;
    const params: Record<string, string> = { ...n.params };
    for (const b of n.bindings) {
      const name = b.nameOf({ params, user, path: n.path }, b.key);
      if (name === undefined)
        throw new NinepError(`${Ename.notFound}: ${n.path}: the ${b.param} it was opened in is gone`);
      params[b.param] = name;
    }
    return params;
  }

  /** Throws the rule's refusal when `user` may not do `op` to `n`. */
  private check(n: Node, user: User, op: AccessOp): void {
    const why = n.built.access?.(this.ctx(n, user), op);
    if (why !== undefined) throw new NinepError(`${Ename.perm}: ${n.path}: ${why}`);
  }

  private allowed(n: Node, user: User, op: AccessOp): boolean {
    return n.built.access?.(this.ctx(n, user), op) === undefined;
  }

  walk(dir: Node, name: string, user: User): Node {
    const n = this.lookup(dir, name, user);
    this.check(n, user, 'walk');
    return n;
  }

  private lookup(dir: Node, name: string, user: User): Node {
    const b = dir.built;
    const child = b.statics.get(name);
    const base = dir.path === '/' ? '' : dir.path;
    const ctx = this.ctx(dir, user);
    const bindings = dir.bindings;
    if (child)
      return {
        built: child,
        name,
        params: ctx.params,
        bindings,
        parent: dir,
        keyPath: `${dir.keyPath}/${name}`,
        path: `${base}/${name}`,
        user,
      };
    const each = b.each;
    const spec = each?.template ?? (each?.spec.kind === 'each' ? each.spec : undefined);
    if (each && spec) {
      if (spec.has ? spec.has(ctx, name) : spec.list(ctx).includes(name)) {
        const params = { ...ctx.params, [spec.param]: name };
        const key = spec.key ? spec.key({ ...ctx, params }, name) : name;
        const bound =
          spec.key && spec.nameOf ? [...(bindings ?? []), { param: spec.param, key, nameOf: spec.nameOf }] : bindings;
        return {
          built: each,
          name,
          params,
          bindings: bound,
          parent: dir,
          keyPath: `${dir.keyPath}/${key}`,
          path: `${base}/${name}`,
          user,
        };
      }
    }
    throw new NinepError(`${Ename.notFound}: ${base}/${name}`);
  }

  /** The entries `user` may reach; the others are left out, as if they were not there. */
  readdir(dir: Node, user: User): Node[] {
    const out = [...dir.built.statics.keys()].map((n) => this.lookup(dir, n, user));
    const each = dir.built.each;
    const spec = each?.template ?? (each?.spec.kind === 'each' ? each.spec : undefined);
    if (spec) {
      for (const name of spec.list(this.ctx(dir, user))) {
        if (!dir.built.statics.has(name)) out.push(this.lookup(dir, name, user));
      }
    }
    return out.filter((n) => this.allowed(n, user, 'walk'));
  }

  stat(n: Node): Stat {
    const b = n.built;
    const isDir = b.spec.kind !== 'leaf';
    n.qidPath ??= hash64(n.keyPath || '/');
    let length = 0;
    let vers = 0;
    const spec = b.spec;
    if (spec.kind === 'leaf') {
      // Never a read handler: a generated file is computed when it is read, not to learn its length. A text file
      // is a stored value, not a computation: its true length is cheap, and an appending client (echo >> plan
      // through a FUSE mount) must see it, or it would write at 0 and replace the value it meant to extend.
      if (spec.version || spec.size || spec.text) {
        const ctx = this.ctx(n, n.user ?? { name: b.uid, groups: [] });
        if (spec.size) length = Math.max(0, Math.floor(spec.size(ctx)));
        else if (spec.text) length = toBytes(spec.text.get(ctx)).length;
        if (spec.version) vers = spec.version(ctx) >>> 0;
      }
      if (!spec.version) vers = this.writes.get(n.keyPath) ?? 0;
    }
    const qid: Qid = { type: isDir ? QTDIR : QTFILE, vers, path: n.qidPath };
    return {
      type: 0,
      dev: 0,
      qid,
      mode: (isDir ? DMDIR : 0) | b.mode,
      atime: this.started,
      mtime: this.started,
      length,
      name: n.name,
      uid: b.uid,
      gid: b.gid,
      muid: b.uid,
    };
  }

  open(n: Node, mode: number, user: User): OpenFile {
    const spec = n.built.spec;
    if (spec.kind !== 'leaf') throw new NinepError(Ename.isDir);
    if ((mode & 3) !== 1) this.check(n, user, 'read');
    if ((mode & 3) === 1 || (mode & 3) === 2 || mode & OTRUNC) this.check(n, user, 'write');
    return new LeafFile(
      spec,
      n.built.readKind,
      () => this.ctx(n, user),
      n.path,
      (mode & OTRUNC) !== 0,
      () => this.bump(n),
    );
  }

  async create(dir: Node, name: string, perm: number, mode: number, user: User): Promise<Node> {
    const spec = dir.built.spec;
    if (spec.kind !== 'dir' || !spec.create) throw new NinepError(`${Ename.noCreate} in ${dir.path}`);
    if (dir.built.statics.has(name)) throw new NinepError(`${Ename.exists}: ${name}`);
    this.check(dir, user, 'create');
    await spec.create(this.ctx(dir, user), name, perm, mode);
    return this.walk(dir, name, user);
  }

  async remove(n: Node, user: User): Promise<void> {
    const spec = n.built.spec;
    const hook = spec.kind === 'each' || spec.kind === 'leaf' ? spec.remove : undefined;
    if (!hook) throw new NinepError(`${Ename.noRemove}: ${n.path}`);
    this.check(n, user, 'remove');
    await hook(this.ctx(n, user));
  }

  async wstat(n: Node, changes: Stat, user: User): Promise<Node> {
    const spec = n.built.spec;
    const ctx = this.ctx(n, user);
    const unchanged =
      changes.mode === 0xffffffff &&
      changes.uid === '' &&
      changes.gid === '' &&
      changes.mtime === 0xffffffff &&
      changes.atime === 0xffffffff;
    if (!unchanged) throw new NinepError(`${Ename.noWstat}: only the name (and the length of text files) can change`);
    if (changes.length !== NOLENGTH) {
      if (spec.kind !== 'leaf' || !spec.text || changes.length !== 0)
        throw new NinepError(`${Ename.noWstat}: cannot set the length of ${n.path}`);
      this.check(n, user, 'write');
      await spec.text.set(ctx, '');
      this.bump(n);
    }
    if (changes.name === '' || changes.name === n.name) return n;
    if (spec.kind !== 'each' || !spec.rename) throw new NinepError(`${Ename.noWstat}: ${n.path} cannot be renamed`);
    if (changes.name.includes('/') || changes.name === '.' || changes.name === '..')
      throw new NinepError(`bad name: ${JSON.stringify(changes.name)}`);
    this.check(n, user, 'rename');
    await spec.rename(ctx, changes.name);
    return this.walk(n.parent!, changes.name, user);
  }
}

/** Resolves with `p`, or rejects when `signal` aborts first, leaving `p` for someone else. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e as Error);
      },
    );
  });
}

/** What a read waiting on a stream that was replaced (an rdwrStream given a new request) rejects with. */
const SUPERSEDED = new Error('stream replaced');

/**
 * Reads of a stream: one at a time, in order; a flushed read gives up its turn without consuming a chunk. The
 * stream's signal aborts when the reader is closed (its fid clunked, or a new request replaced it).
 */
class StreamReader {
  private it?: AsyncIterator<Content>;
  private next?: Promise<IteratorResult<Content>>;
  private left?: Uint8Array;
  private done = false;
  private turn: Promise<unknown> = Promise.resolve();
  private readonly ended = new AbortController();

  constructor(private readonly make: (signal: AbortSignal) => AsyncIterable<Content>) {}

  read(count: number, signal: AbortSignal): Promise<Uint8Array> {
    const mine = this.turn.then(() => this.readNow(count, signal));
    this.turn = mine.catch(() => undefined);
    return mine;
  }

  private async readNow(count: number, signal: AbortSignal): Promise<Uint8Array> {
    signal.throwIfAborted();
    if (this.ended.signal.aborted) throw this.ended.signal.reason;
    while (!this.left?.length) {
      if (this.done) return EMPTY;
      this.it ??= this.make(this.ended.signal)[Symbol.asyncIterator]();
      this.next ??= this.it.next();
      const r = await raceAbort(
        raceAbort(this.next, this.ended.signal).catch((e: unknown) => {
          throw this.ended.signal.aborted ? this.ended.signal.reason : e;
        }),
        signal,
      );
      this.next = undefined;
      if (r.done) {
        this.done = true;
        return EMPTY;
      }
      this.left = toBytes(r.value);
    }
    const out = this.left.subarray(0, count);
    this.left = this.left.length > count ? this.left.subarray(count) : undefined;
    return out;
  }

  /** Starts the stream now rather than on the first read (a subscription sees what happens from its request on). */
  start(): this {
    this.it ??= this.make(this.ended.signal)[Symbol.asyncIterator]();
    return this;
  }

  close(reason: Error = SUPERSEDED): void {
    this.done = true;
    this.ended.abort(reason);
    void this.it?.return?.().catch(() => undefined);
  }
}

/** The open state of one leaf on one fid. */
class LeafFile implements OpenFile {
  private snapshot?: Uint8Array;
  private reply?: Uint8Array;
  /** The value this fid's writes are building (text files), in the pieces written; committed once, at clunk. */
  private textParts: Uint8Array[] = [];
  private textLength = 0;
  private textDirty = false;
  private stream?: StreamReader;
  private wroteText = false;
  /** The message being assembled on this fid (LeafHandlers.whole). */
  private parts?: Uint8Array[];
  private partsLength = 0;

  constructor(
    private readonly spec: LeafSpec,
    private readonly kind: Built['readKind'],
    /** The context now: the names of the instances this fid is bound to may have changed since it was opened. */
    private readonly ctxNow: () => Ctx,
    /** The path as walked, for errors. */
    private readonly path: string,
    private readonly trunc: boolean,
    /** Counts a change to the file, for qid.vers. */
    private readonly changed: () => void,
  ) {}

  private get ctx(): Ctx {
    return this.ctxNow();
  }

  read(offset: number, count: number, req: Pending): Uint8Array | Promise<Uint8Array> {
    const s = this.spec;
    switch (this.kind) {
      case 'read':
      case 'text':
        // What this fid wrote is what it reads back: commit it first.
        if (this.textDirty) {
          return this.commitText().then(() => {
            this.snapshot = toBytes(s.text!.get(this.ctx));
            return this.snapshot.subarray(offset, offset + count);
          });
        }
        if (offset === 0 || !this.snapshot) this.snapshot = toBytes((s.read ?? s.text!.get)(this.ctx));
        return this.snapshot.subarray(offset, offset + count);
      case 'rdwr':
        return (this.reply ?? EMPTY).subarray(offset, offset + count);
      case 'blockOnce':
        if (offset === 0 || !this.snapshot) {
          return s.blockOnce!(this.ctx, req.signal).then((c) => {
            this.snapshot = toBytes(c);
            return this.snapshot.subarray(0, count);
          });
        }
        return this.snapshot.subarray(offset, offset + count);
      case 'stream':
        this.stream ??= new StreamReader((signal) => s.stream!(this.ctx, signal));
        return this.stream.read(count, req.signal);
      case 'rdwrStream':
        this.stream ??= new StreamReader((signal) => s.rdwrStream!(this.ctx, '', signal));
        return this.readStream(this.stream, count, req);
      default:
        throw new NinepError(`${Ename.perm}: ${this.path} is write-only`);
    }
  }

  /** A read waiting when a new request replaced the stream goes on with the new one. */
  private readStream(st: StreamReader, count: number, req: Pending): Promise<Uint8Array> {
    return st.read(count, req.signal).catch((e: unknown) => {
      if (e !== SUPERSEDED) throw e;
      return this.stream && this.stream !== st ? this.readStream(this.stream, count, req) : EMPTY;
    });
  }

  async write(offset: number, data: Uint8Array, req: Pending): Promise<number> {
    const s = this.spec;
    if (s.write && s.whole) {
      if (offset === 0 && this.parts) await this.deliver(req.signal);
      if (offset !== this.partsLength)
        throw new NinepError(
          `${Ename.badOffset}: ${offset}: a message is written in order (${this.partsLength} bytes so far)`,
        );
      if (this.partsLength + data.length > MAX_MESSAGE)
        throw new NinepError(`${this.path}: message longer than ${MAX_MESSAGE} bytes`);
      (this.parts ??= []).push(data);
      this.partsLength += data.length;
      return data.length;
    }
    if (s.write) {
      try {
        await s.write(this.ctx, data, offset, req.signal);
      } finally {
        this.changed();
      }
      return data.length;
    }
    if (s.text) {
      // The writes of one open build the new value, committed once at clunk (its error is the Tclunk's): chunked
      // writes and appends cost linear time, not a copy and a save each.
      if (!this.wroteText && offset > 0 && !this.trunc) {
        // The first write lands past 0 on a fid opened without OTRUNC: an append at the end the client learnt from
        // stat (echo >> plan through 9pfuse or a kernel mount), or an edit in place. It edits the current value.
        const current = toBytes(s.text.get(this.ctx));
        this.textParts = [current];
        this.textLength = current.length;
      }
      const len = this.textLength;
      if (offset > len)
        throw new NinepError(`${Ename.badOffset}: write at ${offset} would leave a hole (value is ${len} bytes)`);
      if (offset + data.length > MAX_TEXT) throw new NinepError(`${this.path}: value longer than ${MAX_TEXT} bytes`);
      if (offset === len) this.textParts.push(data);
      else {
        // Rewriting what this fid already wrote: flatten once.
        const next = new Uint8Array(Math.max(len, offset + data.length));
        next.set(concat(this.textParts));
        next.set(data, offset);
        this.textParts = [next];
      }
      this.textLength = Math.max(len, offset + data.length);
      this.textDirty = true;
      this.wroteText = true;
      return data.length;
    }
    const request = new TextDecoder().decode(data);
    if (s.rdwr) {
      this.reply = undefined;
      this.reply = toBytes(await s.rdwr(this.ctx, request, req.signal));
      return data.length;
    }
    if (s.rdwrStream) {
      // A new request replaces the subscription: the old stream's signal aborts and it is returned; reads waiting
      // on it go on with the new one, so nothing of the old request is delivered after this write.
      const old = this.stream;
      this.stream = new StreamReader((signal) => s.rdwrStream!(this.ctx, request, signal)).start();
      old?.close();
      return data.length;
    }
    throw new NinepError(`${Ename.perm}: ${this.path} is read-only`);
  }

  /** Saves the value this fid's writes built. */
  private async commitText(): Promise<void> {
    if (!this.textDirty) return;
    this.textDirty = false;
    const value = this.textParts.length === 1 ? this.textParts[0]! : concat(this.textParts);
    this.textParts = [value];
    try {
      await this.spec.text!.set(this.ctx, new TextDecoder().decode(value));
    } finally {
      this.changed();
    }
  }

  /** Hands the assembled message to the write handler. */
  private async deliver(signal?: AbortSignal): Promise<void> {
    const parts = this.parts;
    if (!parts) return;
    this.parts = undefined;
    this.partsLength = 0;
    const data = parts.length === 1 ? parts[0]! : concat(parts);
    try {
      await this.spec.write!(this.ctx, data, 0, signal ?? new AbortController().signal);
    } finally {
      this.changed();
    }
  }

  close(): void | Promise<void> {
    this.stream?.close(new NinepError(`${this.path}: fid clunked`));
    if (this.trunc && !this.wroteText && this.spec.text) {
      void Promise.resolve(this.spec.text.set(this.ctx, '')).catch(() => undefined);
      this.changed();
    }
    if (this.parts) return this.deliver();
    if (this.textDirty) return this.commitText();
  }
}
