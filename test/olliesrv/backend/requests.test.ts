/**
 * What each backend puts on the wire, as the mock recorded it: the system prompt, tool schemas, generation
 * parameters, thinking budget, cache_control, history replay (tool calls, results, signatures), Copilot's headers.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startMockLlm, type MockLlm } from '../../../src/devtools/mock-llm/server.js';
import type { Message } from '../../../src/olliesrv/backend/types.js';
import { backendFor, chatRequests, collect, request, SYSTEM, TOOLS } from './helpers.js';

/* eslint-disable @typescript-eslint/no-explicit-any -- recorded request bodies are arbitrary JSON */

const PARAMS = { temperature: 0.3, topP: 0.9, topK: 40, maxTokens: 500, seed: 7, stop: ['END'] };

/** A conversation with a finished tool round: assistant calls two tools, both results come back. */
const HISTORY: Message[] = [
  { role: 'system', content: SYSTEM },
  { role: 'user', content: 'Look at a.txt please.' },
  {
    role: 'assistant',
    content: 'Reading.',
    reasoning: 'I should read it.',
    reasoningSignature: 'sig-reasoning-1',
    toolCalls: [
      { id: 'call_1', name: 'read', args: '{"path":"a.txt"}', signature: 'sig-call-1' },
      { id: 'call_2', name: 'ls', args: '{"dir":"."}' },
    ],
  },
  { role: 'tool', toolCallId: 'call_1', name: 'read', content: 'hello' },
  { role: 'tool', toolCallId: 'call_2', name: 'ls', content: 'no such dir', isError: true },
];

let mock: MockLlm;
beforeEach(async () => {
  mock = await startMockLlm();
});
afterEach(async () => {
  await mock.close();
});

async function send(
  type: Parameters<typeof backendFor>[0],
  req = request({ params: PARAMS }),
  over = {},
): Promise<any> {
  const r = await collect(backendFor(type, mock, over).stream(req));
  expect(r.error).toBeUndefined();
  const reqs = chatRequests(mock);
  return reqs.at(-1);
}

describe('OpenAI-compatible request', () => {
  it('carries the model, system prompt, tool schemas and every parameter, with usage requested', async () => {
    const rec = await send('openai', request({ params: { ...PARAMS, reasoningEffort: 'high' } }));
    expect(rec.path).toBe('/v1/chat/completions');
    expect(rec.headers.authorization).toBe('[redacted]');
    const b = rec.body;
    expect(b).toMatchObject({
      model: 'mock-model',
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.3,
      top_p: 0.9,
      top_k: 40,
      max_tokens: 500,
      seed: 7,
      stop: ['END'],
      reasoning_effort: 'high',
      tool_choice: 'auto',
    });
    expect(b.messages[0]).toEqual({ role: 'system', content: SYSTEM });
    expect(b.messages[1]).toMatchObject({ role: 'user' });
    expect(b.tools).toEqual(
      TOOLS.map((t) => ({
        type: 'function',
        function: { name: t.name, description: t.description, parameters: t.parameters },
      })),
    );
  });

  it('replays tool calls and results; a request-scoped model overrides the default', async () => {
    const rec = await send('openai', request({ model: 'mock-model-large' }, HISTORY));
    const b = rec.body;
    expect(b.model).toBe('mock-model-large');
    expect(b.messages[2]).toMatchObject({
      role: 'assistant',
      content: 'Reading.',
      reasoning_content: 'I should read it.',
      tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'read', arguments: '{"path":"a.txt"}' } },
        { id: 'call_2', type: 'function', function: { name: 'ls', arguments: '{"dir":"."}' } },
      ],
    });
    expect(b.messages.slice(3)).toEqual([
      { role: 'tool', tool_call_id: 'call_1', content: 'hello' },
      { role: 'tool', tool_call_id: 'call_2', content: 'no such dir' },
    ]);
  });

  it('sends configured extra headers', async () => {
    const rec = await send('openai', request(), { headers: { 'X-Title': 'Ollie' } });
    expect(rec.headers['x-title']).toBe('Ollie');
  });
});

