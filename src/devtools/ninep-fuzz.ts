/**
 * The 9P fuzz engine shared by test/ninep/fuzz.test.ts (against src/) and bench/fuzz.mjs (against dist/):
 * a seeded PRNG, generators of (a) random frames with honest size headers, (b) mutations of valid requests
 * and (c) garbage with lying size fields, a model of the byte stream that predicts what the server must do
 * with each raw connection, the raw connection itself, the server the fuzzers attack, one batch of
 * concurrent fuzz sessions, and the check that a well-behaved client still works.
 */
import net from 'node:net';
import {
  build,
  concatBytes,
  decode,
  DEFAULT_MAX_MSIZE,
  Dir,
  DMDIR,
  Each,
  encode,
  Framer,
  Leaf,
  NOFID,
  NOTAG,
  nullStat,
  Server,
  Type,
  type Client,
  type Message,
  type Node as NsNode,
  type Stat,
} from '../ninep/index.js';

export const MSIZE = 8192;
/** The sync Tversion: a tag and msize no fuzz frame is likely to produce. */
export const SYNC_TAG = 0xfffe;
export const SYNC_MSIZE = MSIZE - 1;
export const CONCURRENCY = 4;
export const WAIT_MS = 5000;
export const HELLO = 'hello, world\n';

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Rng {
  private readonly next: () => number;
  constructor(readonly seed: number) {
    this.next = mulberry32(seed);
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  u32(): number {
    return this.int(2 ** 32);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  bytes(n: number, plausible = false): Uint8Array {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++)
      b[i] = plausible && this.chance(0.7) ? this.pick([0, 0, 1, 2, 3, 5, 0xff]) : this.int(256);
    return b;
  }
}

export const concat = concatBytes;
export const setSize = (f: Uint8Array, size = f.length): Uint8Array => {
  new DataView(f.buffer, f.byteOffset, f.byteLength).setUint32(0, size >>> 0, true);
  return f;
};

// ---- What the fuzz frames are made of ----

export const NAMES = [
  'hello',
  'echo',
  'stream',
  'sink',
  'items',
  'a',
  'b',
  'data',
  'tmp',
  '..',
  '.',
  '',
  'nope',
  'a/b',
  'é',
];

export function randomString(r: Rng): string {
  let s = '';
  for (let n = r.int(12); n > 0; n--)
    s += String.fromCharCode(r.pick([r.int(0x80), 0x80 + r.int(0x780), 0xd800 + r.int(0x800), r.int(0x10000)]));
  return s;
}
const fid = (r: Rng): number => (r.chance(0.85) ? r.int(8) : r.pick([NOFID, r.u32()]));
const name = (r: Rng): string => (r.chance(0.85) ? r.pick(NAMES) : randomString(r));

/** A well-formed request, with fields drawn mostly from values that mean something to this server. */
export function request(r: Rng): Message {
  const tag = r.chance(0.9) ? r.int(64) : r.int(0x10000);
  const t = r.int(100);
  if (t < 2)
    return {
      type: Type.Tversion,
      tag,
      msize: r.pick([MSIZE, 256, 255, 0, r.u32()]),
      version: r.pick(['9P2000', '9P2000.L', '9P', '']),
    };
  if (t < 4) return { type: Type.Tauth, tag, afid: fid(r), uname: name(r), aname: name(r) };
  if (t < 8)
    return {
      type: Type.Tattach,
      tag,
      fid: fid(r),
      afid: r.chance(0.8) ? NOFID : fid(r),
      uname: r.pick(['glenda', 'fuzz', '']),
      aname: name(r),
    };
  if (t < 14) return { type: Type.Tflush, tag, oldtag: r.int(64) };
  if (t < 30)
    return {
      type: Type.Twalk,
      tag,
      fid: fid(r),
      newfid: fid(r),
      wnames: Array.from({ length: r.chance(0.9) ? r.int(4) : r.int(17) }, () => name(r)),
    };
  if (t < 40)
    return {
      type: Type.Topen,
      tag,
      fid: fid(r),
      mode: r.chance(0.7) ? r.pick([0, 1, 2, 3, 0x10, 0x12, 0x40]) : r.int(256),
    };
  if (t < 44)
    return {
      type: Type.Tcreate,
      tag,
      fid: fid(r),
      name: name(r),
      perm: r.pick([0o644, (DMDIR | 0o755) >>> 0, r.u32()]),
      mode: r.int(4),
    };
  if (t < 60) {
    return {
      type: Type.Tread,
      tag,
      fid: fid(r),
      offset: r.pick([0, 0, r.int(100), r.u32(), 2 ** 53 - 1]),
      count: r.pick([0, r.int(200), MSIZE - 24, MSIZE, r.u32()]),
    };
  }
  if (t < 72)
    return {
      type: Type.Twrite,
      tag,
      fid: fid(r),
      offset: r.pick([0, 0, r.int(100)]),
      data: r.chance(0.5) ? new TextEncoder().encode(name(r)) : r.bytes(r.int(64)),
    };
  if (t < 80) return { type: Type.Tclunk, tag, fid: fid(r) };
  if (t < 84) return { type: Type.Tremove, tag, fid: fid(r) };
  if (t < 92) return { type: Type.Tstat, tag, fid: fid(r) };
  const stat: Stat = {
    ...nullStat(),
    ...(r.chance(0.6) ? { name: name(r) } : {}),
    ...(r.chance(0.2) ? { length: 0 } : {}),
    ...(r.chance(0.2) ? { mode: r.u32() } : {}),
  };
  return { type: Type.Twstat, tag, fid: fid(r), stat };
}

/** (a) Random bytes under an honest size header, the type mostly a 9P one. */
export function randomFrame(r: Rng): Uint8Array {
  const f = new Uint8Array(7 + (r.chance(0.95) ? r.int(48) : r.int(1500)));
  f.set(r.bytes(f.length - 7, r.chance(0.5)), 7);
  f[4] = r.chance(0.6) ? 100 + r.int(28) : r.chance(0.5) ? r.int(256) : r.pick([99, Type.Terror, 0, 255]);
  f[5] = r.int(64);
  f[6] = r.chance(0.9) ? 0 : r.int(256);
  return setSize(f);
}

/** (b) A request with its contents damaged; the size is kept honest unless `lieOdds` comes up. */
export function mutant(r: Rng, lieOdds: number): Uint8Array {
  const f = encode(request(r));
  const dv = (b: Uint8Array): DataView => new DataView(b.buffer, b.byteOffset, b.byteLength);
  const k = r.int(100);
  if (k < 15) return f;
  if (k < 45) {
    for (let n = 1 + r.int(3); n > 0; n--) {
      const i = 4 + r.int(f.length - 4);
      f[i] = f[i]! ^ (1 << r.int(8));
    }
    return f;
  }
  if (k < 58) return setSize(f.slice(0, 7 + r.int(f.length - 6)));
  if (k < 66) return setSize(concat([f, r.bytes(1 + r.int(16), true)]));
  if (k < 78 && f.length >= 9) {
    dv(f).setUint16(7 + r.int(f.length - 8), r.pick([0, 1, 0xffff, 17, r.int(0x10000), r.int(40)]), true);
    return f;
  }
  if (k < 86 && f.length >= 11) {
    dv(f).setUint32(7 + r.int(f.length - 10), r.pick([0, NOFID, r.u32(), r.int(8)]), true);
    return f;
  }
  if (k < 92) {
    f[4] = r.int(256);
    return f;
  }
  if (!r.chance(lieOdds / 0.08)) return f;
  // A size that lies: the stream is out of step from here on.
  const lie = r.int(4);
  if (lie === 0) return setSize(f, f.length + r.pick([-1, 1, -3, 7, 100]));
  if (lie === 1) return f.slice(0, r.int(f.length));
  if (lie === 2) return setSize(f, r.u32());
  const i = r.int(4);
  f[i] = f[i]! ^ (1 << r.int(8));
  return f;
}

/** (c) A size field that must end the connection: below a header, or above msize. */
export function lyingFrame(r: Rng, maxSize: number): Uint8Array {
  const size = r.chance(0.4)
    ? r.int(7)
    : r.pick([maxSize + 1, maxSize + 1 + r.int(1 << 20), 2 ** 32 - 1, maxSize + 1 + r.int(2 ** 32 - maxSize - 1)]);
  return setSize(concat([new Uint8Array(7), r.bytes(r.int(200))]), size);
}

// ---- The oracle ----

export type Outcome = 'sync' | 'fatal' | 'stall' | 'unknown';

/**
 * Follows the byte stream as the server must: frames are cut by their size; a size below 7 or above msize
 * ends the connection; a Tversion changes msize. How the socket chunks the stream decides whether a frame
 * sent right after a Tversion is held to the old or the new msize, so a size between the two is 'unknown'.
 */
export function predict(bytes: Uint8Array, syncAt: number, maxSize: number): { outcome: Outcome; tags: Set<number> } {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tags = new Set<number>();
  let lo = maxSize;
  let hi = maxSize;
  let pos = 0;
  let last = -1;
  while (bytes.length - pos >= 4) {
    const size = dv.getUint32(pos, true);
    if (size < 7 || size > hi) return { outcome: 'fatal', tags };
    if (size > lo) return { outcome: 'unknown', tags };
    if (bytes.length - pos < size) break;
    tags.add(dv.getUint16(pos + 5, true));
    try {
      const m = decode(bytes.subarray(pos, pos + size));
      if (m.type === Type.Tversion && m.msize >= 256) {
        const n = Math.min(m.msize, DEFAULT_MAX_MSIZE);
        lo = Math.min(lo, n);
        hi = Math.max(hi, n);
      }
    } catch {
      // Answered with Rerror; the stream stays in step.
    }
    last = pos;
    pos += size;
  }
  return { outcome: pos === bytes.length && last === syncAt ? 'sync' : 'stall', tags };
}

// ---- Raw connections ----

export class Raw {
  private readonly framer = new Framer(2 ** 32);
  readonly replies: Array<{ type: number; tag: number }> = [];
  problem?: string;
  synced = false;
  closed = false;
  private wake: Array<() => void> = [];

  private constructor(readonly sock: net.Socket) {
    sock.on('data', (chunk: Uint8Array) => {
      try {
        for (const f of this.framer.push(chunk)) {
          const m = decode(f);
          if (m.type % 2 !== 1) this.problem ??= `server sent a request (type ${m.type})`;
          if (m.type === Type.Rversion && m.tag === SYNC_TAG && m.msize === SYNC_MSIZE) this.synced = true;
          this.replies.push({ type: m.type, tag: m.tag });
        }
      } catch (e) {
        this.problem ??= `server sent bytes that do not decode: ${(e as Error).message}`;
      }
      this.notify();
    });
    sock.on('close', () => {
      this.closed = true;
      this.notify();
    });
    sock.on('error', () => undefined);
  }

  static open(path: string, live: Set<Raw>): Promise<Raw> {
    return new Promise((resolve, reject) => {
      const s = net.connect(path, () => {
        const raw = new Raw(s);
        live.add(raw);
        resolve(raw);
      });
      s.once('error', reject);
    });
  }

  private notify(): void {
    for (const w of this.wake.splice(0)) w();
  }

  /** Resolves with whether `cond` came true within `ms`. */
  async until(cond: () => boolean, ms = WAIT_MS): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!cond()) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((res) => {
        const t = setTimeout(res, left);
        this.wake.push(() => {
          clearTimeout(t);
          res();
        });
      });
    }
    return true;
  }

  /** Writes `bytes` in a few random pieces, so frames straddle socket writes. */
  write(r: Rng, bytes: Uint8Array): void {
    let pos = 0;
    while (pos < bytes.length && !this.sock.destroyed) {
      const n = r.chance(0.5) ? bytes.length - pos : 1 + r.int(bytes.length - pos);
      this.sock.write(bytes.subarray(pos, pos + n));
      pos += n;
    }
  }
}

