/**
 * What every adapter shares: our messages and tools in the AI SDK's LanguageModelV3 form, and the driver that runs a
 * provider's `doStream` and turns its parts into StreamEvents. Only types come from the SDK here; the provider
 * packages are imported by each adapter on first use.
 */
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3FunctionTool,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3Usage,
  SharedV3ProviderMetadata,
  SharedV3ProviderOptions,
} from '@ai-sdk/provider';
import { randomBytes } from 'node:crypto';
import { classifyError, classifyStreamError, StreamDropError } from './errors.js';
import type { FinishReason, Message, StreamEvent, ToolSpec, Usage } from './types.js';

export type { LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3Prompt, SharedV3ProviderOptions };

export interface PromptOptions {
  /** providerOptions carrying a reasoning signature back to the provider (Anthropic). */
  reasoningSignature?: (signature: string) => SharedV3ProviderOptions;
  /** providerOptions carrying a tool call's signature back (Gemini thoughtSignature). */
  toolCallSignature?: (signature: string) => SharedV3ProviderOptions;
}

/** Parse tool arguments for replay; providers want an object, and a model's broken JSON must not fail the request. */
function parseArgs(args: string): unknown {
  if (args.trim() === '') return {};
  try {
    const v: unknown = JSON.parse(args);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : { value: v };
  } catch {
    return { invalid_json: args };
  }
}

export function toPrompt(messages: Message[], o: PromptOptions = {}): LanguageModelV3Prompt {
  const out: LanguageModelV3Prompt = [];
  for (const m of messages) {
    switch (m.role) {
      case 'system':
        out.push({ role: 'system', content: m.content });
        break;
      case 'user':
        out.push({ role: 'user', content: [{ type: 'text', text: m.content }] });
        break;
      case 'assistant': {
        const content: Extract<LanguageModelV3Message, { role: 'assistant' }>['content'] = [];
        if (m.reasoning)
          content.push({
            type: 'reasoning',
            text: m.reasoning,
            ...(m.reasoningSignature && o.reasoningSignature
              ? { providerOptions: o.reasoningSignature(m.reasoningSignature) }
              : {}),
          });
        if (m.content) content.push({ type: 'text', text: m.content });
        for (const c of m.toolCalls ?? [])
          content.push({
            type: 'tool-call',
            toolCallId: c.id,
            toolName: c.name,
            input: parseArgs(c.args),
            ...(c.signature && o.toolCallSignature ? { providerOptions: o.toolCallSignature(c.signature) } : {}),
          });
        // An empty reply (the model said nothing) is left out: Anthropic refuses empty text blocks, and no provider
        // needs strict user/assistant alternation from us (the SDK merges adjacent user turns where required).
        if (content.length) out.push({ role: 'assistant', content });
        break;
      }
      case 'tool': {
        const part = {
          type: 'tool-result' as const,
          toolCallId: m.toolCallId,
          toolName: m.name,
          output: m.isError
            ? { type: 'error-text' as const, value: m.content }
            : { type: 'text' as const, value: m.content },
        };
        // Results of parallel calls belong in one tool message (Gemini and Anthropic pair them with one turn).
        const last = out.at(-1);
        if (last?.role === 'tool') last.content.push(part);
        else out.push({ role: 'tool', content: [part] });
        break;
      }
    }
  }
  return out;
}

export function toTools(tools: ToolSpec[]): LanguageModelV3FunctionTool[] {
  return tools.map((t) => ({
    type: 'function',
    name: t.name,
    description: t.description,
    inputSchema: t.parameters as LanguageModelV3FunctionTool['inputSchema'],
  }));
}

export function toUsage(u: LanguageModelV3Usage): Usage {
  const cached = u.inputTokens.cacheRead ?? 0;
  const created = u.inputTokens.cacheWrite ?? 0;
  const input = u.inputTokens.total ?? (u.inputTokens.noCache ?? 0) + cached + created;
  const usage: Usage = {
    inputTokens: input,
    outputTokens: u.outputTokens.total ?? 0,
    cachedInputTokens: cached,
    cacheCreationTokens: created,
  };
  if (u.outputTokens.reasoning) usage.reasoningTokens = u.outputTokens.reasoning;
  // OpenRouter reports the charge in usage.cost (USD).
  const cost = (u.raw as { cost?: unknown } | undefined)?.cost;
  if (typeof cost === 'number' && Number.isFinite(cost)) usage.costUsd = cost;
  return usage;
}

const FINISH: Record<string, FinishReason> = {
  stop: 'stop',
  'tool-calls': 'tool-calls',
  length: 'length',
  'content-filter': 'content-filter',
};

/** A signature-like value in provider metadata (Anthropic `signature`, Gemini `thoughtSignature`). */
function signatureIn(
  meta: SharedV3ProviderMetadata | undefined,
  key: 'signature' | 'thoughtSignature',
): string | undefined {
  for (const v of Object.values(meta ?? {})) {
    const s = (v as Record<string, unknown> | undefined)?.[key];
    if (typeof s === 'string' && s !== '') return s;
  }
  return undefined;
}

