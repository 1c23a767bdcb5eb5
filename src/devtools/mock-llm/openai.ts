/** OpenAI chat completions on the wire: POST /v1/chat/completions (SSE `data:` chunks, `data: [DONE]`; or one JSON), GET /v1/models. */
import { reasoningTokens, splitArgs, splitText, textOf, tools, type Plan } from './script.js';
import { modelOf, nowSec, sseData, type Dialect, type ErrorDialect, type Frame, type Ids } from './wire.js';

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
  const base = {
    id: ids.next('chatcmpl-'),
    object: 'chat.completion.chunk',
    created: nowSec(),
    model: modelOf(body),
    system_fingerprint: 'fp_mock',
  };
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
        out.push(
          chunk({ tool_calls: [{ index, id, type: 'function', function: { name: call.name, arguments: '' } }] }),
        );
        for (const piece of splitArgs(JSON.stringify(call.args)))
          out.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
      }
  }
  out.push(chunk({}, toolIndex > 0 ? 'tool_calls' : 'stop'));
  const so = body.stream_options as { include_usage?: boolean } | undefined;
  if (so?.include_usage) out.push(sseData({ ...base, choices: [], usage: openaiUsage(p) }));
  out.push(sseData('[DONE]'));
  return out;
}

function openaiJson(p: Plan, body: Record<string, unknown>, ids: Ids, reasoningField: string): unknown {
  const calls = tools(p).map((c) => ({
    id: c.id ?? ids.next('call_'),
    type: 'function',
    function: { name: c.name, arguments: JSON.stringify(c.args) },
  }));
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
    return {
      error: {
        message: message ?? 'Rate limit reached for requests. Please try again later.',
        type: 'requests',
        param: null,
        code: 'rate_limit_exceeded',
      },
    };
  if (status >= 500)
    return {
      error: {
        message: message ?? 'The server had an error while processing your request. Sorry about that!',
        type: 'server_error',
        param: null,
        code: null,
      },
    };
  return {
    error: { message: message ?? `mock error ${status}`, type: 'invalid_request_error', param: null, code: null },
  };
}

const openaiErrors: ErrorDialect = {
  error: openaiError,
  overflow: (limit, actual = limit + 1000) => ({
    error: {
      message: `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${actual} tokens. Please reduce the length of the messages.`,
      type: 'invalid_request_error',
      param: 'messages',
      code: 'context_length_exceeded',
    },
  }),
  /** What Ollama's OpenAI-compatible endpoint answers for a model without tool support. */
  toolUnsupported: (model) => ({
    error: {
      message: `registry.ollama.ai/library/${model}:latest does not support tools`,
      type: 'api_error',
      param: null,
      code: null,
    },
  }),
  streamError: (message) => sseData({ error: { message, type: 'server_error', param: null, code: null } }),
  contentType: 'text/event-stream; charset=utf-8',
};

export const openaiDialect = (body: Record<string, unknown>, ids: Ids, reasoningField: string): Dialect => ({
  ...openaiErrors,
  stream: (p) => openaiStream(p, body, ids, reasoningField),
  json: (p) => openaiJson(p, body, ids, reasoningField),
});

export const openaiModels = (models: string[]): unknown => ({
  object: 'list',
  data: models.map((id) => ({ id, object: 'model', created: 1700000000, owned_by: 'mock' })),
});
