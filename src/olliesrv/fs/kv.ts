/**
 * `key=value` requests, as written to `new` files and `cfg`: pairs separated by whitespace or newlines, each value a
 * shell word (formats/words.ts: quoted when it holds spaces). The keys and their meaning are declared in
 * formats/olliesrv.ts; a bad request is a RequestError naming what and where.
 */
import { FormatError, KeyValues } from '../../formats/index.js';

export class RequestError extends Error {
  override name = 'RequestError';
}

export function parseKeyValues(text: string, decl: KeyValues): Record<string, string> {
  try {
    return decl.parse(text);
  } catch (e) {
    if (e instanceof FormatError) throw new RequestError(e.message);
    throw e;
  }
}