export type Kind = 'random' | 'mutate' | 'garbage';
export interface Tally {
  frames: number;
  sessions: number;
  outcomes: Record<Outcome, number>;
}

/** Sets up fids 0..5 (root, hello open, echo open rdwr, stream open, items/a, sink open) on a fresh raw connection. */
export const HANDSHAKE: Message[] = [
  { type: Type.Tversion, tag: NOTAG, msize: MSIZE, version: '9P2000' },
  { type: Type.Tattach, tag: 0, fid: 0, afid: NOFID, uname: 'fuzz', aname: '' },
  { type: Type.Twalk, tag: 1, fid: 0, newfid: 1, wnames: ['hello'] },
  { type: Type.Topen, tag: 2, fid: 1, mode: 0 },
  { type: Type.Twalk, tag: 3, fid: 0, newfid: 2, wnames: ['echo'] },
  { type: Type.Topen, tag: 4, fid: 2, mode: 2 },
  { type: Type.Twalk, tag: 5, fid: 0, newfid: 3, wnames: ['stream'] },
  { type: Type.Topen, tag: 6, fid: 3, mode: 0 },
  { type: Type.Twalk, tag: 7, fid: 0, newfid: 4, wnames: ['items', 'a'] },
  { type: Type.Twalk, tag: 8, fid: 0, newfid: 5, wnames: ['sink'] },
  { type: Type.Topen, tag: 9, fid: 5, mode: 1 },
];

