/**
 * The 9P2000 codec and framer, checked against frames built by hand from the manual's layout (intro(5),
 * version(5), walk(5), read(5), stat(5)): size[4] type[1] tag[2] fields..., little-endian, strings as
 * len[2] + UTF-8, qids as type[1] vers[4] path[8].
 */
import { describe, expect, it } from 'vitest';
import {
  DMDIR,
  Framer,
  MAXWELEM,
  NOFID,
  NOLENGTH,
  NOTAG,
  ProtocolError,
  QTDIR,
  Type,
  decode,
  encode,
  modeString,
  nullStat,
  packStats,
  statSize,
  unpackStats,
  utf8Length,
  type Message,
  type Stat,
} from '../../src/ninep/index.js';
import { concat as concatAll } from '../../src/devtools/ninep-fuzz.js';

/** Bytes from hex, spaces and `|` ignored. */
const hex = (s: string): Uint8Array =>
  Uint8Array.from(
    s
      .replace(/[\s|]/g, '')
      .match(/../g)!
      .map((h) => parseInt(h, 16)),
  );
const le = (n: number | bigint, width: number): number[] => {
  let v = BigInt(n);
  const out: number[] = [];
  for (let i = 0; i < width; i++) {
    out.push(Number(v & 0xffn));
    v >>= 8n;
  }
  return out;
};
const ascii = (s: string): number[] => [...s].map((c) => c.charCodeAt(0));
const str = (s: string): number[] => [...le(s.length, 2), ...ascii(s)];
/** A frame from its parts; `size` is computed here, from the bytes, not by the codec. */
const frame = (type: number, tag: number, ...body: number[][]): Uint8Array => {
  const b = body.flat();
  return Uint8Array.from([...le(7 + b.length, 4), type, ...le(tag, 2), ...b]);
};
const withSize = (f: Uint8Array): Uint8Array => {
  const g = f.slice();
  new DataView(g.buffer).setUint32(0, g.length, true);
  return g;
};
const concat = (...parts: Uint8Array[]): Uint8Array => concatAll(parts);

function decodeError(f: Uint8Array): ProtocolError {
  try {
    decode(f);
  } catch (e) {
    expect(e).toBeInstanceOf(ProtocolError);
    return e as ProtocolError;
  }
  throw new Error('decode accepted a malformed frame');
}

const qidA = { type: QTDIR, vers: 1, path: 0x1122334455667788n };
const qidB = { type: 0, vers: 0xdeadbeef, path: 0xffffffffffffffffn };
const statA: Stat = {
  type: 0x0102,
  dev: 0x03040506,
  qid: { type: QTDIR, vers: 7, path: 42n },
  mode: (DMDIR | 0o755) >>> 0,
  atime: 1_000_000_000,
  mtime: 1_000_000_001,
  length: 0,
  name: 'usr',
  uid: 'glenda',
  gid: 'sys',
  muid: '',
};
const statB: Stat = {
  type: 0,
  dev: 0,
  qid: qidB,
  mode: 0o644,
  atime: 0xffffffff,
  mtime: 0,
  length: 2 ** 53 - 1,
  name: 'ünïcödé 😀',
  uid: 'a',
  gid: 'b',
  muid: 'c',
};

