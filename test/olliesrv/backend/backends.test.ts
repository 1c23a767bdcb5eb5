/**
 * Every backend type against the mock LLM over real HTTP: content, tool calls, usage, every fault, slow streams and
 * aborts. Request contents per provider are checked in requests.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startMockLlm, type MockLlm } from '../../../src/devtools/mock-llm/server.js';
import {
  BackendError,
  ContextOverflowError,
  RateLimitError,
  StreamDropError,
  ToolUnsupportedError,
  TransientError,
} from '../../../src/olliesrv/backend/errors.js';
import type { StreamEvent, Usage } from '../../../src/olliesrv/backend/types.js';
import { backendFor, chatRequests, collect, deadPort, request, SECRET, TYPES } from './helpers.js';

describe.each(TYPES)('%s backend against the mock', (type) => {
  let mock: MockLlm;
  beforeEach(async () => {
    mock = await startMockLlm();
  });
  afterEach(async () => {
    await mock.close();
  });

  it('streams text, then usage, then finish last', async () => {
    mock.script([{ text: 'Hello there, world.' }, { usage: { input: 100, output: 7 } }]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeUndefined();
    expect(r.text).toBe('Hello there, world.');
    // Several deltas, not one lump: the stream is really streamed.
    expect(r.events.filter((e) => e.type === 'text').length).toBeGreaterThan(1);
    expect(r.events.at(-1)).toEqual({ type: 'finish', reason: 'stop' });
    expect(r.events.at(-2)).toMatchObject({ type: 'usage', usage: { inputTokens: 100, outputTokens: 7 } });
    expect(r.events.filter((e) => e.type === 'finish')).toHaveLength(1);
    expect(mock.pending()).toBe(0);
  });

  it('streams reasoning separately from text', async () => {
    mock.script([{ reasoning: 'The user wants a.txt, so read it.' }, { text: 'Reading.' }]);
    const r = await collect(backendFor(type, mock).stream(request({ params: { thinkingBudget: 2048 } })));
    expect(r.error).toBeUndefined();
    expect(r.reasoning).toBe('The user wants a.txt, so read it.');
    expect(r.text).toBe('Reading.');
    const firstText = r.events.findIndex((e) => e.type === 'text');
    const lastReasoning = r.events.findLastIndex((e) => e.type === 'reasoning' && e.delta !== '');
    expect(lastReasoning).toBeLessThan(firstText);
    if (type === 'anthropic') {
      const sig = r.events.find(
        (e): e is Extract<StreamEvent, { type: 'reasoning' }> => e.type === 'reasoning' && e.signature !== undefined,
      );
      expect(sig?.signature).toMatch(/^mock-sig-/);
    }
  });

  it('delivers parallel tool calls whole, each once, with intact arguments and distinct ids', async () => {
    const args1 = { path: 'dir with spaces/a "quoted" file.txt', n: 3 };
    const args2 = { dir: '.', deep: { list: [1, 2, { x: 'ü' }], flag: true } };
    mock.script([
      { text: 'Reading both.' },
      {
        toolCalls: [
          { name: 'read', args: args1 },
          { name: 'ls', args: args2 },
        ],
      },
    ]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeUndefined();
    const calls = r.events.flatMap((e) => (e.type === 'tool-call' ? [e.call] : []));
    expect(calls.map((c) => c.name)).toEqual(['read', 'ls']);
    expect(JSON.parse(calls[0]!.args)).toEqual(args1);
    expect(JSON.parse(calls[1]!.args)).toEqual(args2);
    expect(calls[0]!.id).toBeTruthy();
    expect(calls[1]!.id).toBeTruthy();
    expect(calls[0]!.id).not.toBe(calls[1]!.id);
    expect(r.events.at(-1)).toEqual({ type: 'finish', reason: 'tool-calls' });
    if (type === 'gemini') {
      // Gemini sends no ids: ours are synthesized; the first call carries Gemini 3's thought signature.
      expect(calls[0]!.id).toMatch(/^call_|^[A-Za-z0-9]/);
      expect(calls[0]!.signature).toMatch(/^mock-sig-/);
    }
  });

  it('reports usage with cached and cache-creation tokens as the provider counts them', async () => {
    mock.script([{ text: 'ok' }, { usage: { input: 1000, output: 20, cached: 600, cacheWrite: 300 } }]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeUndefined();
    const usage = r.events.find((e) => e.type === 'usage')!.usage as Usage;
    expect(usage.inputTokens).toBe(1000);
    expect(usage.outputTokens).toBe(20);
    // Only Anthropic reports cache writes; Ollama reports no cache at all.
    expect(usage.cachedInputTokens).toBe(type === 'ollama' ? 0 : 600);
    expect(usage.cacheCreationTokens).toBe(type === 'anthropic' ? 300 : 0);
  });

  it('429 with Retry-After → RateLimitError carrying the delay, not retried by the SDK', async () => {
    mock.script([{ status: 429, retryAfter: 7 }]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeInstanceOf(RateLimitError);
    expect((r.error as RateLimitError).retryAfterMs).toBe(7000);
    expect((r.error as RateLimitError).status).toBe(429);
    expect((r.error as RateLimitError).backend).toBe(`mock-${type}`);
    expect(chatRequests(mock)).toHaveLength(1);
  });

  it('500 → TransientError', async () => {
    mock.script([{ status: 500 }]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeInstanceOf(TransientError);
    expect((r.error as TransientError).status).toBe(500);
    expect(chatRequests(mock)).toHaveLength(1);
  });

  it('401 → plain BackendError (not retryable), without the key in the message', async () => {
    mock.script([{ status: 401, message: 'invalid x-api-key' }]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeInstanceOf(BackendError);
    for (const cls of [RateLimitError, TransientError, StreamDropError, ContextOverflowError, ToolUnsupportedError])
      expect(r.error).not.toBeInstanceOf(cls);
    expect((r.error as Error).message).toContain('invalid x-api-key');
    expect((r.error as Error).message).not.toContain(SECRET);
  });

  it('connection refused → TransientError', async () => {
    const port = await deadPort();
    const r = await collect(backendFor(type, { url: `http://127.0.0.1:${port}` }).stream(request()));
    expect(r.error).toBeInstanceOf(TransientError);
    expect((r.error as Error).message).toMatch(/ECONNREFUSED|connect/i);
  });

  it('a stream cut mid-response → StreamDropError after the deltas that arrived', async () => {
    mock.script([{ text: 'one two three four five six seven eight' }, { cutAfterChunks: 4 }]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeInstanceOf(StreamDropError);
    expect(r.events.some((e) => e.type === 'finish')).toBe(false);
    expect(r.text.length).toBeGreaterThan(0);
    expect(r.text.length).toBeLessThan('one two three four five six seven eight'.length);
  });

  it('a stream cut after the tool calls but before the end → StreamDropError, no finish', async () => {
    mock.script([
      {
        toolCalls: [
          { name: 'read', args: { path: 'a' } },
          { name: 'read', args: { path: 'b' } },
        ],
      },
      { text: 'and more text after it' },
      { cutAfterChunks: type === 'ollama' || type === 'gemini' ? 2 : 12 },
    ]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeInstanceOf(StreamDropError);
    expect(r.events.some((e) => e.type === 'finish')).toBe(false);
  });

  it('context-overflow 400 → ContextOverflowError', async () => {
    mock.script([{ contextOverflow: true }]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeInstanceOf(ContextOverflowError);
    expect((r.error as ContextOverflowError).status).toBe(400);
  });

  it('tool unsupported → ToolUnsupportedError', async () => {
    mock.script([{ toolUnsupported: true }]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeInstanceOf(ToolUnsupportedError);
  });

  it('an error event inside the stream → TransientError with the provider message', async () => {
    mock.script([{ text: 'one two three four five' }, { streamError: 'upstream model crashed', afterChunks: 3 }]);
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeInstanceOf(TransientError);
    expect((r.error as Error).message).toContain('upstream model crashed');
    expect(r.events.some((e) => e.type === 'finish')).toBe(false);
  });

  it('a slow stream still completes', async () => {
    mock.script([{ text: 'slow but steady wins' }, { delayMs: 40 }]);
    const t0 = Date.now();
    const r = await collect(backendFor(type, mock).stream(request()));
    expect(r.error).toBeUndefined();
    expect(r.text).toBe('slow but steady wins');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(4 * 40);
    expect(r.events.at(-1)!.type).toBe('finish');
  });

  it('aborting the signal stops the stream promptly with the signal reason', async () => {
    mock.script([{ text: Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ') }, { delayMs: 150 }]);
    const ac = new AbortController();
    const reason = new Error('stopped by ctl');
    let abortedAt = 0;
    const r = await collect(backendFor(type, mock).stream(request({ signal: ac.signal })), (e) => {
      if (e.type === 'text' && abortedAt === 0) {
        abortedAt = Date.now();
        ac.abort(reason);
      }
    });
    expect(r.error).toBe(reason);
    // Far less than the 6 s the rest of the stream would take: the abort does not wait for it.
    expect(Date.now() - abortedAt).toBeLessThan(1500);
    expect(r.events.filter((e) => e.type === 'text').length).toBeLessThan(3);
  });

  it('an already-aborted signal throws before any request', async () => {
    const ac = new AbortController();
    ac.abort(new Error('early'));
    const r = await collect(backendFor(type, mock).stream(request({ signal: ac.signal })));
    expect((r.error as Error).message).toBe('early');
    expect(chatRequests(mock)).toHaveLength(0);
  });

  it('lists models once (cached) and knows context lengths', async () => {
    const b = backendFor(type, mock);
    const models = await b.models();
    expect(models.map((m) => m.id)).toEqual(['mock-model', 'mock-model-large']);
    await b.models();
    const listCalls = (): number =>
      mock.requests.filter((r) => r.method === 'GET' && /models|tags/.test(r.path)).length;
    expect(listCalls()).toBe(1);
    await b.models(true);
    expect(listCalls()).toBe(2);
    const ctx = await b.contextLength();
    const expected = { openai: 128_000, anthropic: 200_000, ollama: 32768, gemini: 32768, copilot: 32768 }[type];
    expect(ctx).toBe(expected);
    await b.contextLength();
    expect(mock.requests.filter((r) => r.path === '/api/show')).toHaveLength(type === 'ollama' ? 1 : 0);
    const overridden = backendFor(type, mock, { context: 5000 });
    expect(await overridden.contextLength('mock-model-large')).toBe(5000);
  });

  it('knows the window of a well-known model the provider does not describe', async () => {
    const b = backendFor(type, mock);
    // The mock lists only mock-model*: these come from the table, whatever the type's default.
    if (type !== 'ollama') expect(await b.contextLength('gpt-4o-mini')).toBe(128_000);
    expect(await b.contextLength('meta-llama/llama3.1:8b')).toBe(type === 'ollama' ? 32768 : 131_072);
  });
});

describe('OpenAI-compatible specifics', () => {
  let mock: MockLlm;
  afterEach(async () => {
    await mock.close();
  });

  it('reads reasoning from `reasoning` deltas too (OpenRouter, gpt-oss servers)', async () => {
    mock = await startMockLlm({ reasoningField: 'reasoning' });
    mock.script([{ reasoning: 'hmm, think' }, { text: 'done' }]);
    const r = await collect(backendFor('openai', mock).stream(request()));
    expect(r.reasoning).toBe('hmm, think');
    expect(r.text).toBe('done');
  });

  it('passes the provider-reported cost through (OpenRouter usage.cost)', async () => {
    mock = await startMockLlm();
    mock.script([{ text: 'x' }, { usage: { input: 10, output: 2, cost: 0.0123 } }]);
    const r = await collect(backendFor('openai', mock).stream(request()));
    expect(r.events.find((e) => e.type === 'usage')).toMatchObject({ usage: { costUsd: 0.0123 } });
  });

  it('429 with retry-after-ms and with an HTTP-date Retry-After', async () => {
    mock = await startMockLlm();
    mock.script(
      [{ status: 429, retryAfterMs: 1500 }],
      [{ status: 429, retryAfter: new Date(Date.now() + 20_000).toUTCString() }],
    );
    const b = backendFor('openai', mock);
    const r1 = await collect(b.stream(request()));
    expect((r1.error as RateLimitError).retryAfterMs).toBe(1500);
    const r2 = await collect(b.stream(request()));
    const ms = (r2.error as RateLimitError).retryAfterMs!;
    expect(ms).toBeGreaterThan(17_000);
    expect(ms).toBeLessThanOrEqual(20_000);
  });

  it('429 without Retry-After → RateLimitError with no delay', async () => {
    mock = await startMockLlm();
    mock.script([{ status: 429 }]);
    const r = await collect(backendFor('openai', mock).stream(request()));
    expect(r.error).toBeInstanceOf(RateLimitError);
    expect((r.error as RateLimitError).retryAfterMs).toBeUndefined();
  });
});

describe('tool call ids', () => {
  it('a repeated provider id is replaced, so that every call of a response has its own', async () => {
    const mock = await startMockLlm();
    try {
      mock.script([
        {
          toolCalls: [
            { name: 'read', args: { path: 'a' }, id: 'dup' },
            { name: 'read', args: { path: 'b' }, id: 'dup' },
          ],
        },
      ]);
      const r = await collect(backendFor('ollama', mock).stream(request()));
      const calls = r.events.flatMap((e) => (e.type === 'tool-call' ? [e.call] : []));
      expect(calls).toHaveLength(2);
      expect(calls[0]!.id).toBe('dup');
      expect(calls[1]!.id).toMatch(/^call_/);
      expect(JSON.parse(calls[1]!.args)).toEqual({ path: 'b' });
    } finally {
      await mock.close();
    }
  });
});

describe('Anthropic specifics', () => {
  it('an error event as the first event of the stream (overloaded) → TransientError', async () => {
    const mock = await startMockLlm();
    try {
      mock.script([{ text: 'never seen' }, { streamError: 'Overloaded', afterChunks: 1 }]);
      const r = await collect(backendFor('anthropic', mock).stream(request()));
      expect(r.error).toBeInstanceOf(TransientError);
      expect((r.error as Error).message).toContain('Overloaded');
    } finally {
      await mock.close();
    }
  });

  it('529 overloaded → TransientError', async () => {
    const mock = await startMockLlm();
    try {
      mock.script([{ status: 529 }]);
      const r = await collect(backendFor('anthropic', mock).stream(request()));
      expect(r.error).toBeInstanceOf(TransientError);
      expect((r.error as TransientError).status).toBe(529);
    } finally {
      await mock.close();
    }
  });
});
