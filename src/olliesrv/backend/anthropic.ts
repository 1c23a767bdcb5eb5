/**
 * Anthropic messages API (@ai-sdk/anthropic). Two things beyond plain chat:
 *
 * - Extended thinking: `thinkingBudget` > 0 turns it on with that budget (the SDK raises max_tokens by the budget,
 *   as the API requires max_tokens > budget_tokens). Thinking blocks come back with a signature, which the loop keeps
 *   (Message.reasoningSignature) and we replay: the API refuses a tool-use continuation whose thinking lost it.
 * - Prompt caching: cache_control breakpoints on the system prompt (caching the tools, which precede it, too) and on
 *   the last two messages, so that each request reads the prefix the previous one wrote. Four breakpoints are allowed;
 *   three are used.
 */
import { BaseBackend, perModel } from './base.js';
import { getJson, type LanguageModelV3, type LanguageModelV3CallOptions, type PromptOptions } from './sdk.js';
import type { ModelInfo, StreamRequest } from './types.js';

const EPHEMERAL = { anthropic: { cacheControl: { type: 'ephemeral' } } } as const;
/** Messages at the end of the conversation that get a cache breakpoint. */
const CACHED_TAIL = 2;

export class AnthropicBackend extends BaseBackend {
  private create: ((model: string) => LanguageModelV3) | undefined;

  protected async languageModel(model: string): Promise<LanguageModelV3> {
    if (!this.create) {
      const { createAnthropic } = await import('@ai-sdk/anthropic');
      const provider = createAnthropic({
        baseURL: this.url,
        // An explicit empty key keeps the SDK from reading ANTHROPIC_API_KEY behind the config's back.
        apiKey: this.config.key ?? '',
        headers: this.config.headers,
      });
      this.create = perModel((m) => provider.messages(m));
    }
    return this.create(model);
  }

  protected override promptOptions(): PromptOptions {
    return { reasoningSignature: (signature) => ({ anthropic: { signature } }) };
  }

  protected callOptions(
    req: StreamRequest,
    _model: string,
    call: LanguageModelV3CallOptions,
  ): LanguageModelV3CallOptions {
    const prompt = call.prompt.map((m) => ({ ...m }));
    const lastSystem = prompt.findLastIndex((m) => m.role === 'system');
    if (lastSystem >= 0) prompt[lastSystem]!.providerOptions = { ...prompt[lastSystem]!.providerOptions, ...EPHEMERAL };
    let marked = 0;
    for (let i = prompt.length - 1; i >= 0 && marked < CACHED_TAIL; i--) {
      if (prompt[i]!.role === 'system') continue;
      prompt[i]!.providerOptions = { ...prompt[i]!.providerOptions, ...EPHEMERAL };
      marked++;
    }
    const budget = req.params?.thinkingBudget ?? 0;
    // Fine-grained (eager) tool streaming sends tool input unvalidated, possibly broken off at max_tokens; we only
    // hand out complete calls, so it would buy nothing and risk invalid arguments.
    const anthropic: Record<string, unknown> = { toolStreaming: false };
    if (budget > 0) anthropic.thinking = { type: 'enabled', budgetTokens: Math.max(1024, Math.floor(budget)) };
    return { ...call, prompt, providerOptions: { anthropic: anthropic as never } };
  }

  protected async fetchModels(): Promise<ModelInfo[]> {
    const body = (await getJson(this.name, `${this.url}/models?limit=1000`, {
      headers: this.discoveryHeaders({
        'anthropic-version': '2023-06-01',
        ...(this.config.key ? { 'x-api-key': this.config.key } : {}),
      }),
    })) as { data?: Array<{ id?: unknown }> };
    return (body.data ?? [])
      .filter((m): m is { id: string } => typeof m.id === 'string')
      .map((m) => ({ id: m.id, contextLength: 200_000 }));
  }

  protected fallbackContext(): number {
    return 200_000;
  }
}
