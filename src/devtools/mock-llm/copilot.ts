/**
 * GitHub Copilot on the wire: GET /copilot_internal/v2/token exchanges a GitHub token for a short-lived Copilot token
 * (`endpoints.api` points back at the server); POST /chat/completions and GET /models speak the OpenAI dialect and
 * take only an issued token as Bearer.
 */
import { openaiDialect } from './openai.js';
import { nowSec, sseData, type Dialect, type Frame, type Ids } from './wire.js';

/**
 * Copilot (served from Azure OpenAI) opens each stream with a chunk that has no choices, only the prompt's content
 * filter results.
 */
const azureFilterChunk = (): Frame =>
  sseData({
    choices: [],
    created: 0,
    id: '',
    prompt_filter_results: [
      {
        prompt_index: 0,
        content_filter_results: {
          hate: { filtered: false, severity: 'safe' },
          jailbreak: { filtered: false, detected: false },
          self_harm: { filtered: false, severity: 'safe' },
          sexual: { filtered: false, severity: 'safe' },
          violence: { filtered: false, severity: 'safe' },
        },
      },
    ],
  });

export const copilotDialect = (body: Record<string, unknown>, ids: Ids, reasoningField: string): Dialect => {
  const d = openaiDialect(body, ids, reasoningField);
  return { ...d, stream: (p) => [azureFilterChunk(), ...d.stream(p)] };
};

/** The token endpoint's answer: a new token valid `ttlSec`, and the endpoints at `origin` (this server). */
export function copilotToken(n: number, ttlSec: number, origin: string): { token: string; body: unknown } {
  const expiresAt = nowSec() + ttlSec;
  const token = `tid=mock${n};exp=${expiresAt};sku=free_limited_copilot;8kp=1:mock`;
  return {
    token,
    body: {
      token,
      expires_at: expiresAt,
      refresh_in: Math.max(1, ttlSec - 300),
      endpoints: { api: `http://${origin}`, proxy: `http://${origin}`, telemetry: `http://${origin}/telemetry` },
      chat_enabled: true,
      sku: 'free_limited_copilot',
    },
  };
}

/** Whether a Bearer is an issued token that has not expired. */
export function copilotAccepts(bearer: string | undefined, issued: string[]): boolean {
  const exp = Number(/(?:^|;)exp=(\d+)/.exec(bearer ?? '')?.[1] ?? 0);
  return bearer !== undefined && issued.includes(bearer) && exp > nowSec();
}

/** GET /models. */
export const copilotModels = (models: string[], contextLength: number): unknown => ({
  object: 'list',
  data: models.map((id) => ({
    id,
    object: 'model',
    name: id,
    vendor: 'mock',
    capabilities: {
      type: 'chat',
      family: id,
      limits: { max_context_window_tokens: contextLength, max_output_tokens: 8192 },
      supports: { streaming: true, tool_calls: true, parallel_tool_calls: true },
    },
  })),
});
