/** Retry policy, pricing, and the error classifier on the providers' real error shapes. */
import { describe, expect, it } from 'vitest';
import {
  BackendError,
  classifyError,
  classifyStreamError,
  ContextOverflowError,
  RateLimitError,
  retryAfterMs,
  StreamDropError,
  ToolUnsupportedError,
  TransientError,
} from '../../../src/olliesrv/backend/errors.js';
import { priceOf, priceUsage } from '../../../src/olliesrv/backend/pricing.js';
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  MAX_RATE_LIMIT_RETRIES,
  MAX_RATE_LIMIT_WAIT_MS,
  MAX_TRANSIENT_RETRIES,
  retryDecision,
  retryDelay,
} from '../../../src/olliesrv/backend/retry.js';
import type { Usage } from '../../../src/olliesrv/backend/types.js';

const transient = new TransientError('b', 'HTTP 503');

describe('retry policy', () => {
  it('backs off exponentially with jitter in [50%, 100%] of each step, capped', () => {
    const lo = (): number => 0;
    const hi = (): number => 0.999999;
    for (let n = 0; n < MAX_TRANSIENT_RETRIES; n++) {
      const step = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** n);
      expect(retryDelay(transient, n, lo)).toBe(step / 2);
      expect(retryDelay(transient, n, hi)).toBe(step);
    }
    expect(retryDelay(transient, 1, () => 0.5)).toBe(1500);
    // Later steps stay under the cap.
    expect(retryDecision(new StreamDropError('b', 'cut'), 4, hi)).toEqual({
      retry: true,
      delayMs: Math.min(BACKOFF_MAX_MS, 16_000),
    });
  });

  it('gives up on transient errors and drops after the bound, with a reason', () => {
    expect(retryDelay(transient, MAX_TRANSIENT_RETRIES - 1)).not.toBeNull();
    expect(retryDelay(transient, MAX_TRANSIENT_RETRIES)).toBeNull();
    const d = retryDecision(new StreamDropError('b', 'cut'), MAX_TRANSIENT_RETRIES);
    expect(d).toMatchObject({ retry: false, reason: expect.stringMatching(/stream dropped.*5 retries/) });
  });

  it('honours Retry-After exactly, up to the maximum wait; beyond it gives up and says why', () => {
    expect(retryDelay(new RateLimitError('b', '429', 7000), 0)).toBe(7000);
    expect(retryDelay(new RateLimitError('b', '429', MAX_RATE_LIMIT_WAIT_MS), 3)).toBe(MAX_RATE_LIMIT_WAIT_MS);
    const d = retryDecision(new RateLimitError('b', '429', 3_600_000), 0);
    expect(d).toMatchObject({ retry: false, reason: expect.stringMatching(/3600 s.*120 s/) });
    // Without Retry-After: the backoff.
    expect(retryDelay(new RateLimitError('b', '429', undefined), 2, () => 0)).toBe(2000);
    expect(retryDelay(new RateLimitError('b', '429', 10), MAX_RATE_LIMIT_RETRIES)).toBeNull();
  });

  it('never retries auth/bad request, context overflow or tool refusal', () => {
    for (const e of [
      new BackendError('b', '401'),
      new ContextOverflowError('b', 'too long'),
      new ToolUnsupportedError('b', 'no tools'),
      new Error('x'),
    ]) {
      expect(retryDelay(e, 0)).toBeNull();
      expect(retryDecision(e, 0)).toMatchObject({ retry: false, reason: expect.stringMatching(/not retryable/) });
    }
  });
});

