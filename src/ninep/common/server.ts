/**
 * The 9P2000 protocol core: fids, tags, flush, msize, permissions and authentication, over any ByteChannel.
 * What the files are is the FileServer's business; this module only keeps the protocol's promises.
 *
 * Every request runs as soon as it arrives and replies when it is done, so a read that blocks (a stream, a
 * sub-agent call) never holds up the requests behind it. Fid-table changes happen synchronously on arrival,
 * so pipelined requests (walk, then open the new fid) see each other in order.
 */
import type { ByteChannel } from './channel.js';
import { decode, encode, packStats, truncateUtf8, type Qid, type RMessage, type Stat, type TMessage } from './codec.js';
import {
  DMDIR,
  HEADER_SIZE,
  IOHDRSZ,
  NOFID,
  NOTAG,
  OEXEC,
  ORCLOSE,
  ORDWR,
  OTRUNC,
  OWRITE,
  QTAUTH,
  QTDIR,
  Type,
  VERSION,
} from './constants.js';
import { Ename, NinepError, ProtocolError, errorString } from './errors.js';
import { Framer } from './framer.js';

export interface User {
  readonly name: string;
  readonly groups: readonly string[];
  /**
   * Who the server decided this connection belongs to (ServerOptions.authorize): the file server's own notion of
   * identity, opaque to the protocol core. Absent without an authorize hook.
   */
  readonly principal?: unknown;
}

/**
 * The request a read or write serves. Its signal aborts when the request is flushed or the connection ends; it is
 * made on first use, so a handler that answers at once (most do) costs no AbortController.
 */
export interface Pending {
  readonly signal: AbortSignal;
}

/** An open file: the per-open state a FileServer hands back from open(). */
export interface OpenFile {
  read(offset: number, count: number, req: Pending): Uint8Array | Promise<Uint8Array>;
  write(offset: number, data: Uint8Array, req: Pending): number | Promise<number>;
  /**
   * Called once when the fid is clunked or its connection ends. It may finish work (deliver what the fid's writes
   * assembled): a rejection is the Tclunk's Rerror (the fid is gone all the same).
   */
  close(): void | Promise<void>;
}

/**
 * What a file server provides. Nodes are opaque to the core; it asks for their stat (for qids and
 * permission checks) and walks, lists, opens and changes them through these hooks. Walking ".." is done by
 * the core from the fid's path, so walk() only ever sees real names.
 */
export interface FileServer<N> {
  attach(user: User, aname: string): N;
  walk(dir: N, name: string, user: User): N;
  stat(node: N): Stat;
  readdir(dir: N, user: User): N[];
  open(node: N, mode: number, user: User): OpenFile;
  create?(dir: N, name: string, perm: number, mode: number, user: User): N | Promise<N>;
  remove?(node: N, user: User): void | Promise<void>;
  /** Applies a Twstat; `changes` holds the "don't touch" values for fields left alone. Returns the node as it now is. */
  wstat?(node: N, changes: Stat, user: User): N | Promise<N>;
}

/** One authentication exchange, carried by reads and writes on an auth fid. */
export interface AuthConversation {
  read(count: number): Uint8Array | Promise<Uint8Array>;
  write(data: Uint8Array): number | Promise<number>;
  /** Whether this conversation has proved the identity `uname` attaching to `aname`. */
  authenticated(uname: string, aname: string): boolean;
}

export interface AuthProvider {
  /** `origin` is what the transport knew of the connection (Server.serve's second argument). */
  start(uname: string, aname: string, origin: unknown): AuthConversation;
}

/** What an attach says about itself, for ServerOptions.authorize. */
export interface AttachRequest {
  readonly uname: string;
  readonly aname: string;
  /** What the transport knew of the connection (Server.serve's second argument), e.g. the peer's credentials. */
  readonly origin: unknown;
  /** The conversation held by the attach's afid, if it gave one. */
  readonly auth?: AuthConversation;
}

