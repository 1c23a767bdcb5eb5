/**
 * Typed backend errors and the classifier that turns AI SDK failures (APICallError, fetch/network errors, in-stream
 * error events) into them. The loop decides what to do from the class alone (retry.ts); messages are for people.
 *
 * No import of the SDK here: APICallError is recognised by shape, so that loading this module (and the pool) does not
 * pull provider code in before the first request.
 */

export interface BackendErrorOptions {
  /** HTTP status of the failed response, when there was one. */
  status?: number;
  cause?: unknown;
}

/** Any failure of a backend. Used as is for auth errors and bad requests: retrying cannot help. */
export class BackendError extends Error {
  readonly backend: string;
  readonly status: number | undefined;
  constructor(backend: string, message: string, opts: BackendErrorOptions = {}) {
    super(`${backend}: ${message}`, opts.cause !== undefined ? { cause: opts.cause } : undefined);
    this.name = 'BackendError';
    this.backend = backend;
    this.status = opts.status;
  }
}

/** 429 (or a provider's quota error). `retryAfterMs` is the wait the provider asked for, when it said. */
export class RateLimitError extends BackendError {
  readonly retryAfterMs: number | undefined;
  constructor(backend: string, message: string, retryAfterMs: number | undefined, opts: BackendErrorOptions = {}) {
    super(backend, message, opts);
    this.name = 'RateLimitError';
    this.retryAfterMs = retryAfterMs;
  }
}

/** 5xx, overloaded, connection refused/reset, DNS and timeouts: worth retrying after a backoff. */
export class TransientError extends BackendError {
  constructor(backend: string, message: string, opts: BackendErrorOptions = {}) {
    super(backend, message, opts);
    this.name = 'TransientError';
  }
}

/** The response stream ended (or the connection broke) before the provider said it was finished. */
export class StreamDropError extends BackendError {
  constructor(backend: string, message: string, opts: BackendErrorOptions = {}) {
    super(backend, message, opts);
    this.name = 'StreamDropError';
  }
}

/** The prompt does not fit the model's context window: compact, then try again. */
export class ContextOverflowError extends BackendError {
  constructor(backend: string, message: string, opts: BackendErrorOptions = {}) {
    super(backend, message, opts);
    this.name = 'ContextOverflowError';
  }
}

/** The model (or the endpoint serving it) cannot use tools. */
export class ToolUnsupportedError extends BackendError {
  constructor(backend: string, message: string, opts: BackendErrorOptions = {}) {
    super(backend, message, opts);
    this.name = 'ToolUnsupportedError';
  }
}

/** Each provider's real wording for a prompt that exceeds the context window. */
const OVERFLOW = [
  /context_length_exceeded/i, // OpenAI code
  /maximum context length/i, // OpenAI, vLLM, OpenRouter ("This endpoint's maximum context length is …")
  /prompt is too long/i, // Anthropic
  /exceeds the context length/i, // Ollama
  /exceeds the maximum number of tokens/i, // Gemini
  /context window/i, // "exceeds the context window" (Copilot, LM Studio)
  /too many tokens/i,
  /reduce the length of the messages/i,
  /model_max_prompt_tokens_exceeded/i, // Copilot code
  /prompt token count of \d+ exceeds the limit/i, // Copilot message
];

/** Each provider's wording for a model that cannot take tools. */
const TOOL_UNSUPPORTED = [
  /does not support tools/i, // Ollama (native and OpenAI-compatible)
  /support tool use/i, // OpenRouter "No endpoints found that support tool use"
  /function calling is not enabled/i, // Gemini (Gemma models)
  /tools? (?:are|is) not supported/i,
  /does not support (?:function|tool) call/i,
  /enable-auto-tool-choice/i, // vLLM started without a tool parser
];

const RATE_LIMIT_TEXT = [/rate[ _-]?limit/i, /resource[ _]exhausted/i, /too many requests/i, /quota/i];