const all: Message[] = [
  { type: Type.Tversion, tag: NOTAG, msize: 8192, version: '9P2000' },
  { type: Type.Rversion, tag: NOTAG, msize: 0xffffffff, version: 'unknown' },
  { type: Type.Tauth, tag: 1, afid: 7, uname: 'glenda', aname: '' },
  { type: Type.Rauth, tag: 1, aqid: qidA },
  { type: Type.Tattach, tag: 2, fid: 0, afid: NOFID, uname: 'glenda', aname: 'main' },
  { type: Type.Rattach, tag: 2, qid: qidB },
  { type: Type.Rerror, tag: 3, ename: 'file not found: ☃' },
  { type: Type.Tflush, tag: 4, oldtag: 3 },
  { type: Type.Rflush, tag: 4 },
  { type: Type.Twalk, tag: 5, fid: 0, newfid: 1, wnames: Array.from({ length: MAXWELEM }, (_, i) => `n${i}`) },
  { type: Type.Rwalk, tag: 5, qids: [qidA, qidB] },
  { type: Type.Topen, tag: 6, fid: 1, mode: 0x12 },
  { type: Type.Ropen, tag: 6, qid: qidA, iounit: 8168 },
  { type: Type.Tcreate, tag: 7, fid: 1, name: 'new', perm: (DMDIR | 0o777) >>> 0, mode: 0 },
  { type: Type.Rcreate, tag: 7, qid: qidB, iounit: 0 },
  { type: Type.Tread, tag: 8, fid: 1, offset: 2 ** 53 - 1, count: 0xffffffff },
  { type: Type.Rread, tag: 8, data: Uint8Array.from([0, 1, 2, 0xff]) },
  { type: Type.Twrite, tag: 9, fid: 1, offset: 0x0102030405, data: new Uint8Array(300).fill(0x61) },
  { type: Type.Rwrite, tag: 9, count: 300 },
  { type: Type.Tclunk, tag: 10, fid: 1 },
  { type: Type.Rclunk, tag: 10 },
  { type: Type.Tremove, tag: 11, fid: 2 },
  { type: Type.Rremove, tag: 11 },
  { type: Type.Tstat, tag: 12, fid: 3 },
  { type: Type.Rstat, tag: 12, stat: statB },
  { type: Type.Twstat, tag: 13, fid: 3, stat: { ...nullStat(), name: 'renamed' } },
  { type: Type.Rwstat, tag: 13 },
];

describe('codec round trips', () => {
  it('covers every 9P2000 message type except Terror', () => {
    const types = new Set(all.map((m) => m.type));
    const want = Object.values(Type).filter((t) => t !== Type.Terror);
    expect([...types].sort()).toEqual([...want].sort());
    expect(types.size).toBe(27);
  });

  it.each(all.map((m) => [m.type, m] as const))('type %i encodes and decodes to an equal message', (_t, m) => {
    const f = encode(m);
    expect(new DataView(f.buffer).getUint32(0, true)).toBe(f.length);
    expect(f[4]).toBe(m.type);
    const back = decode(f);
    expect(back).toEqual(m);
    expect(encode(back)).toEqual(f);
  });

  it('decodes a frame that sits inside a larger buffer', () => {
    const f = encode(all[9]!);
    const big = concat(new Uint8Array(3).fill(9), f, new Uint8Array(5).fill(9));
    expect(decode(big.subarray(3, 3 + f.length))).toEqual(all[9]);
  });

  it('round-trips the largest string a frame can carry and refuses a longer one', () => {
    const long = 'x'.repeat(0xffff);
    expect(decode(encode({ type: Type.Rerror, tag: 1, ename: long }))).toEqual({
      type: Type.Rerror,
      tag: 1,
      ename: long,
    });
    expect(() => encode({ type: Type.Rerror, tag: 1, ename: `${long}x` })).toThrow(RangeError);
    expect(() => encode({ type: Type.Rerror, tag: 1, ename: 'é'.repeat(0x8000) })).toThrow(RangeError);
  });
});