describe('pricing', () => {
  const u = (over: Partial<Usage>): Usage => ({
    inputTokens: 0,
    outputTokens: 0,
    cachedInputTokens: 0,
    cacheCreationTokens: 0,
    ...over,
  });

  it('prices by the longest model prefix, case-insensitively, ignoring a router prefix', () => {
    expect(
      priceUsage('claude-sonnet-4-5-20250929', u({ inputTokens: 1_000_000, outputTokens: 1_000_000 })),
    ).toBeCloseTo(18);
    expect(priceUsage('Claude-Opus-4-1', u({ inputTokens: 1_000_000 }))).toBeCloseTo(15);
    expect(priceUsage('claude-opus-4-5', u({ inputTokens: 1_000_000 }))).toBeCloseTo(5);
    expect(priceUsage('gpt-4o-mini-2024-07-18', u({ inputTokens: 1_000_000 }))).toBeCloseTo(0.15);
    expect(priceUsage('gpt-4o', u({ inputTokens: 1_000_000 }))).toBeCloseTo(2.5);
    expect(priceUsage('o3-mini', u({ outputTokens: 1_000_000 }))).toBeCloseTo(4.4);
    expect(priceUsage('models/gemini-2.5-flash-lite', u({ inputTokens: 1_000_000 }))).toBeCloseTo(0.1);
    expect(priceUsage('anthropic/claude-3-5-haiku', u({ inputTokens: 1_000_000 }))).toBeCloseTo(0.8);
    expect(priceOf('gemini-2.5-flash')).toMatchObject({ input: 0.3, output: 2.5 });
  });

  it('discounts cached input as each provider does and charges cache writes at 125%', () => {
    // Anthropic: 1M input of which 600k cached (10%) and 300k written (125%), at $3/M.
    const claude = priceUsage(
      'claude-sonnet-4',
      u({ inputTokens: 1_000_000, cachedInputTokens: 600_000, cacheCreationTokens: 300_000 }),
    );
    expect(claude).toBeCloseTo(0.1 * 3 + 0.6 * 3 * 0.1 + 0.3 * 3 * 1.25);
    // OpenAI: cached at 50%.
    expect(priceUsage('gpt-4.1', u({ inputTokens: 1_000_000, cachedInputTokens: 500_000 }))).toBeCloseTo(
      0.5 * 2 + 0.5 * 2 * 0.5,
    );
    // Gemini: cached at 25%.
    expect(priceUsage('gemini-2.5-pro', u({ inputTokens: 1_000_000, cachedInputTokens: 1_000_000 }))).toBeCloseTo(
      1.25 * 0.25,
    );
  });

  it('lets the provider-reported cost win, and prices unknown or local models at zero', () => {
    expect(priceUsage('claude-sonnet-4', u({ inputTokens: 1_000_000, costUsd: 0.42 }))).toBe(0.42);
    expect(priceUsage('llama3.2', u({ inputTokens: 1_000_000, outputTokens: 5 }))).toBe(0);
    expect(priceUsage('qwen3:8b', u({ inputTokens: 10 }))).toBe(0);
  });
});

const apiError = (statusCode: number | undefined, body: unknown, headers: Record<string, string> = {}): Error =>
  Object.assign(new Error(`HTTP ${statusCode}`), {
    name: 'AI_APICallError',
    statusCode,
    responseHeaders: headers,
    responseBody: typeof body === 'string' ? body : JSON.stringify(body),
    requestBodyValues: {},
  });

