/**
 * Mock LLM server: a test fixture (and a tool you can run by hand, see main.ts) that speaks the real wire protocols
 * of the providers Ollie talks to, over real HTTP, so backends built on the Vercel AI SDK are tested exactly as they
 * run against the real services.
 *
 *   OpenAI chat completions  POST /v1/chat/completions (SSE `data:` chunks, `data: [DONE]`; or one JSON), GET /v1/models
 *   Anthropic messages       POST /v1/messages (SSE with `event:` lines; or one JSON)
 *   Ollama                   POST /api/chat (NDJSON; or one JSON), POST /api/show, GET /api/tags
 *   Gemini                   POST /v1beta/models/{model}:streamGenerateContent?alt=sse (SSE), :generateContent, GET /v1beta/models
 *   GitHub Copilot           GET /copilot_internal/v2/token (token exchange; `endpoints.api` points back here),
 *                            POST /chat/completions and GET /models (OpenAI dialect; Bearer must be an issued token)
 *
 * GET /v1/models answers in Anthropic's shape when the request carries `anthropic-version`, else in OpenAI's.
 *
 * Replies come from one FIFO of scripted turns shared by all protocols (`script(...)`); an empty script gives a default
 * short text. A turn is a list of steps: content (text, reasoning, tool calls — several in one step are parallel calls),
 * usage, and faults (an HTTP error status with Retry-After, a context-overflow 400 with the provider's real error body,
 * a stream cut after n chunks, a per-chunk delay). Every request is recorded, with credentials redacted.
 *
 * Token accounting: `usage.input` is the whole prompt, cached tokens included (as OpenAI's prompt_tokens and
 * Gemini's promptTokenCount count it); for Anthropic, whose input_tokens excludes the cache, input_tokens is
 * input - cached - cacheWrite.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
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

export type Protocol = 'openai' | 'anthropic' | 'ollama' | 'gemini' | 'copilot' | 'other';

export interface RecordedRequest {
  method: string;
  /** Path and query, with a `key=` query parameter redacted. */
  path: string;
  protocol: Protocol;
  /** Lower-cased names; values of credential headers replaced by "[redacted]". */
  headers: Record<string, string>;
  /** The parsed JSON body, the raw text when it is not JSON, undefined when empty. */
  body: unknown;
  time: number;
}

export interface MockLlmOptions {
  port?: number;
  host?: string;
  /** Model ids served by the model lists. */
  models?: string[];
  /** Context length reported by Ollama's /api/show and Gemini's model list. */
  contextLength?: number;
  /** The OpenAI delta field carrying reasoning: `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter). */
  reasoningField?: 'reasoning_content' | 'reasoning';
  /** Called with each request as it is recorded. */
  onRequest?: (r: RecordedRequest) => void;
  /** Lifetime of the Copilot tokens the token endpoint issues (default 1800 s). */
  copilotTokenTtlSec?: number;
  /**
   * Enforce a context window of this many tokens, as a served model does: a chat request whose prompt (counted
   * with the o200k estimate of backend/tokens.ts) plus its requested output exceeds it is refused with the
   * provider's real context-length error, and usage reports the counted prompt. Without it only a scripted
   * `contextOverflow` step overflows.
   */
  window?: number;
  /**
   * Computes the reply to a chat request from its body (a scenario that depends on what was asked, such as
   * answering compaction requests with a summary). The FIFO is used when it returns undefined.
   */
  respond?: (body: Record<string, unknown>, protocol: Protocol) => Turn | undefined;
}

export interface MockLlm {
  url: string;
  port: number;
  /** Append turns to the FIFO. */
  script(...turns: Turn[]): void;
  /** Turns not yet consumed. */
  pending(): number;
  requests: RecordedRequest[];
  /** Copilot tokens issued so far, oldest first; the chat endpoint accepts only these (empty it to revoke them). */
  copilotTokens: string[];
  close(): Promise<void>;
}

export const DEFAULT_REPLY = 'Hello from the mock LLM.';
export const DEFAULT_MODELS = ['mock-model', 'mock-model-large'];
export const DEFAULT_CONTEXT_LENGTH = 32768;

const REDACT = new Set(['authorization', 'x-api-key', 'x-goog-api-key', 'api-key', 'proxy-authorization']);

