/** Ollama on the wire: POST /api/chat (NDJSON; or one JSON), POST /api/show, GET /api/tags. */
import { splitText, textOf, tools, type Plan, type ToolCallSpec } from './script.js';
import { modelOf, type Dialect, type ErrorDialect, type Frame, type Ids } from './wire.js';

const ndjson = (v: unknown): Frame => `${JSON.stringify(v)}\n`;

function ollamaFinal(p: Plan, body: Record<string, unknown>): Record<string, unknown> {
  return {
    model: modelOf(body),
    created_at: new Date().toISOString(),
    message: { role: 'assistant', content: '' },
    done: true,
    done_reason: 'stop',
    total_duration: 1_000_000,
    load_duration: 100_000,
    prompt_eval_count: p.usage.input,
    prompt_eval_duration: 200_000,
    eval_count: p.usage.output,
    eval_duration: 700_000,
  };
}

const ollamaCalls = (calls: ToolCallSpec[], ids: Ids): unknown[] =>
  calls.map((c, index) => ({ id: c.id ?? ids.next('call_'), function: { index, name: c.name, arguments: c.args } }));

function ollamaStream(p: Plan, body: Record<string, unknown>, ids: Ids): Frame[] {
  const line = (message: Record<string, unknown>): Frame =>
    ndjson({
      model: modelOf(body),
      created_at: new Date().toISOString(),
      message: { role: 'assistant', content: '', ...message },
      done: false,
    });
  const out: Frame[] = [];
  for (const c of p.content) {
    if (c.kind === 'reasoning') for (const thinking of splitText(c.text)) out.push(line({ thinking }));
    else if (c.kind === 'text') for (const content of splitText(c.text)) out.push(line({ content }));
    // Ollama sends tool calls whole (arguments as an object), all calls of a step in one line.
    else out.push(line({ tool_calls: ollamaCalls(c.calls, ids) }));
  }
  out.push(ndjson(ollamaFinal(p, body)));
  return out;
}

function ollamaJson(p: Plan, body: Record<string, unknown>, ids: Ids): unknown {
  const calls = tools(p);
  const reasoning = textOf(p, 'reasoning');
  const final = ollamaFinal(p, body);
  return {
    ...final,
    message: {
      role: 'assistant',
      content: textOf(p, 'text'),
      ...(reasoning ? { thinking: reasoning } : {}),
      ...(calls.length ? { tool_calls: ollamaCalls(calls, ids) } : {}),
    },
  };
}

const ollamaErrors: ErrorDialect = {
  error: (status, message) => ({
    error:
      message ??
      (status === 429 ? 'too many requests' : status >= 500 ? 'an internal error occurred' : `mock error ${status}`),
  }),
  overflow: (limit, actual = limit + 1000) => ({
    error: `the input length exceeds the context length (${actual} > ${limit})`,
  }),
  toolUnsupported: (model) => ({ error: `registry.ollama.ai/library/${model}:latest does not support tools` }),
  streamError: (message) => ndjson({ error: message }),
  contentType: 'application/x-ndjson',
};

export const ollamaDialect = (body: Record<string, unknown>, ids: Ids): Dialect => ({
  ...ollamaErrors,
  stream: (p) => ollamaStream(p, body, ids),
  json: (p) => ollamaJson(p, body, ids),
});

/** What Ollama says of every served model: an 8B llama in GGUF, Q4_K_M. */
const modelDetails = {
  parent_model: '',
  format: 'gguf',
  family: 'llama',
  families: ['llama'],
  parameter_size: '8.0B',
  quantization_level: 'Q4_K_M',
};

/** POST /api/show for a served model. */
export const ollamaShow = (name: string, contextLength: number): unknown => ({
  license: '',
  modelfile: `FROM ${name}\n`,
  parameters: '',
  template: '{{ .Prompt }}',
  details: modelDetails,
  model_info: {
    'general.architecture': 'llama',
    'general.parameter_count': 8_000_000_000,
    'llama.context_length': contextLength,
    'llama.embedding_length': 4096,
  },
  capabilities: ['completion', 'tools', 'thinking'],
  modified_at: '2025-01-01T00:00:00Z',
});

/** GET /api/tags. */
export const ollamaTags = (models: string[]): unknown => ({
  models: models.map((name) => ({
    name,
    model: name,
    modified_at: '2025-01-01T00:00:00Z',
    size: 4_920_000_000,
    digest: 'sha256:' + '0'.repeat(64),
    details: modelDetails,
  })),
});
