/**
 * `key=value` requests, as written to `new` files: pairs separated by whitespace or newlines, values
 * optionally double-quoted (with \" and \\ escapes) when they contain spaces.
 */
export class RequestError extends Error {
  override name = 'RequestError';
}

export function parseKeyValues<K extends string>(text: string, valid: readonly K[]): Partial<Record<K, string>> {
  const out: Partial<Record<K, string>> = {};
  let i = 0;
  const n = text.length;
  while (i < n) {
    while (i < n && /\s/.test(text[i]!)) i++;
    if (i >= n) break;
    const start = i;
    while (i < n && text[i] !== '=' && !/\s/.test(text[i]!)) i++;
    const key = text.slice(start, i);
    if (text[i] !== '=') throw new RequestError(`expected key=value, got ${JSON.stringify(key)}; valid keys: ${valid.join(', ')}`);
    i++;
    let value = '';
    if (text[i] === '"') {
      i++;
      while (i < n && text[i] !== '"') {
        if (text[i] === '\\' && i + 1 < n) i++;
        value += text[i++];
      }
      if (i >= n) throw new RequestError(`unterminated quote in value of ${key}`);
      i++;
    } else {
      const vs = i;
      while (i < n && !/\s/.test(text[i]!)) i++;
      value = text.slice(vs, i);
    }
    if (!(valid as readonly string[]).includes(key)) throw new RequestError(`unknown key ${JSON.stringify(key)}; valid keys: ${valid.join(', ')}`);
    if (key in out) throw new RequestError(`key ${key} given twice`);
    out[key as K] = value;
  }
  return out;
}

/** Splits a control request into its command word and the rest. */
export function splitCommand(text: string): { cmd: string; args: string } {
  const t = text.trim();
  const sp = t.search(/\s/);
  return sp === -1 ? { cmd: t, args: '' } : { cmd: t.slice(0, sp), args: t.slice(sp + 1).trim() };
}