/** A turn resolved into content and fault settings. */
interface Plan {
  content: Array<{ kind: 'text'; text: string } | { kind: 'reasoning'; text: string } | { kind: 'tools'; calls: ToolCallSpec[] }>;
  usage: { input: number; output: number; cached: number; cacheWrite: number; cost?: number };
  error?: { status: number; retryAfter?: number | string; retryAfterMs?: number; message?: string };
  overflow: boolean;
  toolUnsupported: boolean;
  streamError?: { message: string; afterChunks: number };
  cutAfter?: number;
  delayMs: number;
}

/** One HTTP body chunk: an SSE event or an NDJSON line, already framed. */
type Frame = string;

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
const NOT_PROMPT = new Set(['model', 'stream', 'stream_options', 'temperature', 'top_p', 'top_k', 'seed', 'stop', 'max_tokens', 'max_completion_tokens', 'tool_choice', 'options', 'think', 'thinking', 'generationConfig', 'toolConfig', 'parallel_tool_calls', 'reasoning_effort', 'metadata', 'keep_alive', 'format']);

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
function outputReserve(body: Record<string, unknown>): number {
  const o = body.options as { num_predict?: unknown } | undefined;
  const g = body.generationConfig as { maxOutputTokens?: unknown } | undefined;
  for (const v of [body.max_tokens, body.max_completion_tokens, o?.num_predict, g?.maxOutputTokens]) if (typeof v === 'number' && v > 0) return v;
  return 0;
}

function plan(turn: Turn | undefined, body: unknown, counted?: number): Plan {
  const p: Plan = { content: [], usage: { input: 0, output: 0, cached: 0, cacheWrite: 0 }, overflow: false, toolUnsupported: false, delayMs: 0 };
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

const tools = (p: Plan): ToolCallSpec[] => p.content.flatMap((c) => (c.kind === 'tools' ? c.calls : []));
const textOf = (p: Plan, kind: 'text' | 'reasoning'): string =>
  p.content.map((c) => (c.kind === kind ? c.text : '')).join('');
const reasoningTokens = (p: Plan): number => {
  const r = textOf(p, 'reasoning');
  return r ? estimateTokens(r) : 0;
};

// ---------------------------------------------------------------------------------------------------------------
// OpenAI chat completions

const sseData = (v: unknown): Frame => `data: ${typeof v === 'string' ? v : JSON.stringify(v)}\n\n`;

function openaiUsage(p: Plan): Record<string, unknown> {
  return {
    prompt_tokens: p.usage.input,
    completion_tokens: p.usage.output,
    total_tokens: p.usage.input + p.usage.output,
    prompt_tokens_details: { cached_tokens: p.usage.cached },
    completion_tokens_details: { reasoning_tokens: reasoningTokens(p) },
    ...(p.usage.cost !== undefined ? { cost: p.usage.cost } : {}),
  };
}

function openaiStream(p: Plan, body: Record<string, unknown>, ids: Ids, reasoningField: string): Frame[] {
  const base = { id: ids.next('chatcmpl-'), object: 'chat.completion.chunk', created: nowSec(), model: modelOf(body), system_fingerprint: 'fp_mock' };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null): Frame =>
    sseData({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
  const out: Frame[] = [chunk({ role: 'assistant', content: '' })];
  let toolIndex = 0;
  for (const c of p.content) {
    if (c.kind === 'reasoning') for (const piece of splitText(c.text)) out.push(chunk({ [reasoningField]: piece }));
    else if (c.kind === 'text') for (const piece of splitText(c.text)) out.push(chunk({ content: piece }));
    else
      for (const call of c.calls) {
        const index = toolIndex++;
        const id = call.id ?? ids.next('call_');
        out.push(chunk({ tool_calls: [{ index, id, type: 'function', function: { name: call.name, arguments: '' } }] }));
        for (const piece of splitArgs(JSON.stringify(call.args))) out.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
      }
  }
  out.push(chunk({}, toolIndex > 0 ? 'tool_calls' : 'stop'));
  const so = body.stream_options as { include_usage?: boolean } | undefined;
  if (so?.include_usage) out.push(sseData({ ...base, choices: [], usage: openaiUsage(p) }));
  out.push(sseData('[DONE]'));
  return out;
}

function openaiJson(p: Plan, body: Record<string, unknown>, ids: Ids, reasoningField: string): unknown {
  const calls = tools(p).map((c) => ({ id: c.id ?? ids.next('call_'), type: 'function', function: { name: c.name, arguments: JSON.stringify(c.args) } }));
  const text = textOf(p, 'text');
  const reasoning = textOf(p, 'reasoning');
  return {
    id: ids.next('chatcmpl-'),
    object: 'chat.completion',
    created: nowSec(),
    model: modelOf(body),
    system_fingerprint: 'fp_mock',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text || (calls.length ? null : ''),
          refusal: null,
          ...(reasoning ? { [reasoningField]: reasoning } : {}),
          ...(calls.length ? { tool_calls: calls } : {}),
        },
        logprobs: null,
        finish_reason: calls.length ? 'tool_calls' : 'stop',
      },
    ],
    usage: openaiUsage(p),
  };
}

