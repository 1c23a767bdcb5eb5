/**
 * Fitting requests into the model's window: the window and the token budget, the size of a request, and how it
 * shrinks when over (compaction of the oldest turns, cutting tool output, dropping skills and hints).
 */
import { preCompactHooks } from '../hooks/agent.js';
import { join } from 'node:path';
import { preciseCounting } from '../backend/tokens.js';
import type { GenerationParams, Message, ToolSpec } from '../backend/types.js';
import type { Agent } from './agent.js';
import { summarize, summaryMessage, tailStart } from './compaction.js';
import { measure, RECENT_ROUNDS, total, view, type Parts } from './context.js';
import { ContextBudgetError, errText } from './errors.js';
import type { Runtime } from './runtime.js';
import { setState } from './state.js';

/** What one request is made of, ready to send. */
export interface Fitted {
  messages: Message[];
  parts: Parts;
  /** Tokens as counted (total of parts) and as corrected by the provider's reports. */
  raw: number;
  estimate: number;
}

/** Share of the budget the tail kept verbatim by a compaction may take (the rest goes into the summary). */
const KEEP_SHARE = 0.4;
/** A compaction asked for by hand keeps less: the point is to free room. */
const KEEP_SHARE_REQUESTED = 0.2;
/** Summarizing costs a request; below this share of the budget the head is not worth it. */
const MIN_HEAD_SHARE = 0.1;
/** Over-budget tails have their tool results and arguments cut to these shares of the budget, in turn. */
const CUT_SHARES = [1 / 6, 1 / 16, 1 / 48];
/** Share of the budget above which requests are counted exactly (backend/tokens.ts preciseCounting). */
const PRECISE_FROM = 0.6;

/** The parts of a request, in words. */
export function describeParts(agent: Agent, p: Parts): string {
  return `system prompt ${p.system}, tool schemas ${p.tools}, history ${p.history}, skills and hints ${p.skills}, attachments ${p.attachments}`;
}

export function spillDir(agent: Agent): string {
  return join(agent.deps.outputDir, agent.sessionId, agent.id);
}

/** The history as it is sent now (stale tool output cut). */
export function sentView(agent: Agent, extra: { maxTokens?: number; dropHints?: boolean } = {}): Message[] {
  return view(agent.history.messages, { spillDir: spillDir(agent), recentRounds: RECENT_ROUNDS, ...extra });
}

export function measured(agent: Agent, rt: Runtime, tools: readonly ToolSpec[], messages: Message[]): Fitted {
  const parts = measure(rt.system, tools, messages);
  const raw = total(parts);
  return { messages, parts, raw, estimate: agent.correction.apply(raw) };
}

/** Tokens a request may take: the window less the reply's room, and at most compactAt of the window. */
export async function tokenBudget(agent: Agent, params: GenerationParams): Promise<number> {
  const window = await windowSize(agent);
  const reserve = params.maxTokens ?? Math.min(8192, Math.floor(window / 4));
  const at = agent.cfg.compactAt ?? agent.runtime?.profile.compactAt ?? 0.75;
  return Math.max(256, Math.floor(Math.min(window - reserve, window * at)));
}

/**
 * The request to send, within the budget (and under `ceiling` counted tokens after an overflow). Shrinks in
 * this order: the oldest turns into a summary; the tool results and arguments of the kept tail cut to
 * excerpts, tighter each step; skills and hints left out. What still does not fit is an error that says
 * what takes the room.
 */
