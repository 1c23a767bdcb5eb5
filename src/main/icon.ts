/**
 * The tray icon, drawn in code (Electron's nativeImage cannot load the SVG in resources/): resources/icon.svg's
 * ring on a rounded square, and a red badge in the corner while approvals are pending. Encoded as PNG with
 * node:zlib, so no image files or libraries are needed. No Electron imports: tested under plain Node.
 */
import { deflateSync } from 'node:zlib';

type RGBA = [number, number, number, number];

const NAVY: RGBA = [0x1f, 0x2a, 0x44, 255];
const AMBER: RGBA = [0xf2, 0xb8, 0x4b, 255];
const RED: RGBA = [0xe5, 0x48, 0x3d, 255];
const WHITE: RGBA = [255, 255, 255, 255];

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(buf: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Uint8Array): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'ascii');
  Buffer.from(data).copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** Encodes RGBA pixels (row-major, size×size) as a PNG. */
export function encodePng(size: number, rgba: Uint8Array): Buffer {
  const raw = Buffer.alloc(size * (size * 4 + 1));
  for (let y = 0; y < size; y++) {
    raw[y * (size * 4 + 1)] = 0; // filter: none
    Buffer.from(rgba.buffer, rgba.byteOffset + y * size * 4, size * 4).copy(raw, y * (size * 4 + 1) + 1);
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 6; // RGBA
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', new Uint8Array(0)),
  ]);
}

/** Coverage of a pixel by a shape, by 4×4 supersampling (anti-aliased edges). */
function cover(x: number, y: number, inside: (px: number, py: number) => boolean): number {
  let n = 0;
  for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) if (inside(x + (i + 0.5) / 4, y + (j + 0.5) / 4)) n++;
  return n / 16;
}

function blend(px: Uint8Array, at: number, c: RGBA, a: number): void {
  if (a <= 0) return;
  const da = px[at + 3]! / 255;
  const oa = a + da * (1 - a);
  for (let k = 0; k < 3; k++) px[at + k] = Math.round((c[k]! * a + px[at + k]! * da * (1 - a)) / (oa || 1));
  px[at + 3] = Math.round(oa * 255);
}

/** The icon at `size` pixels; with `badge`, a red dot (with a white rim) at the top right. */
export function drawIcon(size: number, badge: boolean): Uint8Array {
  const px = new Uint8Array(size * size * 4);
  const s = size / 512;
  const roundRect = (x: number, y: number): boolean => {
    const r = 104 * s;
    const lo = 16 * s + r;
    const hi = 496 * s - r;
    const dx = Math.max(lo - x, 0, x - hi);
    const dy = Math.max(lo - y, 0, y - hi);
    return x >= 16 * s && x <= 496 * s && y >= 16 * s && y <= 496 * s && dx * dx + dy * dy <= r * r;
  };
  const c = 256 * s;
  const dist = (x: number, y: number, cx: number, cy: number): number => Math.hypot(x - cx, y - cy);
  const ring = (x: number, y: number): boolean => Math.abs(dist(x, y, c, c) - 148 * s) <= 22 * s;
  const dot = (x: number, y: number): boolean => dist(x, y, c, c) <= 46 * s;
  const bx = size * 0.76;
  const br = size * 0.24;
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const at = (y * size + x) * 4;
      blend(px, at, NAVY, cover(x, y, roundRect));
      blend(
        px,
        at,
        AMBER,
        cover(x, y, (a, b) => ring(a, b) || dot(a, b)),
      );
      if (badge) {
        blend(
          px,
          at,
          WHITE,
          cover(x, y, (a, b) => dist(a, b, bx, size - bx) <= br),
        );
        blend(
          px,
          at,
          RED,
          cover(x, y, (a, b) => dist(a, b, bx, size - bx) <= br * 0.78),
        );
      }
    }
  }
  return px;
}

export function iconPng(size: number, badge: boolean): Buffer {
  return encodePng(size, drawIcon(size, badge));
}
