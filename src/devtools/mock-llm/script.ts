/**
 * Scripting the mock LLM: the turns a test scripts (content, usage, faults), how a turn resolves into a plan that
 * every protocol renders, and how a request's prompt is counted for usage and the enforced window.
 *
 * Token accounting: `usage.input` is the whole prompt, cached tokens included (as OpenAI's prompt_tokens and
 * Gemini's promptTokenCount count it); the Anthropic rendering subtracts the cache (anthropic.ts).
 */
import { countTokens } from '../../olliesrv/backend/tokens.js';

export interface ToolCallSpec {
  name: string;
  args: Record<string, unknown>;
  /** Defaults to a generated id in the provider's style (call_…, toolu_…). */
  id?: string;
}

export type Step =
  | { text: string }
  | { reasoning: string }
  | { toolCalls: ToolCallSpec[] }
  /** `cost` (USD) is reported in the OpenAI usage chunk, as OpenRouter does. */
  | { usage: { input?: number; output?: number; cached?: number; cacheWrite?: number; cost?: number } }
  /**
   * Reply with this HTTP error (in the provider's error envelope). `retryAfter` is sent as Retry-After (seconds, or
   * a string such as an HTTP-date), `retryAfterMs` as OpenAI's retry-after-ms.
   */
  | { status: number; retryAfter?: number | string; retryAfterMs?: number; message?: string }
  /** HTTP 400 with the provider's real context-length error body. */
  | { contextOverflow: true }
  /** The error a provider returns when the model cannot use tools (Ollama "does not support tools", …). */
  | { toolUnsupported: true }
  /**
   * After `afterChunks` chunks (default 1) of a 200 stream, send the provider's in-stream error event with this
   * message and end the stream (OpenAI-style `data: {"error":…}`, Anthropic `event: error`, Ollama `{"error":…}`).
   */
  | { streamError: string; afterChunks?: number }
  /** Destroy the socket after writing this many chunks (SSE events / NDJSON lines) of the body. */
  | { cutAfterChunks: number }
  /** Wait this long before each chunk. */
  | { delayMs: number };

export type Turn = Step[];

export const DEFAULT_REPLY = 'Hello from the mock LLM.';

/** A turn resolved into content and fault settings. */
export interface Plan {
  content: Array<
    { kind: 'text'; text: string } | { kind: 'reasoning'; text: string } | { kind: 'tools'; calls: ToolCallSpec[] }
  >;
  usage: { input: number; output: number; cached: number; cacheWrite: number; cost?: number };
  error?: { status: number; retryAfter?: number | string; retryAfterMs?: number; message?: string };
  overflow: boolean;
  toolUnsupported: boolean;
  streamError?: { message: string; afterChunks: number };
  cutAfter?: number;
  delayMs: number;
}

/** Split text into word-sized deltas, keeping the spaces: "a b c" → ["a", " b", " c"]. */
export function splitText(text: string): string[] {
  return text === '' ? [] : text.split(/(?=\s)/);
}

/** Split a JSON argument string into `n` pieces (fewer when it is short), as providers stream tool input. */
export function splitArgs(json: string, n = 3): string[] {
  const size = Math.max(1, Math.ceil(json.length / n));
  const out: string[] = [];
  for (let i = 0; i < json.length; i += size) out.push(json.slice(i, i + size));
  return out.length ? out : [''];
}

const estimateTokens = (s: string): number => Math.max(1, Math.ceil(s.length / 4));

/** Request fields that are settings, not prompt text. */
const NOT_PROMPT = new Set([
  'model',
  'stream',
  'stream_options',
  'temperature',
  'top_p',
  'top_k',
  'seed',
  'stop',
  'max_tokens',
  'max_completion_tokens',
  'tool_choice',
  'options',
  'think',
  'thinking',
  'generationConfig',
  'toolConfig',
  'parallel_tool_calls',
  'reasoning_effort',
  'metadata',
  'keep_alive',
  'format',
]);

/** The prompt of a chat request of any dialect in tokens: every text in it, the tool schemas as JSON. */
export function promptTokens(body: Record<string, unknown>): number {
  let n = 0;
  const walk = (v: unknown): void => {
    if (typeof v === 'string') n += countTokens(v);
    else if (Array.isArray(v)) for (const x of v) walk(x);
    else if (v !== null && typeof v === 'object') {
      // Each part (message, content block) costs a few tokens of framing.
      n += 3;
      for (const x of Object.values(v)) walk(x);
    }
  };
  for (const [k, v] of Object.entries(body)) {
    if (NOT_PROMPT.has(k)) continue;
    if (k === 'tools') n += countTokens(JSON.stringify(v));
    else walk(v);
  }
  return n;
}

/** The output a request asks room for (the window must hold the prompt and the reply). */
export function outputReserve(body: Record<string, unknown>): number {
  const o = body.options as { num_predict?: unknown } | undefined;
  const g = body.generationConfig as { maxOutputTokens?: unknown } | undefined;
  for (const v of [body.max_tokens, body.max_completion_tokens, o?.num_predict, g?.maxOutputTokens])
    if (typeof v === 'number' && v > 0) return v;
  return 0;
}

export function plan(turn: Turn | undefined, body: unknown, counted?: number): Plan {
  const p: Plan = {
    content: [],
    usage: { input: 0, output: 0, cached: 0, cacheWrite: 0 },
    overflow: false,
    toolUnsupported: false,
    delayMs: 0,
  };
  let usage: Extract<Step, { usage: unknown }>['usage'] | undefined;
  for (const s of turn ?? [{ text: DEFAULT_REPLY }]) {
    if ('text' in s) p.content.push({ kind: 'text', text: s.text });
    else if ('reasoning' in s) p.content.push({ kind: 'reasoning', text: s.reasoning });
    else if ('toolCalls' in s) p.content.push({ kind: 'tools', calls: s.toolCalls });
    else if ('usage' in s) usage = s.usage;
    else if ('status' in s) p.error = s;
    else if ('contextOverflow' in s) p.overflow = true;
    else if ('toolUnsupported' in s) p.toolUnsupported = true;
    else if ('streamError' in s) p.streamError = { message: s.streamError, afterChunks: s.afterChunks ?? 1 };
    else if ('cutAfterChunks' in s) p.cutAfter = s.cutAfterChunks;
    else if ('delayMs' in s) p.delayMs = s.delayMs;
  }
  const produced = p.content.map((c) => (c.kind === 'tools' ? JSON.stringify(c.calls) : c.text)).join('');
  p.usage = {
    input: usage?.input ?? counted ?? estimateTokens(JSON.stringify(body ?? '')),
    output: usage?.output ?? estimateTokens(produced),
    cached: usage?.cached ?? 0,
    cacheWrite: usage?.cacheWrite ?? 0,
    ...(usage?.cost !== undefined ? { cost: usage.cost } : {}),
  };
  return p;
}

export const tools = (p: Plan): ToolCallSpec[] => p.content.flatMap((c) => (c.kind === 'tools' ? c.calls : []));
export const textOf = (p: Plan, kind: 'text' | 'reasoning'): string =>
  p.content.map((c) => (c.kind === kind ? c.text : '')).join('');
export const reasoningTokens = (p: Plan): number => {
  const r = textOf(p, 'reasoning');
  return r ? estimateTokens(r) : 0;
};