describe('codec bytes, by hand from the manual', () => {
  const cases: Array<[string, Message, Uint8Array]> = [
    [
      'Tversion tag=NOTAG msize=8192 "9P2000"',
      { type: Type.Tversion, tag: 0xffff, msize: 8192, version: '9P2000' },
      Uint8Array.from([
        0x13, 0x00, 0x00, 0x00, 0x64, 0xff, 0xff, 0x00, 0x20, 0x00, 0x00, 0x06, 0x00, 0x39, 0x50, 0x32, 0x30, 0x30,
        0x30,
      ]),
    ],
    ['Rerror tag=1 "no"', { type: Type.Rerror, tag: 1, ename: 'no' }, hex('0b000000 6b 0100 | 0200 6e6f')],
    [
      'Twalk tag=2 fid=1 newfid=2 usr/glenda',
      { type: Type.Twalk, tag: 2, fid: 1, newfid: 2, wnames: ['usr', 'glenda'] },
      hex('1e000000 6e 0200 | 01000000 02000000 0200 | 0300 757372 | 0600 676c656e6461'),
    ],
    [
      'Rwalk tag=7 with two qids',
      { type: Type.Rwalk, tag: 7, qids: [qidA, { type: 0, vers: 0xdeadbeef, path: 2n }] },
      hex('23000000 6f 0700 | 0200 | 80 01000000 8877665544332211 | 00 efbeadde 0200000000000000'),
    ],
    [
      'Tread tag=3 fid=5 offset=0x0102030405 count=8192',
      { type: Type.Tread, tag: 3, fid: 5, offset: 0x0102030405, count: 8192 },
      hex('17000000 74 0300 | 05000000 | 0504030201000000 | 00200000'),
    ],
    [
      'Rread tag=3 "hi"',
      { type: Type.Rread, tag: 3, data: Uint8Array.from([0x68, 0x69]) },
      hex('0d000000 75 0300 | 02000000 6869'),
    ],
    [
      'Twrite tag=4 fid=6 offset=0 "ok"',
      { type: Type.Twrite, tag: 4, fid: 6, offset: 0, data: Uint8Array.from([0x6f, 0x6b]) },
      hex('19000000 76 0400 | 06000000 | 0000000000000000 | 02000000 6f6b'),
    ],
    [
      // Rstat: n[2] then the stat, which itself starts with its own size[2] (= n - 2).
      'Rstat tag=9 of /usr',
      { type: Type.Rstat, tag: 9, stat: statA },
      hex(`46000000 7d 0900 | 3d00 | 3b00 0201 06050403 | 80 07000000 2a00000000000000 | ed010080 | 00ca9a3b 01ca9a3b
           0000000000000000 | 0300 757372 | 0600 676c656e6461 | 0300 737973 | 0000`),
    ],
    [
      'Twstat tag=10 fid=4, rename only (every other field "don\'t touch")',
      { type: Type.Twstat, tag: 10, fid: 4, stat: { ...nullStat(), name: 'new' } },
      hex(`41000000 7e 0a00 | 04000000 | 3400 | 3200 ffff ffffffff | ff ffffffff ffffffffffffffff | ffffffff ffffffff ffffffff
           ffffffffffffffff | 0300 6e6577 | 0000 | 0000 | 0000`),
    ],
    ['Rclunk tag=5: a bare header', { type: Type.Rclunk, tag: 5 }, hex('07000000 79 0500')],
  ];

  it.each(cases)('%s', (_name, m, bytes) => {
    expect(encode(m)).toEqual(bytes);
    expect(decode(bytes)).toEqual(m);
  });

  it('builds the same Rstat bytes field by field', () => {
    const st = [
      ...le(0x0102, 2),
      ...le(0x03040506, 4),
      0x80,
      ...le(7, 4),
      ...le(42, 8),
      ...le(0x800001ed, 4),
      ...le(1e9, 4),
      ...le(1e9 + 1, 4),
      ...le(0, 8),
      ...str('usr'),
      ...str('glenda'),
      ...str('sys'),
      ...str(''),
    ];
    const entry = [...le(st.length, 2), ...st];
    expect(entry.length).toBe(61);
    expect(statSize(statA)).toBe(61);
    expect(encode({ type: Type.Rstat, tag: 9, stat: statA })).toEqual(frame(Type.Rstat, 9, le(entry.length, 2), entry));
    expect(packStats([statA])).toEqual(Uint8Array.from(entry));
  });

  it('encodes nullStat as all ones with empty strings (length is ff x 8)', () => {
    const ns = nullStat();
    expect(statSize(ns)).toBe(49);
    const packed = packStats([ns]);
    expect(packed).toEqual(hex(`2f00 ${'ff'.repeat(2 + 4 + 13 + 4 + 4 + 4)} ffffffffffffffff 0000 0000 0000 0000`));
    expect(packed.subarray(2 + 2 + 4 + 13 + 12, 2 + 2 + 4 + 13 + 12 + 8)).toEqual(new Uint8Array(8).fill(0xff));
    const back = unpackStats(packed);
    expect(back).toEqual([ns]);
    expect(back[0]!.length).toBe(NOLENGTH);
  });
});