export interface ServerOptions<N> {
  fs: FileServer<N>;
  /** Largest msize granted; a client asking for more gets this. */
  maxMsize?: number;
  /** When absent, Tauth is answered with "no auth required" and attach takes afid = NOFID. */
  auth?: AuthProvider;
  /**
   * Decides who an attaching client is, from facts it cannot forge (the connection's origin, what its auth
   * conversation proved), and returns the User its fids act as; throws to refuse the attach with that message.
   * With this hook the claimed uname is only a claim: an afid that proved nothing is not a refusal by itself
   * (clients such as plan9port's try to authenticate whenever the server offers it), the hook decides.
   */
  authorize?: (req: AttachRequest) => User;
  groupsOf?: (uname: string) => readonly string[];
  /** Told about connections closed for protocol errors (and limits and timeouts), so the daemon can log them. */
  onProtocolError?: (message: string) => void;
  /**
   * Write backpressure: while more than this many reply bytes wait unsent on a connection (on channels that can
   * tell, i.e. sockets), its requests are not read, so a client that never reads its replies cannot grow the
   * server. At least 1 MiB; default DEFAULT_LIMITS.maxUnsent.
   */
  maxUnsent?: number;
  /** Requests in progress per connection; one more is refused with an Rerror naming the limit. */
  maxOutstanding?: number;
  /** Fids per connection; an attach, walk or auth to one more is refused with an Rerror naming the limit. */
  maxFids?: number;
  /** Milliseconds a connection may take to finish Tversion before it is closed (and logged). 0: no limit. */
  versionTimeout?: number;
  /** Milliseconds a frame may stay half-received before it is dropped and its connection closed (and logged). 0: no limit. */
  frameTimeout?: number;
  /**
   * Bytes held in unfinished frames across all connections. Past it, a connection with more than 64 KiB of an
   * unfinished frame is not read (the kernel holds the rest) until others finish or time out their frames; its
   * frame's clock (frameTimeout) keeps running meanwhile.
   */
  maxPartialBytes?: number;
}

/** The limits a Server applies when its options leave them out. */
export const DEFAULT_LIMITS = {
  maxUnsent: 4 * 1024 * 1024,
  maxOutstanding: 1024,
  maxFids: 65536,
  versionTimeout: 30_000,
  frameTimeout: 30_000,
  maxPartialBytes: 16 * 1024 * 1024,
} as const;

/** An unfinished frame this small is always read on, whatever the budget: small requests never wait. */
const SMALL_PARTIAL = 64 * 1024;

/** Most bytes of an unfinished frame held before Tversion has set msize: a Tversion is a few dozen bytes. */
const PREVERSION_MAX_FRAME = 8192;

export const DEFAULT_MAX_MSIZE = 1024 * 1024 + IOHDRSZ;
const MIN_MSIZE = 256;
/** Longest error string sent, in bytes; longer ones are cut. */
const ERRMAX = 4096;

export class Server<N> {
  readonly connections = new Set<Connection<N>>();
  /** Bytes held in unfinished frames across connections (see ServerOptions.maxPartialBytes). */
  partialBytes = 0;
  /** Connections not read because partialBytes is over budget. */
  readonly starved = new Set<Connection<N>>();
  constructor(readonly options: ServerOptions<N>) {}

  /** Reads starved connections again while the partial-frame budget allows. */
  wake(): void {
    const budget = this.options.maxPartialBytes ?? DEFAULT_LIMITS.maxPartialBytes;
    for (const c of this.starved) {
      if (this.partialBytes > budget) return;
      this.starved.delete(c);
      c.unstarve();
    }
  }

  /**
   * Serves 9P on a channel until it closes. `origin` is what the transport knows of the other end (peer
   * credentials, "this is the embedding app's own channel"), handed to the auth and authorize hooks.
   */
  serve(channel: ByteChannel, origin?: unknown): Connection<N> {
    const conn = new Connection(this, channel, origin);
    this.connections.add(conn);
    return conn;
  }

  /** Closes every connection: pending requests are cancelled and every fid clunked. */
  close(): void {
    for (const c of [...this.connections]) c.close();
  }
}

interface Fid<N> {
  path: N[];
  user: User;
  qid: Qid;
  mode?: number;
  file?: OpenFile;
  dir?: { entries: Uint8Array[]; next: number; offset: number };
  auth?: AuthConversation;
}

