/**
 * ANSI output → styled segments, for process output: SGR colours and attributes become styles the view puts
 * on spans (text nodes, never HTML), every other escape sequence is dropped. It is incremental — a chunk may
 * end in the middle of an escape sequence — and a lone carriage return rewinds to the start of the line, as a
 * terminal's progress bar expects.
 */

export interface AnsiStyle {
  fg?: string;
  bg?: string;
  bold?: boolean;
  dim?: boolean;
  italic?: boolean;
  underline?: boolean;
  inverse?: boolean;
  strike?: boolean;
}

export interface Segment {
  text: string;
  style: AnsiStyle;
}

/** The 16 basic colours (xterm's defaults, a little softened for a dark background). */
const BASIC = [
  '#2e3436',
  '#ef2929',
  '#4e9a06',
  '#c4a000',
  '#3465a4',
  '#a569bd',
  '#06989a',
  '#d3d7cf',
  '#7f8784',
  '#ff6b6b',
  '#8ae234',
  '#fce94f',
  '#729fcf',
  '#d7a3e8',
  '#34e2e2',
  '#eeeeec',
];

/** xterm's 256-colour palette: 16 basic, a 6×6×6 cube, 24 greys. */
export function color256(n: number): string | undefined {
  if (!Number.isInteger(n) || n < 0 || n > 255) return undefined;
  if (n < 16) return BASIC[n];
  if (n < 232) {
    const i = n - 16;
    const step = (v: number): number => (v === 0 ? 0 : 55 + v * 40);
    return rgb(step(Math.floor(i / 36)), step(Math.floor(i / 6) % 6), step(i % 6));
  }
  const g = 8 + (n - 232) * 10;
  return rgb(g, g, g);
}

function rgb(r: number, g: number, b: number): string {
  const h = (v: number): string =>
    Math.max(0, Math.min(255, v | 0))
      .toString(16)
      .padStart(2, '0');
  return `#${h(r)}${h(g)}${h(b)}`;
}

const sameStyle = (a: AnsiStyle, b: AnsiStyle): boolean =>
  a.fg === b.fg &&
  a.bg === b.bg &&
  !a.bold === !b.bold &&
  !a.dim === !b.dim &&
  !a.italic === !b.italic &&
  !a.underline === !b.underline &&
  !a.inverse === !b.inverse &&
  !a.strike === !b.strike;

/** Applies one SGR parameter list (`ESC [ … m`) to a style; returns the new style (styles are never mutated). */
export function applySgr(style: AnsiStyle, params: number[]): AnsiStyle {
  let s: AnsiStyle = { ...style };
  if (params.length === 0) params = [0];
  for (let i = 0; i < params.length; i++) {
    const p = params[i]!;
    if (p === 0) s = {};
    else if (p === 1) s.bold = true;
    else if (p === 2) s.dim = true;
    else if (p === 3) s.italic = true;
    else if (p === 4) s.underline = true;
    else if (p === 7) s.inverse = true;
    else if (p === 9) s.strike = true;
    else if (p === 22) s.bold = s.dim = false;
    else if (p === 23) s.italic = false;
    else if (p === 24) s.underline = false;
    else if (p === 27) s.inverse = false;
    else if (p === 29) s.strike = false;
    else if (p >= 30 && p <= 37) s.fg = BASIC[p - 30];
    else if (p === 39) s.fg = undefined;
    else if (p >= 40 && p <= 47) s.bg = BASIC[p - 40];
    else if (p === 49) s.bg = undefined;
    else if (p >= 90 && p <= 97) s.fg = BASIC[p - 90 + 8];
    else if (p >= 100 && p <= 107) s.bg = BASIC[p - 100 + 8];
    else if (p === 38 || p === 48) {
      // Extended colour: 5;N (palette) or 2;R;G;B (true colour). A malformed one ends the list.
      let c: string | undefined;
      if (params[i + 1] === 5) {
        c = color256(params[i + 2] ?? -1);
        i += 2;
      } else if (params[i + 1] === 2) {
        c = rgb(params[i + 2] ?? 0, params[i + 3] ?? 0, params[i + 4] ?? 0);
        i += 4;
      } else break;
      if (p === 38) s.fg = c;
      else s.bg = c;
    }
  }
  return s;
}

/**
 * The parser keeps the output as segments (adjacent text of the same style merged). `push` feeds a chunk;
 * `segments` is the whole output so far, capped at `maxChars` (the oldest text is dropped first).
 */
export class AnsiText {
  segments: Segment[] = [];
  /** Characters dropped from the front to respect the cap. */
  dropped = 0;
  private style: AnsiStyle = {};
  /** An escape sequence cut by the end of a chunk, kept for the next one. */
  private pending = '';
  private chars = 0;

  constructor(private readonly maxChars = 512 * 1024) {}

