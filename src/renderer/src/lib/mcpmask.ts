/**
 * config/mcp.json as the GUI shows it: the values of every server's `env` and `headers` (tokens, Authorization)
 * replaced by KEY_MASK, the rest of the text as written. A save puts back, for each value still masked, the value
 * the same server and name had in the file as read, so editing the rest never needs the keys (as backends.conf's
 * keys, parse.ts maskKeys).
 */
import { KEY_MASK } from './parse.js';

type Secrets = Array<{ server: string; field: 'env' | 'headers'; name: string; value: string }>;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The secret values of a file, in the order they are written (JSON.parse keeps it). Undefined: not parseable. */
function secrets(text: string): Secrets | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(json) || !isObject(json.mcpServers)) return [];
  const out: Secrets = [];
  for (const [server, s] of Object.entries(json.mcpServers)) {
    if (!isObject(s)) continue;
    for (const field of ['env', 'headers'] as const) {
      const m = s[field];
      if (!isObject(m)) continue;
      for (const [name, value] of Object.entries(m))
        if (typeof value === 'string') out.push({ server, field, name, value });
    }
  }
  return out;
}

/** `"NAME": VALUE` at or after `from`: where it is, and its text. */
function findPair(text: string, name: string, value: string, from: number): { at: number; len: number } | undefined {
  const re = new RegExp(`${escape(JSON.stringify(name))}\\s*:\\s*${escape(JSON.stringify(value))}`, 'g');
  re.lastIndex = from;
  const m = re.exec(text);
  return m ? { at: m.index, len: m[0].length } : undefined;
}

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The text with every env and header value masked (a file that is not JSON is shown as it is). */
export function maskMcp(text: string): string {
  const list = secrets(text);
  if (!list) return text;
  let out = text;
  let from = 0;
  for (const s of list) {
    const p = findPair(out, s.name, s.value, from);
    if (!p) continue;
    const masked = `${JSON.stringify(s.name)}: ${JSON.stringify(KEY_MASK)}`;
    out = out.slice(0, p.at) + masked + out.slice(p.at + p.len);
    from = p.at + masked.length;
  }
  return out;
}

/**
 * The text to write for an edited, masked file: each value still KEY_MASK gets the value its server and name had
 * in `original`. Throws when a mask stands where the file as read had no value (a renamed server or variable).
 */
export function unmaskMcp(edited: string, original: string): string {
  const list = secrets(edited);
  // Not JSON: written as it is, for olliesrv's check to name the problem.
  if (!list) return edited;
  const known = new Map((secrets(original) ?? []).map((s) => [`${s.server}\0${s.field}\0${s.name}`, s.value]));
  let out = edited;
  let from = 0;
  for (const s of list) {
    const p = findPair(out, s.name, s.value, from);
    if (!p) continue;
    if (s.value !== KEY_MASK) {
      from = p.at + p.len;
      continue;
    }
    const value = known.get(`${s.server}\0${s.field}\0${s.name}`);
    if (value === undefined)
      throw new Error(
        `mcp.json: mcpServers.${s.server}.${s.field}.${s.name} is hidden (${KEY_MASK}) but had no value to keep: type the value`,
      );
    const pair = `${JSON.stringify(s.name)}: ${JSON.stringify(value)}`;
    out = out.slice(0, p.at) + pair + out.slice(p.at + p.len);
    from = p.at + pair.length;
  }
  return out;
}
