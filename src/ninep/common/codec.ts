/**
 * Encoding and decoding of every 9P2000 message (intro(5)). Browser-safe: Uint8Array and DataView only.
 * Decoding is strict: a frame whose fields do not exactly fill its size, a string running past the frame,
 * invalid UTF-8, more than MAXWELEM names or an unknown type is a ProtocolError carrying the tag, so the
 * server can answer Rerror and keep the connection.
 */
import { DMDIR, HEADER_SIZE, MAXWELEM, Type } from './constants.js';
import { ProtocolError } from './errors.js';

export interface Qid {
  type: number;
  vers: number;
  path: bigint;
}

export interface Stat {
  type: number;
  dev: number;
  qid: Qid;
  mode: number;
  atime: number;
  mtime: number;
  length: number;
  name: string;
  uid: string;
  gid: string;
  muid: string;
}

type M<T extends number, F> = { type: T; tag: number } & F;
type T = typeof Type;

export type Tversion = M<T['Tversion'], { msize: number; version: string }>;
export type Rversion = M<T['Rversion'], { msize: number; version: string }>;
export type Tauth = M<T['Tauth'], { afid: number; uname: string; aname: string }>;
export type Rauth = M<T['Rauth'], { aqid: Qid }>;
export type Tattach = M<T['Tattach'], { fid: number; afid: number; uname: string; aname: string }>;
export type Rattach = M<T['Rattach'], { qid: Qid }>;
export type Rerror = M<T['Rerror'], { ename: string }>;
export type Tflush = M<T['Tflush'], { oldtag: number }>;
export type Rflush = M<T['Rflush'], object>;
export type Twalk = M<T['Twalk'], { fid: number; newfid: number; wnames: string[] }>;
export type Rwalk = M<T['Rwalk'], { qids: Qid[] }>;
export type Topen = M<T['Topen'], { fid: number; mode: number }>;
export type Ropen = M<T['Ropen'], { qid: Qid; iounit: number }>;
export type Tcreate = M<T['Tcreate'], { fid: number; name: string; perm: number; mode: number }>;
export type Rcreate = M<T['Rcreate'], { qid: Qid; iounit: number }>;
export type Tread = M<T['Tread'], { fid: number; offset: number; count: number }>;
export type Rread = M<T['Rread'], { data: Uint8Array }>;
export type Twrite = M<T['Twrite'], { fid: number; offset: number; data: Uint8Array }>;
export type Rwrite = M<T['Rwrite'], { count: number }>;
export type Tclunk = M<T['Tclunk'], { fid: number }>;
export type Rclunk = M<T['Rclunk'], object>;
export type Tremove = M<T['Tremove'], { fid: number }>;
export type Rremove = M<T['Rremove'], object>;
export type Tstat = M<T['Tstat'], { fid: number }>;
export type Rstat = M<T['Rstat'], { stat: Stat }>;
export type Twstat = M<T['Twstat'], { fid: number; stat: Stat }>;
export type Rwstat = M<T['Rwstat'], object>;

export type TMessage =
  Tversion | Tauth | Tattach | Tflush | Twalk | Topen | Tcreate | Tread | Twrite | Tclunk | Tremove | Tstat | Twstat;
export type RMessage =
  | Rversion
  | Rauth
  | Rattach
  | Rerror
  | Rflush
  | Rwalk
  | Ropen
  | Rcreate
  | Rread
  | Rwrite
  | Rclunk
  | Rremove
  | Rstat
  | Rwstat;
export type Message = TMessage | RMessage;

const QID_SIZE = 13;
const STAT_FIXED = 2 + 2 + 4 + QID_SIZE + 4 + 4 + 4 + 8 + 4 * 2;
const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });

/** Bytes of `s` as UTF-8, without encoding it. */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** The all-ones length of a "don't touch" stat, as the nearest double (2^64). */
export const NOLENGTH = 2 ** 64;

/** The "don't touch" stat of Twstat: every field at its maximum, every string empty. */
export function nullStat(): Stat {
  return {
    type: 0xffff,
    dev: 0xffffffff,
    qid: { type: 0xff, vers: 0xffffffff, path: 0xffffffffffffffffn },
    mode: 0xffffffff,
    atime: 0xffffffff,
    mtime: 0xffffffff,
    length: NOLENGTH,
    name: '',
    uid: '',
    gid: '',
    muid: '',
  };
}

/** Size of a stat entry as it appears on the wire, including its own size[2] prefix. */
export function statSize(s: Stat): number {
  return STAT_FIXED + utf8Length(s.name) + utf8Length(s.uid) + utf8Length(s.gid) + utf8Length(s.muid);
}