describe('Anthropic request', () => {
  it('carries the system prompt with cache_control, tools, parameters, and cache_control on the last two messages', async () => {
    const msgs: Message[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'first' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'second' },
    ];
    const rec = await send('anthropic', request({ params: PARAMS }, msgs));
    expect(rec.path).toBe('/v1/messages');
    expect(rec.headers['x-api-key']).toBe('[redacted]');
    expect(rec.headers['anthropic-version']).toBe('2023-06-01');
    const b = rec.body;
    expect(b).toMatchObject({
      model: 'mock-model',
      stream: true,
      max_tokens: 500,
      temperature: 0.3,
      top_p: 0.9,
      top_k: 40,
      stop_sequences: ['END'],
    });
    expect(b.system).toEqual([{ type: 'text', text: SYSTEM, cache_control: { type: 'ephemeral' } }]);
    expect(b.tools).toEqual(
      TOOLS.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters })),
    );
    expect(b.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'first' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'ok', cache_control: { type: 'ephemeral' } }] },
      { role: 'user', content: [{ type: 'text', text: 'second', cache_control: { type: 'ephemeral' } }] },
    ]);
    expect(JSON.stringify(b).match(/cache_control/g)).toHaveLength(3);
  });

  it('turns on extended thinking with the budget (max_tokens raised by it)', async () => {
    const rec = await send('anthropic', request({ params: { maxTokens: 1000, thinkingBudget: 4096 } }));
    expect(rec.body.thinking).toEqual({ type: 'enabled', budget_tokens: 4096 });
    expect(rec.body.max_tokens).toBe(1000 + 4096);
  });

  it('replays thinking with its signature, tool_use and tool_result (errors flagged)', async () => {
    const rec = await send('anthropic', request({ params: { thinkingBudget: 2048 } }, HISTORY));
    const [, assistant, results] = rec.body.messages;
    expect(assistant.role).toBe('assistant');
    expect(assistant.content[0]).toEqual({
      type: 'thinking',
      thinking: 'I should read it.',
      signature: 'sig-reasoning-1',
    });
    expect(assistant.content[1]).toMatchObject({ type: 'text', text: 'Reading.' });
    expect(assistant.content.slice(2)).toMatchObject([
      { type: 'tool_use', id: 'call_1', name: 'read', input: { path: 'a.txt' } },
      { type: 'tool_use', id: 'call_2', name: 'ls', input: { dir: '.' } },
    ]);
    expect(results.role).toBe('user');
    expect(results.content).toMatchObject([
      { type: 'tool_result', tool_use_id: 'call_1', content: 'hello' },
      { type: 'tool_result', tool_use_id: 'call_2', content: 'no such dir', is_error: true },
    ]);
    // The tool results are the last message: the cache breakpoint sits on its last block.
    expect(results.content[1].cache_control).toEqual({ type: 'ephemeral' });
  });
});