  push(chunk: string): void {
    let text = this.pending + chunk;
    this.pending = '';
    let i = 0;
    let plain = '';
    const flush = (): void => {
      if (plain) this.append(plain);
      plain = '';
    };
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 0x1b) {
        flush();
        const end = this.escapeEnd(text, i);
        if (end === -1) {
          this.pending = text.slice(i);
          text = '';
          break;
        }
        const seq = text.slice(i, end);
        if (seq.startsWith('\x1b[') && seq.endsWith('m')) {
          const body = seq.slice(2, -1);
          // Private or intermediate forms (`ESC [ ? … m`) are not SGR.
          if (/^[\d;:]*$/.test(body))
            this.style = applySgr(
              this.style,
              body === '' ? [] : body.split(/[;:]/).map((x) => (x === '' ? 0 : Number(x))),
            );
        }
        i = end;
        continue;
      }
      if (c === 0x0d) {
        if (i + 1 >= text.length) {
          // Could be the first half of CRLF: decide with the next chunk.
          flush();
          this.pending = '\r';
          break;
        }
        if (text.charCodeAt(i + 1) === 0x0a) {
          i++;
          continue;
        }
        flush();
        this.rewindLine();
        i++;
        continue;
      }
      if (c === 0x08) {
        flush();
        this.backspace();
        i++;
        continue;
      }
      // Other C0 controls except tab and newline show as nothing (a bell, a shift-in).
      if (c < 0x20 && c !== 0x0a && c !== 0x09) {
        i++;
        continue;
      }
      plain += text[i];
      i++;
    }
    flush();
    this.trim();
  }

  /** Where the escape sequence at `i` ends (exclusive), or -1 when the text ends first. */
  private escapeEnd(text: string, i: number): number {
    if (i + 1 >= text.length) return -1;
    const kind = text[i + 1];
    if (kind === '[') {
      // CSI: parameters and intermediates, then one final byte in @–~.
      for (let j = i + 2; j < text.length; j++) {
        const c = text.charCodeAt(j);
        if (c >= 0x40 && c <= 0x7e) return j + 1;
        if (c < 0x20 || c > 0x3f) return j; // not a CSI after all: drop what came so far
      }
      return -1;
    }
    if (kind === ']' || kind === 'P' || kind === '_' || kind === '^') {
      // OSC / DCS / APC / PM: up to BEL or ST (ESC \).
      for (let j = i + 2; j < text.length; j++) {
        if (text.charCodeAt(j) === 0x07) return j + 1;
        if (text.charCodeAt(j) === 0x1b && j + 1 < text.length && text[j + 1] === '\\') return j + 2;
      }
      return -1;
    }
    // A two-byte escape (ESC 7, ESC =, …), or ESC ( B style charset selection.
    if (kind === '(' || kind === ')') return i + 3 <= text.length ? i + 3 : -1;
    return i + 2;
  }

  private append(text: string): void {
    const last = this.segments.at(-1);
    if (last && sameStyle(last.style, this.style)) last.text += text;
    else this.segments.push({ text, style: this.style });
    this.chars += text.length;
  }

  /** A lone CR: what follows overwrites the current line, so drop the line's text so far. */
  private rewindLine(): void {
    while (this.segments.length) {
      const last = this.segments.at(-1)!;
      const nl = last.text.lastIndexOf('\n');
      if (nl !== -1) {
        this.chars -= last.text.length - nl - 1;
        last.text = last.text.slice(0, nl + 1);
        return;
      }
      this.chars -= last.text.length;
      this.segments.pop();
    }
  }

  private backspace(): void {
    const last = this.segments.at(-1);
    if (!last || last.text.endsWith('\n')) return;
    last.text = last.text.slice(0, -1);
    this.chars--;
    if (!last.text) this.segments.pop();
  }

  private trim(): void {
    while (this.chars > this.maxChars && this.segments.length > 1) {
      const first = this.segments[0]!;
      const over = this.chars - this.maxChars;
      if (first.text.length <= over) {
        this.segments.shift();
        this.chars -= first.text.length;
        this.dropped += first.text.length;
      } else {
        first.text = first.text.slice(over);
        this.chars -= over;
        this.dropped += over;
      }
    }
  }

  /** The plain text (no styles): for copying. */
  toString(): string {
    return this.segments.map((s) => s.text).join('');
  }
}

/** The CSS a segment's style maps to (inverse swaps the colours). */
export function segmentCss(s: AnsiStyle): Record<string, string> {
  const css: Record<string, string> = {};
  let fg = s.fg;
  let bg = s.bg;
  if (s.inverse) [fg, bg] = [bg ?? 'var(--bg)', fg ?? 'var(--fg)'];
  if (fg) css.color = fg;
  if (bg) css.backgroundColor = bg;
  if (s.bold) css.fontWeight = '700';
  if (s.dim) css.opacity = '0.65';
  if (s.italic) css.fontStyle = 'italic';
  const deco = [s.underline && 'underline', s.strike && 'line-through'].filter(Boolean).join(' ');
  if (deco) css.textDecoration = deco;
  return css;
}