/** OpenAI's error envelope. */
function openaiError(status: number, message?: string): unknown {
  if (status === 429)
    return { error: { message: message ?? 'Rate limit reached for requests. Please try again later.', type: 'requests', param: null, code: 'rate_limit_exceeded' } };
  if (status >= 500)
    return { error: { message: message ?? 'The server had an error while processing your request. Sorry about that!', type: 'server_error', param: null, code: null } };
  return { error: { message: message ?? `mock error ${status}`, type: 'invalid_request_error', param: null, code: null } };
}

const openaiOverflow = (limit: number, actual = limit + 1000): unknown => ({
  error: {
    message: `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${actual} tokens. Please reduce the length of the messages.`,
    type: 'invalid_request_error',
    param: 'messages',
    code: 'context_length_exceeded',
  },
});

/**
 * Copilot (served from Azure OpenAI) opens each stream with a chunk that has no choices, only the prompt's content
 * filter results.
 */
const azureFilterChunk = (): Frame =>
  sseData({
    choices: [],
    created: 0,
    id: '',
    prompt_filter_results: [
      {
        prompt_index: 0,
        content_filter_results: {
          hate: { filtered: false, severity: 'safe' },
          jailbreak: { filtered: false, detected: false },
          self_harm: { filtered: false, severity: 'safe' },
          sexual: { filtered: false, severity: 'safe' },
          violence: { filtered: false, severity: 'safe' },
        },
      },
    ],
  });

const openaiStreamError = (message: string): Frame => sseData({ error: { message, type: 'server_error', param: null, code: null } });

/** What Ollama's OpenAI-compatible endpoint answers for a model without tool support. */
const openaiToolUnsupported = (model: string): { status: number; body: unknown } => ({
  status: 400,
  body: { error: { message: `registry.ollama.ai/library/${model}:latest does not support tools`, type: 'api_error', param: null, code: null } },
});

// ---------------------------------------------------------------------------------------------------------------
// Anthropic messages

const sseEvent = (event: string, data: Record<string, unknown>): Frame => `event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`;

function anthropicUsageIn(p: Plan): Record<string, number> {
  return {
    input_tokens: Math.max(0, p.usage.input - p.usage.cached - p.usage.cacheWrite),
    cache_creation_input_tokens: p.usage.cacheWrite,
    cache_read_input_tokens: p.usage.cached,
  };
}

function anthropicStream(p: Plan, body: Record<string, unknown>, ids: Ids): Frame[] {
  const out: Frame[] = [
    sseEvent('message_start', {
      message: {
        id: ids.next('msg_mock'),
        type: 'message',
        role: 'assistant',
        model: modelOf(body),
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...anthropicUsageIn(p), output_tokens: 1 },
      },
    }),
  ];
  let index = 0;
  let usedTools = false;
  const block = (start: Record<string, unknown>, deltas: Record<string, unknown>[]): void => {
    out.push(sseEvent('content_block_start', { index, content_block: start }));
    if (index === 0) out.push(sseEvent('ping', {}));
    for (const delta of deltas) out.push(sseEvent('content_block_delta', { index, delta }));
    out.push(sseEvent('content_block_stop', { index }));
    index++;
  };
  for (const c of p.content) {
    if (c.kind === 'reasoning')
      block({ type: 'thinking', thinking: '' }, [
        ...splitText(c.text).map((thinking) => ({ type: 'thinking_delta', thinking })),
        { type: 'signature_delta', signature: signatureOf(c.text) },
      ]);
    else if (c.kind === 'text')
      block({ type: 'text', text: '' }, splitText(c.text).map((text) => ({ type: 'text_delta', text })));
    else
      for (const call of c.calls) {
        usedTools = true;
        block(
          { type: 'tool_use', id: call.id ?? ids.next('toolu_mock'), name: call.name, input: {} },
          splitArgs(JSON.stringify(call.args)).map((partial_json) => ({ type: 'input_json_delta', partial_json })),
        );
      }
  }
  out.push(sseEvent('message_delta', { delta: { stop_reason: usedTools ? 'tool_use' : 'end_turn', stop_sequence: null }, usage: { output_tokens: p.usage.output } }));
  out.push(sseEvent('message_stop', {}));
  return out;
}