describe('Ollama request', () => {
  it('puts parameters and num_ctx in options (where Ollama reads them), with tools and the system prompt', async () => {
    const rec = await send('ollama');
    expect(rec.path).toBe('/api/chat');
    const b = rec.body;
    expect(b).toMatchObject({ model: 'mock-model', stream: true, think: false });
    expect(b.options).toEqual({
      num_ctx: 32768,
      temperature: 0.3,
      top_p: 0.9,
      top_k: 40,
      seed: 7,
      stop: ['END'],
      num_predict: 500,
    });
    expect(b.messages[0]).toEqual({ role: 'system', content: SYSTEM });
    expect(b.tools).toEqual(
      TOOLS.map((t) => ({
        type: 'function',
        function: { name: t.name, description: t.description, parameters: t.parameters },
      })),
    );
    // The context comes from /api/show, asked once per backend.
    const backend = backendFor('ollama', mock);
    await collect(backend.stream(request()));
    await collect(backend.stream(request()));
    expect(mock.requests.filter((r) => r.path === '/api/show')).toHaveLength(2);
  });

  it('asks for thinking when a budget is set; a configured context overrides num_ctx', async () => {
    const rec = await send('ollama', request({ params: { thinkingBudget: 1 } }), { context: 8192 });
    expect(rec.body.think).toBe(true);
    expect(rec.body.options.num_ctx).toBe(8192);
    expect(mock.requests.filter((r) => r.path === '/api/show')).toHaveLength(0);
  });

  it('raises num_ctx for a request that would not fit, within the trained length, and warns once; past it, warns that the start will be cut', async () => {
    const backend = backendFor('ollama', mock, { context: 8192 });
    // ~15k tokens of varied words: over the configured 8192, under the 32768 the model was trained for.
    const big = (n: number): Message[] => [
      { role: 'user', content: Array.from({ length: n }, (_, i) => `word${i % 997} thing${i}`).join(' ') },
    ];
    const first = await collect(backend.stream(request({}, big(5000))));
    const warnings = (c: Awaited<ReturnType<typeof collect>>): string[] =>
      c.events.flatMap((e) => (e.type === 'warning' ? [e.message] : []));
    expect(warnings(first)).toEqual([
      expect.stringMatching(
        /a request of ~\d+ tokens \(with room for the reply\) does not fit num_ctx 8192; sending num_ctx \d+ \(mock-model supports 32768\)/,
      ),
    ]);
    const sent = chatRequests(mock).at(-1)!.body as { options: { num_ctx: number } };
    expect(sent.options.num_ctx % 4096).toBe(0);
    expect(sent.options.num_ctx).toBeGreaterThan(8192);
    expect(sent.options.num_ctx).toBeLessThanOrEqual(32768);
    expect(warnings(await collect(backend.stream(request({}, big(5000)))))).toEqual([]);
    const over = await collect(backend.stream(request({}, big(14000))));
    expect(warnings(over)).toEqual([
      expect.stringMatching(
        /does not fit mock-model's window of 32768 tokens: Ollama will drop the start of the prompt/,
      ),
    ]);
  });

  it('replays tool calls with object arguments and tool results', async () => {
    const rec = await send('ollama', request({}, HISTORY));
    const m = rec.body.messages;
    expect(m[2]).toMatchObject({
      role: 'assistant',
      content: 'Reading.',
      tool_calls: [
        { function: { name: 'read', arguments: { path: 'a.txt' } } },
        { function: { name: 'ls', arguments: { dir: '.' } } },
      ],
    });
    expect(m.slice(3).map((x: any) => [x.role, x.content])).toEqual([
      ['tool', 'hello'],
      ['tool', 'no such dir'],
    ]);
  });
});

describe('Gemini request', () => {
  it('carries systemInstruction, function declarations, generationConfig and the thinking budget', async () => {
    const rec = await send('gemini', request({ params: { ...PARAMS, thinkingBudget: 1024 } }));
    expect(rec.path).toBe('/v1beta/models/mock-model:streamGenerateContent?alt=sse');
    expect(rec.headers['x-goog-api-key']).toBe('[redacted]');
    const b = rec.body;
    expect(b.systemInstruction).toEqual({ parts: [{ text: SYSTEM }] });
    expect(b.tools[0].functionDeclarations.map((f: any) => [f.name, f.description])).toEqual(
      TOOLS.map((t) => [t.name, t.description]),
    );
    expect(b.tools[0].functionDeclarations[0].parameters).toMatchObject({
      type: 'object',
      properties: { path: { type: 'string' } },
      required: ['path'],
    });
    expect(b.generationConfig).toMatchObject({
      temperature: 0.3,
      topP: 0.9,
      topK: 40,
      maxOutputTokens: 500,
      seed: 7,
      stopSequences: ['END'],
      thinkingConfig: { thinkingBudget: 1024, includeThoughts: true },
    });
  });

  it('replays function calls with their thought signature, and the responses', async () => {
    const rec = await send('gemini', request({}, HISTORY));
    const contents = rec.body.contents;
    const model = contents.find((c: any) => c.role === 'model');
    const calls = model.parts.filter((p: any) => p.functionCall);
    expect(calls[0]).toMatchObject({
      functionCall: { name: 'read', args: { path: 'a.txt' } },
      thoughtSignature: 'sig-call-1',
    });
    expect(calls[1]).toMatchObject({ functionCall: { name: 'ls', args: { dir: '.' } } });
    const responses = contents.at(-1).parts.map((p: any) => p.functionResponse?.name);
    expect(responses).toEqual(['read', 'ls']);
  });
});

