/**
 * OpenAI-compatible chat completions: OpenAI itself, OpenRouter, LM Studio, vLLM, llama.cpp, DeepSeek…
 *
 * Built on @ai-sdk/openai-compatible rather than @ai-sdk/openai: the latter ignores the `reasoning_content` /
 * `reasoning` deltas that compatible servers stream their thinking in. Request details the compatible provider does
 * not know are added per server: OpenAI's reasoning models refuse `max_tokens` (they take `max_completion_tokens`,
 * which all its chat models accept), OpenRouter reports the cost only when asked (`usage: {include: true}`).
 */
import { BaseBackend, perModel } from './base.js';
import { getJson, type LanguageModelV3, type LanguageModelV3CallOptions } from './sdk.js';
import type { ModelInfo, StreamRequest } from './types.js';

/** The provider name, which is also the providerOptions key the compatible provider reads. */
const PROVIDER = 'openaiCompatible';

export interface OpenAIEndpoint {
  baseURL: string;
  apiKey?: string;
  headers: Record<string, string>;
}

/** Context-window fields of the servers' model lists: OpenRouter, vLLM, LM Studio/others, Copilot. */
function contextOf(m: Record<string, unknown>): number | undefined {
  for (const k of ['context_length', 'max_model_len', 'max_context_length', 'context_window']) {
    const v = m[k];
    if (typeof v === 'number' && v > 0) return v;
  }
  const limits = (m.capabilities as { limits?: { max_context_window_tokens?: unknown } } | undefined)?.limits;
  if (typeof limits?.max_context_window_tokens === 'number') return limits.max_context_window_tokens;
  return undefined;
}

/** The provider package, imported once: an import() of a loaded module still costs ~10 µs, on every request here. */
let sdk: Promise<typeof import('@ai-sdk/openai-compatible')> | undefined;
const loadSdk = (): Promise<typeof import('@ai-sdk/openai-compatible')> =>
  (sdk ??= import('@ai-sdk/openai-compatible'));

export class OpenAIBackend extends BaseBackend {
  private cached: { key: string; create: (model: string) => LanguageModelV3 } | undefined;

  /** Where requests go and with which credentials (Copilot's come from its token exchange). */
  protected endpoint(): Promise<OpenAIEndpoint> {
    return Promise.resolve({ baseURL: this.url, ...(this.config.key ? { apiKey: this.config.key } : {}), headers: {} });
  }

  /** Headers that depend on the request (Copilot's X-Initiator). */
  protected requestHeaders(_req: StreamRequest): Record<string, string> {
    return {};
  }

  protected async languageModel(model: string): Promise<LanguageModelV3> {
    // Copilot's token exchange and the package import overlap.
    const [ep, { createOpenAICompatible }] = await Promise.all([this.endpoint(), loadSdk()]);
    const key = `${ep.baseURL}\n${ep.apiKey ?? ''}`;
    if (this.cached?.key !== key) {
      const isOpenAI = /^https:\/\/api\.openai\.com\//.test(ep.baseURL + '/');
      const provider = createOpenAICompatible({
        name: PROVIDER,
        baseURL: ep.baseURL,
        ...(ep.apiKey ? { apiKey: ep.apiKey } : {}),
        headers: ep.headers,
        includeUsage: true,
        ...(isOpenAI
          ? {
              transformRequestBody: (args: Record<string, unknown>) => {
                const { max_tokens, ...rest } = args;
                return max_tokens === undefined ? rest : { ...rest, max_completion_tokens: max_tokens };
              },
            }
          : {}),
      });
      this.cached = { key, create: perModel((m) => provider.chatModel(m)) };
    }
    return this.cached.create(model);
  }

  protected callOptions(
    req: StreamRequest,
    _model: string,
    call: LanguageModelV3CallOptions,
  ): LanguageModelV3CallOptions {
    const opts: Record<string, unknown> = {};
    const p = req.params ?? {};
    if (p.reasoningEffort) opts.reasoningEffort = p.reasoningEffort;
    // Unknown keys of these provider options go into the request body as they are.
    if (p.topK !== undefined) opts.top_k = p.topK;
    if (/openrouter\.ai/.test(this.url)) opts.usage = { include: true };
    delete call.topK;
    const headers = { ...call.headers, ...this.requestHeaders(req) };
    return {
      ...call,
      ...(Object.keys(headers).length ? { headers } : {}),
      ...(Object.keys(opts).length ? { providerOptions: { [PROVIDER]: opts as Record<string, never> } } : {}),
    };
  }

  protected async fetchModels(): Promise<ModelInfo[]> {
    const ep = await this.endpoint();
    const body = (await getJson(this.name, `${ep.baseURL}/models`, {
      headers: this.discoveryHeaders({ ...ep.headers, ...(ep.apiKey ? { authorization: `Bearer ${ep.apiKey}` } : {}) }),
    })) as { data?: Array<Record<string, unknown>> };
    return (body.data ?? [])
      .filter((m) => typeof m.id === 'string')
      .map((m) => {
        const ctx = contextOf(m);
        return { id: m.id as string, ...(ctx ? { contextLength: ctx } : {}) };
      });
  }

  protected fallbackContext(): number {
    return 128_000;
  }
}