class Writer {
  readonly buf: Uint8Array;
  readonly view: DataView;
  pos = 0;
  constructor(size: number) {
    this.buf = new Uint8Array(size);
    this.view = new DataView(this.buf.buffer);
  }
  u8(v: number): void {
    this.view.setUint8(this.pos, v);
    this.pos += 1;
  }
  u16(v: number): void {
    this.view.setUint16(this.pos, v, true);
    this.pos += 2;
  }
  u32(v: number): void {
    this.view.setUint32(this.pos, v >>> 0, true);
    this.pos += 4;
  }
  u64(v: number): void {
    if (v >= NOLENGTH) {
      this.view.setBigUint64(this.pos, 0xffffffffffffffffn, true);
      this.pos += 8;
      return;
    }
    this.view.setUint32(this.pos, v % 0x100000000, true);
    this.view.setUint32(this.pos + 4, Math.floor(v / 0x100000000), true);
    this.pos += 8;
  }
  big64(v: bigint): void {
    this.view.setBigUint64(this.pos, BigInt.asUintN(64, v), true);
    this.pos += 8;
  }
  str(s: string): void {
    const start = this.pos + 2;
    const { written } = utf8.encodeInto(s, this.buf.subarray(start));
    if (written > 0xffff) throw new RangeError('string longer than 65535 bytes');
    this.view.setUint16(this.pos, written, true);
    this.pos = start + written;
  }
  bytes(b: Uint8Array): void {
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
  qid(q: Qid): void {
    this.u8(q.type);
    this.u32(q.vers);
    this.big64(q.path);
  }
  stat(s: Stat): void {
    const size = statSize(s);
    this.u16(size - 2);
    this.u16(s.type);
    this.u32(s.dev);
    this.qid(s.qid);
    this.u32(s.mode);
    this.u32(s.atime);
    this.u32(s.mtime);
    this.u64(s.length);
    this.str(s.name);
    this.str(s.uid);
    this.str(s.gid);
    this.str(s.muid);
  }
}

const s = utf8Length;

function bodySize(m: Message): number {
  switch (m.type) {
    case Type.Tversion:
    case Type.Rversion:
      return 4 + 2 + s(m.version);
    case Type.Tauth:
      return 4 + 2 + s(m.uname) + 2 + s(m.aname);
    case Type.Rauth:
      return QID_SIZE;
    case Type.Tattach:
      return 8 + 2 + s(m.uname) + 2 + s(m.aname);
    case Type.Rattach:
      return QID_SIZE;
    case Type.Rerror:
      return 2 + s(m.ename);
    case Type.Tflush:
      return 2;
    case Type.Twalk:
      return 10 + m.wnames.reduce((n, w) => n + 2 + s(w), 0);
    case Type.Rwalk:
      return 2 + QID_SIZE * m.qids.length;
    case Type.Topen:
      return 5;
    case Type.Ropen:
    case Type.Rcreate:
      return QID_SIZE + 4;
    case Type.Tcreate:
      return 4 + 2 + s(m.name) + 4 + 1;
    case Type.Tread:
      return 16;
    case Type.Rread:
      return 4 + m.data.length;
    case Type.Twrite:
      return 16 + m.data.length;
    case Type.Rwrite:
      return 4;
    case Type.Tclunk:
    case Type.Tremove:
    case Type.Tstat:
      return 4;
    case Type.Rstat:
      return 2 + statSize(m.stat);
    case Type.Twstat:
      return 4 + 2 + statSize(m.stat);
    case Type.Rflush:
    case Type.Rclunk:
    case Type.Rremove:
    case Type.Rwstat:
      return 0;
  }
}

/** Encodes one message as a complete frame, size prefix included. */
export function encode(m: Message): Uint8Array {
  const size = HEADER_SIZE + bodySize(m);
  const w = new Writer(size);
  w.u32(size);
  w.u8(m.type);
  w.u16(m.tag);
  switch (m.type) {
    case Type.Tversion:
    case Type.Rversion:
      w.u32(m.msize);
      w.str(m.version);
      break;
    case Type.Tauth:
      w.u32(m.afid);
      w.str(m.uname);
      w.str(m.aname);
      break;
    case Type.Rauth:
      w.qid(m.aqid);
      break;
    case Type.Tattach:
      w.u32(m.fid);
      w.u32(m.afid);
      w.str(m.uname);
      w.str(m.aname);
      break;
    case Type.Rattach:
      w.qid(m.qid);
      break;
    case Type.Rerror:
      w.str(m.ename);
      break;
    case Type.Tflush:
      w.u16(m.oldtag);
      break;
    case Type.Twalk:
      w.u32(m.fid);
      w.u32(m.newfid);
      w.u16(m.wnames.length);
      for (const n of m.wnames) w.str(n);
      break;
    case Type.Rwalk:
      w.u16(m.qids.length);
      for (const q of m.qids) w.qid(q);
      break;
    case Type.Topen:
      w.u32(m.fid);
      w.u8(m.mode);
      break;
    case Type.Ropen:
    case Type.Rcreate:
      w.qid(m.qid);
      w.u32(m.iounit);
      break;
    case Type.Tcreate:
      w.u32(m.fid);
      w.str(m.name);
      w.u32(m.perm);
      w.u8(m.mode);
      break;
    case Type.Tread:
      w.u32(m.fid);
      w.u64(m.offset);
      w.u32(m.count);
      break;
    case Type.Rread:
      w.u32(m.data.length);
      w.bytes(m.data);
      break;
    case Type.Twrite:
      w.u32(m.fid);
      w.u64(m.offset);
      w.u32(m.data.length);
      w.bytes(m.data);
      break;
    case Type.Rwrite:
      w.u32(m.count);
      break;
    case Type.Tclunk:
    case Type.Tremove:
    case Type.Tstat:
      w.u32(m.fid);
      break;
    case Type.Rstat:
      w.u16(statSize(m.stat));
      w.stat(m.stat);
      break;
    case Type.Twstat:
      w.u32(m.fid);
      w.u16(statSize(m.stat));
      w.stat(m.stat);
      break;
    case Type.Rflush:
    case Type.Rclunk:
    case Type.Rremove:
    case Type.Rwstat:
      break;
  }
  if (w.pos !== size) throw new Error(`9P encoder botch: wrote ${w.pos} of ${size} bytes`);
  return w.buf;
}

class Reader {
  readonly view: DataView;
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    readonly end: number,
    readonly tag: number,
    start: number,
  ) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    this.pos = start;
  }
  need(n: number, what: string): void {
    if (this.pos + n > this.end)
      throw new ProtocolError(`truncated message: ${what} runs past the end of the frame`, this.tag);
  }
  u8(): number {
    this.need(1, 'u8');
    return this.view.getUint8(this.pos++);
  }
  u16(): number {
    this.need(2, 'u16');
    const v = this.view.getUint16(this.pos, true);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.need(4, 'u32');
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  u64(): number {
    this.need(8, 'u64');
    const lo = this.view.getUint32(this.pos, true);
    const hi = this.view.getUint32(this.pos + 4, true);
    this.pos += 8;
    return hi * 0x100000000 + lo;
  }
  big64(): bigint {
    this.need(8, 'u64');
    const v = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    return v;
  }
  str(what: string): string {
    const n = this.u16();
    this.need(n, `string ${what}`);
    const bytes = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    try {
      return utf8Strict.decode(bytes);
    } catch {
      throw new ProtocolError(`invalid UTF-8 in ${what}`, this.tag);
    }
  }
  bytes(n: number): Uint8Array {
    this.need(n, 'data');
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
  qid(): Qid {
    return { type: this.u8(), vers: this.u32(), path: this.big64() };
  }
  stat(): Stat {
    const size = this.u16();
    const end = this.pos + size;
    if (end > this.end) throw new ProtocolError('truncated message: stat runs past the end of the frame', this.tag);
    const st: Stat = {
      type: this.u16(),
      dev: this.u32(),
      qid: this.qid(),
      mode: this.u32(),
      atime: this.u32(),
      mtime: this.u32(),
      length: this.u64(),
      name: this.str('stat name'),
      uid: this.str('stat uid'),
      gid: this.str('stat gid'),
      muid: this.str('stat muid'),
    };
    if (this.pos !== end) throw new ProtocolError(`stat size ${size} does not match its fields`, this.tag);
    return st;
  }
}

/**
 * Decodes one complete frame (as delivered by the Framer). Throws ProtocolError with the tag when the
 * frame's contents are malformed.
 */
export function decode(frame: Uint8Array): Message {
  if (frame.length < HEADER_SIZE)
    throw new ProtocolError(`frame of ${frame.length} bytes is shorter than a header`, undefined, true);
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const size = view.getUint32(0, true);
  if (size !== frame.length)
    throw new ProtocolError(`size field ${size} does not match frame of ${frame.length} bytes`, undefined, true);
  const type = view.getUint8(4);
  const tag = view.getUint16(5, true);
  const r = new Reader(frame, size, tag, HEADER_SIZE);
  const m = decodeBody(type, tag, r);
  if (r.pos !== size)
    throw new ProtocolError(`message size mismatch: ${size - r.pos} bytes left over after the fields`, tag);
  return m;
}

function decodeBody(type: number, tag: number, r: Reader): Message {
  switch (type) {
    case Type.Tversion:
    case Type.Rversion:
      return { type, tag, msize: r.u32(), version: r.str('version') };
    case Type.Tauth:
      return { type, tag, afid: r.u32(), uname: r.str('uname'), aname: r.str('aname') };
    case Type.Rauth:
      return { type, tag, aqid: r.qid() };
    case Type.Tattach:
      return { type, tag, fid: r.u32(), afid: r.u32(), uname: r.str('uname'), aname: r.str('aname') };
    case Type.Rattach:
      return { type, tag, qid: r.qid() };
    case Type.Rerror:
      return { type, tag, ename: r.str('ename') };
    case Type.Tflush:
      return { type, tag, oldtag: r.u16() };
    case Type.Twalk: {
      const fid = r.u32();
      const newfid = r.u32();
      const n = r.u16();
      if (n > MAXWELEM) throw new ProtocolError(`too many names in walk: ${n} > ${MAXWELEM}`, tag);
      const wnames: string[] = [];
      for (let i = 0; i < n; i++) wnames.push(r.str('wname'));
      return { type, tag, fid, newfid, wnames };
    }
    case Type.Rwalk: {
      const n = r.u16();
      if (n > MAXWELEM) throw new ProtocolError(`too many qids in walk reply: ${n} > ${MAXWELEM}`, tag);
      const qids: Qid[] = [];
      for (let i = 0; i < n; i++) qids.push(r.qid());
      return { type, tag, qids };
    }
    case Type.Topen:
      return { type, tag, fid: r.u32(), mode: r.u8() };
    case Type.Ropen:
    case Type.Rcreate:
      return { type, tag, qid: r.qid(), iounit: r.u32() };
    case Type.Tcreate:
      return { type, tag, fid: r.u32(), name: r.str('name'), perm: r.u32(), mode: r.u8() };
    case Type.Tread:
      return { type, tag, fid: r.u32(), offset: r.u64(), count: r.u32() };
    case Type.Rread:
      return { type, tag, data: r.bytes(r.u32()) };
    case Type.Twrite: {
      const fid = r.u32();
      const offset = r.u64();
      return { type, tag, fid, offset, data: r.bytes(r.u32()) };
    }
    case Type.Rwrite:
      return { type, tag, count: r.u32() };
    case Type.Tclunk:
    case Type.Tremove:
    case Type.Tstat:
      return { type, tag, fid: r.u32() };
    case Type.Rstat:
      return { type, tag, stat: statWithPrefix(r) };
    case Type.Twstat:
      return { type, tag, fid: r.u32(), stat: statWithPrefix(r) };
    case Type.Rflush:
    case Type.Rclunk:
    case Type.Rremove:
    case Type.Rwstat:
      return { type, tag };
    default:
      throw new ProtocolError(`unknown message type ${type}`, tag);
  }
}

/** Rstat and Twstat wrap the stat in a second, redundant count n[2], which must agree with it. */
function statWithPrefix(r: Reader): Stat {
  const n = r.u16();
  const start = r.pos;
  const st = r.stat();
  if (r.pos - start !== n)
    throw new ProtocolError(`stat count ${n} does not match stat of ${r.pos - start} bytes`, r.tag);
  return st;
}

/** Packs stat entries as a directory read returns them. */
export function packStats(stats: readonly Stat[]): Uint8Array {
  const out = new Writer(stats.reduce((n, st) => n + statSize(st), 0));
  for (const st of stats) out.stat(st);
  return out.buf;
}

/** Unpacks the stat entries of a directory read. */
export function unpackStats(data: Uint8Array): Stat[] {
  const r = new Reader(data, data.length, 0, 0);
  const out: Stat[] = [];
  while (r.pos < data.length) out.push(r.stat());
  return out;
}

/** A stat mode as ls(1) shows it: d for directories, then rwx for owner, group and others. */
export function modeString(mode: number): string {
  const bits = 'rwxrwxrwx';
  let out = mode & DMDIR ? 'd' : '-';
  for (let i = 0; i < 9; i++) out += mode & (1 << (8 - i)) ? bits[i] : '-';
  return out;
}

/** `s` cut to at most `maxBytes` of UTF-8, at a character boundary. */
export function truncateUtf8(s: string, maxBytes: number): string {
  if (utf8Length(s) <= maxBytes) return s;
  let lo = 0;
  let hi = Math.min(s.length, maxBytes);
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (utf8Length(s.slice(0, mid)) <= maxBytes) lo = mid;
    else hi = mid - 1;
  }
  // Do not split a surrogate pair.
  const c = s.charCodeAt(lo - 1);
  return s.slice(0, c >= 0xd800 && c <= 0xdbff ? lo - 1 : lo);
}

/** Joins byte arrays (a single part is returned as is). */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let pos = 0;
  for (const p of parts) {
    out.set(p, pos);
    pos += p.length;
  }
  return out;
}
