/** The stream driver on hand-made LanguageModelV3 part streams: edge cases no real server is needed for. */
import type { LanguageModelV3, LanguageModelV3StreamPart, LanguageModelV3Usage } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import { StreamDropError, TransientError } from '../../../src/olliesrv/backend/errors.js';
import { drive, toPrompt } from '../../../src/olliesrv/backend/sdk.js';
import { collect } from './helpers.js';

const usage = (input?: number, output?: number): LanguageModelV3Usage => ({
  inputTokens: { total: input, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: undefined, reasoning: undefined },
});

function model(parts: LanguageModelV3StreamPart[], opts: { error?: unknown } = {}): LanguageModelV3 {
  return {
    specificationVersion: 'v3',
    provider: 'fake',
    modelId: 'fake',
    supportedUrls: {},
    doGenerate: () => Promise.reject(new Error('not used')),
    doStream: () => {
      if (opts.error) return Promise.reject(opts.error);
      return Promise.resolve({
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          start(c) {
            for (const p of parts) c.enqueue(p);
            c.close();
          },
        }),
      });
    },
  };
}

const run = (parts: LanguageModelV3StreamPart[], opts: { error?: unknown } = {}) =>
  collect(drive(model(parts, opts), { prompt: [] }, { backend: 'fake' }));

describe('stream driver', () => {
  it('a finish without the provider’s finish reason is a drop; no finish at all too', async () => {
    const r1 = await run([
      { type: 'text-delta', id: '0', delta: 'hi' },
      { type: 'finish', usage: usage(), finishReason: { unified: 'other', raw: undefined } },
    ]);
    expect(r1.error).toBeInstanceOf(StreamDropError);
    const r2 = await run([{ type: 'text-delta', id: '0', delta: 'hi' }]);
    expect(r2.error).toBeInstanceOf(StreamDropError);
    expect(r2.text).toBe('hi');
  });

  it('emits no usage event when the provider reported none, and maps finish reasons', async () => {
    const r = await run([{ type: 'finish', usage: usage(), finishReason: { unified: 'length', raw: 'length' } }]);
    expect(r.events).toEqual([{ type: 'finish', reason: 'length' }]);
    const r2 = await run([
      { type: 'finish', usage: usage(5, 1), finishReason: { unified: 'content-filter', raw: 'content_filter' } },
    ]);
    expect(r2.events).toEqual([
      { type: 'usage', usage: { inputTokens: 5, outputTokens: 1, cachedInputTokens: 0, cacheCreationTokens: 0 } },
      { type: 'finish', reason: 'content-filter' },
    ]);
  });

  it('synthesizes missing ids and gives object input and empty arguments a JSON text', async () => {
    const r = await run([
      { type: 'tool-call', toolCallId: '', toolName: 'a', input: '' },
      { type: 'tool-call', toolCallId: 'x', toolName: 'b', input: '{"k":1}' },
      { type: 'finish', usage: usage(1, 1), finishReason: { unified: 'tool-calls', raw: 'tool_calls' } },
    ]);
    const calls = r.events.flatMap((e) => (e.type === 'tool-call' ? [e.call] : []));
    expect(calls[0]).toMatchObject({ name: 'a', args: '{}' });
    expect(calls[0]!.id).toMatch(/^call_[A-Za-z0-9_-]{12}$/);
    expect(calls[1]).toEqual({ id: 'x', name: 'b', args: '{"k":1}' });
  });

  it('a failure before the stream is classified (a timeout is transient)', async () => {
    const r = await run([], {
      error: Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' }),
    });
    expect(r.error).toBeInstanceOf(TransientError);
  });

  it('stops reading when the consumer leaves early', async () => {
    let cancelled = false;
    const m = model([]);
    m.doStream = () =>
      Promise.resolve({
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          pull(c) {
            c.enqueue({ type: 'text-delta', id: '0', delta: 'x' });
          },
          cancel() {
            cancelled = true;
          },
        }),
      });
    for await (const e of drive(m, { prompt: [] }, { backend: 'fake' })) {
      expect(e.type).toBe('text');
      break;
    }
    expect(cancelled).toBe(true);
  });
});

describe('prompt conversion', () => {
  it('groups consecutive tool results, keeps broken tool JSON as text, and leaves out an empty assistant turn', () => {
    const p = toPrompt([
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: '1', name: 'f', args: '{not json' },
          { id: '2', name: 'g', args: '[1]' },
        ],
      },
      { role: 'tool', toolCallId: '1', name: 'f', content: 'r1' },
      { role: 'tool', toolCallId: '2', name: 'g', content: 'r2', isError: true },
      { role: 'assistant', content: '' },
      { role: 'user', content: 'go on' },
    ]);
    expect(p).toHaveLength(3);
    expect(p[0]).toMatchObject({
      role: 'assistant',
      content: [
        { type: 'tool-call', input: { invalid_json: '{not json' } },
        { type: 'tool-call', input: { value: [1] } },
      ],
    });
    expect(p[1]).toMatchObject({
      role: 'tool',
      content: [
        { toolCallId: '1', output: { type: 'text', value: 'r1' } },
        { toolCallId: '2', output: { type: 'error-text', value: 'r2' } },
      ],
    });
    expect(p[2]).toEqual({ role: 'user', content: [{ type: 'text', text: 'go on' }] });
  });
});