export const syntheticCallId = (): string => `call_${randomBytes(9).toString('base64url')}`;

export interface DriveOptions {
  backend: string;
  signal?: AbortSignal;
  /**
   * Whether a finish part means the provider really finished. Providers emit one when the body merely ended; by
   * default a finish without the provider's raw finish reason is a drop.
   */
  finished?: (part: Extract<LanguageModelV3StreamPart, { type: 'finish' }>) => boolean;
}

const abortReason = (signal: AbortSignal): unknown =>
  signal.reason ?? Object.assign(new Error('aborted'), { name: 'AbortError' });

/**
 * Run one `doStream` and yield our events: text and reasoning deltas, each tool call once complete (ids synthesized
 * when missing or repeated), usage, then finish. Every failure is thrown as a typed error; an abort as the signal's
 * reason.
 */
export async function* drive(
  model: LanguageModelV3,
  call: LanguageModelV3CallOptions,
  o: DriveOptions,
): AsyncGenerator<StreamEvent, void, undefined> {
  const { backend, signal } = o;
  if (signal?.aborted) throw abortReason(signal);
  let stream: ReadableStream<LanguageModelV3StreamPart>;
  try {
    ({ stream } = await model.doStream({ ...call, ...(signal ? { abortSignal: signal } : {}) }));
  } catch (e) {
    if (signal?.aborted) throw abortReason(signal);
    throw classifyError(backend, e, false);
  }
  const reader = stream.getReader();
  // The fetch abort reaches the body too, but a parser between may hold it; cancelling the reader ends at once.
  const onAbort = (): void => void reader.cancel(abortReason(signal!)).catch(() => {});
  signal?.addEventListener('abort', onAbort, { once: true });
  const ids = new Set<string>();
  let finished = false;
  try {
    for (;;) {
      let r: Awaited<ReturnType<typeof reader.read>>;
      try {
        r = await reader.read();
      } catch (e) {
        if (signal?.aborted) throw abortReason(signal);
        throw classifyError(backend, e, true);
      }
      if (signal?.aborted) throw abortReason(signal);
      if (r.done) break;
      const p = r.value;
      switch (p.type) {
        case 'text-delta':
          if (p.delta) yield { type: 'text', delta: p.delta };
          break;
        case 'reasoning-delta': {
          const signature = signatureIn(p.providerMetadata, 'signature');
          if (p.delta || signature)
            yield signature ? { type: 'reasoning', delta: p.delta, signature } : { type: 'reasoning', delta: p.delta };
          break;
        }
        case 'tool-call': {
          let id = p.toolCallId;
          if (!id || ids.has(id)) id = syntheticCallId();
          ids.add(id);
          const signature = signatureIn(p.providerMetadata, 'thoughtSignature');
          const args = typeof p.input === 'string' ? p.input : JSON.stringify(p.input ?? {});
          yield {
            type: 'tool-call',
            call: { id, name: p.toolName, args: args === '' ? '{}' : args, ...(signature ? { signature } : {}) },
          };
          break;
        }
        case 'error':
          throw classifyStreamError(backend, p.error);
        case 'finish': {
          const ok = o.finished
            ? o.finished(p)
            : p.finishReason.raw !== undefined && p.finishReason.unified !== 'error';
          if (!ok) throw new StreamDropError(backend, 'the response stream ended before the provider finished it');
          // A server that reports no usage (some OpenAI-compatible ones ignore stream_options) gets no usage event
          // rather than one of zeros that would read as a free request.
          if (p.usage.inputTokens.total !== undefined || p.usage.outputTokens.total !== undefined)
            yield { type: 'usage', usage: toUsage(p.usage) };
          yield { type: 'finish', reason: FINISH[p.finishReason.unified] ?? 'other' };
          finished = true;
          break;
        }
        default:
          break;
      }
      if (finished) break;
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // Leaving early (consumer break, error) must not leave the HTTP body hanging.
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
  if (!finished) throw new StreamDropError(backend, 'the response stream ended without a finish');
}

/** Discovery and token calls give up after this long: a host that does not answer must not hold a turn. */
export const DISCOVERY_TIMEOUT_MS = 10_000;

/** Fetch JSON for discovery calls (model lists, /api/show), with typed errors. */
export async function getJson(backend: string, url: string, init: RequestInit = {}): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS), ...init });
  } catch (e) {
    throw classifyError(backend, e, false);
  }
  const text = await res.text();
  if (!res.ok) {
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => (headers[k] = v));
    throw classifyError(
      backend,
      Object.assign(new Error(`HTTP ${res.status}`), {
        name: 'AI_APICallError',
        statusCode: res.status,
        responseHeaders: headers,
        responseBody: text,
        requestBodyValues: undefined,
      }),
    );
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw classifyError(backend, new Error(`${url}: not JSON`));
  }
}