/** One raw connection: optional handshake, `n` fuzz frames, the sync; then checks what the server did. */
export async function session(
  path: string,
  live: Set<Raw>,
  kind: Kind,
  seed: number,
  n: number,
  tally: Tally,
): Promise<void> {
  const r = new Rng(seed);
  const where = `${kind} session seed ${seed}`;
  const raw = await Raw.open(path, live);
  try {
    let maxSize = DEFAULT_MAX_MSIZE;
    let handshake = 0;
    if (kind !== 'random' || r.chance(0.7)) {
      raw.sock.write(concat(HANDSHAKE.map(encode)));
      handshake = HANDSHAKE.length;
      if (!(await raw.until(() => raw.replies.length >= handshake || raw.closed)))
        throw new Error(`${where}: handshake not answered`);
      const failed = raw.replies.filter((m) => m.type === Type.Rerror);
      if (raw.replies.length !== handshake || failed.length)
        throw new Error(`${where}: handshake failed: ${JSON.stringify(raw.replies)}`);
      maxSize = MSIZE;
    }
    const frames: Uint8Array[] = [];
    let lied = false;
    if (kind === 'random') for (let i = 0; i < n; i++) frames.push(randomFrame(r));
    if (kind === 'mutate') for (let i = 0; i < n; i++) frames.push(mutant(r, 0.01));
    if (kind === 'garbage') {
      for (let i = r.int(n); i > 0; i--) frames.push(r.chance(0.5) ? mutant(r, 0) : randomFrame(r));
      // A Tversion among them could move msize; keep the lie beyond any msize it could have set.
      lied = r.chance(0.9);
      frames.push(lied ? lyingFrame(r, frames.length ? DEFAULT_MAX_MSIZE : maxSize) : r.bytes(1 + r.int(64)));
    }
    const sync = encode({ type: Type.Tversion, tag: SYNC_TAG, msize: SYNC_MSIZE, version: '9P2000' });
    const stream = concat([...frames, sync]);
    const { outcome, tags } = predict(stream, stream.length - sync.length, maxSize);
    tally.frames += frames.length;
    tally.sessions++;
    tally.outcomes[outcome]++;
    // The frames before a lie keep the stream in step, so the connection must close: at the lie, or before it
    // when a fuzzed Tversion lowered msize below an earlier frame ('unknown').
    if (lied && outcome !== 'fatal' && outcome !== 'unknown')
      throw new Error(`${where}: the model does not find the lying size fatal (${outcome})`);
    const mustClose = outcome === 'fatal' || lied;
    raw.write(r, stream);
    if (outcome === 'sync') {
      if (!(await raw.until(() => raw.synced || raw.closed)))
        throw new Error(`${where}: server stopped answering (no reply to the sync Tversion)`);
      if (!raw.synced) throw new Error(`${where}: server closed a connection whose stream was well framed`);
    } else if (mustClose) {
      if (!(await raw.until(() => raw.closed)))
        throw new Error(`${where}: server kept a connection open after a lying size field`);
      if (raw.synced) throw new Error(`${where}: server answered a frame after a lying size field`);
    }
    if (raw.problem) throw new Error(`${where}: ${raw.problem}`);
    if (outcome !== 'unknown') {
      const stray = raw.replies
        .slice(handshake)
        .map((m) => m.tag)
        .filter((t) => !tags.has(t));
      if (stray.length)
        throw new Error(`${where}: replies with tags no request carried: ${stray.slice(0, 5).join(', ')}`);
    }
  } finally {
    raw.sock.destroy();
    live.delete(raw);
  }
}