class Request implements Pending {
  private controller?: AbortController;
  private aborted = false;
  /** Dropped without a reply: the connection ended or a Tversion started over. */
  flushed = false;
  /** Tags of the Tflushes waiting for this request: each is answered right after its reply (lib9p's order). */
  flushes?: number[];
  constructor(readonly tag: number) {}
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      // Asked for after the flush: born aborted.
      if (this.aborted) this.controller.abort(new NinepError(Ename.interrupted));
    }
    return this.controller.signal;
  }
  abort(): void {
    this.aborted = true;
    this.controller?.abort(new NinepError(Ename.interrupted));
  }
}

type Reply = RMessage | Promise<RMessage>;

const EMPTY = new Uint8Array(0);

const err = (tag: number, ename: string): RMessage => ({ type: Type.Rerror, tag, ename });

function canAccess(st: Stat, user: User, need: number): boolean {
  let perm = st.mode & 7;
  if (st.uid === user.name) perm |= (st.mode >>> 6) & 7;
  if (st.gid === user.name || user.groups.includes(st.gid)) perm |= (st.mode >>> 3) & 7;
  return (perm & need) === need;
}

function openNeeds(mode: number): number {
  const base = [4, 2, 6, 1][mode & 3]!;
  return mode & OTRUNC ? base | 2 : base;
}

const readable = (mode: number): boolean => (mode & 3) !== OWRITE;
const writable = (mode: number): boolean => (mode & 3) === OWRITE || (mode & 3) === ORDWR;

export class Connection<N> {
  private readonly fs: FileServer<N>;
  private readonly fids = new Map<number, Fid<N>>();
  private readonly pending = new Map<number, Request>();
  private readonly framer: Framer;
  private msize: number;
  private versioned = false;
  private closed = false;
  /** Frames received but not yet handled, held while the connection's replies are backed up. */
  private queue: Uint8Array[] = [];
  private queued = 0;
  private paused = false;
  /** Not read because the server's partial-frame budget is spent (Server.starved). */
  private starving = false;
  /** This connection's share of Server.partialBytes. */
  private held = 0;
  private readonly maxUnsent: number;
  private readonly maxOutstanding: number;
  private readonly maxFids: number;
  private versionTimer?: ReturnType<typeof setTimeout>;
  private frameTimer?: ReturnType<typeof setTimeout>;

  constructor(
    private readonly server: Server<N>,
    private readonly channel: ByteChannel,
    private readonly origin: unknown,
  ) {
    const o = server.options;
    this.fs = o.fs;
    this.msize = o.maxMsize ?? DEFAULT_MAX_MSIZE;
    this.maxUnsent = Math.max(o.maxUnsent ?? DEFAULT_LIMITS.maxUnsent, 1024 * 1024);
    this.maxOutstanding = o.maxOutstanding ?? DEFAULT_LIMITS.maxOutstanding;
    this.maxFids = o.maxFids ?? DEFAULT_LIMITS.maxFids;
    this.framer = new Framer(this.msize);
    const vt = o.versionTimeout ?? DEFAULT_LIMITS.versionTimeout;
    if (vt > 0) this.versionTimer = setTimeout(() => this.expire(`no Tversion within ${vt / 1000} s`), vt);
    channel.start(
      (b) => this.receive(b),
      () => this.teardown(),
      () => this.drained(),
    );
  }

  close(): void {
    if (this.closed) return;
    this.channel.close();
    this.teardown();
  }

  private expire(why: string): void {
    if (this.closed) return;
    this.server.options.onProtocolError?.(`${why}; closing the connection`);
    this.close();
  }

  private receive(chunk: Uint8Array): void {
    let frames: Uint8Array[];
    try {
      frames = this.framer.push(chunk);
    } catch (e) {
      this.server.options.onProtocolError?.(errorString(e));
      this.close();
      return;
    }
    this.watchPartialFrame(frames.length > 0);
    if (this.queued < this.queue.length) for (const f of frames) this.queue.push(f);
    else {
      this.queue = frames;
      this.queued = 0;
    }
    this.pump();
    this.account();
    // Until Tversion, no more than a Tversion's worth is held for an unfinished frame: a stranger cannot make us
    // hold 1 MiB. (Checked after the frames were handled, so a Tversion pipelined with a large request is fine.)
    if (!this.versioned && !this.closed && this.framer.pending > PREVERSION_MAX_FRAME) {
      this.expire(`${this.framer.pending} bytes of a frame before Tversion (limit ${PREVERSION_MAX_FRAME})`);
    }
  }

