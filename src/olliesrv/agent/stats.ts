/** Token and cost accounting of one agent: per turn and accumulated, persisted with the agent. */
import { priceUsage } from '../backend/pricing.js';
import type { Usage } from '../backend/types.js';
import { STATS } from '../../formats/olliesrv.js';
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
  /**
   * What the sub-agents this agent spawned used, one entry per sub-agent, each including its own sub-agents.
   * Sub-agents are removed when they reply, so their usage would vanish with them; it is paid for by the caller.
   */
  subagents?: SubagentUsage[];
}

export interface SubagentUsage {
  id: string;
  name: string;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cacheCreationTokens: number;
  requests: number;
  cost: number;
}

/** Adds a finished sub-agent's usage (its own and its sub-agents') to its caller's stats. */
export function addSubagent(caller: Stats, id: string, name: string, sub: Stats): void {
  const own = subagentTotals(sub);
  (caller.subagents ??= []).push({
    id,
    name,
    inputTokens: sub.inputTokens + own.inputTokens,
    outputTokens: sub.outputTokens + own.outputTokens,
    cachedTokens: sub.cachedTokens + own.cachedTokens,
    cacheCreationTokens: sub.cacheCreationTokens + own.cacheCreationTokens,
    requests: sub.requests + own.requests,
    cost: sub.costSession + own.cost,
  });
}

/** The sum over an agent's sub-agents. */
export function subagentTotals(s: Stats): Omit<SubagentUsage, 'id' | 'name'> {
  const t = { inputTokens: 0, outputTokens: 0, cachedTokens: 0, cacheCreationTokens: 0, requests: 0, cost: 0 };
  for (const u of s.subagents ?? []) {
    t.inputTokens += u.inputTokens;
    t.outputTokens += u.outputTokens;
    t.cachedTokens += u.cachedTokens;
    t.cacheCreationTokens += u.cacheCreationTokens;
    t.requests += u.requests;
    t.cost += u.cost;
  }
  return t;
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
  return STATS.format({
    input_tokens: s.inputTokens,
    output_tokens: s.outputTokens,
    cached_tokens: s.cachedTokens,
    cache_creation_tokens: s.cacheCreationTokens,
    requests: s.requests,
    cost_last_turn: usd(s.costLastTurn),
    cost_session: usd(s.costSession),
    context_estimate: contextEstimate,
    context_length: contextLength,
    context_percent: pct,
    context_system: c?.system ?? 0,
    context_tools: c?.tools ?? 0,
    context_history: c?.history ?? 0,
    context_skills: c?.skills ?? 0,
    context_attachments: c?.attachments ?? 0,
    estimate_factor: s.estimateFactor.toFixed(3),
    ...subagentValues(s),
  });
}

/**
 * The sub-agents' part of `stats`: their totals (the keys above count this agent's own requests only), the total
 * cost with them, and one `subagent.ID=` pair per sub-agent (its value quoted: it holds spaces), in the order they finished.
 */
function subagentValues(s: Stats): Record<string, string | number> {
  const t = subagentTotals(s);
  return {
    subagents: s.subagents?.length ?? 0,
    subagents_input_tokens: t.inputTokens,
    subagents_output_tokens: t.outputTokens,
    subagents_cached_tokens: t.cachedTokens,
    subagents_cache_creation_tokens: t.cacheCreationTokens,
    subagents_requests: t.requests,
    subagents_cost: usd(t.cost),
    cost_total: usd(s.costSession + t.cost),
    ...Object.fromEntries(
      (s.subagents ?? []).map((u) => [
        `subagent.${u.id}`,
        `name=${u.name} input_tokens=${u.inputTokens} output_tokens=${u.outputTokens} cached_tokens=${u.cachedTokens} requests=${u.requests} cost=${usd(u.cost)}`,
      ]),
    ),
  };
}