/** Network failures worth retrying, by Node/undici error code. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
]);

interface ApiCallErrorLike {
  message: string;
  statusCode?: number;
  responseHeaders?: Record<string, string>;
  responseBody?: string;
  data?: unknown;
  cause?: unknown;
}

/** APICallError by shape (its class lives in @ai-sdk/provider, which this module does not load). */
function asApiCallError(e: unknown): ApiCallErrorLike | undefined {
  if (!(e instanceof Error)) return undefined;
  if (e.name !== 'AI_APICallError' && !('statusCode' in e && 'requestBodyValues' in e)) return undefined;
  return e as unknown as ApiCallErrorLike;
}

/** The error code of the first network error in a `cause` chain. */
function networkCode(e: unknown): string | undefined {
  const seen = new Set<unknown>();
  for (let c = e; c instanceof Error && !seen.has(c); c = (c as { cause?: unknown }).cause) {
    seen.add(c);
    const code = (c as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return code;
  }
  return undefined;
}

/** Whether the error is a fetch body that broke off mid-transfer (undici "terminated", "other side closed"). */
function isTerminated(e: unknown): boolean {
  const seen = new Set<unknown>();
  for (let c = e; c instanceof Error && !seen.has(c); c = (c as { cause?: unknown }).cause) {
    seen.add(c);
    if (/^terminated$|other side closed|socket hang up|premature close/i.test(c.message)) return true;
  }
  return false;
}

/** The message of the deepest cause, which names what actually happened. */
function innermost(e: unknown): string {
  const seen = new Set<unknown>();
  let last = e instanceof Error ? e.message : String(e);
  for (let c = e; c instanceof Error && !seen.has(c); c = (c as { cause?: unknown }).cause) {
    seen.add(c);
    const code = (c as { code?: unknown }).code;
    last = typeof code === 'string' ? `${c.message} (${code})` : c.message;
  }
  return last;
}

export function isAbortError(e: unknown): boolean {
  return e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError' || e.name === 'ResponseAborted');
}

/** Header lookup, case-insensitive (the SDK lower-cases them, but callers may not). */
function header(headers: Record<string, string> | undefined, name: string): string | undefined {
  if (!headers) return undefined;
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return v;
  return undefined;
}

/**
 * The wait a rate-limited response asks for, in ms: `retry-after-ms` (OpenAI), `Retry-After` in seconds or as an
 * HTTP-date, or Gemini's RetryInfo `retryDelay` ("30s") in the error body. Undefined when none is given.
 */
export function retryAfterMs(
  headers: Record<string, string> | undefined,
  body?: string,
  now = Date.now(),
): number | undefined {
  const ms = header(headers, 'retry-after-ms');
  if (ms !== undefined && ms.trim() !== '' && Number.isFinite(Number(ms)) && Number(ms) >= 0)
    return Math.round(Number(ms));
  const ra = header(headers, 'retry-after')?.trim();
  if (ra !== undefined && ra !== '') {
    if (/^\d+(\.\d+)?$/.test(ra)) return Math.round(Number(ra) * 1000);
    const at = Date.parse(ra);
    if (!Number.isNaN(at)) return Math.max(0, at - now);
  }
  if (body) {
    const m = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(body);
    if (m) return Math.round(Number(m[1]) * 1000);
  }
  return undefined;
}

/** A short human message from an error body (the provider's `message`), never the whole body. */
function bodyMessage(body: string | undefined): string | undefined {
  if (!body) return undefined;
  try {
    const v = JSON.parse(body) as { error?: unknown; message?: unknown };
    const e = v.error;
    if (typeof e === 'string') return e;
    if (e && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string')
      return (e as { message: string }).message;
    if (typeof v.message === 'string') return v.message;
  } catch {
    // not JSON: fall through to the raw text
  }
  return body.length > 300 ? `${body.slice(0, 300)}…` : body;
}

/** Classify an HTTP failure by status and the provider's error text. */
function fromStatus(
  backend: string,
  status: number,
  text: string,
  headers: Record<string, string> | undefined,
  body: string | undefined,
  cause: unknown,
): BackendError {
  const opts = { status, cause };
  // Codes (context_length_exceeded, …) sit next to the message in the body: match both.
  const all = `${text}\n${body ?? ''}`;
  if (OVERFLOW.some((r) => r.test(all)) || status === 413) return new ContextOverflowError(backend, text, opts);
  if (TOOL_UNSUPPORTED.some((r) => r.test(all))) return new ToolUnsupportedError(backend, text, opts);
  if (status === 429) return new RateLimitError(backend, text, retryAfterMs(headers, body), opts);
  if (status === 408 || status === 409 || status >= 500) return new TransientError(backend, text, opts);
  return new BackendError(backend, text, opts);
}

/**
 * Turn anything a provider call or its stream threw into a typed error. `midStream` is true once the response has
 * started: a broken connection then is a StreamDropError (what arrived is incomplete), before it a TransientError.
 */
export function classifyError(backend: string, e: unknown, midStream = false): BackendError {
  if (e instanceof BackendError) return e;
  const api = asApiCallError(e);
  if (api) {
    const status = api.statusCode;
    // A 200 whose body broke off while being read ("Failed to process successful response", caused by undici's
    // "terminated"): the response had started, so what arrived is incomplete.
    if (status !== undefined && status < 300 && (networkCode(e) !== undefined || isTerminated(e)))
      return new StreamDropError(backend, `connection lost mid-response: ${innermost(e)}`, { status, cause: e });
    const text = bodyMessage(api.responseBody) ?? api.message;
    if (status !== undefined) return fromStatus(backend, status, text, api.responseHeaders, api.responseBody, e);
    // No status: the request never got a response (the SDK wraps fetch failures as "Cannot connect to API").
    const code = networkCode(e);
    return new TransientError(backend, code ? `${api.message} (${code})` : api.message, { cause: e });
  }
  const code = networkCode(e);
  if (midStream && (code !== undefined || isTerminated(e)))
    return new StreamDropError(
      backend,
      `connection lost mid-response: ${(e as Error).message}${code ? ` (${code})` : ''}`,
      { cause: e },
    );
  if (code !== undefined || isTerminated(e) || (e instanceof TypeError && /fetch failed/i.test(e.message)))
    return new TransientError(backend, `${(e as Error).message}${code ? ` (${code})` : ''}`, { cause: e });
  return classifyStreamError(backend, e);
}

/**
 * An `error` part inside a 200 stream: the provider's error object (OpenAI-style `{message, type, code}`, Anthropic
 * `{type: 'overloaded_error', message}`, Ollama's string) or an SDK error (a chunk that failed to parse).
 */
export function classifyStreamError(backend: string, err: unknown): BackendError {
  if (err instanceof BackendError) return err;
  if (asApiCallError(err)) return classifyError(backend, err, true);
  // A chunk that did not fit the provider's schema: Ollama's `{"error": "…"}` line arrives this way.
  const value = err instanceof Error ? (err as { value?: unknown }).value : undefined;
  if (value && typeof value === 'object' && 'error' in value)
    return classifyStreamError(backend, (value as { error: unknown }).error);
  let text: string;
  let kind = '';
  let status: number | undefined;
  if (typeof err === 'string') text = err;
  else if (err instanceof Error) {
    text = err.message;
    kind = err.name;
  } else if (err && typeof err === 'object') {
    const o = err as { message?: unknown; type?: unknown; code?: unknown; status?: unknown };
    text = typeof o.message === 'string' ? o.message : JSON.stringify(err);
    kind = [o.type, o.code, o.status].filter((x) => typeof x === 'string').join(' ');
    if (typeof o.code === 'number') status = o.code;
  } else text = String(err);
  const all = `${kind} ${text}`;
  const opts = { cause: err, ...(status !== undefined ? { status } : {}) };
  if (OVERFLOW.some((r) => r.test(all))) return new ContextOverflowError(backend, text, opts);
  if (TOOL_UNSUPPORTED.some((r) => r.test(all))) return new ToolUnsupportedError(backend, text, opts);
  if (status === 429 || RATE_LIMIT_TEXT.some((r) => r.test(all)))
    return new RateLimitError(backend, text, undefined, opts);
  if (/authentication|permission|invalid_api_key|unauthori[sz]ed/i.test(all))
    return new BackendError(backend, text, opts);
  if (/invalid_request/i.test(all) && status === undefined) return new BackendError(backend, text, opts);
  if (/TypeValidationError|JSONParseError/.test(kind))
    return new StreamDropError(backend, `malformed stream chunk: ${text}`, opts);
  // A failure reported inside a stream that had started is the server giving up on this response: try again.
  return new TransientError(backend, text, opts);
}