describe('codec strictness', () => {
  const tclunk = hex('0b000000 78 3412 | 05000000');

  it('accepts the well-formed frame the malformed ones derive from', () => {
    expect(decode(tclunk)).toEqual({ type: Type.Tclunk, tag: 0x1234, fid: 5 });
  });

  it('rejects bytes left over after the fields, with the tag', () => {
    const e = decodeError(withSize(concat(tclunk, hex('00'))));
    expect(e.tag).toBe(0x1234);
    expect(e.fatal).toBe(false);
    expect(decodeError(withSize(concat(hex('07000000 79 0900'), hex('00')))).tag).toBe(9);
  });

  it('rejects fields running past the end of the frame, with the tag', () => {
    const e = decodeError(withSize(tclunk.subarray(0, 10)));
    expect(e.tag).toBe(0x1234);
    expect(e.fatal).toBe(false);
    // Tread one byte short of its count[4].
    const tread = encode({ type: Type.Tread, tag: 77, fid: 1, offset: 0, count: 10 });
    expect(decodeError(withSize(tread.subarray(0, tread.length - 1))).tag).toBe(77);
    // Rread whose count[4] claims more data than the frame has.
    expect(decodeError(hex('0d000000 75 0800 | 03000000 6869')).tag).toBe(8);
  });

  it('rejects a string running past the frame, with the tag', () => {
    // Tversion whose version string claims 7 bytes but only 6 follow.
    const e = decodeError(hex('13000000 64 ffff | 00200000 | 0700 395032303030'));
    expect(e.tag).toBe(0xffff);
    expect(e.fatal).toBe(false);
    // A walk name claiming 0xffff bytes.
    expect(decodeError(frame(Type.Twalk, 3, le(0, 4), le(1, 4), le(1, 2), le(0xffff, 2), ascii('abc'))).tag).toBe(3);
  });

  it('rejects invalid UTF-8, with the tag', () => {
    for (const bad of [[0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0x80], [0xf4, 0x90, 0x80, 0x80]]) {
      const e = decodeError(frame(Type.Tattach, 21, le(0, 4), le(NOFID, 4), [...le(bad.length, 2), ...bad], str('')));
      expect(e.tag).toBe(21);
      expect(e.fatal).toBe(false);
      expect(e.message).toMatch(/UTF-8/);
    }
  });

  it('rejects a walk of more than MAXWELEM names and a walk reply of more qids, with the tag', () => {
    const names = Array.from({ length: 17 }, () => str('a')).flat();
    const e = decodeError(frame(Type.Twalk, 5, le(0, 4), le(1, 4), le(17, 2), names));
    expect(e.tag).toBe(5);
    expect(e.fatal).toBe(false);
    // The encoder does not police MAXWELEM; the decoder does.
    expect(decodeError(encode({ type: Type.Twalk, tag: 6, fid: 0, newfid: 1, wnames: Array(17).fill('x') })).tag).toBe(
      6,
    );
    expect(decodeError(encode({ type: Type.Rwalk, tag: 7, qids: Array(17).fill(qidA) })).tag).toBe(7);
  });

  it('rejects unknown types, including Terror, with the tag', () => {
    for (const type of [99, Type.Terror, 0, 128, 255]) {
      const e = decodeError(hex(`07000000 ${type.toString(16).padStart(2, '0')} 2a00`));
      expect(e.tag).toBe(42);
      expect(e.fatal).toBe(false);
    }
    expect(decodeError(frame(106, 43, str('error'))).tag).toBe(43);
  });

  it('rejects a stat whose sizes disagree, with the tag', () => {
    const good = encode({ type: Type.Twstat, tag: 11, fid: 4, stat: nullStat() });
    expect(decode(good).type).toBe(Type.Twstat);
    // n[2] one more than the stat, with a byte to back it.
    const n = good.slice();
    n[11] = n[11]! + 1;
    expect(decodeError(withSize(concat(n, hex('00')))).tag).toBe(11);
    // The stat's own size[2] one less than its fields.
    const sz = good.slice();
    sz[13] = sz[13]! - 1;
    expect(decodeError(sz).tag).toBe(11);
    // The stat's size[2] pointing past the frame.
    const past = good.slice();
    past[13] = 0xff;
    expect(decodeError(past).tag).toBe(11);
  });

  it('treats a frame shorter than a header, or whose size field is not its length, as fatal', () => {
    for (const f of [new Uint8Array(0), hex('07'), hex('06000000 78 00')]) {
      const e = decodeError(f);
      expect(e.fatal).toBe(true);
      expect(e.tag).toBeUndefined();
    }
    expect(decodeError(concat(tclunk, hex('00'))).fatal).toBe(true);
    expect(decodeError(tclunk.subarray(0, 10)).fatal).toBe(true);
  });
});

