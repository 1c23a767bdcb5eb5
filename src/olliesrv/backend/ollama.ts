/**
 * Ollama's native API (ollama-ai-provider-v2): NDJSON `/api/chat`, models from `/api/tags`, context length from
 * `/api/show`.
 *
 * Sampling parameters go in `options` (where Ollama reads them; the provider puts the standard ones at the top level,
 * where Ollama ignores them). `num_ctx` is always sent: Ollama otherwise runs every model at its small default
 * window and silently drops the start of longer prompts, while we would believe the model's full window is in use.
 * We send the window we report: the `context` of backends.conf, else the model's own length capped at
 * OLLAMA_CONTEXT_CAP (a model's full 128k window can need more memory than the machine has). A request that
 * would not fit that num_ctx (the agent fits its requests to the window, but an estimate can be off) gets a
 * num_ctx raised to hold it, within what the model was trained for, and a warning once; when even the
 * trained length is too small, a warning that Ollama will drop the start of the prompt.
 */
import { BaseBackend, perModel } from './base.js';
import { getJson, type DriveOptions, type LanguageModelV3, type LanguageModelV3CallOptions } from './sdk.js';
import { requestTokens } from './tokens.js';
import type { ModelInfo, StreamRequest } from './types.js';

export const OLLAMA_CONTEXT_CAP = 32_768;

/**
 * Ollama reports a failure during generation as an NDJSON line `{"error": "…"}`. The provider's NDJSON reader drops
 * lines that do not fit its schema (with a console warning), so the message would be lost and the stream would just
 * look cut. This fetch wrapper ends the body with that error instead, which the driver then classifies.
 */
function surfaceErrorLines(): TransformStream<Uint8Array, Uint8Array> {
  const dec = new TextDecoder();
  const enc = new TextEncoder();
  let buf = '';
  const line = (l: string, c: TransformStreamDefaultController<Uint8Array>): boolean => {
    if (l.trim().startsWith('{"error"')) {
      try {
        const v = JSON.parse(l) as { error?: unknown };
        if (typeof v.error === 'string') {
          c.error(Object.assign(new Error(v.error), { name: 'OllamaError' }));
          return false;
        }
      } catch {
        // not an error line after all: pass it on
      }
    }
    c.enqueue(enc.encode(l + '\n'));
    return true;
  };
  return new TransformStream({
    transform(chunk, c) {
      buf += dec.decode(chunk, { stream: true });
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const l of lines) if (!line(l, c)) return;
    },
    flush(c) {
      if (buf.trim()) line(buf, c);
    },
  });
}

const ollamaFetch: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  if (!res.ok || !res.body) return res;
  // The provider cancels its reader on abort without handling the promise (`cancel() { reader.cancel() }`), and
  // cancelling an errored stream rejects: an unhandled rejection, which ends a Node process. So the body it reads
  // is ours: on abort it ends quietly, and its cancel never rejects.
  const src = res.body.pipeThrough(surfaceErrorLines()).getReader();
  const signal = init?.signal;
  const body = new ReadableStream<Uint8Array>({
    async pull(c) {
      try {
        const { done, value } = await src.read();
        if (done) c.close();
        else c.enqueue(value);
      } catch (e) {
        if (signal?.aborted) c.close();
        else c.error(e);
      }
    },
    cancel: (reason) => src.cancel(reason).catch(() => undefined),
  });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
};
/** Room for the reply when the request does not set num_predict. */
const OLLAMA_REPLY_ROOM = 1024;
/** Ollama's own default window, used when /api/show does not say. */
const OLLAMA_DEFAULT_CONTEXT = 4096;

export class OllamaBackend extends BaseBackend {
  private create: ((model: string) => LanguageModelV3) | undefined;

  /** The server root, whether the config gave it with or without the `/api` suffix. */
  private get root(): string {
    return this.url.replace(/\/api$/, '');
  }

  protected async languageModel(model: string): Promise<LanguageModelV3> {
    if (!this.create) {
      const { createOllama } = await import('ollama-ai-provider-v2');
      const provider = createOllama({
        baseURL: `${this.root}/api`,
        headers: { ...this.config.headers, ...(this.config.key ? { authorization: `Bearer ${this.config.key}` } : {}) },
        fetch: ollamaFetch,
      });
      this.create = perModel((m) => provider.chat(m));
    }
    return this.create(model);
  }