  /** Updates the server's partial-frame total; stops reading this connection when it is over budget. */
  private account(): void {
    const now = this.closed ? 0 : this.framer.pending;
    const before = this.held;
    this.server.partialBytes += now - before;
    this.held = now;
    if (now < before) this.server.wake();
    const budget = this.server.options.maxPartialBytes ?? DEFAULT_LIMITS.maxPartialBytes;
    if (!this.closed && !this.starving && now > SMALL_PARTIAL && this.server.partialBytes > budget) {
      this.starving = true;
      this.server.starved.add(this);
      // Its frame's clock keeps running: it holds part of the budget, which must come back.
      if (!this.paused) this.channel.pause?.();
    }
  }

  /** The partial-frame budget allows reading this connection again (Server.wake). */
  unstarve(): void {
    if (!this.starving || this.closed) return;
    this.starving = false;
    if (!this.paused) this.channel.resume?.();
  }

  /** Handles queued frames until they run out or the connection's unsent replies pass maxUnsent. */
  private pump(): void {
    while (this.queued < this.queue.length) {
      if (this.closed) return;
      if ((this.channel.backlog?.() ?? 0) > this.maxUnsent) {
        if (!this.paused) {
          this.paused = true;
          if (!this.starving) this.channel.pause?.();
          this.watchPartialFrame(false);
        }
        return;
      }
      const f = this.queue[this.queued]!;
      this.queue[this.queued++] = EMPTY;
      this.handle(f);
    }
    this.queue = [];
    this.queued = 0;
  }

  /** The channel wrote out its backlog: read requests again. */
  private drained(): void {
    if (!this.paused || this.closed) return;
    this.paused = false;
    if (!this.starving) this.channel.resume?.();
    this.watchPartialFrame(true);
    this.pump();
  }

  /**
   * Times a half-received frame: started when one begins, restarted when a frame completes and another is under
   * way, stopped while the connection is paused (the client cannot finish a frame we are not reading).
   */
  private watchPartialFrame(progress: boolean): void {
    const t = this.server.options.frameTimeout ?? DEFAULT_LIMITS.frameTimeout;
    if (t <= 0) return;
    if (this.framer.pending === 0 || this.paused || this.closed) {
      clearTimeout(this.frameTimer);
      this.frameTimer = undefined;
      return;
    }
    if (this.frameTimer && !progress) return;
    clearTimeout(this.frameTimer);
    this.frameTimer = setTimeout(
      () => this.expire(`a frame stayed unfinished for ${t / 1000} s (${this.framer.pending} bytes received)`),
      t,
    );
  }

  private handle(frame: Uint8Array): void {
    let m: TMessage;
    try {
      const decoded = decode(frame);
      if (decoded.type % 2 === 1) {
        this.send(err(decoded.tag, `${Ename.botch}: type ${decoded.type} is not a request`));
        return;
      }
      m = decoded as TMessage;
    } catch (e) {
      if (e instanceof ProtocolError && !e.fatal && e.tag !== undefined) this.send(err(e.tag, e.message));
      else {
        this.server.options.onProtocolError?.(errorString(e));
        this.close();
      }
      return;
    }
    if (m.type === Type.Tversion) {
      this.send(this.version(m.tag, m.msize, m.version));
      return;
    }
    if (!this.versioned) {
      this.send(err(m.tag, Ename.noVersion));
      return;
    }
    if (m.type !== Type.Tflush && this.pending.size >= this.maxOutstanding) {
      this.send(err(m.tag, `too many outstanding requests (limit ${this.maxOutstanding} per connection)`));
      return;
    }
    if (this.pending.has(m.tag)) {
      this.send(err(m.tag, Ename.dupTag));
      return;
    }
    if (m.type === Type.Tflush) {
      // As lib9p: the handler is told (its signal aborts) and either finishes or gives up before having any effect;
      // its reply goes out first and the Rflush after it, so the client knows which happened.
      const old = this.pending.get(m.oldtag);
      if (old && m.oldtag !== m.tag) {
        (old.flushes ??= []).push(m.tag);
        old.abort();
      } else this.send({ type: Type.Rflush, tag: m.tag });
      return;
    }
    const req = new Request(m.tag);
    this.pending.set(m.tag, req);
    let reply: Reply;
    try {
      reply = this.dispatch(m, req);
    } catch (e) {
      reply = err(m.tag, errorString(e));
    }
    if (reply instanceof Promise) {
      reply.then(
        (r) => this.respond(req, r),
        (e: unknown) => this.respond(req, err(m.tag, errorString(e))),
      );
    } else this.respond(req, reply);
  }

