/**
 * The contract between the agent loop and the LLM providers. The loop sees only these types; each provider is an
 * adapter over the Vercel AI SDK behind `Backend`. Retries are the loop's business (the SDK's are turned off), so a
 * backend throws one of the typed errors in errors.ts and never retries by itself.
 */

export type BackendType = 'openai' | 'anthropic' | 'ollama' | 'gemini' | 'copilot';

export interface ToolCall {
  /** Provider-assigned id (call_…, toolu_…); backends synthesize one when the provider sends none (Ollama). */
  id: string;
  name: string;
  /** The arguments as the model wrote them: JSON text, not yet parsed or validated. */
  args: string;
  /**
   * Opaque provider signature of the call (Gemini's thoughtSignature). Keep it with the call in history: Gemini 3
   * rejects a replayed call without it.
   */
  signature?: string;
}

export type ContextKind = 'skill' | 'hint' | 'summary' | 'attachment' | 'context';

export type Message =
  | { role: 'system'; content: string }
  /**
   * `kind` tags what the loop added rather than the user typed (a skill, a tool hint, a compaction summary, the
   * output of a `!cmd`): the token account counts them apart, and compaction may leave hints out. Providers never
   * see it.
   */
  | { role: 'user'; content: string; kind?: ContextKind }
  | {
      role: 'assistant';
      content: string;
      reasoning?: string;
      toolCalls?: ToolCall[];
      /**
       * Signature of the reasoning (Anthropic thinking blocks). Anthropic only accepts replayed thinking with it, and
       * requires it when thinking is on and the turn continues after tool calls; without it the reasoning is dropped.
       */
      reasoningSignature?: string;
    }
  | { role: 'tool'; toolCallId: string; name: string; content: string; isError?: boolean };

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema (an object schema) of the arguments. */
  parameters: Record<string, unknown>;
}

export interface GenerationParams {
  temperature?: number;
  topP?: number;
  topK?: number;
  maxTokens?: number;
  seed?: number;
  stop?: string[];
  /** Anthropic extended thinking budget in tokens (0/undefined = off). */
  thinkingBudget?: number;
  /** OpenAI-style reasoning effort for reasoning models. */
  reasoningEffort?: 'low' | 'medium' | 'high';
}

export interface Usage {
  /** All prompt tokens, cached ones included. */
  inputTokens: number;
  outputTokens: number;
  /** Prompt tokens served from the provider's cache (part of inputTokens). */
  cachedInputTokens: number;
  /** Prompt tokens written to the cache (Anthropic cache_creation_input_tokens; part of inputTokens). */
  cacheCreationTokens: number;
  reasoningTokens?: number;
  /** Cost in USD when the provider reports it (OpenRouter); otherwise the loop prices it (pricing.ts). */
  costUsd?: number;
}

export type FinishReason = 'stop' | 'tool-calls' | 'length' | 'content-filter' | 'other';

export type StreamEvent =
  | { type: 'text'; delta: string }
  /** `signature` arrives once, at the end of a reasoning block (Anthropic); store it as Message.reasoningSignature. */
  | { type: 'reasoning'; delta: string; signature?: string }
  /** A complete tool call (arguments fully streamed). Several in one response are parallel calls. */
  | { type: 'tool-call'; call: ToolCall }
  | { type: 'usage'; usage: Usage }
  /** Something the user should know about this request that is not an error (said once per cause). */
  | { type: 'warning'; message: string }
  /** Always the last event of a completed response; a stream that ends without it is a StreamDropError. */
  | { type: 'finish'; reason: FinishReason };

export interface StreamRequest {
  /** Model id; the backend's default model when empty. */
  model?: string;
  messages: Message[];
  tools: ToolSpec[];
  params?: GenerationParams;
  signal?: AbortSignal;
}

export interface ModelInfo {
  id: string;
  /** Context window in tokens, when the provider says. */
  contextLength?: number;
}

export interface Backend {
  readonly name: string;
  readonly type: BackendType;
  readonly url: string;
  readonly defaultModel: string;
  /** Model used for compaction summaries; defaultModel when unset. */
  readonly compactionModel: string;
  /**
   * Streams one response. Throws (from the iterator) RateLimitError, TransientError, StreamDropError,
   * ContextOverflowError, ToolUnsupportedError, or BackendError for anything else (auth, bad request). An abort via
   * `signal` ends the iteration with the signal's reason.
   */
  stream(req: StreamRequest): AsyncIterable<StreamEvent>;
  /** Models the provider serves; fetched once and cached (refresh = true refetches). */
  models(refresh?: boolean): Promise<ModelInfo[]>;
  /** Context window of a model: config override, else discovered (cached), else a per-type default. */
  contextLength(model?: string): Promise<number>;
  /** The window backends.conf sets (`context =`), for every model of the backend; undefined when it sets none. */
  readonly configuredContext?: number;
  /**
   * Start loading what the first request needs (the provider package, ~100 ms; Copilot's token exchange) without
   * waiting for it, so that it overlaps the rest of startup. Never rejects: failures surface on the real request.
   */
  prepare?(): Promise<void>;
}
