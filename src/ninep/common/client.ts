/**
 * A 9P2000 client over any ByteChannel. Requests are pipelined: each gets its own tag and they complete in
 * whatever order the server answers. An AbortSignal cancels a request with Tflush; the tag is reused only
 * after the server has acknowledged the flush.
 */
import type { ByteChannel } from './channel.js';
import {
  concatBytes,
  decode,
  encode,
  nullStat,
  unpackStats,
  type Message,
  type Qid,
  type RMessage,
  type Rversion,
  type Stat,
  type TMessage,
} from './codec.js';
import { DMDIR, IOHDRSZ, MAXWELEM, NOFID, NOTAG, OREAD, ORDWR, OTRUNC, OWRITE, Type, VERSION } from './constants.js';
import { NinepError, ProtocolError } from './errors.js';
import { Framer } from './framer.js';

export interface ClientOptions {
  uname?: string;
  aname?: string;
  /** msize to ask for; the server may grant less. */
  msize?: number;
  /** Runs the authentication exchange on an auth fid; without it the client attaches with afid = NOFID. */
  authenticate?: (write: (data: Uint8Array) => Promise<void>) => Promise<void>;
  /**
   * A one-message authentication (a shared secret), instead of `authenticate`: Tauth, its write and Tattach go out
   * together, one round trip instead of three. For servers that apply pipelined requests in order, as this
   * library's does.
   */
  authData?: string | Uint8Array;
}

type Untagged<T> = T extends unknown ? Omit<T, 'tag'> : never;
type Request = Untagged<TMessage>;
/** The reply type of each request type: R = T + 1. */
type ReplyOf<T extends number> = Extract<RMessage, { type: Next[T & keyof Next] }>;
type Next = {
  100: 101;
  102: 103;
  104: 105;
  110: 111;
  112: 113;
  114: 115;
  116: 117;
  118: 119;
  120: 121;
  122: 123;
  124: 125;
  126: 127;
};

interface Waiter {
  resolve(m: RMessage): void;
  reject(e: Error): void;
}

const utf8 = new TextEncoder();
const toBytes = (d: string | Uint8Array): Uint8Array => (typeof d === 'string' ? utf8.encode(d) : d);

export function splitPath(path: string): string[] {
  return path.split('/').filter((p) => p !== '' && p !== '.');
}

export class Client {
  private readonly framer: Framer;
  private readonly waiting = new Map<number, Waiter>();
  private readonly freeTags: number[] = [];
  private nextTag = 0;
  private readonly freeFids: number[] = [];
  private nextFid = 1;
  private closedError?: Error;
  private root?: Fid;
  msize: number;

  private constructor(
    private readonly channel: ByteChannel,
    msize: number,
  ) {
    this.msize = msize;
    this.framer = new Framer(msize);
    channel.start(
      (b) => this.receive(b),
      (e) => this.fail(e ?? new Error('9P connection closed')),
    );
  }

  /** Negotiates the version and attaches; the returned client is ready for path operations. */
  static async connect(channel: ByteChannel, opts: ClientOptions = {}): Promise<Client> {
    const c = new Client(channel, opts.msize ?? 1024 * 1024 + IOHDRSZ);
    try {
      const v = (await c.rpcWithTag(NOTAG, { type: Type.Tversion, msize: c.msize, version: VERSION })) as Rversion;
      if (v.version !== VERSION) throw new NinepError(`server speaks ${v.version}, not ${VERSION}`);
      // The server may only lower msize: a bigger grant would let it make us buffer frames of up to 4 GiB.
      if (v.msize > c.msize) throw new NinepError(`server granted msize ${v.msize}, above the ${c.msize} asked for`);
      if (v.msize <= IOHDRSZ) throw new NinepError(`server granted msize ${v.msize}, too small for any data`);
      c.msize = v.msize;
      c.framer.maxSize = v.msize;
      const uname = opts.uname ?? 'none';
      const aname = opts.aname ?? '';
      const afid = opts.authData !== undefined || opts.authenticate ? c.allocFid() : NOFID;
      const fid = c.allocFid();
      let r;
      if (opts.authData !== undefined) {
        const auth = c.rpc({ type: Type.Tauth, afid, uname, aname });
        const write = c.rpc({ type: Type.Twrite, fid: afid, offset: 0, data: toBytes(opts.authData) });
        const attach = c.rpc({ type: Type.Tattach, fid, afid, uname, aname });
        // The first failure is the one that says why (no auth here, a refused secret); the others follow from it.
        attach.catch(() => undefined);
        write.catch(() => undefined);
        await auth;
        await write;
        r = await attach;
      } else if (opts.authenticate) {
        await c.rpc({ type: Type.Tauth, afid, uname, aname });
        const auth = new Fid(c, afid, { type: 0, vers: 0, path: 0n });
        auth.iounit = c.msize - IOHDRSZ;
        await opts.authenticate(async (data) => {
          await auth.write(0, data);
        });
      }
      r ??= await c.rpc({ type: Type.Tattach, fid, afid, uname, aname });
      c.root = new Fid(c, fid, r.qid);
      // The auth fid has served its purpose: its clunk need not be waited for (requests are handled in order).
      if (afid !== NOFID)
        void c.rpc({ type: Type.Tclunk, fid: afid }).then(
          () => c.releaseFid(afid),
          () => undefined,
        );
      return c;
    } catch (e) {
      c.close();
      throw e;
    }
  }