export function withTimeout<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`good client: ${what} timed out`)), WAIT_MS);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** The file tree the fuzzers attack: plain, rdwr, stream, write-only and template files, and a create-able dir. */
export function fuzzServer(): Server<NsNode> {
  const fs = build(
    Dir(
      '/',
      Leaf('hello', { read: () => HELLO }),
      Leaf('echo', { rdwr: (_ctx, req) => `echo:${req}` }),
      Leaf('stream', {
        async *stream(_ctx, signal) {
          yield 'tick\n';
          if (!signal.aborted) await new Promise((res) => signal.addEventListener('abort', res, { once: true }));
        },
      }),
      Leaf('sink', { write: () => undefined }),
      Dir('tmp', { create: () => undefined }),
      Dir(
        'items',
        Each(
          'item',
          { list: () => ['a', 'b'], rename: () => undefined, remove: () => undefined },
          Leaf('data', { read: (ctx) => `item ${ctx.params.item}\n` }),
        ),
      ),
    ),
    { uid: 'glenda' },
  );
  return new Server({ fs });
}

export const newTally = (): Tally => ({
  frames: 0,
  sessions: 0,
  outcomes: { sync: 0, fatal: 0, stall: 0, unknown: 0 },
});

/** CONCURRENCY sessions at once, their kinds, seeds and lengths drawn from `master`; rejects with the first failure. */
export async function runBatch(path: string, live: Set<Raw>, master: Rng, tally: Tally): Promise<void> {
  const batch: Promise<void>[] = [];
  for (let i = 0; i < CONCURRENCY; i++) {
    const kind: Kind = master.chance(0.35) ? 'random' : master.chance(0.8) ? 'mutate' : 'garbage';
    batch.push(session(path, live, kind, master.u32(), 10 + master.int(50), tally));
  }
  const results = await Promise.allSettled(batch);
  const failed = results.find((x): x is PromiseRejectedResult => x.status === 'rejected');
  if (failed) throw failed.reason;
}

