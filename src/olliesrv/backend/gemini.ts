/**
 * Google Gemini API (@ai-sdk/google): streamGenerateContent over SSE. Thinking is requested with a token budget
 * (`thinkingBudget`) or a level (`reasoningEffort`, Gemini 3), always with includeThoughts so that the reasoning is
 * streamed. Gemini 3 signs function calls (thoughtSignature); the signature travels on ToolCall.signature and is
 * sent back with the call, which Gemini 3 requires.
 */
import { BaseBackend, perModel } from './base.js';
import { getJson, type LanguageModelV3, type LanguageModelV3CallOptions, type PromptOptions } from './sdk.js';
import type { ModelInfo, StreamRequest } from './types.js';

export class GeminiBackend extends BaseBackend {
  private create: ((model: string) => LanguageModelV3) | undefined;

  protected async languageModel(model: string): Promise<LanguageModelV3> {
    if (!this.create) {
      const { createGoogleGenerativeAI } = await import('@ai-sdk/google');
      const provider = createGoogleGenerativeAI({
        baseURL: this.url,
        apiKey: this.config.key ?? '',
        headers: this.config.headers,
      });
      this.create = perModel((m) => provider.chat(m));
    }
    return this.create(model.replace(/^models\//, ''));
  }

  protected override promptOptions(): PromptOptions {
    return { toolCallSignature: (thoughtSignature) => ({ google: { thoughtSignature } }) };
  }

  protected callOptions(
    req: StreamRequest,
    _model: string,
    call: LanguageModelV3CallOptions,
  ): LanguageModelV3CallOptions {
    const p = req.params ?? {};
    const thinking: Record<string, unknown> = {};
    if ((p.thinkingBudget ?? 0) > 0) thinking.thinkingBudget = p.thinkingBudget;
    else if (p.reasoningEffort) thinking.thinkingLevel = p.reasoningEffort;
    if (Object.keys(thinking).length === 0) return call;
    return {
      ...call,
      providerOptions: { google: { thinkingConfig: { ...thinking, includeThoughts: true } } as never },
    };
  }

  protected async fetchModels(): Promise<ModelInfo[]> {
    const out: ModelInfo[] = [];
    let pageToken: string | undefined;
    // The list is paged; a few pages cover every model Google serves.
    for (let page = 0; page < 10; page++) {
      const body = (await getJson(
        this.name,
        `${this.url}/models?pageSize=1000${pageToken ? `&pageToken=${encodeURIComponent(pageToken)}` : ''}`,
        {
          headers: this.discoveryHeaders(this.config.key ? { 'x-goog-api-key': this.config.key } : {}),
        },
      )) as {
        models?: Array<{ name?: unknown; inputTokenLimit?: unknown; supportedGenerationMethods?: unknown }>;
        nextPageToken?: unknown;
      };
      for (const m of body.models ?? []) {
        if (typeof m.name !== 'string') continue;
        const methods = Array.isArray(m.supportedGenerationMethods)
          ? m.supportedGenerationMethods
          : ['generateContent'];
        if (!methods.includes('generateContent')) continue;
        out.push({
          id: m.name.replace(/^models\//, ''),
          ...(typeof m.inputTokenLimit === 'number' ? { contextLength: m.inputTokenLimit } : {}),
        });
      }
      pageToken = typeof body.nextPageToken === 'string' && body.nextPageToken ? body.nextPageToken : undefined;
      if (!pageToken) break;
    }
    return out;
  }

  protected fallbackContext(): number {
    return 1_048_576;
  }
}
