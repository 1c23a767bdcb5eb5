/**
 * Cuts a byte stream into 9P frames. Chunks may split or join frames arbitrarily; a frame is emitted as soon
 * as its last byte arrives. A size field below the header size or above the negotiated maximum means the
 * stream can no longer be trusted, so it is a fatal ProtocolError and the connection must close.
 */
import { HEADER_SIZE } from './constants.js';
import { ProtocolError } from './errors.js';

export class Framer {
  private chunks: Uint8Array[] = [];
  private buffered = 0;

  constructor(public maxSize: number) {}

  /** Adds bytes; returns the frames they complete, in order. */
  push(chunk: Uint8Array): Uint8Array[] {
    const frames: Uint8Array[] = [];
    if (this.buffered === 0) {
      // The common case: whole frames within one chunk, sliced without copying.
      let pos = 0;
      while (chunk.length - pos >= 4) {
        const size = this.check(readSize(chunk, pos));
        if (chunk.length - pos < size) break;
        frames.push(chunk.subarray(pos, pos + size));
        pos += size;
      }
      if (pos < chunk.length) this.keep(chunk.subarray(pos));
      return frames;
    }
    this.keep(chunk);
    for (;;) {
      if (this.buffered < 4) return frames;
      const head = this.peek(4);
      const size = this.check(readSize(head, 0));
      if (this.buffered < size) return frames;
      frames.push(this.take(size));
    }
  }

  /** Bytes received but not yet part of a complete frame. */
  get pending(): number {
    return this.buffered;
  }

  private check(size: number): number {
    if (size < HEADER_SIZE) throw new ProtocolError(`frame size ${size} is smaller than a 9P header`, undefined, true);
    if (size > this.maxSize)
      throw new ProtocolError(`frame size ${size} exceeds msize ${this.maxSize}`, undefined, true);
    return size;
  }

  private keep(b: Uint8Array): void {
    this.chunks.push(b);
    this.buffered += b.length;
  }

  private peek(n: number): Uint8Array {
    const first = this.chunks[0]!;
    if (first.length >= n) return first;
    return this.gather(n, false);
  }

  private take(n: number): Uint8Array {
    const first = this.chunks[0]!;
    if (first.length === n) {
      this.chunks.shift();
      this.buffered -= n;
      return first;
    }
    if (first.length > n) {
      this.chunks[0] = first.subarray(n);
      this.buffered -= n;
      return first.subarray(0, n);
    }
    return this.gather(n, true);
  }

  private gather(n: number, consume: boolean): Uint8Array {
    const out = new Uint8Array(n);
    let filled = 0;
    let i = 0;
    while (filled < n) {
      const c = this.chunks[i]!;
      const part = Math.min(c.length, n - filled);
      out.set(c.subarray(0, part), filled);
      filled += part;
      if (consume) {
        if (part === c.length) this.chunks.shift();
        else this.chunks[0] = c.subarray(part);
      } else i++;
    }
    if (consume) this.buffered -= n;
    return out;
  }
}

function readSize(b: Uint8Array, pos: number): number {
  return (b[pos]! | (b[pos + 1]! << 8) | (b[pos + 2]! << 16)) + b[pos + 3]! * 0x1000000;
}