  protected async callOptions(
    req: StreamRequest,
    model: string,
    call: LanguageModelV3CallOptions,
  ): Promise<LanguageModelV3CallOptions> {
    const p = req.params ?? {};
    const options: Record<string, unknown> = { num_ctx: await this.numCtx(model, req) };
    if (p.temperature !== undefined) options.temperature = p.temperature;
    if (p.topP !== undefined) options.top_p = p.topP;
    if (p.topK !== undefined) options.top_k = p.topK;
    if (p.seed !== undefined) options.seed = p.seed;
    if (p.stop?.length) options.stop = p.stop;
    if (p.maxTokens !== undefined) options.num_predict = p.maxTokens;
    const think = (p.thinkingBudget ?? 0) > 0 || p.reasoningEffort !== undefined;
    const { temperature: _t, topP: _p, topK: _k, seed: _s, stopSequences: _st, maxOutputTokens: _m, ...rest } = call;
    return { ...rest, providerOptions: { ollama: { think, options } as never } };
  }

  /**
   * The provider emits a finish even when the body just ended, and marks it as a tool-call finish whenever calls
   * came; only the final `done` line carries the token counts, so their presence is what says Ollama finished.
   */
  protected override driveOptions(): Partial<DriveOptions> {
    return { finished: (part) => part.usage.inputTokens.total !== undefined };
  }

  protected async fetchModels(): Promise<ModelInfo[]> {
    const body = (await getJson(this.name, `${this.root}/api/tags`, {
      headers: this.discoveryHeaders(this.auth()),
    })) as { models?: Array<{ name?: unknown; model?: unknown }> };
    return (body.models ?? [])
      .map((m) => (typeof m.name === 'string' ? m.name : typeof m.model === 'string' ? m.model : undefined))
      .filter((id): id is string => id !== undefined)
      .map((id) => ({ id }));
  }

  /** The num_ctx for this request: the window, raised when the request needs more and the model allows it. */
  private async numCtx(model: string, req: StreamRequest): Promise<number> {
    const window = await this.contextLength(model);
    const need = requestTokens(req.messages, req.tools) + (req.params?.maxTokens ?? OLLAMA_REPLY_ROOM);
    if (need <= window) return window;
    const trained = (await this.show(model).catch(() => undefined))?.trained;
    if (trained && trained > window) {
      // Whole 4k steps, so that the raised value (and with it Ollama's loaded model) does not change on every request.
      const raised = Math.min(trained, Math.ceil(need / 4096) * 4096);
      this.warnOnce(
        `raise:${model}`,
        `${this.name}: a request of ~${need} tokens (with room for the reply) does not fit num_ctx ${window}; sending num_ctx ${raised} (${model} supports ${trained}). Set context= in backends.conf to choose the window yourself.`,
      );
      if (raised >= need) return raised;
    }
    this.warnOnce(
      `cut:${model}`,
      `${this.name}: a request of ~${need} tokens does not fit ${model}'s window of ${Math.max(window, trained ?? 0)} tokens: Ollama will drop the start of the prompt.`,
    );
    return Math.max(window, trained ?? 0);
  }

  private shown = new Map<string, Promise<{ param?: number; trained?: number }>>();

  /** /api/show, once per model: the Modelfile's num_ctx and the trained context length. */
  private show(model: string): Promise<{ param?: number; trained?: number }> {
    let p = this.shown.get(model);
    if (!p) {
      p = (async () => {
        const body = (await getJson(this.name, `${this.root}/api/show`, {
          method: 'POST',
          headers: this.discoveryHeaders({ 'content-type': 'application/json', ...this.auth() }),
          body: JSON.stringify({ model }),
        })) as { model_info?: Record<string, unknown>; parameters?: unknown };
        const param = typeof body.parameters === 'string' ? /^num_ctx\s+(\d+)/m.exec(body.parameters)?.[1] : undefined;
        const info = body.model_info ?? {};
        const arch = info['general.architecture'];
        const t =
          (typeof arch === 'string' ? info[`${arch}.context_length`] : undefined) ??
          Object.entries(info).find(([k]) => k.endsWith('.context_length'))?.[1];
        return {
          ...(param ? { param: Number(param) } : {}),
          ...(typeof t === 'number' && t > 0 ? { trained: t } : {}),
        };
      })();
      this.shown.set(model, p);
      p.catch(() => this.shown.delete(model));
    }
    return p;
  }

  protected override async discoverContext(model: string): Promise<number | undefined> {
    const s = await this.show(model);
    // A num_ctx in the Modelfile is what the model was set up to run with; the trained length is the upper bound.
    if (s.param) return s.param;
    return s.trained ? Math.min(s.trained, OLLAMA_CONTEXT_CAP) : undefined;
  }

  private auth(): Record<string, string> {
    return this.config.key ? { authorization: `Bearer ${this.config.key}` } : {};
  }

  /** A published window is what the model supports; what we ask Ollama to allocate stays under the cap. */
  protected override usableWindow(published: number): number {
    return Math.min(published, OLLAMA_CONTEXT_CAP);
  }

  protected fallbackContext(): number {
    return OLLAMA_DEFAULT_CONTEXT;
  }
}
