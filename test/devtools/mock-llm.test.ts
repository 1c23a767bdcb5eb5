import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startMockLlm, type MockLlm } from '../../src/devtools/mock-llm/server.js';

/** Read a response body to the end; a connection dropped mid-body is reported, with what arrived before it. */
async function readAll(res: Response): Promise<{ text: string; dropped: boolean }> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { text, dropped: false };
      text += dec.decode(value, { stream: true });
    }
  } catch {
    return { text, dropped: true };
  }
}

interface SseEvent {
  event?: string;
  data: string;
}

/** Parse raw SSE text into events (LF or CRLF framing). */
function parseSse(text: string): SseEvent[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((b) => b.trim() !== '')
    .map((block) => {
      const ev: SseEvent = { data: '' };
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith('event: ')) ev.event = line.slice(7);
        else if (line.startsWith('data: ')) ev.data += line.slice(6);
      }
      return ev;
    });
}

const json = (e: SseEvent): Record<string, any> => JSON.parse(e.data) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('mock LLM server', () => {
  let mock: MockLlm;
  beforeEach(async () => {
    mock = await startMockLlm();
  });
  afterEach(async () => {
    await mock.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(mock.url + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  describe('OpenAI chat completions', () => {
    const req = {
      model: 'gpt-mock',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'hi' }],
    };

    it('streams reasoning, text, parallel tool-call deltas, finish_reason, the usage chunk and [DONE]', async () => {
      mock.script([
        { reasoning: 'let me see' },
        { text: 'Reading both.' },
        {
          toolCalls: [
            { name: 'read', args: { path: 'a.txt' } },
            { name: 'ls', args: { dir: '.' } },
          ],
        },
        { usage: { input: 120, output: 30, cached: 100 } },
      ]);
      const res = await post('/v1/chat/completions', req);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const events = parseSse((await readAll(res)).text);
      expect(events.at(-1)!.data).toBe('[DONE]');
      const chunks = events.slice(0, -1).map(json);
      for (const c of chunks) {
        expect(c.object).toBe('chat.completion.chunk');
        expect(c.model).toBe('gpt-mock');
      }
      expect(chunks[0]!.choices[0].delta).toEqual({ role: 'assistant', content: '' });
      const deltas = chunks.filter((c) => c.choices.length > 0).map((c) => c.choices[0].delta);
      expect(
        deltas
          .map((d) => d.reasoning_content)
          .filter(Boolean)
          .join(''),
      ).toBe('let me see');
      expect(deltas.map((d) => d.content ?? '').join('')).toBe('Reading both.');

      // Tool calls: the first delta of each index carries id, type and name; arguments come in several pieces.
      const tc = deltas.flatMap((d) => d.tool_calls ?? []);
      const byIndex = [0, 1].map((i) => tc.filter((t) => t.index === i));
      expect(byIndex[0]![0]).toMatchObject({ index: 0, type: 'function', function: { name: 'read', arguments: '' } });
      expect(byIndex[0]![0].id).toMatch(/^call_/);
      expect(byIndex[1]![0]).toMatchObject({ index: 1, type: 'function', function: { name: 'ls' } });
      expect(byIndex[0]![0].id).not.toBe(byIndex[1]![0].id);
      expect(byIndex[0]!.length).toBeGreaterThan(2);
      expect(byIndex[0]!.slice(1).every((t) => t.id === undefined && t.function.name === undefined)).toBe(true);
      expect(JSON.parse(byIndex[0]!.map((t) => t.function.arguments).join(''))).toEqual({ path: 'a.txt' });
      expect(JSON.parse(byIndex[1]!.map((t) => t.function.arguments).join(''))).toEqual({ dir: '.' });

      const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
      expect(finish).toHaveLength(1);
      expect(finish[0]!.choices[0].finish_reason).toBe('tool_calls');
      const usage = chunks.at(-1)!;
      expect(usage.choices).toEqual([]);
      expect(usage.usage).toMatchObject({
        prompt_tokens: 120,
        completion_tokens: 30,
        total_tokens: 150,
        prompt_tokens_details: { cached_tokens: 100 },
      });
    });

    it('omits the usage chunk without include_usage, uses finish_reason stop for text', async () => {
      mock.script([{ text: 'one two' }]);
      const events = parseSse(
        (await readAll(await post('/v1/chat/completions', { ...req, stream_options: undefined }))).text,
      );
      const chunks = events.slice(0, -1).map(json);
      expect(chunks.map((c) => c.choices[0].delta)).toEqual([
        { role: 'assistant', content: '' },
        { content: 'one' },
        { content: ' two' },
        {},
      ]);
      expect(chunks.at(-1)!.choices[0].finish_reason).toBe('stop');
      expect(chunks.every((c) => c.usage === undefined)).toBe(true);
    });

    it('can carry reasoning in the `reasoning` field (OpenRouter style)', async () => {
      await mock.close();
      mock = await startMockLlm({ reasoningField: 'reasoning' });
      mock.script([{ reasoning: 'hmm' }, { text: 'ok' }]);
      const chunks = parseSse((await readAll(await post('/v1/chat/completions', req))).text)
        .slice(0, -1)
        .map(json);
      expect(chunks[1]!.choices[0].delta).toEqual({ reasoning: 'hmm' });
    });

    it('answers non-streaming requests with one chat.completion', async () => {
      mock.script([
        { text: 'whole' },
        { toolCalls: [{ name: 'f', args: { x: 1 }, id: 'call_fixed' }] },
        { usage: { input: 9, output: 4 } },
      ]);
      const res = await post('/v1/chat/completions', { model: 'gpt-mock', messages: [] });
      const body = (await res.json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(body.object).toBe('chat.completion');
      expect(body.choices[0]).toMatchObject({
        index: 0,
        finish_reason: 'tool_calls',
        message: {
          role: 'assistant',
          content: 'whole',
          tool_calls: [{ id: 'call_fixed', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }],
        },
      });
      expect(body.usage).toMatchObject({ prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 });
    });

    it('lists models', async () => {
      const body = (await (await fetch(mock.url + '/v1/models')).json()) as {
        object: string;
        data: { id: string; object: string }[];
      };
      expect(body.object).toBe('list');
      expect(body.data.map((m) => m.id)).toEqual(['mock-model', 'mock-model-large']);
      expect(body.data[0]!.object).toBe('model');
    });

    it('replies with a default text when the script is empty', async () => {
      const chunks = parseSse((await readAll(await post('/v1/chat/completions', req))).text)
        .slice(0, -1)
        .map(json);
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('Hello from the mock LLM.');
    });
  });

  describe('Anthropic messages', () => {
    const req = { model: 'claude-mock', stream: true, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };

    it('streams message_start, thinking/text/tool_use blocks, message_delta and message_stop', async () => {
      mock.script([
        { reasoning: 'ponder this' },
        { text: 'Hi there' },
        {
          toolCalls: [
            { name: 'read', args: { path: 'a.txt' } },
            { name: 'ls', args: {} },
          ],
        },
        { usage: { input: 100, output: 42, cached: 60, cacheWrite: 10 } },
      ]);
      const res = await post('/v1/messages', req, { 'x-api-key': 'sk-secret', 'anthropic-version': '2023-06-01' });
      expect(res.status).toBe(200);
      const events = parseSse((await readAll(res)).text);
      for (const e of events) expect(json(e).type).toBe(e.event);
      expect(events.map((e) => e.event)).toEqual([
        'message_start',
        'content_block_start',
        'ping',
        'content_block_delta',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'content_block_start',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'content_block_start',
        'content_block_delta',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'content_block_start',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ]);
      const data = events.map(json);
      expect(data[0]!.message).toMatchObject({
        type: 'message',
        role: 'assistant',
        model: 'claude-mock',
        content: [],
        stop_reason: null,
        usage: { input_tokens: 30, cache_read_input_tokens: 60, cache_creation_input_tokens: 10 },
      });
      expect(data[1]).toEqual({
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'thinking', thinking: '' },
      });
      expect(data[3]!.delta).toEqual({ type: 'thinking_delta', thinking: 'ponder' });
      expect(data[4]!.delta).toEqual({ type: 'thinking_delta', thinking: ' this' });
      expect(data[5]!.delta.type).toBe('signature_delta');
      expect(typeof data[5]!.delta.signature).toBe('string');
      expect(data[7]).toEqual({ type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } });
      expect(data.slice(8, 10).map((d) => d.delta)).toEqual([
        { type: 'text_delta', text: 'Hi' },
        { type: 'text_delta', text: ' there' },
      ]);
      expect(data[11]).toMatchObject({ index: 2, content_block: { type: 'tool_use', name: 'read', input: {} } });
      expect(data[11]!.content_block.id).toMatch(/^toolu_/);
      const parts = data.slice(12, 15).map((d) => d.delta);
      expect(parts.every((p) => p.type === 'input_json_delta')).toBe(true);
      expect(JSON.parse(parts.map((p) => p.partial_json).join(''))).toEqual({ path: 'a.txt' });
      expect(data[16]).toMatchObject({ index: 3, content_block: { type: 'tool_use', name: 'ls' } });
      expect(data[20]).toMatchObject({
        delta: { stop_reason: 'tool_use', stop_sequence: null },
        usage: { output_tokens: 42 },
      });
    });

    it('ends a text reply with stop_reason end_turn; non-streaming gives one message', async () => {
      mock.script([{ text: 'a' }], [{ reasoning: 'r' }, { text: 'b' }]);
      const data = parseSse((await readAll(await post('/v1/messages', req))).text).map(json);
      expect(data.at(-2)!.delta.stop_reason).toBe('end_turn');
      const msg = (await (await post('/v1/messages', { ...req, stream: false })).json()) as Record<string, unknown>;
      expect(msg).toMatchObject({
        type: 'message',
        role: 'assistant',
        stop_reason: 'end_turn',
        content: [
          { type: 'thinking', thinking: 'r' },
          { type: 'text', text: 'b' },
        ],
      });
    });

    it('returns errors in the Anthropic envelope', async () => {
      mock.script([{ status: 429, retryAfter: 7 }], [{ status: 529 }]);
      const r1 = await post('/v1/messages', req);
      expect(r1.status).toBe(429);
      expect(r1.headers.get('retry-after')).toBe('7');
      expect(await r1.json()).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
      const r2 = await post('/v1/messages', req);
      expect(r2.status).toBe(529);
      expect(await r2.json()).toMatchObject({
        type: 'error',
        error: { type: 'overloaded_error', message: 'Overloaded' },
      });
    });
  });

  describe('Ollama', () => {
    it('streams NDJSON thinking, content and tool calls, then a done line with counts', async () => {
      mock.script([
        { reasoning: 'hm ok' },
        { text: 'Sure thing' },
        {
          toolCalls: [
            { name: 'read', args: { path: 'a' } },
            { name: 'ls', args: {} },
          ],
        },
        { usage: { input: 50, output: 8 } },
      ]);
      const res = await post('/api/chat', { model: 'llama3', messages: [{ role: 'user', content: 'hi' }] });
      expect(res.headers.get('content-type')).toBe('application/x-ndjson');
      const text = (await readAll(res)).text;
      expect(text.endsWith('\n')).toBe(true);
      const lines = text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(lines.map((l) => l.message)).toEqual([
        { role: 'assistant', content: '', thinking: 'hm' },
        { role: 'assistant', content: '', thinking: ' ok' },
        { role: 'assistant', content: 'Sure' },
        { role: 'assistant', content: ' thing' },
        {
          role: 'assistant',
          content: '',
          tool_calls: [
            { id: expect.stringMatching(/^call_/), function: { index: 0, name: 'read', arguments: { path: 'a' } } },
            { id: expect.stringMatching(/^call_/), function: { index: 1, name: 'ls', arguments: {} } },
          ],
        },
        { role: 'assistant', content: '' },
      ]);
      for (const l of lines) {
        expect(l.model).toBe('llama3');
        expect(typeof l.created_at).toBe('string');
      }
      expect(lines.map((l) => l.done)).toEqual([false, false, false, false, false, true]);
      expect(lines.at(-1)).toMatchObject({ done_reason: 'stop', prompt_eval_count: 50, eval_count: 8 });
    });

    it('answers stream:false with one message', async () => {
      mock.script([{ text: 'whole reply' }]);
      const body = (await (await post('/api/chat', { model: 'llama3', stream: false, messages: [] })).json()) as Record<
        string,
        unknown
      >;
      expect(body).toMatchObject({
        model: 'llama3',
        done: true,
        done_reason: 'stop',
        message: { role: 'assistant', content: 'whole reply' },
      });
    });

    it('serves /api/show with the context length and /api/tags with the models', async () => {
      await mock.close();
      mock = await startMockLlm({ contextLength: 131072, models: ['qwen3:8b'] });
      const show = (await (await post('/api/show', { model: 'qwen3:8b' })).json()) as {
        model_info: Record<string, unknown>;
      };
      expect(show.model_info['general.architecture']).toBe('llama');
      expect(show.model_info['llama.context_length']).toBe(131072);
      expect((await post('/api/show', { model: 'nope' })).status).toBe(404);
      const tags = (await (await fetch(mock.url + '/api/tags')).json()) as { models: { name: string }[] };
      expect(tags.models.map((m) => m.name)).toEqual(['qwen3:8b']);
    });
  });

  describe('Gemini', () => {
    it('streams SSE candidates with thought parts, text, parallel function calls, usageMetadata and STOP', async () => {
      mock.script([
        { reasoning: 'thinking it' },
        { text: 'Calling now' },
        {
          toolCalls: [
            { name: 'read', args: { path: 'a' } },
            { name: 'ls', args: {} },
          ],
        },
        { usage: { input: 200, output: 12, cached: 150 } },
      ]);
      const res = await post(
        '/v1beta/models/gemini-mock:streamGenerateContent?alt=sse',
        { contents: [] },
        { 'x-goog-api-key': 'secret' },
      );
      expect(res.headers.get('content-type')).toBe('text/event-stream');
      const chunks = parseSse((await readAll(res)).text).map(json);
      expect(chunks.map((c) => c.candidates[0].content.parts)).toEqual([
        [{ text: 'thinking', thought: true }],
        [{ text: ' it', thought: true }],
        [{ text: 'Calling' }],
        [{ text: ' now' }],
        // Gemini 3 signs the first call of a step.
        [
          {
            functionCall: { name: 'read', args: { path: 'a' } },
            thoughtSignature: expect.stringMatching(/^mock-sig-/),
          },
          { functionCall: { name: 'ls', args: {} } },
        ],
        [{ text: '' }],
      ]);
      expect(chunks.map((c) => c.candidates[0].finishReason)).toEqual([
        undefined,
        undefined,
        undefined,
        undefined,
        undefined,
        'STOP',
      ]);
      for (const c of chunks) {
        expect(c.candidates[0].content.role).toBe('model');
        expect(c.usageMetadata).toMatchObject({
          promptTokenCount: 200,
          candidatesTokenCount: 12,
          cachedContentTokenCount: 150,
        });
        expect(c.modelVersion).toBe('gemini-mock');
      }
    });

    it('answers generateContent and lists models', async () => {
      mock.script([{ text: 'a b' }]);
      const body = (await (
        await post('/v1beta/models/gemini-mock:generateContent', { contents: [] })
      ).json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(body.candidates[0]).toMatchObject({
        content: { parts: [{ text: 'a b' }], role: 'model' },
        finishReason: 'STOP',
      });
      const models = (await (await fetch(mock.url + '/v1beta/models')).json()) as {
        models: { name: string; inputTokenLimit: number }[];
      };
      expect(models.models[0]).toMatchObject({ name: 'models/mock-model', inputTokenLimit: 32768 });
    });
  });

  describe('faults', () => {
    const openai = { model: 'm', stream: true, stream_options: { include_usage: true }, messages: [] };

    it('429 with Retry-After and 500, in each provider envelope; a fault consumes its turn', async () => {
      mock.script(
        [{ status: 429, retryAfter: 3 }],
        [{ status: 500 }],
        [{ status: 429, retryAfter: 2 }],
        [{ status: 500 }],
        [{ status: 429, retryAfter: 1 }],
      );
      const r1 = await post('/v1/chat/completions', openai);
      expect(r1.status).toBe(429);
      expect(r1.headers.get('retry-after')).toBe('3');
      expect(await r1.json()).toMatchObject({ error: { code: 'rate_limit_exceeded', type: 'requests' } });
      const r2 = await post('/v1/chat/completions', openai);
      expect(r2.status).toBe(500);
      expect(await r2.json()).toMatchObject({ error: { type: 'server_error' } });
      const r3 = await post('/v1beta/models/g:streamGenerateContent?alt=sse', {});
      expect(r3.status).toBe(429);
      expect(r3.headers.get('retry-after')).toBe('2');
      expect(await r3.json()).toMatchObject({
        error: { code: 429, status: 'RESOURCE_EXHAUSTED', details: [{ retryDelay: '2s' }] },
      });
      const r4 = await post('/api/chat', { model: 'x' });
      expect(r4.status).toBe(500);
      expect(await r4.json()).toEqual({ error: expect.any(String) });
      const r5 = await post('/v1/messages', { stream: true });
      expect(r5.status).toBe(429);
      expect(r5.headers.get('retry-after')).toBe('1');
      expect(mock.pending()).toBe(0);
      // The next request gets the default reply.
      expect((await post('/v1/chat/completions', openai)).status).toBe(200);
    });

    it('context overflow: HTTP 400 with each provider’s context-length error', async () => {
      mock.script(
        [{ contextOverflow: true }],
        [{ contextOverflow: true }],
        [{ contextOverflow: true }],
        [{ contextOverflow: true }],
      );
      const o = await post('/v1/chat/completions', openai);
      expect(o.status).toBe(400);
      expect(await o.json()).toMatchObject({
        error: {
          code: 'context_length_exceeded',
          type: 'invalid_request_error',
          message: expect.stringMatching(/maximum context length is 32768 tokens/),
        },
      });
      const a = await post('/v1/messages', { stream: true });
      expect(a.status).toBe(400);
      expect(await a.json()).toMatchObject({
        type: 'error',
        error: {
          type: 'invalid_request_error',
          message: expect.stringMatching(/^prompt is too long: \d+ tokens > 32768 maximum$/),
        },
      });
      const l = await post('/api/chat', { model: 'x' });
      expect(l.status).toBe(400);
      expect(((await l.json()) as { error: string }).error).toMatch(/exceeds the context length/);
      const g = await post('/v1beta/models/g:streamGenerateContent?alt=sse', {});
      expect(g.status).toBe(400);
      expect(await g.json()).toMatchObject({
        error: {
          code: 400,
          status: 'INVALID_ARGUMENT',
          message: expect.stringMatching(/input token count .* exceeds the maximum/),
        },
      });
    });

    it('a window: prompts over it are refused with the provider’s error naming the count; usage reports the count; respond() scripts by request', async () => {
      const w = await startMockLlm({
        window: 300,
        respond: (b) => (JSON.stringify(b).includes('summarize') ? [{ text: 'a summary' }] : undefined),
      });
      try {
        const send = (path: string, body: unknown): Promise<Response> =>
          fetch(w.url + path, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
        const long = 'word '.repeat(400);
        const o = await send('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: long }] });
        expect(o.status).toBe(400);
        expect(((await o.json()) as { error: { message: string } }).error.message).toMatch(
          /maximum context length is 300 tokens\. However, your messages resulted in 40\d tokens/,
        );
        const a = await send('/v1/messages', {
          model: 'm',
          max_tokens: 100,
          messages: [{ role: 'user', content: 'word '.repeat(250) }],
        });
        expect(((await a.json()) as { error: { message: string } }).error.message).toMatch(
          /^prompt is too long: 25\d tokens > 300 maximum$/,
        );
        w.script([{ text: 'scripted' }]);
        const ok = (await (
          await send('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'please summarize' }] })
        ).json()) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
        expect(ok.choices[0].message.content).toBe('a summary');
        expect(ok.usage.prompt_tokens).toBeLessThan(10);
        expect(w.pending()).toBe(1);
      } finally {
        await w.close();
      }
    });

    it('cut stream: the connection drops after n chunks, without [DONE] or message_stop', async () => {
      mock.script(
        [{ text: 'a b c d e f' }, { cutAfterChunks: 3 }],
        [{ text: 'a b c d e f' }, { cutAfterChunks: 4 }],
        [{ text: 'a b c d' }, { cutAfterChunks: 2 }],
      );
      const o = await readAll(await post('/v1/chat/completions', openai));
      expect(o.dropped).toBe(true);
      const oe = parseSse(o.text);
      expect(oe).toHaveLength(3);
      expect(oe.some((e) => e.data === '[DONE]')).toBe(false);

      const a = await readAll(await post('/v1/messages', { stream: true }));
      expect(a.dropped).toBe(true);
      expect(parseSse(a.text).map((e) => e.event)).toEqual([
        'message_start',
        'content_block_start',
        'ping',
        'content_block_delta',
      ]);

      const l = await readAll(await post('/api/chat', { model: 'x' }));
      expect(l.dropped).toBe(true);
      const lines = l.text
        .trim()
        .split('\n')
        .map((x) => JSON.parse(x) as { done: boolean });
      expect(lines.map((x) => x.done)).toEqual([false, false]);
    });

    it('slow stream: delayMs before each chunk', async () => {
      mock.script([{ text: 'a b c' }, { delayMs: 60 }]);
      const t0 = performance.now();
      const res = await post('/v1/chat/completions', openai);
      const reader = res.body!.getReader();
      const dec = new TextDecoder();
      const arrivals: number[] = [];
      let text = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += dec.decode(value, { stream: true });
        arrivals.push(performance.now() - t0);
      }
      // role chunk, 3 text chunks, finish chunk, usage chunk, [DONE]: 7 chunks of 60 ms each.
      expect(parseSse(text)).toHaveLength(7);
      expect(arrivals.at(-1)!).toBeGreaterThanOrEqual(7 * 60 - 15);
      expect(arrivals.length).toBeGreaterThanOrEqual(4); // they arrive spread out, not in one piece
    });
  });

  describe('more faults', () => {
    const openai = { model: 'm', stream: true, stream_options: { include_usage: true }, messages: [] };

    it('retry-after-ms and an HTTP-date Retry-After are sent as given', async () => {
      const date = 'Wed, 21 Oct 2026 07:28:00 GMT';
      mock.script([{ status: 429, retryAfterMs: 1500 }], [{ status: 429, retryAfter: date }]);
      const r1 = await post('/v1/chat/completions', openai);
      expect(r1.headers.get('retry-after-ms')).toBe('1500');
      expect(r1.headers.get('retry-after')).toBeNull();
      const r2 = await post('/v1/chat/completions', openai);
      expect(r2.headers.get('retry-after')).toBe(date);
    });

    it('tool unsupported: each provider’s refusal', async () => {
      mock.script(
        [{ toolUnsupported: true }],
        [{ toolUnsupported: true }],
        [{ toolUnsupported: true }],
        [{ toolUnsupported: true }],
      );
      const o = await post('/v1/chat/completions', { ...openai, model: 'gemma' });
      expect(o.status).toBe(400);
      expect(await o.json()).toMatchObject({
        error: { message: 'registry.ollama.ai/library/gemma:latest does not support tools' },
      });
      const a = await post('/v1/messages', { model: 'c', stream: true });
      expect(a.status).toBe(400);
      expect(await a.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
      const l = await post('/api/chat', { model: 'gemma' });
      expect(l.status).toBe(400);
      expect(await l.json()).toEqual({ error: 'registry.ollama.ai/library/gemma:latest does not support tools' });
      const g = await post('/v1beta/models/gemma-3:streamGenerateContent?alt=sse', {});
      expect(g.status).toBe(400);
      expect(await g.json()).toMatchObject({
        error: { status: 'INVALID_ARGUMENT', message: 'Function calling is not enabled for models/gemma-3' },
      });
    });

    it('an error event inside a 200 stream, after n chunks, in each provider’s framing', async () => {
      const turn = [{ text: 'a b c d e f' }, { streamError: 'boom', afterChunks: 2 }];
      mock.script(turn, turn, turn, turn);
      const o = await readAll(await post('/v1/chat/completions', openai));
      expect(o.dropped).toBe(false);
      const oe = parseSse(o.text);
      expect(oe).toHaveLength(3);
      expect(json(oe[2]!)).toEqual({ error: { message: 'boom', type: 'server_error', param: null, code: null } });

      const a = parseSse((await readAll(await post('/v1/messages', { stream: true }))).text);
      expect(a.map((e) => e.event)).toEqual(['message_start', 'content_block_start', 'error']);
      expect(json(a[2]!)).toEqual({ type: 'error', error: { type: 'overloaded_error', message: 'boom' } });

      const l = (await readAll(await post('/api/chat', { model: 'x' }))).text.trim().split('\n');
      expect(l).toHaveLength(3);
      expect(JSON.parse(l[2]!)).toEqual({ error: 'boom' });

      const g = parseSse((await readAll(await post('/v1beta/models/g:streamGenerateContent?alt=sse', {}))).text);
      expect(json(g[2]!)).toEqual({ error: { code: 500, message: 'boom', status: 'INTERNAL' } });
    });

    it('reports an OpenRouter-style cost in the usage chunk', async () => {
      mock.script([{ text: 'x' }, { usage: { input: 5, output: 1, cost: 0.002 } }]);
      const chunks = parseSse((await readAll(await post('/v1/chat/completions', openai))).text)
        .slice(0, -1)
        .map(json);
      expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 5, cost: 0.002 });
    });
  });

  it('answers GET /v1/models in Anthropic’s shape when anthropic-version is sent', async () => {
    const body = (await (
      await fetch(mock.url + '/v1/models', { headers: { 'anthropic-version': '2023-06-01' } })
    ).json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(body.object).toBeUndefined();
    expect(body).toMatchObject({ has_more: false, first_id: 'mock-model', last_id: 'mock-model-large' });
    expect(body.data[0]).toEqual({
      type: 'model',
      id: 'mock-model',
      display_name: 'mock-model',
      created_at: '2025-01-01T00:00:00Z',
    });
  });

  describe('GitHub Copilot', () => {
    it('exchanges a GitHub token for a Copilot token whose endpoints.api points back at the mock', async () => {
      expect((await fetch(mock.url + '/copilot_internal/v2/token')).status).toBe(401);
      const res = await fetch(mock.url + '/copilot_internal/v2/token', { headers: { authorization: 'token gho_abc' } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        token: string;
        expires_at: number;
        refresh_in: number;
        endpoints: { api: string };
      };
      expect(body.endpoints.api).toBe(mock.url);
      expect(body.expires_at).toBeGreaterThan(Date.now() / 1000 + 1700);
      expect(mock.copilotTokens).toEqual([body.token]);
      expect(mock.requests[1]!.headers.authorization).toBe('[redacted]');
    });

    it('serves chat only to a valid, unexpired Copilot token', async () => {
      const chat = (auth: string): Promise<Response> =>
        fetch(mock.url + '/chat/completions', {
          method: 'POST',
          headers: { authorization: auth, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', stream: true, messages: [] }),
        });
      expect((await chat('Bearer made-up')).status).toBe(401);
      const { token } = (await (
        await fetch(mock.url + '/copilot_internal/v2/token', { headers: { authorization: 'token gho_abc' } })
      ).json()) as { token: string };
      mock.script([{ text: 'hi there' }]);
      const ok = await chat(`Bearer ${token}`);
      expect(ok.status).toBe(200);
      const chunks = parseSse((await readAll(ok)).text)
        .slice(0, -1)
        .map(json);
      // Azure's filter-only chunk comes first.
      expect(chunks[0]).toMatchObject({ choices: [], prompt_filter_results: [{ prompt_index: 0 }] });
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('hi there');
      const models = (await (
        await fetch(mock.url + '/models', { headers: { authorization: `Bearer ${token}` } })
      ).json()) as { data: { id: string; capabilities: { limits: { max_context_window_tokens: number } } }[] };
      expect(models.data[0]!.capabilities.limits.max_context_window_tokens).toBe(32768);

      await mock.close();
      mock = await startMockLlm({ copilotTokenTtlSec: -1 });
      const { token: stale } = (await (
        await fetch(mock.url + '/copilot_internal/v2/token', { headers: { authorization: 'token gho_abc' } })
      ).json()) as { token: string };
      expect((await chat(`Bearer ${stale}`)).status).toBe(401);
    });
  });

  it('records every request with credentials redacted', async () => {
    await post(
      '/v1/chat/completions',
      { model: 'm', messages: [{ role: 'user', content: 'hello' }] },
      { authorization: 'Bearer sk-secret' },
    );
    await post(
      '/v1/messages',
      { model: 'c', stream: true },
      { 'x-api-key': 'sk-ant-secret', 'anthropic-version': '2023-06-01' },
    );
    await readAll(await post('/v1beta/models/g:streamGenerateContent?alt=sse&key=AIzaSecret', { contents: [] }));
    await fetch(mock.url + '/api/tags');
    expect(mock.requests.map((r) => [r.method, r.protocol, r.path])).toEqual([
      ['POST', 'openai', '/v1/chat/completions'],
      ['POST', 'anthropic', '/v1/messages'],
      ['POST', 'gemini', '/v1beta/models/g:streamGenerateContent?alt=sse&key=[redacted]'],
      ['GET', 'ollama', '/api/tags'],
    ]);
    const [o, a] = mock.requests;
    expect(o!.headers.authorization).toBe('[redacted]');
    expect(o!.body).toEqual({ model: 'm', messages: [{ role: 'user', content: 'hello' }] });
    expect(a!.headers['x-api-key']).toBe('[redacted]');
    expect(a!.headers['anthropic-version']).toBe('2023-06-01');
    expect(JSON.stringify(mock.requests)).not.toMatch(/secret/i);
    expect(mock.requests[3]!.body).toBeUndefined();
  });

  it('answers unknown routes with 404', async () => {
    expect((await fetch(mock.url + '/nope')).status).toBe(404);
  });
});