  /** Sends one request and resolves with its reply; an Rerror rejects with NinepError. */
  rpc<R extends Request>(req: R, signal?: AbortSignal): Promise<ReplyOf<R['type']>> {
    return this.rpcWithTag(this.allocTag(), req, signal) as never;
  }

  private rpcWithTag(tag: number, req: Request, signal?: AbortSignal): Promise<RMessage> {
    if (this.closedError) return Promise.reject(this.closedError);
    if (signal?.aborted) {
      this.releaseTag(tag);
      return Promise.reject(signal.reason as Error);
    }
    return new Promise((resolve, reject) => {
      let onAbort: (() => void) | undefined;
      const done = (): void => {
        if (onAbort) signal!.removeEventListener('abort', onAbort);
      };
      const settle = (m: RMessage): void => {
        if (m.type === Type.Rerror) reject(new NinepError(m.ename));
        else if (m.type !== req.type + 1)
          reject(new ProtocolError(`reply type ${m.type} to request type ${req.type}`, tag));
        else resolve(m);
      };
      this.waiting.set(tag, {
        resolve: (m) => {
          done();
          this.releaseTag(tag);
          settle(m);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
      if (signal) {
        onAbort = () => {
          // The request settles only once the flush is answered (the tag stays reserved till then, so a late reply
          // cannot be misattributed). A reply that came before the Rflush means the request took effect (a walk made
          // its fid, a write was applied): it is what the caller gets, so nothing the server holds is forgotten.
          // Otherwise it was abandoned before having any effect, and the caller gets the abort's reason.
          const w = this.waiting.get(tag);
          if (!w) return;
          let late: RMessage | undefined;
          this.waiting.set(tag, { resolve: (m) => void (late = m), reject: (e) => reject(e) });
          let flushTag: number;
          try {
            flushTag = this.allocTag();
          } catch {
            this.waiting.set(tag, w);
            return;
          }
          this.waiting.set(flushTag, {
            resolve: () => {
              this.releaseTag(flushTag);
              this.releaseTag(tag);
              if (late && late.type !== Type.Rerror) settle(late);
              else reject(signal.reason as Error);
            },
            reject: (e) => reject(e),
          });
          this.channel.send(encode({ type: Type.Tflush, tag: flushTag, oldtag: tag }));
        };
        signal.addEventListener('abort', onAbort, { once: true });
      }
      this.channel.send(encode({ ...req, tag } as unknown as Message));
    });
  }

  private receive(chunk: Uint8Array): void {
    let frames: Uint8Array[];
    try {
      frames = this.framer.push(chunk);
    } catch (e) {
      this.fail(e as Error);
      this.channel.close();
      return;
    }
    for (const f of frames) {
      let m: Message;
      try {
        m = decode(f);
      } catch (e) {
        this.fail(e as Error);
        this.channel.close();
        return;
      }
      const w = this.waiting.get(m.tag);
      if (!w) continue;
      if (m.tag === NOTAG) this.waiting.delete(NOTAG);
      w.resolve(m as RMessage);
    }
  }

  private fail(e: Error): void {
    if (this.closedError) return;
    this.closedError = e;
    const all = [...this.waiting.values()];
    this.waiting.clear();
    for (const w of all) w.reject(e);
  }

  private allocTag(): number {
    const t = this.freeTags.pop() ?? this.nextTag++;
    if (t >= NOTAG) throw new Error('too many outstanding 9P requests');
    return t;
  }

  private releaseTag(tag: number): void {
    if (tag === NOTAG) return;
    this.waiting.delete(tag);
    this.freeTags.push(tag);
  }

  /** @internal */
  allocFid(): number {
    return this.freeFids.pop() ?? this.nextFid++;
  }

  /** @internal */
  releaseFid(fid: number): void {
    this.freeFids.push(fid);
  }

  get closed(): boolean {
    return this.closedError !== undefined;
  }

  close(): void {
    this.fail(new Error('9P client closed'));
    this.channel.close();
  }

  /** Walks from the root to `path`, returning a new, unopened fid. */
  async walk(path: string | string[], signal?: AbortSignal): Promise<Fid> {
    if (!this.root) throw new Error('not attached');
    const names = typeof path === 'string' ? splitPath(path) : path;
    const from = this.root;
    let qid = from.qid;
    const fid = this.allocFid();
    let walked = false;
    try {
      let i = 0;
      do {
        const part = names.slice(i, i + MAXWELEM);
        const r = await this.rpc({ type: Type.Twalk, fid: walked ? fid : from.fid, newfid: fid, wnames: part }, signal);
        if (r.qids.length < part.length) throw await this.walkError(names, i + r.qids.length, signal);
        walked = true;
        if (r.qids.length) qid = r.qids[r.qids.length - 1]!;
        i += MAXWELEM;
        // The walk was answered before its flush: the fid exists and is clunked below.
        signal?.throwIfAborted();
      } while (i < names.length);
      return new Fid(this, fid, qid);
    } catch (e) {
      if (walked) await this.rpc({ type: Type.Tclunk, fid }).catch(() => undefined);
      this.releaseFid(fid);
      throw e;
    }
  }

  /**
   * Why `names[k]` could not be walked. A walk that fails past its first element answers with the qids it got,
   * not the reason (the protocol's rule), so the failing element is walked alone, which answers with the
   * server's own error ("permission denied: …" says more than "not found"). Costs two round trips, on failure only.
   */
  private async walkError(names: string[], k: number, signal?: AbortSignal): Promise<Error> {
    const fallback = new NinepError(`${names.slice(0, k + 1).join('/')}: file not found`);
    const tmp = this.allocFid();
    let made = false;
    try {
      for (let i = 0; i < k || !made; i += MAXWELEM) {
        await this.rpc(
          {
            type: Type.Twalk,
            fid: made ? tmp : this.root!.fid,
            newfid: tmp,
            wnames: names.slice(i, Math.min(i + MAXWELEM, k)),
          },
          signal,
        );
        made = true;
      }
      const probe = this.allocFid();
      try {
        const r = await this.rpc({ type: Type.Twalk, fid: tmp, newfid: probe, wnames: [names[k]!] }, signal);
        // It walks now (the tree changed meanwhile): the first answer stands.
        if (r.qids.length) await this.rpc({ type: Type.Tclunk, fid: probe }).catch(() => undefined);
        return fallback;
      } catch (e) {
        return e instanceof NinepError ? new NinepError(`${names.slice(0, k + 1).join('/')}: ${e.message}`) : fallback;
      } finally {
        this.releaseFid(probe);
      }
    } catch {
      return fallback;
    } finally {
      if (made) await this.rpc({ type: Type.Tclunk, fid: tmp }).catch(() => undefined);
      this.releaseFid(tmp);
    }
  }

  /** Walks and opens `path`. */
  async open(path: string, mode: number, signal?: AbortSignal): Promise<Fid> {
    const f = await this.walk(path, signal);
    try {
      await f.open(mode, signal);
      return f;
    } catch (e) {
      await f.clunk().catch(() => undefined);
      throw e;
    }
  }

  private async using<T>(path: string, mode: number, fn: (f: Fid) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const f = await this.open(path, mode, signal);
    try {
      return await fn(f);
    } finally {
      await f.clunk().catch(() => undefined);
    }
  }

  /** Reads a whole file. */
  read(path: string, signal?: AbortSignal): Promise<Uint8Array> {
    return this.using(path, OREAD, (f) => f.readAll(signal), signal);
  }

  async readText(path: string, signal?: AbortSignal): Promise<string> {
    return new TextDecoder().decode(await this.read(path, signal));
  }

  /** Writes `data` to a file from offset 0 (truncating it when `truncate`). */
  async write(
    path: string,
    data: string | Uint8Array,
    opts: { truncate?: boolean; signal?: AbortSignal } = {},
  ): Promise<void> {
    const f = await this.open(path, OWRITE | (opts.truncate ? OTRUNC : 0), opts.signal);
    try {
      await f.writeAll(toBytes(data), opts.signal);
    } catch (e) {
      await f.clunk().catch(() => undefined);
      throw e;
    }
    // A file that takes a message whole acts on it at clunk, and says there whether it could.
    await f.clunk();
  }

  /** Writes a request and reads the reply on the same fid: the Rdwr pattern of control files. */
  rdwr(path: string, data: string | Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    return this.using(
      path,
      ORDWR,
      async (f) => {
        await f.writeAll(toBytes(data), signal);
        return f.readAll(signal);
      },
      signal,
    );
  }

  async rdwrText(path: string, data: string | Uint8Array, signal?: AbortSignal): Promise<string> {
    return new TextDecoder().decode(await this.rdwr(path, data, signal));
  }

  /**
   * Streams a file until EOF or until `signal` aborts. With `request`, it is written first on the same fid
   * (streaming Rdwr: a filter, then its matches).
   */
  async *stream(
    path: string,
    opts: { request?: string | Uint8Array; signal?: AbortSignal } = {},
  ): AsyncGenerator<Uint8Array> {
    const f = await this.open(path, opts.request === undefined ? OREAD : ORDWR, opts.signal);
    try {
      if (opts.request !== undefined) await f.writeAll(toBytes(opts.request), opts.signal);
      let offset = 0;
      for (;;) {
        const chunk = await f.read(offset, f.iounit, opts.signal);
        if (chunk.length === 0) return;
        offset += chunk.length;
        yield chunk;
      }
    } finally {
      await f.clunk().catch(() => undefined);
    }
  }

  async stat(path: string, signal?: AbortSignal): Promise<Stat> {
    const f = await this.walk(path, signal);
    try {
      return await f.stat(signal);
    } finally {
      await f.clunk().catch(() => undefined);
    }
  }

  /** Applies a wstat; fields not given are left alone. */
  async wstat(path: string, changes: Partial<Stat>, signal?: AbortSignal): Promise<void> {
    const f = await this.walk(path, signal);
    try {
      await f.wstat(changes, signal);
    } finally {
      await f.clunk().catch(() => undefined);
    }
  }

  /** Renames a file within its directory (wstat of the name, as mv(1) on Plan 9). */
  rename(path: string, newName: string, signal?: AbortSignal): Promise<void> {
    return this.wstat(path, { name: newName }, signal);
  }

  /** Creates `path` (a directory when perm has DMDIR) and returns it opened with `mode`. */
  async create(path: string, perm: number, mode: number, signal?: AbortSignal): Promise<Fid> {
    const names = splitPath(path);
    const name = names.pop();
    if (!name) throw new Error('create: empty name');
    const dir = await this.walk(names, signal);
    try {
      await dir.create(name, perm, mode, signal);
      return dir;
    } catch (e) {
      await dir.clunk().catch(() => undefined);
      throw e;
    }
  }

  async remove(path: string, signal?: AbortSignal): Promise<void> {
    const f = await this.walk(path, signal);
    await f.remove(signal);
  }

  /** Lists a directory; a file lists as itself. */
  async ls(path: string, signal?: AbortSignal): Promise<Stat[]> {
    const st = await this.stat(path, signal);
    if (!(st.mode & DMDIR)) return [st];
    return unpackStats(await this.read(path, signal));
  }
}

/** A fid on the server: walked, then opened, then read/written, then clunked. */
export class Fid {
  iounit: number;
  private clunked = false;

  constructor(
    private readonly client: Client,
    readonly fid: number,
    public qid: Qid,
  ) {
    this.iounit = client.msize - IOHDRSZ;
  }

  async open(mode: number, signal?: AbortSignal): Promise<void> {
    const r = await this.client.rpc({ type: Type.Topen, fid: this.fid, mode }, signal);
    this.qid = r.qid;
    this.iounit = Math.min(r.iounit || this.client.msize - IOHDRSZ, this.client.msize - IOHDRSZ);
  }

  async create(name: string, perm: number, mode: number, signal?: AbortSignal): Promise<void> {
    const r = await this.client.rpc({ type: Type.Tcreate, fid: this.fid, name, perm, mode }, signal);
    this.qid = r.qid;
    this.iounit = Math.min(r.iounit || this.client.msize - IOHDRSZ, this.client.msize - IOHDRSZ);
  }

  async read(offset: number, count: number, signal?: AbortSignal): Promise<Uint8Array> {
    const r = await this.client.rpc(
      { type: Type.Tread, fid: this.fid, offset, count: Math.min(count, this.iounit) },
      signal,
    );
    return r.data;
  }

  async write(offset: number, data: Uint8Array, signal?: AbortSignal): Promise<number> {
    const r = await this.client.rpc({ type: Type.Twrite, fid: this.fid, offset, data }, signal);
    return r.count;
  }

  /** The file's content in chunks as reads return it, from offset 0 until EOF (a stream: until it ends). */
  async *chunks(signal?: AbortSignal): AsyncGenerator<Uint8Array> {
    for (let offset = 0; ;) {
      const d = await this.read(offset, this.iounit, signal);
      if (d.length === 0) return;
      offset += d.length;
      yield d;
    }
  }

  /** Reads from offset 0 until EOF. */
  async readAll(signal?: AbortSignal): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    let offset = 0;
    for (;;) {
      const d = await this.read(offset, this.iounit, signal);
      if (d.length === 0) break;
      parts.push(d);
      offset += d.length;
    }
    return concatBytes(parts);
  }

  /** Writes all of `data` from offset 0, in iounit-sized pieces. An empty write is still sent once. */
  async writeAll(data: Uint8Array, signal?: AbortSignal): Promise<void> {
    let offset = 0;
    do {
      const piece = data.subarray(offset, offset + this.iounit);
      const n = await this.write(offset, piece, signal);
      if (n === 0 && piece.length > 0) throw new NinepError('short write');
      offset += n;
    } while (offset < data.length);
  }

  async stat(signal?: AbortSignal): Promise<Stat> {
    return (await this.client.rpc({ type: Type.Tstat, fid: this.fid }, signal)).stat;
  }

  async wstat(changes: Partial<Stat>, signal?: AbortSignal): Promise<void> {
    await this.client.rpc({ type: Type.Twstat, fid: this.fid, stat: { ...nullStat(), ...changes } }, signal);
  }

  async remove(signal?: AbortSignal): Promise<void> {
    this.clunked = true;
    try {
      await this.client.rpc({ type: Type.Tremove, fid: this.fid }, signal);
    } finally {
      this.client.releaseFid(this.fid);
    }
  }

  async clunk(): Promise<void> {
    if (this.clunked) return;
    this.clunked = true;
    try {
      await this.client.rpc({ type: Type.Tclunk, fid: this.fid });
    } finally {
      this.client.releaseFid(this.fid);
    }
  }
}

export { OREAD, OWRITE, ORDWR, OTRUNC };

/** The longest line lines() takes by default: far above any JSON line the namespaces stream. */
export const MAX_LINE = 16 * 1024 * 1024;

/** Splits a byte stream into lines (a 9P read may end anywhere); empty lines are skipped. */
export async function* lines(chunks: AsyncIterable<Uint8Array>, maxLine = MAX_LINE): AsyncGenerator<string> {
  const dec = new TextDecoder();
  let buf = '';
  for await (const c of chunks) {
    buf += dec.decode(c, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line) yield line;
    }
    // A server that never ends its line (a hostile remote toolsrv's bypass queue) must not fill our memory.
    if (buf.length > maxLine) throw new ProtocolError(`a line of more than ${maxLine} characters`, undefined);
  }
  if (buf) yield buf;
}