function anthropicJson(p: Plan, body: Record<string, unknown>, ids: Ids): unknown {
  const content: unknown[] = [];
  for (const c of p.content) {
    if (c.kind === 'reasoning') content.push({ type: 'thinking', thinking: c.text, signature: signatureOf(c.text) });
    else if (c.kind === 'text') content.push({ type: 'text', text: c.text });
    else for (const call of c.calls) content.push({ type: 'tool_use', id: call.id ?? ids.next('toolu_mock'), name: call.name, input: call.args });
  }
  return {
    id: ids.next('msg_mock'),
    type: 'message',
    role: 'assistant',
    model: modelOf(body),
    content,
    stop_reason: tools(p).length ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { ...anthropicUsageIn(p), output_tokens: p.usage.output },
  };
}

const signatureOf = (thinking: string): string => `mock-sig-${Buffer.from(thinking).toString('base64').slice(0, 16)}`;

/** Anthropic's error envelope; error types as the API documents them per status. */
function anthropicError(status: number, message?: string): unknown {
  const type =
    status === 400 ? 'invalid_request_error'
    : status === 401 ? 'authentication_error'
    : status === 403 ? 'permission_error'
    : status === 404 ? 'not_found_error'
    : status === 413 ? 'request_too_large'
    : status === 429 ? 'rate_limit_error'
    : status === 529 ? 'overloaded_error'
    : 'api_error';
  const text = message ?? (status === 429 ? 'Number of request tokens has exceeded your per-minute rate limit' : status === 529 ? 'Overloaded' : status >= 500 ? 'Internal server error' : `mock error ${status}`);
  return { type: 'error', error: { type, message: text } };
}

const anthropicOverflow = (limit: number, actual = limit + 1000): unknown => ({
  type: 'error',
  error: { type: 'invalid_request_error', message: `prompt is too long: ${actual} tokens > ${limit} maximum` },
});

const anthropicStreamError = (message: string): Frame => sseEvent('error', { error: { type: 'overloaded_error', message } });

/**
 * Every Claude model supports tools, so the real API has no such error; this is the shape Anthropic-compatible
 * servers use (an invalid_request_error naming tools), so that the backend's classification is exercised.
 */
const anthropicToolUnsupported = (model: string): { status: number; body: unknown } => ({
  status: 400,
  body: { type: 'error', error: { type: 'invalid_request_error', message: `tools: model ${model} does not support tools` } },
});

// ---------------------------------------------------------------------------------------------------------------
// Ollama

const ndjson = (v: unknown): Frame => `${JSON.stringify(v)}\n`;

function ollamaFinal(p: Plan, body: Record<string, unknown>): Record<string, unknown> {
  return {
    model: modelOf(body),
    created_at: new Date().toISOString(),
    message: { role: 'assistant', content: '' },
    done: true,
    done_reason: 'stop',
    total_duration: 1_000_000,
    load_duration: 100_000,
    prompt_eval_count: p.usage.input,
    prompt_eval_duration: 200_000,
    eval_count: p.usage.output,
    eval_duration: 700_000,
  };
}

const ollamaCalls = (calls: ToolCallSpec[], ids: Ids): unknown[] =>
  calls.map((c, index) => ({ id: c.id ?? ids.next('call_'), function: { index, name: c.name, arguments: c.args } }));

function ollamaStream(p: Plan, body: Record<string, unknown>, ids: Ids): Frame[] {
  const line = (message: Record<string, unknown>): Frame =>
    ndjson({ model: modelOf(body), created_at: new Date().toISOString(), message: { role: 'assistant', content: '', ...message }, done: false });
  const out: Frame[] = [];
  for (const c of p.content) {
    if (c.kind === 'reasoning') for (const thinking of splitText(c.text)) out.push(line({ thinking }));
    else if (c.kind === 'text') for (const content of splitText(c.text)) out.push(line({ content }));
    // Ollama sends tool calls whole (arguments as an object), all calls of a step in one line.
    else out.push(line({ tool_calls: ollamaCalls(c.calls, ids) }));
  }
  out.push(ndjson(ollamaFinal(p, body)));
  return out;
}

