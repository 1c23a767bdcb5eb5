/** Token and cost accounting of one agent: per turn and accumulated, persisted with the agent. */
import { priceUsage } from '../backend/pricing.js';
import type { Usage } from '../backend/types.js';
import type { Parts } from './context.js';

export interface Stats {
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cacheCreationTokens: number;
  requests: number;
  costSession: number;
  costLastTurn: number;
  /** Prompt size of the last request (what the context holds now), 0 before the first. */
  lastInputTokens: number;
  lastOutputTokens: number;
  /** Tokens of the current (or last) turn, for sub-agent budgets. */
  turnTokens: number;
  /** The estimate of the next (or last) request, by part, before correction. */
  context?: Parts;
  /** Provider-reported prompt tokens per estimated token, learned from usage (context.ts, Correction). */
  estimateFactor: number;
}

export function emptyStats(): Stats {
  return {
    inputTokens: 0,
    outputTokens: 0,
    cachedTokens: 0,
    cacheCreationTokens: 0,
    requests: 0,
    costSession: 0,
    costLastTurn: 0,
    lastInputTokens: 0,
    lastOutputTokens: 0,
    turnTokens: 0,
    estimateFactor: 1,
  };
}

export function parseStats(json: string): Stats {
  try {
    return { ...emptyStats(), ...(JSON.parse(json) as Partial<Stats>) };
  } catch {
    return emptyStats();
  }
}

export function startTurn(s: Stats): void {
  s.costLastTurn = 0;
  s.turnTokens = 0;
}

/** Adds one response's usage; the provider's reported cost wins over our price table. */
export function addUsage(s: Stats, model: string, u: Usage): number {
  const cost = u.costUsd ?? priceUsage(model, u);
  s.inputTokens += u.inputTokens;
  s.outputTokens += u.outputTokens;
  s.cachedTokens += u.cachedInputTokens;
  s.cacheCreationTokens += u.cacheCreationTokens;
  s.requests++;
  s.costSession += cost;
  s.costLastTurn += cost;
  s.lastInputTokens = u.inputTokens;
  s.lastOutputTokens = u.outputTokens;
  s.turnTokens += u.inputTokens + u.outputTokens;
  return cost;
}

const usd = (n: number): string => n.toFixed(6);

/**
 * The `stats` file: key=value lines. context_estimate is the whole next request (system prompt, tool schemas,
 * history, skills, attachments), corrected by the provider's reports; the context_* parts are uncorrected.
 */
export function renderStats(s: Stats, contextEstimate: number, contextLength: number): string {
  const pct = contextLength > 0 ? ((100 * contextEstimate) / contextLength).toFixed(1) : '0.0';
  const c = s.context;
  return [
    `input_tokens=${s.inputTokens}`,
    `output_tokens=${s.outputTokens}`,
    `cached_tokens=${s.cachedTokens}`,
    `cache_creation_tokens=${s.cacheCreationTokens}`,
    `requests=${s.requests}`,
    `cost_last_turn=${usd(s.costLastTurn)}`,
    `cost_session=${usd(s.costSession)}`,
    `context_estimate=${contextEstimate}`,
    `context_length=${contextLength}`,
    `context_percent=${pct}`,
    `context_system=${c?.system ?? 0}`,
    `context_tools=${c?.tools ?? 0}`,
    `context_history=${c?.history ?? 0}`,
    `context_skills=${c?.skills ?? 0}`,
    `context_attachments=${c?.attachments ?? 0}`,
    `estimate_factor=${s.estimateFactor.toFixed(3)}`,
    '',
  ].join('\n');
}