  private respond(req: Request, reply: RMessage): void {
    if (req.flushed || this.closed) return;
    this.pending.delete(req.tag);
    this.send(reply);
    if (req.flushes) for (const tag of req.flushes) this.send({ type: Type.Rflush, tag });
  }

  private send(m: RMessage): void {
    if (this.closed) return;
    let frame: Uint8Array;
    try {
      // An error string (which may echo a client's 64 KiB name) must fit in one frame of the client's msize.
      frame = encode(
        m.type === Type.Rerror
          ? { ...m, ename: truncateUtf8(m.ename, Math.min(ERRMAX, this.msize - HEADER_SIZE - 2)) }
          : m,
      );
    } catch (e) {
      frame = encode({
        type: Type.Rerror,
        tag: m.tag,
        ename: `reply could not be encoded: ${truncateUtf8(errorString(e), 200)}`,
      });
    }
    this.channel.send(frame);
  }

  private dispatch(m: TMessage, req: Request): Reply {
    switch (m.type) {
      case Type.Tauth:
        return this.auth(m.tag, m.afid, m.uname, m.aname);
      case Type.Tattach:
        return this.attach(m.tag, m.fid, m.afid, m.uname, m.aname);
      case Type.Twalk:
        return this.walk(m.tag, m.fid, m.newfid, m.wnames);
      case Type.Topen:
        return this.open(m.tag, m.fid, m.mode);
      case Type.Tcreate:
        return this.create(m.tag, m.fid, m.name, m.perm, m.mode);
      case Type.Tread:
        return this.read(m.tag, m.fid, m.offset, m.count, req);
      case Type.Twrite:
        return this.write(m.tag, m.fid, m.offset, m.data, req);
      case Type.Tclunk:
        return this.clunk(m.tag, m.fid);
      case Type.Tremove:
        return this.remove(m.tag, m.fid);
      case Type.Tstat:
        return this.stat(m.tag, m.fid);
      case Type.Twstat:
        return this.wstat(m.tag, m.fid, m.stat);
      default:
        return err(m.tag, `${Ename.botch}: type ${m.type}`);
    }
  }

  private version(tag: number, msize: number, version: string): RMessage {
    // A Tversion aborts everything outstanding and starts a fresh session on this connection.
    for (const r of this.pending.values()) {
      r.flushed = true;
      r.abort();
    }
    this.pending.clear();
    this.clunkAll();
    const cap = this.server.options.maxMsize ?? DEFAULT_MAX_MSIZE;
    if (msize < MIN_MSIZE) return err(tag, `msize ${msize} is too small (at least ${MIN_MSIZE})`);
    this.msize = Math.min(msize, cap);
    this.framer.maxSize = this.msize;
    // 9P2000.u and .L clients are answered with plain 9P2000, which they must accept or hang up on.
    this.versioned = version.startsWith(VERSION);
    if (this.versioned) {
      clearTimeout(this.versionTimer);
      this.versionTimer = undefined;
    }
    return {
      type: Type.Rversion,
      tag: tag === NOTAG ? NOTAG : tag,
      msize: this.msize,
      version: this.versioned ? VERSION : 'unknown',
    };
  }