function ollamaJson(p: Plan, body: Record<string, unknown>, ids: Ids): unknown {
  const calls = tools(p);
  const reasoning = textOf(p, 'reasoning');
  const final = ollamaFinal(p, body);
  return {
    ...final,
    message: {
      role: 'assistant',
      content: textOf(p, 'text'),
      ...(reasoning ? { thinking: reasoning } : {}),
      ...(calls.length ? { tool_calls: ollamaCalls(calls, ids) } : {}),
    },
  };
}

const ollamaError = (status: number, message?: string): unknown => ({
  error: message ?? (status === 429 ? 'too many requests' : status >= 500 ? 'an internal error occurred' : `mock error ${status}`),
});

const ollamaOverflow = (limit: number, actual = limit + 1000): unknown => ({
  error: `the input length exceeds the context length (${actual} > ${limit})`,
});

const ollamaStreamError = (message: string): Frame => ndjson({ error: message });

const ollamaToolUnsupported = (model: string): { status: number; body: unknown } => ({
  status: 400,
  body: { error: `registry.ollama.ai/library/${model}:latest does not support tools` },
});

// ---------------------------------------------------------------------------------------------------------------
// Gemini

const sseDataCrlf = (v: unknown): Frame => `data: ${JSON.stringify(v)}\r\n\r\n`;

function geminiUsage(p: Plan): Record<string, unknown> {
  const thoughts = reasoningTokens(p);
  return {
    promptTokenCount: p.usage.input,
    candidatesTokenCount: p.usage.output,
    totalTokenCount: p.usage.input + p.usage.output + thoughts,
    ...(p.usage.cached ? { cachedContentTokenCount: p.usage.cached } : {}),
    ...(thoughts ? { thoughtsTokenCount: thoughts } : {}),
  };
}

function geminiParts(p: Plan, split: boolean): unknown[][] {
  const groups: unknown[][] = [];
  for (const c of p.content) {
    if (c.kind === 'reasoning') for (const text of split ? splitText(c.text) : [c.text]) groups.push([{ text, thought: true }]);
    else if (c.kind === 'text') for (const text of split ? splitText(c.text) : [c.text]) groups.push([{ text }]);
    // Gemini sends function calls whole; parallel calls are parts of one chunk.
    // Gemini 3 signs the first function call of a step; the signature must be sent back with the call.
    else groups.push(c.calls.map((call, i) => ({ functionCall: { name: call.name, args: call.args }, ...(i === 0 ? { thoughtSignature: signatureOf(call.name) } : {}) })));
  }
  return groups;
}

function geminiStream(p: Plan, model: string, ids: Ids): Frame[] {
  const responseId = ids.next('mock-resp-');
  const usageMetadata = geminiUsage(p);
  const chunk = (parts: unknown[], finishReason?: string): Frame =>
    sseDataCrlf({
      candidates: [{ content: { parts, role: 'model' }, ...(finishReason ? { finishReason } : {}), index: 0 }],
      usageMetadata,
      modelVersion: model,
      responseId,
    });
  const out = geminiParts(p, true).map((parts) => chunk(parts));
  // Gemini reports STOP also after function calls.
  out.push(chunk([{ text: '' }], 'STOP'));
  return out;
}

function geminiJson(p: Plan, model: string, ids: Ids): unknown {
  return {
    candidates: [{ content: { parts: geminiParts(p, false).flat(), role: 'model' }, finishReason: 'STOP', index: 0 }],
    usageMetadata: geminiUsage(p),
    modelVersion: model,
    responseId: ids.next('mock-resp-'),
  };
}

