/**
 * The part of a Backend every provider shares: config, the cached model list and context lengths, and the stream
 * entry point (SDK call options from our request, then the driver). An adapter supplies the LanguageModel (importing
 * its provider package on first use), its provider options, and discovery.
 */
import type { BackendConfig } from './config.js';
import { BackendError, classifyError } from './errors.js';
import { knownWindow } from './windows.js';
import {
  drive,
  toPrompt,
  toTools,
  type DriveOptions,
  type LanguageModelV3,
  type LanguageModelV3CallOptions,
  type PromptOptions,
} from './sdk.js';
import type { Backend, BackendType, ModelInfo, StreamEvent, StreamRequest } from './types.js';

/** One model object per id: building one constructs its zod schemas, ~10 % of a tool round's CPU. */
export function perModel(create: (model: string) => LanguageModelV3): (model: string) => LanguageModelV3 {
  const models = new Map<string, LanguageModelV3>();
  return (m) => {
    let lm = models.get(m);
    if (!lm) models.set(m, (lm = create(m)));
    return lm;
  };
}

export abstract class BaseBackend implements Backend {
  readonly name: string;
  readonly type: BackendType;
  readonly url: string;
  readonly defaultModel: string;
  readonly compactionModel: string;
  readonly config: BackendConfig;
  private modelList: Promise<ModelInfo[]> | undefined;
  /** Warnings raised while preparing a request (callOptions), sent ahead of its stream. */
  protected readonly queuedWarnings: string[] = [];
  private readonly warned = new Set<string>();
  private readonly contexts = new Map<string, Promise<number>>();

  constructor(cfg: BackendConfig) {
    this.config = cfg;
    this.name = cfg.name;
    this.type = cfg.type;
    this.url = cfg.url;
    this.defaultModel = cfg.model;
    this.compactionModel = cfg.compactionModel;
  }

  /** The provider's LanguageModel for `model` (the provider package is imported here, lazily). */
  protected abstract languageModel(model: string, req: StreamRequest): Promise<LanguageModelV3>;
  /** Provider-specific call options (thinking, caching, provider options) on top of the common ones. */
  protected abstract callOptions(
    req: StreamRequest,
    model: string,
    base: LanguageModelV3CallOptions,
  ): Promise<LanguageModelV3CallOptions> | LanguageModelV3CallOptions;
  protected abstract fetchModels(): Promise<ModelInfo[]>;
  /** Context window when neither the config, discovery nor the table of known models (windows.ts) says. */
  protected abstract fallbackContext(model: string): number;
  protected promptOptions(): PromptOptions {
    return {};
  }
  protected driveOptions(): Partial<DriveOptions> {
    return {};
  }
  /** The window to use of a model's published one (all of it, unless the backend runs the model itself). */
  protected usableWindow(published: number): number {
    return published;
  }
  /** Context length of one model from the provider, when it has a per-model call (Ollama's /api/show). */
  protected discoverContext(model: string): Promise<number | undefined> {
    return this.models().then((ms) => ms.find((m) => m.id === model)?.contextLength);
  }

  prepare(): Promise<void> {
    return this.languageModel(this.defaultModel, { messages: [], tools: [] }).then(
      () => undefined,
      () => undefined,
    );
  }

  stream(req: StreamRequest): AsyncIterable<StreamEvent> {
    return this.run(req);
  }

  private async *run(req: StreamRequest): AsyncGenerator<StreamEvent, void, undefined> {
    const model = req.model || this.defaultModel;
    let lm: LanguageModelV3;
    let call: LanguageModelV3CallOptions;
    try {
      lm = await this.languageModel(model, req);
      call = await this.callOptions(req, model, this.baseCall(req));
    } catch (e) {
      if (req.signal?.aborted) throw req.signal.reason;
      throw e instanceof BackendError ? e : classifyError(this.name, e);
    }
    for (const message of this.queuedWarnings.splice(0)) yield { type: 'warning', message };
    yield* drive(lm, call, {
      backend: this.name,
      ...(req.signal ? { signal: req.signal } : {}),
      ...this.driveOptions(),
    });
  }

  private baseCall(req: StreamRequest): LanguageModelV3CallOptions {
    const p = req.params ?? {};
    const call: LanguageModelV3CallOptions = { prompt: toPrompt(req.messages, this.promptOptions()) };
    if (req.tools.length) {
      call.tools = toTools(req.tools);
      call.toolChoice = { type: 'auto' };
    }
    if (p.maxTokens !== undefined) call.maxOutputTokens = p.maxTokens;
    if (p.temperature !== undefined) call.temperature = p.temperature;
    if (p.topP !== undefined) call.topP = p.topP;
    if (p.topK !== undefined) call.topK = p.topK;
    if (p.seed !== undefined) call.seed = p.seed;
    if (p.stop?.length) call.stopSequences = p.stop;
    if (Object.keys(this.config.headers).length) call.headers = { ...this.config.headers };
    return call;
  }

  models(refresh = false): Promise<ModelInfo[]> {
    if (!this.modelList || refresh) {
      const p = this.fetchModels();
      this.modelList = p;
      // A failed fetch is not cached: the next call asks again.
      p.catch(() => {
        if (this.modelList === p) this.modelList = undefined;
      });
      if (refresh) this.contexts.clear();
    }
    return this.modelList;
  }

  get configuredContext(): number | undefined {
    return this.config.context;
  }

  contextLength(model?: string): Promise<number> {
    if (this.config.context !== undefined) return Promise.resolve(this.config.context);
    const id = model || this.defaultModel;
    let p = this.contexts.get(id);
    if (!p) {
      // Discovery failing (offline, no such model) gives the fallback, cached like a discovered value: asking the
      // provider again on every turn would add its latency to every request.
      const known = knownWindow(id);
      const fallback = (): number => (known !== undefined ? this.usableWindow(known) : this.fallbackContext(id));
      p = this.discoverContext(id).then((n) => (n && n > 0 ? n : fallback()), fallback);
      this.contexts.set(id, p);
    }
    return p;
  }

  /** Queues a warning for the request being prepared, once per `key` for the backend's life. */
  protected warnOnce(key: string, message: string): void {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.queuedWarnings.push(message);
  }

  /** Headers for discovery requests: the config's extra headers plus the provider's auth. */
  protected discoveryHeaders(auth: Record<string, string>): Record<string, string> {
    return { ...this.config.headers, ...auth };
  }
}