  private newFid(fid: number): void {
    if (fid === NOFID) throw new NinepError(`${Ename.badFid}: NOFID`);
    if (this.fids.has(fid)) throw new NinepError(Ename.dupFid);
    if (this.fids.size >= this.maxFids) throw new NinepError(`too many fids (limit ${this.maxFids} per connection)`);
  }

  private fid(fid: number): Fid<N> {
    const f = this.fids.get(fid);
    if (!f) throw new NinepError(Ename.badFid);
    return f;
  }

  private user(uname: string): User {
    return { name: uname, groups: this.server.options.groupsOf?.(uname) ?? [] };
  }

  private auth(tag: number, afid: number, uname: string, aname: string): Reply {
    const provider = this.server.options.auth;
    if (!provider) return err(tag, Ename.noAuth);
    this.newFid(afid);
    const qid: Qid = { type: QTAUTH, vers: 0, path: 0n };
    this.fids.set(afid, {
      path: [],
      user: this.user(uname),
      qid,
      auth: provider.start(uname, aname, this.origin),
      mode: ORDWR,
    });
    return { type: Type.Rauth, tag, aqid: qid };
  }

  private attach(tag: number, fid: number, afid: number, uname: string, aname: string): Reply {
    this.newFid(fid);
    let user: User;
    const { auth, authorize } = this.server.options;
    if (authorize) {
      const a = afid === NOFID ? undefined : this.fids.get(afid)?.auth;
      if (afid !== NOFID && !a) return err(tag, Ename.badFid);
      user = authorize({ uname, aname, origin: this.origin, ...(a && { auth: a }) });
    } else {
      if (auth) {
        const a = afid === NOFID ? undefined : this.fids.get(afid)?.auth;
        if (!a || !a.authenticated(uname, aname)) return err(tag, Ename.authFailed);
      } else if (afid !== NOFID) return err(tag, Ename.noAuth);
      user = this.user(uname);
    }
    const root = this.fs.attach(user, aname);
    const qid = this.fs.stat(root).qid;
    this.fids.set(fid, { path: [root], user, qid });
    return { type: Type.Rattach, tag, qid };
  }

  private walk(tag: number, fidno: number, newfid: number, wnames: string[]): Reply {
    const f = this.fid(fidno);
    if (f.auth) throw new NinepError(Ename.badFid);
    if (f.mode !== undefined) throw new NinepError(Ename.walkDone);
    if (newfid !== fidno) this.newFid(newfid);
    const path = [...f.path];
    const qids: Qid[] = [];
    let qid = f.qid;
    // Each step's stat serves both as its qid and as the next step's directory check.
    let st = wnames.length ? this.fs.stat(path[path.length - 1]!) : undefined;
    for (const name of wnames) {
      try {
        const cur = path[path.length - 1]!;
        if (!(st!.qid.type & QTDIR)) throw new NinepError(Ename.notDir);
        if (!canAccess(st!, f.user, 1)) throw new NinepError(Ename.perm);
        if (name === '..') {
          if (path.length > 1) path.pop();
        } else if (name === '.' || name.includes('/')) {
          throw new NinepError(`${Ename.notFound}: ${name}`);
        } else path.push(this.fs.walk(cur, name, f.user));
        st = this.fs.stat(path[path.length - 1]!);
        qid = st.qid;
        qids.push(qid);
      } catch (e) {
        if (qids.length === 0) throw e;
        // A partial walk answers with the qids it got and leaves newfid unused.
        return { type: Type.Rwalk, tag, qids };
      }
    }
    this.fids.set(newfid, { path, user: f.user, qid });
    return { type: Type.Rwalk, tag, qids };
  }

  private open(tag: number, fidno: number, mode: number): Reply {
    const f = this.fid(fidno);
    if (f.auth) throw new NinepError(Ename.badFid);
    if (f.mode !== undefined) throw new NinepError(Ename.opened);
    if (mode & ~(3 | OTRUNC | ORCLOSE)) throw new NinepError(`${Ename.badMode}: ${mode}`);
    const node = f.path[f.path.length - 1]!;
    const st = this.fs.stat(node);
    this.checkOpen(f, st, mode);
    if (st.qid.type & QTDIR) f.dir = { entries: [], next: 0, offset: 0 };
    else f.file = this.fs.open(node, mode, f.user);
    f.mode = mode;
    f.qid = st.qid;
    return { type: Type.Ropen, tag, qid: st.qid, iounit: this.msize - IOHDRSZ };
  }

