/**
 * `generate` and `complete`: one model request with no history and no tools. The request is optional
 * `key=value` header lines, a blank line, then the text (without a blank line, a request whose first line is
 * not key=value is all text).
 */
import type { GenerationParams } from '../backend/types.js';
import type { BackendPool } from './deps.js';

const HEADER_KEYS = new Set(['backend', 'model', 'system', 'suffix', 'temperature', 'topP', 'topK', 'maxTokens', 'seed']);

export class OneShotError extends Error {
  override name = 'OneShotError';
}

export function parseOneShot(request: string): { headers: Record<string, string>; text: string } {
  const headers: Record<string, string> = {};
  const lines = request.split('\n');
  let i = 0;
  for (; i < lines.length; i++) {
    const l = lines[i]!;
    if (l === '') {
      i++;
      break;
    }
    const m = /^([A-Za-z]+)=(.*)$/.exec(l);
    if (!m || !HEADER_KEYS.has(m[1]!)) {
      if (i === 0) return { headers: {}, text: request };
      throw new OneShotError(`line ${i + 1}: expected key=value (keys: ${[...HEADER_KEYS].join(', ')}) or a blank line before the text`);
    }
    headers[m[1]!] = m[2]!;
  }
  return { headers, text: lines.slice(i).join('\n') };
}

const COMPLETE_SYSTEM =
  'You complete code. Reply with only the text that belongs at the cursor: no explanation, no code fences, nothing repeated from before or after the cursor.';

export async function oneShot(backends: BackendPool, request: string, mode: 'generate' | 'complete', signal: AbortSignal): Promise<string> {
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
  const user = mode === 'complete' ? `<before-cursor>${text}</before-cursor>${headers.suffix ? `\n<after-cursor>${headers.suffix.replace(/\\n/g, '\n')}</after-cursor>` : ''}` : text;
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
