/**
 * Escaping of one field of a tab-separated line, so that any text round-trips and nothing in it can pass for
 * something else: a backslash, newline, tab and carriage return become \\ \n \t \r, and any other control or
 * invisible character \u{HEX} (a newline flattened to a space would make `npm test⏎rm -rf ~` read as arguments of
 * npm; a bidi override would show a different command than the one that runs).
 */

/** A character a person cannot see for what it is: controls, invisible formatting (bidi overrides…), odd spaces. */
export function hiddenChar(c: string): boolean {
  return /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/u.test(c) || (/\p{Zs}/u.test(c) && c !== ' ');
}

const NAMED: Readonly<Record<string, string>> = { '\\': '\\\\', '\n': '\\n', '\t': '\\t', '\r': '\\r' };
const UNNAMED: Readonly<Record<string, string>> = { n: '\n', t: '\t', r: '\r', '\\': '\\', '-': '-' };

export function escapeField(text: string): string {
  let out = '';
  for (const c of text) out += NAMED[c] ?? (hiddenChar(c) ? `\\u{${c.codePointAt(0)!.toString(16)}}` : c);
  return out;
}

/** The text of an escaped field. `\-` is a literal `-` where `-` alone means "none" (see records.ts). */
export function unescapeField(text: string): string {
  return text.replace(/\\(u\{([0-9a-fA-F]{1,6})\}|[\\ntr-])/g, (_m, e: string, hex?: string) => {
    if (hex) return String.fromCodePoint(parseInt(hex, 16));
    return UNNAMED[e] ?? e;
  });
}