  private checkOpen(f: Fid<N>, st: Stat, mode: number): void {
    if (st.qid.type & QTDIR && ((mode & 3) !== 0 || mode & OTRUNC)) throw new NinepError(Ename.isDir);
    if ((mode & 3) === OEXEC && st.qid.type & QTDIR) throw new NinepError(Ename.isDir);
    if (!canAccess(st, f.user, openNeeds(mode))) throw new NinepError(Ename.perm);
    if (mode & ORCLOSE) {
      const parent = f.path[f.path.length - 2];
      if (!parent || !canAccess(this.fs.stat(parent), f.user, 2)) throw new NinepError(Ename.perm);
    }
  }

  private async create(tag: number, fidno: number, name: string, perm: number, mode: number): Promise<RMessage> {
    const f = this.fid(fidno);
    if (f.auth || f.mode !== undefined) throw new NinepError(Ename.opened);
    if (name === '.' || name === '..' || name === '' || name.includes('/'))
      throw new NinepError(`bad file name: ${JSON.stringify(name)}`);
    const dir = f.path[f.path.length - 1]!;
    const dst = this.fs.stat(dir);
    if (!(dst.qid.type & QTDIR)) throw new NinepError(Ename.notDir);
    if (!canAccess(dst, f.user, 2)) throw new NinepError(Ename.perm);
    if (perm & DMDIR && ((mode & 3) !== 0 || mode & OTRUNC)) throw new NinepError(Ename.isDir);
    if (!this.fs.create) throw new NinepError(Ename.noCreate);
    const node = await this.fs.create(dir, name, perm, mode, f.user);
    if (this.fids.get(fidno) !== f) throw new NinepError(Ename.badFid);
    const st = this.fs.stat(node);
    f.path = [...f.path, node];
    if (st.qid.type & QTDIR) f.dir = { entries: [], next: 0, offset: 0 };
    else f.file = this.fs.open(node, mode, f.user);
    f.mode = mode;
    f.qid = st.qid;
    return { type: Type.Rcreate, tag, qid: st.qid, iounit: this.msize - IOHDRSZ };
  }

  private read(tag: number, fidno: number, offset: number, count: number, req: Pending): Reply {
    const f = this.fid(fidno);
    if (count > this.msize - IOHDRSZ) throw new NinepError(`${Ename.badCount}: ${count} > ${this.msize - IOHDRSZ}`);
    if (f.auth) return Promise.resolve(f.auth.read(count)).then((data) => ({ type: Type.Rread, tag, data }));
    if (f.mode === undefined || !readable(f.mode)) throw new NinepError(Ename.notOpen);
    if (f.dir) return { type: Type.Rread, tag, data: this.readDir(f, offset, count) };
    const data = f.file!.read(offset, count, req);
    if (data instanceof Promise)
      return data.then((d) => ({ type: Type.Rread, tag, data: d.length > count ? d.subarray(0, count) : d }));
    return { type: Type.Rread, tag, data: data.length > count ? data.subarray(0, count) : data };
  }

  private readDir(f: Fid<N>, offset: number, count: number): Uint8Array {
    const d = f.dir!;
    if (offset === 0) {
      const dir = f.path[f.path.length - 1]!;
      d.entries = this.fs.readdir(dir, f.user).map((n) => packStats([this.fs.stat(n)]));
      d.next = 0;
      d.offset = 0;
    } else if (offset !== d.offset) throw new NinepError(`${Ename.badOffset} in directory read: ${offset}`);
    const out: Uint8Array[] = [];
    let size = 0;
    while (d.next < d.entries.length && size + d.entries[d.next]!.length <= count) {
      const e = d.entries[d.next++]!;
      out.push(e);
      size += e.length;
    }
    if (out.length === 0 && d.next < d.entries.length)
      throw new NinepError(`count ${count} too small for a directory entry`);
    d.offset += size;
    const buf = new Uint8Array(size);
    let pos = 0;
    for (const e of out) {
      buf.set(e, pos);
      pos += e.length;
    }
    return buf;
  }

