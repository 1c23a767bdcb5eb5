/** 9P2000 message types, modes and limits, as in intro(5) and fcall.h. */

export const Type = {
  Tversion: 100,
  Rversion: 101,
  Tauth: 102,
  Rauth: 103,
  Tattach: 104,
  Rattach: 105,
  Terror: 106,
  Rerror: 107,
  Tflush: 108,
  Rflush: 109,
  Twalk: 110,
  Rwalk: 111,
  Topen: 112,
  Ropen: 113,
  Tcreate: 114,
  Rcreate: 115,
  Tread: 116,
  Rread: 117,
  Twrite: 118,
  Rwrite: 119,
  Tclunk: 120,
  Rclunk: 121,
  Tremove: 122,
  Rremove: 123,
  Tstat: 124,
  Rstat: 125,
  Twstat: 126,
  Rwstat: 127,
} as const;

export type TypeName = keyof typeof Type;
export const typeName: Record<number, TypeName> = Object.fromEntries(
  Object.entries(Type).map(([k, v]) => [v, k as TypeName]),
);

export const VERSION = '9P2000';
export const NOTAG = 0xffff;
export const NOFID = 0xffffffff;
/** Bytes of a Tread/Rread/Twrite header beyond the data: what msize must leave room for. */
export const IOHDRSZ = 24;
/** Most path elements in one Twalk. */
export const MAXWELEM = 16;
/** Smallest frame: size[4] type[1] tag[2]. */
export const HEADER_SIZE = 7;

/** Open modes (Topen/Tcreate). */
export const OREAD = 0;
export const OWRITE = 1;
export const ORDWR = 2;
export const OEXEC = 3;
export const OTRUNC = 0x10;
export const ORCLOSE = 0x40;

/** Qid types: the high byte of a Dir's mode. */
export const QTDIR = 0x80;
export const QTAPPEND = 0x40;
export const QTEXCL = 0x20;
export const QTAUTH = 0x08;
export const QTFILE = 0x00;

/** Mode bits of a stat entry. */
export const DMDIR = 0x80000000;
export const DMAPPEND = 0x40000000;
export const DMEXCL = 0x20000000;
export const DMAUTH = 0x08000000;
