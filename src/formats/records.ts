/**
 * Tab-separated records: one record a line, fields in the declared column order, each escaped (escape.ts) so that
 * tabs, newlines and backslashes in a value round-trip. A declaration is the only place its columns are named:
 * the daemon formats through it and every client parses through it, by column name.
 */
import { escapeField, unescapeField } from './escape.js';
import {
  describeField,
  fieldText,
  FormatError,
  type DeclaredFormat,
  type Field,
  type Input,
  type Value,
} from './format.js';

export type Row = Record<string, Value>;

export class Records implements DeclaredFormat {
  readonly kind = 'tsv';
  constructor(
    readonly name: string,
    /** Mutable on purpose: the column list is the format (a test reorders it and every client must follow). */
    readonly columns: Field[],
    readonly doc = '',
  ) {}

  formatRow(row: Readonly<Record<string, Input>>): string {
    return this.columns
      .map((c) => {
        const t = fieldText(c, row[c.name], this.name);
        if (t === null) return '-';
        const e = escapeField(t);
        return c.optional && e === '-' ? '\\-' : e;
      })
      .join('\t');
  }

  /** Whole lines, each ending in a newline. */
  format(rows: Iterable<Readonly<Record<string, Input>>>): string {
    let out = '';
    for (const r of rows) out += `${this.formatRow(r)}\n`;
    return out;
  }

  parseRow(line: string, n = 1): Row {
    const fields = line.split('\t');
    if (fields.length !== this.columns.length) {
      throw new FormatError(
        `${this.name} line ${n}: ${fields.length} fields, expected ${this.columns.length} (${this.columns.map((c) => c.name).join(', ')})`,
      );
    }
    const row: Row = {};
    this.columns.forEach((c, i) => {
      const f = fields[i]!;
      row[c.name] = c.optional && f === '-' ? null : unescapeField(f);
    });
    return row;
  }

  parse(text: string): Row[] {
    const out: Row[] = [];
    text.split('\n').forEach((l, i) => {
      if (l !== '') out.push(this.parseRow(l, i + 1));
    });
    return out;
  }

  /** The records of `text` that parse as declared, a line that does not left out (a client shows the rest). */
  parseValid(text: string): Row[] {
    return text.split('\n').flatMap((l) => {
      if (!l.trim()) return [];
      try {
        return [this.parseRow(l)];
      } catch {
        return [];
      }
    });
  }

  describe(): string {
    return `tab-separated records, one a line (\\t \\n \\\\ escaped): ${this.columns.map(describeField).join('; ')}.${this.doc ? ` ${this.doc}` : ''}`;
  }
}

export const records = (name: string, columns: Field[], doc?: string): Records => new Records(name, columns, doc);