export async function fit(
  agent: Agent,
  rt: Runtime,
  tools: readonly ToolSpec[],
  params: GenerationParams,
  signal: AbortSignal,
  ceiling = Infinity,
  refused?: string,
): Promise<Fitted> {
  const budget = await tokenBudget(agent, params);
  const fits = (f: Fitted): boolean => f.estimate <= budget && f.raw <= ceiling;
  // In counted (uncorrected) tokens, the unit of every message's size; after an overflow, what the provider
  // will take rather than what we thought it would.
  const room = Math.min(Math.floor(budget / agent.correction.factor), ceiling);
  const done = (f: Fitted): Fitted => {
    agent.stats.context = f.parts;
    return f;
  };
  let f = measured(agent, rt, tools, sentView(agent));
  // Near the window, a few per cent decide: count exactly from here on (the tokenizer loads once, ~100 ms).
  if (f.estimate > budget * PRECISE_FROM) {
    await preciseCounting();
    f = measured(agent, rt, tools, sentView(agent));
  }
  if (fits(f)) return done(f);
  const over = `the request would be ~${f.estimate} tokens, over the budget of ${budget}`;
  // 1. The oldest turns into a summary, when they are worth a request.
  try {
    const did = await compactNow(agent, over, signal, room, KEEP_SHARE, { rt, tools, force: ceiling !== Infinity });
    if (did) f = measured(agent, rt, tools, sentView(agent));
    if (fits(f)) return done(f);
  } catch (e) {
    if (signal.aborted) throw e;
    agent.log.add('info', `compaction failed (${errText(e)}); cutting tool output instead`, { name: 'compaction' });
  }
  // 2. The kept tail's tool results and arguments, cut tighter each step.
  for (const share of CUT_SHARES) {
    f = measured(agent, rt, tools, sentView(agent, { maxTokens: Math.floor(room * share) }));
    if (fits(f)) return done(noteCut(agent, f, budget));
  }
  // 3. Skills and hints.
  f = measured(
    agent,
    rt,
    tools,
    sentView(agent, { maxTokens: Math.floor(room * CUT_SHARES.at(-1)!), dropHints: true }),
  );
  if (fits(f)) return done(noteCut(agent, f, budget));
  const window = await windowSize(agent);
  const fixed = agent.correction.apply(f.parts.system + f.parts.tools);
  const advice =
    fixed > budget
      ? `the system prompt and tool schemas alone take ~${fixed}: use a profile with a shorter prompt or fewer tools (autoLoad), or a model with a larger window`
      : `what is left is the conversation itself (the latest prompt or summary): shorten the prompt, \`ctl clear\`, or use a model with a larger window`;
  throw new ContextBudgetError(
    `${refused ? `${refused}, and nothing is left to shrink: ` : ''}the request does not fit ${agent.cfg.model || agent.backend().defaultModel}'s window of ${window} tokens ` +
      `(budget ${budget} after room for the reply): ~${f.estimate} tokens after compacting and cutting (${describeParts(agent, f.parts)}); ${advice}. ` +
      `If the window is larger than ${window}, set context= for backend ${agent.cfg.backend} in backends.conf.`,
  );
}

/** Says once per request that tool output of the kept tail was cut to fit. */
export function noteCut(agent: Agent, f: Fitted, budget: number): Fitted {
  agent.log.add(
    'info',
    `Cut large tool output in the recent history to fit the budget of ${budget} tokens (now ~${f.estimate}); the whole texts are in ${spillDir(agent)}.`,
    { name: 'compaction' },
  );
  return f;
}

export async function contextLength(agent: Agent): Promise<number> {
  const backend = agent.backend();
  const key = `${backend.name}/${agent.cfg.model}`;
  if (agent.contextLen?.key !== key)
    agent.contextLen = { key, n: await backend.contextLength(agent.cfg.model || undefined) };
  return agent.contextLen.n;
}

export function windowKey(agent: Agent): string {
  return `${agent.cfg.backend}/${agent.cfg.model}`;
}

/** The window requests must fit: the configured or discovered one, or less when the provider said so. */
export async function windowSize(agent: Agent): Promise<number> {
  const n = await agent.contextLength();
  const l = agent.learnedWindow?.key === windowKey(agent) ? agent.learnedWindow.n : Infinity;
  return Math.min(n, l);
}