describe('Copilot request', () => {
  it('exchanges the GitHub token once, then chats with the Copilot token and Copilot’s headers', async () => {
    const b = backendFor('copilot', mock);
    for (let i = 0; i < 2; i++) expect((await collect(b.stream(request({ params: PARAMS })))).error).toBeUndefined();
    const tokenCalls = mock.requests.filter((r) => r.path === '/copilot_internal/v2/token');
    expect(tokenCalls).toHaveLength(1);
    expect(tokenCalls[0]!.method).toBe('GET');
    expect(mock.copilotTokens).toHaveLength(1);
    const chats = chatRequests(mock);
    expect(chats).toHaveLength(2);
    for (const c of chats) {
      expect(c.path).toBe('/chat/completions');
      expect(c.headers).toMatchObject({
        'editor-version': expect.stringMatching(/^vscode\//),
        'editor-plugin-version': expect.stringMatching(/^copilot-chat\//),
        'copilot-integration-id': 'vscode-chat',
        'openai-intent': 'conversation-edits',
        'x-initiator': 'user',
      });
      expect((c.body as any).messages[0]).toEqual({ role: 'system', content: SYSTEM });
      expect((c.body as any).temperature).toBe(0.3);
    }
    // A tool round is initiated by the agent, not the user.
    await collect(b.stream(request({}, HISTORY)));
    expect(chatRequests(mock).at(-1)!.headers['x-initiator']).toBe('agent');
  });

  it('exchanges again when the token is about to expire; config headers override the defaults', async () => {
    await mock.close();
    mock = await startMockLlm({ copilotTokenTtlSec: 30 });
    const b = backendFor('copilot', mock, { headers: { 'Editor-Version': 'Ollie/0.1' } });
    for (let i = 0; i < 2; i++) expect((await collect(b.stream(request()))).error).toBeUndefined();
    expect(mock.copilotTokens).toHaveLength(2);
    expect(chatRequests(mock)[0]!.headers['editor-version']).toBe('Ollie/0.1');
  });

  it('a cached token the chat endpoint refuses is exchanged again and the request resent once', async () => {
    const b = backendFor('copilot', mock);
    expect((await collect(b.stream(request()))).error).toBeUndefined();
    // Revoke every issued token: the mock then refuses the cached one.
    mock.copilotTokens.length = 0;
    mock.script([{ text: 'after refresh' }]);
    const r = await collect(b.stream(request()));
    expect(r.error).toBeUndefined();
    expect(r.text).toBe('after refresh');
    expect(mock.copilotTokens).toHaveLength(1);
    expect(chatRequests(mock)).toHaveLength(3);
    expect(mock.requests.filter((x) => x.path === '/copilot_internal/v2/token')).toHaveLength(2);
  });

  it('shares one exchange between concurrent requests; a refused GitHub token is a BackendError', async () => {
    const b = backendFor('copilot', mock);
    const rs = await Promise.all([
      collect(b.stream(request())),
      collect(b.stream(request())),
      collect(b.stream(request())),
    ]);
    for (const r of rs) expect(r.error).toBeUndefined();
    expect(mock.copilotTokens).toHaveLength(1);
    const noKey = backendFor('copilot', mock, { key: undefined });
    const r = await collect(noKey.stream(request()));
    expect((r.error as Error).message).toMatch(/no GitHub token/);
  });
});