  private write(tag: number, fidno: number, offset: number, data: Uint8Array, req: Pending): Reply {
    const f = this.fid(fidno);
    if (data.length > this.msize - IOHDRSZ)
      throw new NinepError(`${Ename.badCount}: ${data.length} > ${this.msize - IOHDRSZ}`);
    if (f.auth) return Promise.resolve(f.auth.write(data)).then((count) => ({ type: Type.Rwrite, tag, count }));
    if (f.mode === undefined || !writable(f.mode)) throw new NinepError(Ename.notOpen);
    if (f.dir) throw new NinepError(Ename.isDir);
    // Incoming data is a view into the connection's receive buffer; handlers may keep it.
    const n = f.file!.write(offset, data.slice(), req);
    if (n instanceof Promise) return n.then((count) => ({ type: Type.Rwrite, tag, count }));
    return { type: Type.Rwrite, tag, count: n };
  }

  private async clunk(tag: number, fidno: number): Promise<RMessage> {
    const f = this.fid(fidno);
    this.fids.delete(fidno);
    await this.release(f);
    return { type: Type.Rclunk, tag };
  }

  /** Closes a fid's open file and performs its ORCLOSE removal. */
  private async release(f: Fid<N>): Promise<void> {
    try {
      await f.file?.close();
    } finally {
      if (f.mode !== undefined && f.mode & ORCLOSE && this.fs.remove)
        await this.fs.remove(f.path[f.path.length - 1]!, f.user);
    }
  }

  private async remove(tag: number, fidno: number): Promise<RMessage> {
    const f = this.fid(fidno);
    // Tremove clunks the fid whether or not the removal succeeds.
    this.fids.delete(fidno);
    await f.file?.close();
    const parent = f.path[f.path.length - 2];
    if (f.auth || !parent) throw new NinepError(Ename.noRemove);
    if (!canAccess(this.fs.stat(parent), f.user, 2)) throw new NinepError(Ename.perm);
    if (!this.fs.remove) throw new NinepError(Ename.noRemove);
    await this.fs.remove(f.path[f.path.length - 1]!, f.user);
    return { type: Type.Rremove, tag };
  }

  private stat(tag: number, fidno: number): Reply {
    const f = this.fid(fidno);
    if (f.auth) {
      const qid = f.qid;
      return {
        type: Type.Rstat,
        tag,
        stat: {
          type: 0,
          dev: 0,
          qid,
          mode: 0x08000000 | 0o600,
          atime: 0,
          mtime: 0,
          length: 0,
          name: 'auth',
          uid: f.user.name,
          gid: f.user.name,
          muid: '',
        },
      };
    }
    return { type: Type.Rstat, tag, stat: this.fs.stat(f.path[f.path.length - 1]!) };
  }

  private async wstat(tag: number, fidno: number, changes: Stat): Promise<RMessage> {
    const f = this.fid(fidno);
    if (f.auth) throw new NinepError(Ename.noWstat);
    const node = f.path[f.path.length - 1]!;
    if (changes.name !== '') {
      const parent = f.path[f.path.length - 2];
      if (!parent) throw new NinepError('cannot rename the root');
      if (!canAccess(this.fs.stat(parent), f.user, 2)) throw new NinepError(Ename.perm);
    }
    if (!this.fs.wstat) throw new NinepError(Ename.noWstat);
    const updated = await this.fs.wstat(node, changes, f.user);
    f.path = [...f.path.slice(0, -1), updated];
    return { type: Type.Rwstat, tag };
  }

  private clunkAll(): void {
    const fids = [...this.fids.values()];
    this.fids.clear();
    for (const f of fids) this.release(f).catch(() => undefined);
  }

  /** The channel ended: cancel every pending request and clunk every fid. */
  private teardown(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.versionTimer);
    clearTimeout(this.frameTimer);
    this.queue = [];
    this.queued = 0;
    this.server.starved.delete(this);
    this.account();
    for (const r of this.pending.values()) {
      r.flushed = true;
      r.abort();
    }
    this.pending.clear();
    this.clunkAll();
    this.server.connections.delete(this);
  }
}