/** The size of the next request as it stands (system prompt, tools, history as sent), corrected. */
export function contextEstimate(agent: Agent): number {
  const rt = agent.runtime;
  const parts = measure(rt?.system ?? '', rt?.specs ?? [], sentView(agent));
  // Before the first request there is no runtime: the last request's fixed parts stand in for it.
  if (!rt && agent.stats.context)
    Object.assign(parts, { system: agent.stats.context.system, tools: agent.stats.context.tools });
  agent.stats.context = parts;
  return agent.correction.apply(total(parts));
}

/**
 * Summarizes the oldest turns, keeping a tail of at most `keepShare` of the budget (counted tokens). Run by fit() (only when
 * the head is worth a request) and by hand (then anything older than the last message can go). Returns
 * the report, or '' when there was nothing to summarize.
 */
export async function compactNow(
  agent: Agent,
  reason: string,
  signal?: AbortSignal,
  budget?: number,
  keepShare = KEEP_SHARE_REQUESTED,
  req?: { rt: Runtime; tools: readonly ToolSpec[]; force?: boolean },
): Promise<string> {
  const requested = budget === undefined;
  budget ??= Math.floor(
    (await tokenBudget(agent, { ...agent.runtime?.profile.params, ...agent.cfg.params })) / agent.correction.factor,
  );
  const msgs = agent.history.messages;
  const sized = sentView(agent);
  // The tail is sized as it will be sent once its oversized output is cut (the next step of fit()): a round
  // with one huge result stays, cut, rather than being summarized away with the turns before it.
  const cutSized = sentView(agent, { maxTokens: Math.floor(budget * CUT_SHARES[0]!) });
  let start = tailStart(msgs, cutSized, Math.floor(budget * keepShare));
  if (requested && start < 2) start = msgs.length;
  if (req?.force && start === 0) {
    // After an overflow something must go even if the tail looked small: all but the latest prompt.
    const last = msgs.findLastIndex((m) => m.role === 'user' && !m.kind);
    start = last > 0 ? last : msgs.length;
  }
  const head = msgs.slice(0, start);
  const headTokens = measure('', [], sized.slice(0, start)).history;
  const onlySummary = head.length === 1 && head[0]!.role === 'user' && head[0]!.kind === 'summary';
  if (start === 0 || onlySummary || (!requested && !req?.force && headTokens < budget * MIN_HEAD_SHARE)) {
    return requested
      ? `nothing to compact: the history is ${msgs.length} message(s), ~${headTokens} tokens, already as small as compaction makes it\n`
      : '';
  }
  await preCompactHooks(agent, requested);
  const prev = agent.st;
  setState(agent, 'compacting');
  const rt = req?.rt ?? agent.runtime;
  const before = rt ? measured(agent, rt, req?.tools ?? rt.specs, sized).estimate : agent.correction.apply(headTokens);
  agent.log.add('info', `Compacting ${start} messages (~${headTokens} tokens; ${reason}).`, { name: 'compaction' });
  try {
    const backend = agent.backend();
    const model = agent.runtime?.profile.compactionModel ?? backend.compactionModel;
    const window = Math.min(await windowSize(agent), await backend.contextLength(model).catch(() => Infinity));
    const summary = await summarize(backend, model, head, Math.floor(window / agent.correction.factor), signal);
    const oldEpoch = agent.history.epoch;
    agent.history.replace([summaryMessage(summary, start), ...msgs.slice(start)]);
    agent.stats.lastInputTokens = 0;
    agent.stats.lastOutputTokens = 0;
    const after = rt ? measured(agent, rt, req?.tools ?? rt.specs, sentView(agent)).estimate : agent.contextEstimate();
    if (!agent.dead) agent.deps.store.setStats(agent.id, JSON.stringify(agent.stats));
    const msg = `Compacted ${start} messages into a summary (request ~${before} → ~${after} tokens, system prompt and tools included). The history before it is kept (epoch ${oldEpoch}; ctl restore brings it back).`;
    agent.log.add('info', msg, { name: 'compaction' });
    return `${msg}\n`;
  } finally {
    setState(agent, prev);
  }
}
