/** Gemini on the wire: POST /v1beta/models/{model}:streamGenerateContent?alt=sse (SSE), :generateContent, GET /v1beta/models. */
import { reasoningTokens, splitText, type Plan } from './script.js';
import { signatureOf, type Dialect, type ErrorDialect, type Frame, type Ids } from './wire.js';

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
    if (c.kind === 'reasoning')
      for (const text of split ? splitText(c.text) : [c.text]) groups.push([{ text, thought: true }]);
    else if (c.kind === 'text') for (const text of split ? splitText(c.text) : [c.text]) groups.push([{ text }]);
    // Gemini sends function calls whole; parallel calls are parts of one chunk.
    // Gemini 3 signs the first function call of a step; the signature must be sent back with the call.
    else
      groups.push(
        c.calls.map((call, i) => ({
          functionCall: { name: call.name, args: call.args },
          ...(i === 0 ? { thoughtSignature: signatureOf(call.name) } : {}),
        })),
      );
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
    status === 400
      ? 'INVALID_ARGUMENT'
      : status === 403
        ? 'PERMISSION_DENIED'
        : status === 404
          ? 'NOT_FOUND'
          : status === 429
            ? 'RESOURCE_EXHAUSTED'
            : status === 503
              ? 'UNAVAILABLE'
              : status === 504
                ? 'DEADLINE_EXCEEDED'
                : 'INTERNAL';
  const text =
    message ??
    (status === 429
      ? 'Resource has been exhausted (e.g. check quota).'
      : status >= 500
        ? 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting'
        : `mock error ${status}`);
  const details =
    retryAfter !== undefined
      ? [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${retryAfter}s` }]
      : undefined;
  return { error: { code: status, message: text, status: s, ...(details ? { details } : {}) } };
}

const geminiErrors: ErrorDialect = {
  error: (status, message, retryAfter) =>
    geminiError(status, message, typeof retryAfter === 'number' ? retryAfter : undefined),
  overflow: (limit, actual = limit + 1000) => ({
    error: {
      code: 400,
      message: `The input token count (${actual}) exceeds the maximum number of tokens allowed (${limit}).`,
      status: 'INVALID_ARGUMENT',
    },
  }),
  toolUnsupported: (model) => ({
    error: { code: 400, message: `Function calling is not enabled for models/${model}`, status: 'INVALID_ARGUMENT' },
  }),
  streamError: (message) => sseDataCrlf({ error: { code: 500, message, status: 'INTERNAL' } }),
  contentType: 'text/event-stream',
};

export const geminiDialect = (model: string, ids: Ids): Dialect => ({
  ...geminiErrors,
  stream: (p) => geminiStream(p, model, ids),
  json: (p) => geminiJson(p, model, ids),
});

/** GET /v1beta/models. */
export const geminiModels = (models: string[], contextLength: number): unknown => ({
  models: models.map((id) => ({
    name: `models/${id}`,
    version: '001',
    displayName: id,
    inputTokenLimit: contextLength,
    outputTokenLimit: 8192,
    supportedGenerationMethods: ['generateContent', 'countTokens'],
  })),
});
