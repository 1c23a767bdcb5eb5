/**
 * What every declared content format is: a kind (for clients that switch on it, the gateway and its OpenAPI), a
 * description (printed by the namespace's `help`), and a way to format and to parse.
 */
export class FormatError extends Error {
  override name = 'FormatError';
}

/** A field's value as the parsers give it: text, or null for "none" (`-` on the wire). */
export type Value = string | null;
/** What a formatter accepts for a field. */
export type Input = string | number | boolean | null | undefined;

export type FieldType = 'string' | 'integer' | 'number' | 'boolean' | 'time';

export interface Field {
  readonly name: string;
  readonly type?: FieldType;
  /** `-` on the wire means none (parsed as null); a literal `-` is then written `\-`. */
  readonly optional?: boolean;
  readonly doc?: string;
}

export interface DeclaredFormat {
  readonly kind: string;
  /** One paragraph: the format, its fields, what they mean. */
  describe(): string;
}

/** A field's value as text: booleans 1/0, numbers as JavaScript prints them. */
export function fieldText(f: Field, v: Input, where: string): string | null {
  if (v === undefined || v === null) {
    if (f.optional) return null;
    throw new FormatError(`${where}: ${f.name} has no value (it is not optional)`);
  }
  if (typeof v === 'boolean') return v ? '1' : '0';
  return String(v);
}

export function describeField(f: Field): string {
  const t =
    f.type && f.type !== 'string'
      ? ` (${f.type}${f.optional ? ', - for none' : ''})`
      : f.optional
        ? ' (- for none)'
        : '';
  return `${f.name}${t}${f.doc ? `: ${f.doc}` : ''}`;
}