function geminiError(status: number, message?: string, retryAfter?: number): unknown {
  const s =
    status === 400 ? 'INVALID_ARGUMENT'
    : status === 403 ? 'PERMISSION_DENIED'
    : status === 404 ? 'NOT_FOUND'
    : status === 429 ? 'RESOURCE_EXHAUSTED'
    : status === 503 ? 'UNAVAILABLE'
    : status === 504 ? 'DEADLINE_EXCEEDED'
    : 'INTERNAL';
  const text = message ?? (status === 429 ? 'Resource has been exhausted (e.g. check quota).' : status >= 500 ? 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting' : `mock error ${status}`);
  const details = retryAfter !== undefined ? [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${retryAfter}s` }] : undefined;
  return { error: { code: status, message: text, status: s, ...(details ? { details } : {}) } };
}

const geminiOverflow = (limit: number, actual = limit + 1000): unknown => ({
  error: { code: 400, message: `The input token count (${actual}) exceeds the maximum number of tokens allowed (${limit}).`, status: 'INVALID_ARGUMENT' },
});

const geminiStreamError = (message: string): Frame => sseDataCrlf({ error: { code: 500, message, status: 'INTERNAL' } });

const geminiToolUnsupported = (model: string): { status: number; body: unknown } => ({
  status: 400,
  body: { error: { code: 400, message: `Function calling is not enabled for models/${model}`, status: 'INVALID_ARGUMENT' } },
});

// ---------------------------------------------------------------------------------------------------------------
// The server

class Ids {
  private n = 0;
  next(prefix: string): string {
    return `${prefix}${(++this.n).toString().padStart(4, '0')}`;
  }
}

const nowSec = (): number => Math.floor(Date.now() / 1000);
const modelOf = (body: Record<string, unknown>): string => (typeof body.model === 'string' ? body.model : DEFAULT_MODELS[0]!);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function protocolOf(path: string): Protocol {
  if (path.startsWith('/v1/messages')) return 'anthropic';
  if (path.startsWith('/v1/')) return 'openai';
  if (path.startsWith('/api/')) return 'ollama';
  if (path.startsWith('/v1beta/')) return 'gemini';
  if (path.startsWith('/copilot_internal/') || path === '/chat/completions' || path === '/models') return 'copilot';
  return 'other';
}

interface Dialect {
  error(status: number, message: string | undefined, retryAfter: number | string | undefined): unknown;
  overflow(limit: number, actual?: number): unknown;
  toolUnsupported(model: string): { status: number; body: unknown };
  streamError(message: string): Frame;
  stream(p: Plan): Frame[];
  json(p: Plan): unknown;
  contentType: string;
}

export async function startMockLlm(opts: MockLlmOptions = {}): Promise<MockLlm> {
  const host = opts.host ?? '127.0.0.1';
  const models = opts.models ?? DEFAULT_MODELS;
  const contextLength = opts.contextLength ?? DEFAULT_CONTEXT_LENGTH;
  const reasoningField = opts.reasoningField ?? 'reasoning_content';
  const copilotTtl = opts.copilotTokenTtlSec ?? 1800;
  const copilotTokens: string[] = [];
  const queue: Turn[] = [];
  const requests: RecordedRequest[] = [];
  const ids = new Ids();
  const sockets = new Set<Socket>();

  const sendJson = (res: ServerResponse, status: number, v: unknown, headers: Record<string, string> = {}): void => {
    const text = JSON.stringify(v);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  };

  /** Run a chat request of any dialect: faults first, then the body, streamed or whole. */
  const chat = async (res: ServerResponse, body: Record<string, unknown>, streaming: boolean, d: Dialect, protocol: Protocol): Promise<void> => {
    let counted: number | undefined;
    if (opts.window !== undefined) {
      counted = promptTokens(body);
      if (counted + outputReserve(body) > opts.window) return sendJson(res, 400, d.overflow(opts.window, counted));
    }
    const turn = opts.respond?.(body, protocol) ?? queue.shift();
    return serve(res, plan(turn, body, counted), body, streaming, d);
  };

  const serve = async (res: ServerResponse, p: Plan, body: Record<string, unknown>, streaming: boolean, d: Dialect): Promise<void> => {
    if (p.delayMs && !streaming) await sleep(p.delayMs);
    if (p.error) {
      const headers: Record<string, string> = {};
      if (p.error.retryAfter !== undefined) headers['retry-after'] = String(p.error.retryAfter);
      if (p.error.retryAfterMs !== undefined) headers['retry-after-ms'] = String(p.error.retryAfterMs);
      return sendJson(res, p.error.status, d.error(p.error.status, p.error.message, p.error.retryAfter), headers);
    }
    if (p.overflow) return sendJson(res, 400, d.overflow(contextLength));
    if (p.toolUnsupported) {
      const e = d.toolUnsupported(modelOf(body));
      return sendJson(res, e.status, e.body);
    }
    if (!streaming) {
      if (p.cutAfter !== undefined) {
        res.socket?.destroy();
        return;
      }
      return sendJson(res, 200, d.json(p));
    }
    res.writeHead(200, { 'content-type': d.contentType, 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.flushHeaders();
    let written = 0;
    let frames = d.stream(p);
    if (p.streamError) frames = [...frames.slice(0, p.streamError.afterChunks), d.streamError(p.streamError.message)];
    for (const frame of frames) {
      if (p.cutAfter !== undefined && written >= p.cutAfter) {
        // Let what was written reach the client, then drop the connection without finishing the response.
        await new Promise<void>((r) => res.write('', () => r()));
        res.socket?.destroy();
        return;
      }
      if (p.delayMs) await sleep(p.delayMs);
      if (res.destroyed || res.socket?.destroyed) return;
      res.write(frame);
      written++;
    }
    res.end();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://mock');
    const raw = await readBody(req);
    let body: unknown = undefined;
    if (raw !== '') {
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
    }
    const auth = req.headers.authorization ?? '';
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (v === undefined) continue;
      headers[k] = REDACT.has(k) ? '[redacted]' : Array.isArray(v) ? v.join(', ') : v;
    }
    if (url.searchParams.has('key')) url.searchParams.set('key', '[redacted]');
    const path = url.pathname + (url.search ? decodeURIComponent(url.search) : '');
    const protocol = protocolOf(url.pathname);
    const rec: RecordedRequest = { method: req.method ?? 'GET', path, protocol, headers, body, time: Date.now() };
    requests.push(rec);
    opts.onRequest?.(rec);

    const b: Record<string, unknown> = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
    const method = req.method ?? 'GET';
    const route = `${method} ${url.pathname}`;

    const openaiDialect: Dialect = {
      error: (s, m) => openaiError(s, m),
      overflow: openaiOverflow,
      toolUnsupported: openaiToolUnsupported,
      streamError: openaiStreamError,
      stream: (p) => openaiStream(p, b, ids, reasoningField),
      json: (p) => openaiJson(p, b, ids, reasoningField),
      contentType: 'text/event-stream; charset=utf-8',
    };

    // OpenAI
    if (route === 'POST /v1/chat/completions') return chat(res, b, b.stream === true, openaiDialect, protocol);
    if (route === 'GET /v1/models' && req.headers['anthropic-version'] !== undefined)
      return sendJson(res, 200, {
        data: models.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })),
        has_more: false,
        first_id: models[0] ?? null,
        last_id: models.at(-1) ?? null,
      });
    if (route === 'GET /v1/models')
      return sendJson(res, 200, { object: 'list', data: models.map((id) => ({ id, object: 'model', created: 1700000000, owned_by: 'mock' })) });

    // GitHub Copilot: a GitHub token (`Authorization: token …`) buys a short-lived Copilot token, which the chat
    // endpoint (OpenAI dialect) accepts as a Bearer.
    if (route === 'GET /copilot_internal/v2/token') {
      if (!/^token \S+/.test(auth)) return sendJson(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
      const expiresAt = nowSec() + copilotTtl;
      const token = `tid=mock${copilotTokens.length + 1};exp=${expiresAt};sku=free_limited_copilot;8kp=1:mock`;
      copilotTokens.push(token);
      return sendJson(res, 200, {
        token,
        expires_at: expiresAt,
        refresh_in: Math.max(1, copilotTtl - 300),
        endpoints: { api: `http://${req.headers.host ?? host}`, proxy: `http://${req.headers.host ?? host}`, telemetry: `http://${req.headers.host ?? host}/telemetry` },
        chat_enabled: true,
        sku: 'free_limited_copilot',
      });
    }
    if (route === 'POST /chat/completions' || route === 'GET /models') {
      const bearer = /^Bearer (.+)$/.exec(auth)?.[1];
      const exp = Number(/(?:^|;)exp=(\d+)/.exec(bearer ?? '')?.[1] ?? 0);
      if (bearer === undefined || !copilotTokens.includes(bearer) || exp <= nowSec()) return sendJson(res, 401, { error: { message: 'unauthorized: token expired or invalid', type: 'invalid_request_error' } });
      if (route === 'GET /models')
        return sendJson(res, 200, {
          object: 'list',
          data: models.map((id) => ({
            id,
            object: 'model',
            name: id,
            vendor: 'mock',
            capabilities: { type: 'chat', family: id, limits: { max_context_window_tokens: contextLength, max_output_tokens: 8192 }, supports: { streaming: true, tool_calls: true, parallel_tool_calls: true } },
          })),
        });
      return chat(res, b, b.stream === true, { ...openaiDialect, stream: (p) => [azureFilterChunk(), ...openaiDialect.stream(p)] }, protocol);
    }

    // Anthropic
    if (route === 'POST /v1/messages')
      return chat(res, b, b.stream === true, {
        error: (s, m) => anthropicError(s, m),
        overflow: anthropicOverflow,
        toolUnsupported: anthropicToolUnsupported,
        streamError: anthropicStreamError,
        stream: (p) => anthropicStream(p, b, ids),
        json: (p) => anthropicJson(p, b, ids),
        contentType: 'text/event-stream; charset=utf-8',
      }, protocol);

    // Ollama (stream defaults to true, as in Ollama)
    if (route === 'POST /api/chat')
      return chat(res, b, b.stream !== false, {
        error: (s, m) => ollamaError(s, m),
        overflow: ollamaOverflow,
        toolUnsupported: ollamaToolUnsupported,
        streamError: ollamaStreamError,
        stream: (p) => ollamaStream(p, b, ids),
        json: (p) => ollamaJson(p, b, ids),
        contentType: 'application/x-ndjson',
      }, protocol);
    if (route === 'POST /api/show') {
      const name = typeof b.model === 'string' ? b.model : typeof b.name === 'string' ? b.name : '';
      if (!models.includes(name)) return sendJson(res, 404, { error: `model '${name}' not found` });
      return sendJson(res, 200, {
        license: '',
        modelfile: `FROM ${name}\n`,
        parameters: '',
        template: '{{ .Prompt }}',
        details: { parent_model: '', format: 'gguf', family: 'llama', families: ['llama'], parameter_size: '8.0B', quantization_level: 'Q4_K_M' },
        model_info: { 'general.architecture': 'llama', 'general.parameter_count': 8_000_000_000, 'llama.context_length': contextLength, 'llama.embedding_length': 4096 },
        capabilities: ['completion', 'tools', 'thinking'],
        modified_at: '2025-01-01T00:00:00Z',
      });
    }
    if (route === 'GET /api/tags')
      return sendJson(res, 200, {
        models: models.map((name) => ({
          name,
          model: name,
          modified_at: '2025-01-01T00:00:00Z',
          size: 4_920_000_000,
          digest: 'sha256:' + '0'.repeat(64),
          details: { parent_model: '', format: 'gguf', family: 'llama', families: ['llama'], parameter_size: '8.0B', quantization_level: 'Q4_K_M' },
        })),
      });

    // Gemini
    const gm = /^\/v1beta\/models\/([^:/]+):(streamGenerateContent|generateContent)$/.exec(url.pathname);
    if (method === 'POST' && gm) {
      const model = decodeURIComponent(gm[1]!);
      return chat(res, { ...b, model }, gm[2] === 'streamGenerateContent', {
        error: (s, m, ra) => geminiError(s, m, typeof ra === 'number' ? ra : undefined),
        overflow: geminiOverflow,
        toolUnsupported: geminiToolUnsupported,
        streamError: geminiStreamError,
        stream: (p) => geminiStream(p, model, ids),
        json: (p) => geminiJson(p, model, ids),
        contentType: 'text/event-stream',
      }, protocol);
    }
    if (route === 'GET /v1beta/models')
      return sendJson(res, 200, {
        models: models.map((id) => ({
          name: `models/${id}`,
          version: '001',
          displayName: id,
          inputTokenLimit: contextLength,
          outputTokenLimit: 8192,
          supportedGenerationMethods: ['generateContent', 'countTokens'],
        })),
      });

    sendJson(res, 404, { error: { message: `mock LLM: no route for ${route}`, type: 'not_found' } });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: `mock LLM: ${(e as Error).message}` } });
      else res.destroy();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://${host}:${port}`,
    port,
    requests,
    copilotTokens,
    script: (...turns) => void queue.push(...turns),
    pending: () => queue.length,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