describe('Framer', () => {
  const frames = [
    encode({ type: Type.Tversion, tag: NOTAG, msize: 8192, version: '9P2000' }),
    encode({ type: Type.Rclunk, tag: 1 }),
    encode({ type: Type.Rread, tag: 2, data: Uint8Array.from({ length: 300 }, (_, i) => i & 0xff) }),
    encode({ type: Type.Twalk, tag: 3, fid: 1, newfid: 2, wnames: ['a', 'bb'] }),
    encode({ type: Type.Rflush, tag: 4 }),
  ];
  const stream = concat(...frames);
  const asArrays = (fs: Uint8Array[]): number[][] => fs.map((f) => [...f]);
  const want = asArrays(frames);

  it('emits every frame of one coalesced chunk, and of a chunk holding the stream twice', () => {
    expect(asArrays(new Framer(8192).push(stream))).toEqual(want);
    expect(asArrays(new Framer(8192).push(concat(stream, stream)))).toEqual([...want, ...want]);
  });

  it('gives the same frames for a split at every byte boundary', () => {
    for (let i = 0; i <= stream.length; i++) {
      const f = new Framer(8192);
      const got = [...f.push(stream.subarray(0, i)), ...f.push(stream.subarray(i))];
      expect(asArrays(got), `split at ${i}`).toEqual(want);
      expect(f.pending).toBe(0);
    }
  });

  it('gives the same frames for every pair of split points in the small frames', () => {
    const small = concat(frames[1]!, frames[3]!, frames[4]!, frames[1]!);
    const smallWant = asArrays([frames[1]!, frames[3]!, frames[4]!, frames[1]!]);
    for (let i = 0; i <= small.length; i++) {
      for (let j = i; j <= small.length; j++) {
        const f = new Framer(8192);
        const got = [...f.push(small.subarray(0, i)), ...f.push(small.subarray(i, j)), ...f.push(small.subarray(j))];
        expect(asArrays(got), `splits at ${i}, ${j}`).toEqual(smallWant);
      }
    }
  });

  it('gives the same frames one byte at a time and in random chunks (with empty ones)', () => {
    const f = new Framer(8192);
    const got: Uint8Array[] = [];
    for (let i = 0; i < stream.length; i++) {
      got.push(...f.push(stream.subarray(i, i + 1)));
      expect(f.pending).toBe(i + 1 - got.reduce((n, g) => n + g.length, 0));
    }
    expect(asArrays(got)).toEqual(want);
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    for (let round = 0; round < 200; round++) {
      const g = new Framer(8192);
      const out: Uint8Array[] = [];
      const twice = concat(stream, stream);
      for (let pos = 0; pos < twice.length;) {
        const n = rand(4) === 0 ? 0 : 1 + rand(120);
        out.push(...g.push(twice.subarray(pos, pos + n)));
        pos += n;
      }
      expect(asArrays(out), `round ${round}`).toEqual([...want, ...want]);
      expect(g.pending).toBe(0);
    }
  });

  function fatal(fn: () => unknown): ProtocolError {
    try {
      fn();
    } catch (e) {
      expect(e).toBeInstanceOf(ProtocolError);
      expect((e as ProtocolError).fatal).toBe(true);
      return e as ProtocolError;
    }
    throw new Error('no error');
  }

  it('throws a fatal ProtocolError for a size below the header size, as soon as the size is in', () => {
    for (const size of [0, 1, 4, 6]) {
      fatal(() => new Framer(8192).push(Uint8Array.from(le(size, 4))));
      fatal(() => new Framer(8192).push(concat(frames[1]!, Uint8Array.from(le(size, 4)), new Uint8Array(10))));
      const f = new Framer(8192);
      expect(f.push(Uint8Array.from(le(size, 4)).subarray(0, 2))).toEqual([]);
      fatal(() => f.push(Uint8Array.from(le(size, 4)).subarray(2)));
    }
    expect(new Framer(8192).push(hex('07000000 79 0000'))).toHaveLength(1);
  });

  it('throws a fatal ProtocolError for a size above maxSize, and follows maxSize changes', () => {
    for (const size of [8193, 0x10000, 0xffffffff]) {
      fatal(() => new Framer(8192).push(Uint8Array.from(le(size, 4))));
      const f = new Framer(8192);
      expect(f.push(Uint8Array.from(le(size, 4)).subarray(0, 2))).toEqual([]);
      fatal(() => f.push(Uint8Array.from(le(size, 4)).subarray(2)));
    }
    const exact = withSize(new Uint8Array(8192));
    expect(new Framer(8192).push(exact)).toHaveLength(1);
    const f = new Framer(8192);
    expect(f.push(frames[2]!)).toHaveLength(1);
    f.maxSize = 256;
    fatal(() => f.push(frames[2]!));
  });
});