/** Waits up to WAIT_MS for the server to be down to `n` connections; returns how many it has. */
export async function connectionsBackTo(server: Server<NsNode>, n: number): Promise<number> {
  const deadline = Date.now() + WAIT_MS;
  while (server.connections.size !== n && Date.now() < deadline) await new Promise((res) => setTimeout(res, 5));
  return server.connections.size;
}

/** Asserts `got` is `want`; the test passes vitest's expect, the bench a throwing check. */
export type Check = (got: unknown, want: unknown, what: string) => void;

export const throwingCheck: Check = (got, want, what) => {
  if (got !== want) throw new Error(`good client: ${what} gave ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
};

/** The well-behaved client still reads, does rdwr, walks a template and streams. */
export async function goodClientWorks(
  client: Client,
  round: number | string,
  check: Check = throwingCheck,
): Promise<void> {
  check(await withTimeout(client.readText('/hello'), 'read /hello'), HELLO, 'read /hello');
  check(await withTimeout(client.rdwrText('/echo', `ping ${round}`), 'rdwr /echo'), `echo:ping ${round}`, 'rdwr /echo');
  check(await withTimeout(client.readText('/items/b/data'), 'read /items/b/data'), 'item b\n', 'read /items/b/data');
  const first = await withTimeout(
    (async () => {
      for await (const chunk of client.stream('/stream')) return new TextDecoder().decode(chunk);
      return '';
    })(),
    'stream /stream',
  );
  check(first, 'tick\n', 'stream /stream');
}
