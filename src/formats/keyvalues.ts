/**
 * key=value content: files (cfg, stats, proc stat) and requests (session/new, agent/new, cfg writes). Written one
 * pair a line, each value a shell word (words.ts: single-quoted when not plain, so spaces, tabs, newlines and `=`
 * round-trip); read as shell words, so pairs may also share a line, as a person types them.
 */
import { describeField, fieldText, FormatError, type DeclaredFormat, type Field, type Input } from './format.js';
import { nextWord, quoteWord, WordsError } from './words.js';

export class KeyValues implements DeclaredFormat {
  readonly kind = 'kv';
  constructor(
    readonly name: string,
    readonly keys: Field[],
    /** Keys beyond the declared ones, by pattern (e.g. one per sub-agent), with what they are. */
    readonly extra?: { pattern: RegExp; doc: string },
    readonly doc = '',
  ) {}

  private at(): string {
    return this.name ? `${this.name}: ` : '';
  }

  private field(key: string): Field | undefined {
    return this.keys.find((k) => k.name === key) ?? (this.extra?.pattern.test(key) ? { name: key } : undefined);
  }

  /** One line per pair: declared keys in order (absent ones left out), then the extra keys. */
  format(values: Readonly<Record<string, Input>>): string {
    let out = '';
    const put = (f: Field, v: Input): void => {
      if (v === undefined) return;
      const t = fieldText(f, v, this.name);
      out += `${f.name}=${t === null ? '-' : quoteWord(t)}\n`;
    };
    for (const k of this.keys) put(k, values[k.name]);
    for (const [k, v] of Object.entries(values)) {
      if (this.keys.some((d) => d.name === k)) continue;
      if (!this.field(k)) throw new FormatError(`${this.at()}${k} is not a declared key (${this.keyNames()})`);
      put({ name: k }, v);
    }
    return out;
  }

  keyNames(): string {
    return [...this.keys.map((k) => k.name), ...(this.extra ? [this.extra.pattern.source] : [])].join(', ');
  }

  /** The pairs of `text`; an unknown key, a word without `=`, a key given twice or a bad quote is an error naming it. */
  parse(text: string): Record<string, string> {
    const out: Record<string, string> = {};
    let w;
    try {
      w = nextWord(text, 0);
    } catch (e) {
      throw new FormatError(`${this.at()}${(e as WordsError).message}`);
    }
    while (w) {
      // The key is what precedes the first `=` of the word as written (a quoted key is still a key).
      const eq = w.word.indexOf('=');
      if (eq < 1)
        throw new FormatError(
          `${this.at()}expected key=value, got ${JSON.stringify(w.word)}; valid keys: ${this.keyNames()}`,
        );
      const key = w.word.slice(0, eq);
      if (!this.field(key))
        throw new FormatError(`${this.at()}unknown key ${JSON.stringify(key)}; valid keys: ${this.keyNames()}`);
      if (key in out) throw new FormatError(`${this.at()}key ${key} given twice`);
      out[key] = w.word.slice(eq + 1);
      try {
        w = nextWord(text, w.end);
      } catch (e) {
        throw new FormatError(`${this.at()}${(e as WordsError).message}`);
      }
    }
    return out;
  }

  describe(): string {
    return `key=value, one pair a line (values in single quotes when not plain): ${this.keys.map(describeField).join('; ')}${this.extra ? `; ${this.extra.pattern.source}: ${this.extra.doc}` : ''}.${this.doc ? ` ${this.doc}` : ''}`;
  }
}

export const keyValues = (name: string, keys: Field[], extra?: KeyValues['extra'], doc?: string): KeyValues =>
  new KeyValues(name, keys, extra, doc);
