/**
 * What a response cost, in USD. The provider's own figure (OpenRouter's usage.cost) wins; otherwise the price list
 * below, matched by the longest model-id prefix (case-insensitive; a router's `vendor/` prefix is ignored). Cached
 * input is billed at the provider's discount (Anthropic 10%, OpenAI 50%, Gemini 25% of the input price), writes to
 * the cache at 125%. Unknown and local models cost nothing.
 *
 * Prices are the providers' public list prices (USD per million tokens, standard tier, prompts under the long-context
 * threshold) as of late 2025.
 */
import type { Usage } from './types.js';

type Vendor = 'anthropic' | 'openai' | 'google';

interface Price {
  /** USD per million input tokens. */
  input: number;
  /** USD per million output tokens. */
  output: number;
  vendor: Vendor;
}

/** Fraction of the input price a cached input token costs, per vendor. */
export const CACHED_INPUT_RATE: Record<Vendor, number> = { anthropic: 0.1, openai: 0.5, google: 0.25 };
/** Fraction of the input price a token written to the cache costs. */
export const CACHE_WRITE_RATE = 1.25;

const a = (input: number, output: number): Price => ({ input, output, vendor: 'anthropic' });
const o = (input: number, output: number): Price => ({ input, output, vendor: 'openai' });
const g = (input: number, output: number): Price => ({ input, output, vendor: 'google' });

export const PRICES: Record<string, Price> = {
  // Anthropic
  'claude-opus-4-5': a(5, 25),
  'claude-opus-4': a(15, 75),
  'claude-sonnet-4': a(3, 15),
  'claude-haiku-4': a(1, 5),
  'claude-3-7-sonnet': a(3, 15),
  'claude-3-5-sonnet': a(3, 15),
  'claude-3-5-haiku': a(0.8, 4),
  'claude-3-opus': a(15, 75),
  'claude-3-haiku': a(0.25, 1.25),
  // OpenAI
  'gpt-5-nano': o(0.05, 0.4),
  'gpt-5-mini': o(0.25, 2),
  'gpt-5': o(1.25, 10),
  'gpt-4.1-nano': o(0.1, 0.4),
  'gpt-4.1-mini': o(0.4, 1.6),
  'gpt-4.1': o(2, 8),
  'gpt-4o-mini': o(0.15, 0.6),
  'gpt-4o': o(2.5, 10),
  'gpt-4-turbo': o(10, 30),
  'gpt-4': o(30, 60),
  'gpt-3.5-turbo': o(0.5, 1.5),
  'o4-mini': o(1.1, 4.4),
  'o3-mini': o(1.1, 4.4),
  'o3-pro': o(20, 80),
  o3: o(2, 8),
  'o1-mini': o(1.1, 4.4),
  'o1-pro': o(150, 600),
  o1: o(15, 60),
  // Google
  'gemini-3-pro': g(2, 12),
  'gemini-2.5-pro': g(1.25, 10),
  'gemini-2.5-flash-lite': g(0.1, 0.4),
  'gemini-2.5-flash': g(0.3, 2.5),
  'gemini-2.0-flash-lite': g(0.075, 0.3),
  'gemini-2.0-flash': g(0.1, 0.4),
  'gemini-1.5-pro': g(1.25, 5),
  'gemini-1.5-flash': g(0.075, 0.3),
};

const PREFIXES = Object.keys(PRICES).sort((x, y) => y.length - x.length);

/** The price entry for a model id, or undefined (unknown or local model). */
export function priceOf(model: string): Price | undefined {
  const id = model
    .toLowerCase()
    .replace(/^models\//, '')
    .replace(/^[a-z0-9_-]+\//, '');
  const key = PREFIXES.find((p) => id.startsWith(p));
  return key ? PRICES[key] : undefined;
}

export function priceUsage(model: string, usage: Usage): number {
  if (usage.costUsd !== undefined) return usage.costUsd;
  const p = priceOf(model);
  if (!p) return 0;
  const cached = Math.min(usage.cachedInputTokens, usage.inputTokens);
  const written = Math.min(usage.cacheCreationTokens, usage.inputTokens - cached);
  const fresh = usage.inputTokens - cached - written;
  const perToken = p.input / 1e6;
  return (
    fresh * perToken +
    cached * perToken * CACHED_INPUT_RATE[p.vendor] +
    written * perToken * CACHE_WRITE_RATE +
    (usage.outputTokens * p.output) / 1e6
  );
}
