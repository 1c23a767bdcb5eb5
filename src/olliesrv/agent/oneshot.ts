/**
 * `generate` and `complete`: one model request with no history and no tools. The request is optional
 * `key=value` header lines, a blank line, then the text (without a blank line, a request whose first line is
 * not key=value is all text).
 */
import { ONESHOT_HEADERS } from '../../formats/olliesrv.js';
import type { GenerationParams } from '../backend/types.js';
import type { BackendPool } from './deps.js';

export class OneShotError extends Error {
  override name = 'OneShotError';
}

/** Splits a request into its header lines (ONESHOT_HEADERS, up to the first blank line) and the text. */
export function parseOneShot(request: string): { headers: Record<string, string>; text: string } {
  const keys = ONESHOT_HEADERS.keys.map((k) => k.name);
  const isHeader = (l: string): boolean => keys.includes(/^([A-Za-z]+)=/.exec(l)?.[1] ?? '');
  const lines = request.split('\n');
  if (!isHeader(lines[0]!)) return { headers: {}, text: lines[0] === '' ? lines.slice(1).join('\n') : request };
  const blank = lines.indexOf('');
  const head = blank < 0 ? lines : lines.slice(0, blank);
  const headers: Record<string, string> = {};
  head.forEach((l, i) => {
    if (!isHeader(l))
      throw new OneShotError(
        `line ${i + 1}: expected key=value (keys: ${keys.join(', ')}) or a blank line before the text`,
      );
    let pair: Record<string, string>;
    try {
      pair = ONESHOT_HEADERS.parse(l);
    } catch {
      // A value typed unquoted with spaces in it (`system=Be brief`): the rest of the line as written.
      const eq = l.indexOf('=');
      pair = { [l.slice(0, eq)]: l.slice(eq + 1) };
    }
    for (const [k, v] of Object.entries(pair)) {
      if (k in headers) throw new OneShotError(`line ${i + 1}: ${k} given twice`);
      headers[k] = v;
    }
  });
  return { headers, text: blank < 0 ? '' : lines.slice(blank + 1).join('\n') };
}

const COMPLETE_SYSTEM =
  'You complete code. Reply with only the text that belongs at the cursor: no explanation, no code fences, nothing repeated from before or after the cursor.';

export async function oneShot(
  backends: BackendPool,
  request: string,
  mode: 'generate' | 'complete',
  signal: AbortSignal,
): Promise<string> {
  const { headers, text } = parseOneShot(request);
  if (!text.trim()) throw new OneShotError('no text to send: write the prompt after the header lines');
  const backend = backends.get(headers.backend ?? backends.defaultName);
  const params: GenerationParams = {};
  for (const k of ['temperature', 'topP', 'topK', 'maxTokens', 'seed'] as const) {
    if (headers[k] === undefined) continue;
    const n = Number(headers[k]);
    if (!Number.isFinite(n)) throw new OneShotError(`${k}: ${JSON.stringify(headers[k])} is not a number`);
    params[k] = n;
  }
  const user =
    mode === 'complete'
      ? `<before-cursor>${text}</before-cursor>${headers.suffix ? `\n<after-cursor>${headers.suffix.replace(/\\n/g, '\n')}</after-cursor>` : ''}`
      : text;
  const system = headers.system ?? (mode === 'complete' ? COMPLETE_SYSTEM : undefined);
  let out = '';
  for await (const ev of backend.stream({
    model: headers.model,
    messages: [...(system ? [{ role: 'system' as const, content: system }] : []), { role: 'user', content: user }],
    tools: [],
    params,
    signal,
  })) {
    if (ev.type === 'text') out += ev.delta;
  }
  return out.endsWith('\n') ? out : `${out}\n`;
}