describe('stat packing and helpers', () => {
  it('packs and unpacks directory entries', () => {
    const stats = [statA, statB, nullStat(), { ...statA, name: '' }];
    const packed = packStats(stats);
    expect(packed.length).toBe(stats.reduce((n, s) => n + statSize(s), 0));
    expect(unpackStats(packed)).toEqual(stats);
    expect(unpackStats(new Uint8Array(0))).toEqual([]);
    expect(packStats([])).toEqual(new Uint8Array(0));
  });

  it('refuses truncated or padded directory data', () => {
    const packed = packStats([statA, statB]);
    expect(() => unpackStats(packed.subarray(0, packed.length - 1))).toThrow(ProtocolError);
    expect(() => unpackStats(concat(packed, hex('00')))).toThrow(ProtocolError);
    const bad = packed.slice();
    bad[0] = bad[0]! + 1;
    expect(() => unpackStats(bad)).toThrow(ProtocolError);
  });

  it('utf8Length agrees with TextEncoder, lone surrogates included', () => {
    const te = new TextEncoder();
    const samples = [
      '',
      'abc',
      '\u007f',
      '\u0080',
      'é',
      '\u07ff',
      '\u0800',
      '€',
      '\uffff',
      '😀',
      'a😀b',
      '\u{10ffff}',
      '\ud800',
      '\udbff',
      '\udc00',
      '\udfff',
      '\ud800a',
      'a\ud800',
      '\udc00\ud800',
      '\ud800\ud800\udc00',
      '\ud83d',
      'mixed: ascii é € 😀 \ud800 \udc00 end',
    ];
    for (const s of samples) expect(utf8Length(s), JSON.stringify(s)).toBe(te.encode(s).length);
    // And the encoder sizes frames with it: a lone surrogate goes out as U+FFFD.
    const m = decode(encode({ type: Type.Rerror, tag: 1, ename: 'x\ud800y' }));
    expect(m).toEqual({ type: Type.Rerror, tag: 1, ename: 'x\ufffdy' });
  });

  it('modeString shows ls(1)-style modes', () => {
    expect(modeString((DMDIR | 0o755) >>> 0)).toBe('drwxr-xr-x');
    expect(modeString(DMDIR | 0o555)).toBe('dr-xr-xr-x');
    expect(modeString(0o644)).toBe('-rw-r--r--');
    expect(modeString(0o777)).toBe('-rwxrwxrwx');
    expect(modeString(0o222)).toBe('--w--w--w-');
    expect(modeString(0o1)).toBe('---------x');
    expect(modeString(0)).toBe('----------');
  });
});