describe('error classifier', () => {
  it('recognises each provider’s context-overflow error', () => {
    const bodies = [
      {
        error: {
          message:
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
          code: 'context_length_exceeded',
        },
      },
      {
        type: 'error',
        error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' },
      },
      { error: 'the input length exceeds the context length' },
      {
        error: {
          code: 400,
          message: 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).',
          status: 'INVALID_ARGUMENT',
        },
      },
      {
        error: {
          message: 'prompt token count of 130000 exceeds the limit of 128000',
          code: 'model_max_prompt_tokens_exceeded',
        },
      },
    ];
    for (const b of bodies) expect(classifyError('b', apiError(400, b))).toBeInstanceOf(ContextOverflowError);
    expect(classifyError('b', apiError(413, { error: { message: 'request too large' } }))).toBeInstanceOf(
      ContextOverflowError,
    );
  });

  it('recognises tool refusals: Ollama, OpenRouter, Gemma on Gemini, vLLM', () => {
    for (const [s, b] of [
      [400, { error: 'registry.ollama.ai/library/gemma:2b does not support tools' }],
      [
        404,
        {
          error: {
            message:
              'No endpoints found that support tool use. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing',
            code: 404,
          },
        },
      ],
      [
        400,
        {
          error: {
            code: 400,
            message: 'Function calling is not enabled for models/gemma-3-27b-it',
            status: 'INVALID_ARGUMENT',
          },
        },
      ],
      [
        400,
        {
          object: 'error',
          message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
          type: 'BadRequestError',
        },
      ],
    ] as const)
      expect(classifyError('b', apiError(s, b))).toBeInstanceOf(ToolUnsupportedError);
  });

  it('maps statuses: 429 → RateLimit, 5xx/408/529 → Transient, 401/400 → BackendError', () => {
    expect(classifyError('b', apiError(429, {}, { 'retry-after': '3' }))).toMatchObject({
      retryAfterMs: 3000,
      status: 429,
    });
    for (const s of [500, 502, 503, 504, 529, 408])
      expect(classifyError('b', apiError(s, {}))).toBeInstanceOf(TransientError);
    for (const s of [400, 401, 403, 404]) {
      const e = classifyError('b', apiError(s, { error: { message: 'nope' } }));
      expect(e.constructor).toBe(BackendError);
      expect(e.message).toBe('b: nope');
    }
  });

  it('reads the wait from retry-after-ms, Retry-After seconds or date, and Gemini’s RetryInfo', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs({ 'retry-after-ms': '250' })).toBe(250);
    expect(retryAfterMs({ 'Retry-After': '2.5' })).toBe(2500);
    expect(retryAfterMs({ 'retry-after': 'Thu, 01 Jan 2026 00:00:30 GMT' }, undefined, now)).toBe(30_000);
    expect(retryAfterMs({ 'retry-after': 'Wed, 31 Dec 2025 00:00:00 GMT' }, undefined, now)).toBe(0);
    expect(
      retryAfterMs(
        {},
        JSON.stringify({
          error: { details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '41s' }] },
        }),
      ),
    ).toBe(41_000);
    expect(retryAfterMs({ 'retry-after': 'soon' })).toBeUndefined();
    expect(retryAfterMs(undefined)).toBeUndefined();
  });

  it('network failures: before a response Transient, mid-body StreamDrop', () => {
    const refused = Object.assign(new TypeError('fetch failed'), {
      cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }),
    });
    expect(classifyError('b', refused)).toBeInstanceOf(TransientError);
    const reset = Object.assign(new TypeError('terminated'), {
      cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }),
    });
    expect(classifyError('b', reset, true)).toBeInstanceOf(StreamDropError);
    expect(classifyError('b', reset, false)).toBeInstanceOf(TransientError);
  });

  it('in-stream error objects: overloaded/server → Transient, rate limit, overflow, auth', () => {
    expect(classifyStreamError('b', { type: 'overloaded_error', message: 'Overloaded' })).toBeInstanceOf(
      TransientError,
    );
    expect(
      classifyStreamError('b', { message: 'The server had an error', type: 'server_error', code: null }),
    ).toBeInstanceOf(TransientError);
    expect(classifyStreamError('b', { type: 'rate_limit_error', message: 'slow down' })).toBeInstanceOf(RateLimitError);
    expect(
      classifyStreamError('b', { message: 'prompt is too long: 5 > 4', type: 'invalid_request_error' }),
    ).toBeInstanceOf(ContextOverflowError);
    expect(classifyStreamError('b', { message: 'bad key', type: 'authentication_error' }).constructor).toBe(
      BackendError,
    );
    expect(classifyStreamError('b', 'model runner has unexpectedly stopped')).toBeInstanceOf(TransientError);
  });
});
