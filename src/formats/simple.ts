/** The formats with no columns: JSON, JSONL blocks, one item a line, a status word with a summary, plain text. */
import { FormatError, type DeclaredFormat } from './format.js';

export class Json implements DeclaredFormat {
  readonly kind = 'json';
  constructor(readonly doc: string) {}
  format(v: unknown): string {
    return `${JSON.stringify(v)}\n`;
  }
  parse(text: string): unknown {
    return JSON.parse(text) as unknown;
  }
  describe(): string {
    return `JSON: ${this.doc}`;
  }
}

/** One JSON object a line (the chat log's blocks). */
export class JsonLines implements DeclaredFormat {
  readonly kind = 'jsonl';
  constructor(
    readonly doc: string,
    /** The keys every object has, then the optional ones (for OpenAPI and the description). */
    readonly keys: readonly string[] = [],
    readonly optionalKeys: readonly string[] = [],
  ) {}
  formatLine(v: Record<string, unknown>): string {
    return JSON.stringify(v);
  }
  format(vs: Iterable<Record<string, unknown>>): string {
    let out = '';
    for (const v of vs) out += `${this.formatLine(v)}\n`;
    return out;
  }
  parseLine(line: string, n = 1): Record<string, unknown> {
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new FormatError(`line ${n}: not JSON: ${(e as Error).message}`);
    }
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new FormatError(`line ${n}: not a JSON object`);
    return v as Record<string, unknown>;
  }
  parse(text: string): Record<string, unknown>[] {
    return text.split('\n').flatMap((l, i) => (l.trim() ? [this.parseLine(l, i + 1)] : []));
  }
  describe(): string {
    const keys = this.keys.length ? ` {${[...this.keys, ...this.optionalKeys.map((k) => `${k}?`)].join(', ')}}` : '';
    return `JSONL, one object a line${keys}: ${this.doc}`;
  }
}

/** One item a line (names); an item never holds a newline. */
export class Lines implements DeclaredFormat {
  readonly kind = 'lines';
  constructor(readonly doc: string) {}
  format(items: Iterable<string>): string {
    let out = '';
    for (const i of items) {
      if (i.includes('\n')) throw new FormatError(`a line item holds a newline: ${JSON.stringify(i)}`);
      out += `${i}\n`;
    }
    return out;
  }
  parse(text: string): string[] {
    return text.split('\n').filter((l) => l !== '');
  }
  describe(): string {
    return `one a line: ${this.doc}`;
  }
}

/** A status word on the first line, then a summary (goalstatus). */
export class Status implements DeclaredFormat {
  readonly kind = 'status';
  constructor(
    readonly words: readonly string[],
    readonly doc: string,
  ) {}
  format(v: { status: string; summary: string }): string {
    return `${v.status}\n${v.summary ? `${v.summary}\n` : ''}`;
  }
  parse(text: string): { status: string; summary: string } {
    const nl = text.indexOf('\n');
    const status = (nl < 0 ? text : text.slice(0, nl)).trim();
    const summary = nl < 0 ? '' : text.slice(nl + 1).replace(/\n$/, '');
    return { status, summary };
  }
  describe(): string {
    return `the status (${this.words.join(', ')}) on the first line, then ${this.doc}`;
  }
}

/** Text with no structure of its own (a prompt, a plan, a log as text, a configuration file with its own parser). */
export class Text implements DeclaredFormat {
  readonly kind = 'text';
  constructor(readonly doc: string) {}
  format(v: string): string {
    return v;
  }
  parse(text: string): string {
    return text;
  }
  describe(): string {
    return `text: ${this.doc}`;
  }
}

/** One value on one line (an id, a name, a state): the gateway serves it as text. */
export class OneLine implements DeclaredFormat {
  readonly kind = 'value';
  constructor(readonly doc: string) {}
  format(v: string): string {
    if (v.includes('\n')) throw new FormatError(`a one-line value holds a newline: ${JSON.stringify(v)}`);
    return `${v}\n`;
  }
  parse(text: string): string {
    return text.replace(/\n$/, '');
  }
  describe(): string {
    return `one line: ${this.doc}`;
  }
}
