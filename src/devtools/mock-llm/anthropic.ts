/**
 * Anthropic messages on the wire: POST /v1/messages (SSE with `event:` lines; or one JSON). Anthropic's
 * input_tokens excludes the cache: it is input - cached - cacheWrite.
 */
import { splitArgs, splitText, tools, type Plan } from './script.js';
import { modelOf, signatureOf, type Dialect, type ErrorDialect, type Frame, type Ids } from './wire.js';

const sseEvent = (event: string, data: Record<string, unknown>): Frame =>
  `event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`;

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
      block(
        { type: 'text', text: '' },
        splitText(c.text).map((text) => ({ type: 'text_delta', text })),
      );
    else
      for (const call of c.calls) {
        usedTools = true;
        block(
          { type: 'tool_use', id: call.id ?? ids.next('toolu_mock'), name: call.name, input: {} },
          splitArgs(JSON.stringify(call.args)).map((partial_json) => ({ type: 'input_json_delta', partial_json })),
        );
      }
  }
  out.push(
    sseEvent('message_delta', {
      delta: { stop_reason: usedTools ? 'tool_use' : 'end_turn', stop_sequence: null },
      usage: { output_tokens: p.usage.output },
    }),
  );
  out.push(sseEvent('message_stop', {}));
  return out;
}

function anthropicJson(p: Plan, body: Record<string, unknown>, ids: Ids): unknown {
  const content: unknown[] = [];
  for (const c of p.content) {
    if (c.kind === 'reasoning') content.push({ type: 'thinking', thinking: c.text, signature: signatureOf(c.text) });
    else if (c.kind === 'text') content.push({ type: 'text', text: c.text });
    else
      for (const call of c.calls)
        content.push({ type: 'tool_use', id: call.id ?? ids.next('toolu_mock'), name: call.name, input: call.args });
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

/** Anthropic's error envelope; error types as the API documents them per status. */
function anthropicError(status: number, message?: string): unknown {
  const type =
    status === 400
      ? 'invalid_request_error'
      : status === 401
        ? 'authentication_error'
        : status === 403
          ? 'permission_error'
          : status === 404
            ? 'not_found_error'
            : status === 413
              ? 'request_too_large'
              : status === 429
                ? 'rate_limit_error'
                : status === 529
                  ? 'overloaded_error'
                  : 'api_error';
  const text =
    message ??
    (status === 429
      ? 'Number of request tokens has exceeded your per-minute rate limit'
      : status === 529
        ? 'Overloaded'
        : status >= 500
          ? 'Internal server error'
          : `mock error ${status}`);
  return { type: 'error', error: { type, message: text } };
}

const anthropicErrors: ErrorDialect = {
  error: anthropicError,
  overflow: (limit, actual = limit + 1000) => ({
    type: 'error',
    error: { type: 'invalid_request_error', message: `prompt is too long: ${actual} tokens > ${limit} maximum` },
  }),
  /**
   * Every Claude model supports tools, so the real API has no such error; this is the shape Anthropic-compatible
   * servers use (an invalid_request_error naming tools), so that the backend's classification is exercised.
   */
  toolUnsupported: (model) => ({
    type: 'error',
    error: { type: 'invalid_request_error', message: `tools: model ${model} does not support tools` },
  }),
  streamError: (message) => sseEvent('error', { error: { type: 'overloaded_error', message } }),
  contentType: 'text/event-stream; charset=utf-8',
};

export const anthropicDialect = (body: Record<string, unknown>, ids: Ids): Dialect => ({
  ...anthropicErrors,
  stream: (p) => anthropicStream(p, body, ids),
  json: (p) => anthropicJson(p, body, ids),
});

/** GET /v1/models in Anthropic's shape (the request carries `anthropic-version`). */
export const anthropicModels = (models: string[]): unknown => ({
  data: models.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })),
  has_more: false,
  first_id: models[0] ?? null,
  last_id: models.at(-1) ?? null,
});
