/**
 * The turn loop: stream the model's reply, run the tool calls it asks for through toolsrv, append the results,
 * and go round again until the model answers without calling a tool, with the loop's safety limits (steps, failing
 * rounds, repeated rounds, token budget).
 */
import type { ContextKind } from '../backend/types.js';
import { EVENTS } from '../../formats/olliesrv.js';
import type { Agent } from './agent.js';
import { errText } from './errors.js';
import { compactNow, sentView } from './fit.js';
import { closeDanglingCalls } from './history.js';
import { respond } from './request.js';
import { refreshTools } from './runtime.js';
import { setState, topic } from './state.js';
import { startTurn } from './stats.js';
import { runShell, runTools } from './toolround.js';
import { sessionStartHooks, stopHooks, takeInterrupt, turnStarts, userPromptHooks } from '../hooks/agent.js';
import type { TurnResult } from './types.js';

/** Safety thresholds of the loop: a model that keeps failing or repeating itself is nudged, then stopped. */
export const ERROR_ROUNDS_NUDGE = 5;
export const ERROR_ROUNDS_ABORT = 10;
export const STALL_ROUNDS = 5;
export const PLAN_EVERY = 10;

/** The skill a `skill` context block holds (skills/matcher.ts writes its name first). */
const SKILL_NAME = /^<context>\nSkill "([^"]+)"/;

export async function runTurn(agent: Agent, text: string): Promise<void> {
  agent.running = true;
  const ac = new AbortController();
  agent.abort = ac;
  agent.deps.store.setRunning(agent.id, true);
  startTurn(agent.stats);
  let result: TurnResult;
  try {
    result = text.startsWith('!')
      ? await runShell(agent, text.slice(1).trim(), ac.signal)
      : await turn(agent, text, ac.signal);
  } catch (e) {
    const msg = ac.signal.aborted ? 'stopped' : errText(e);
    if (!ac.signal.aborted) agent.log.add('error', msg);
    result = { reply: '', error: ac.signal.aborted ? undefined : msg, stopped: ac.signal.aborted };
  }
  // A stopped turn may leave calls without results; the next request would be rejected without them.
  for (const m of closeDanglingCalls(
    agent.history.messages,
    'error: interrupted by the user before this tool call finished',
  ))
    agent.history.append(m);
  if (result.stopped) agent.log.add('info', 'Stopped.', { name: 'stopped' });
  agent.running = false;
  agent.abort = undefined;
  agent.injection = undefined;
  if (!agent.dead) {
    agent.deps.store.batch(() => {
      agent.deps.store.setRunning(agent.id, false);
      agent.deps.store.setStats(agent.id, JSON.stringify(agent.stats));
    });
    // Before the state: a client that sees `idle` already knows whether the turn failed.
    agent.lastTurn = result.error ? 'error' : result.stopped ? 'stopped' : 'ok';
    agent.deps.bus.publish(
      topic(agent, 'turn'),
      EVENTS.payload(topic(agent, 'turn'), { how: agent.lastTurn, error: result.error ?? null }),
    );
    setState(agent, 'idle');
  }
  const waiters = agent.turnWaiters;
  agent.turnWaiters = [];
  for (const w of waiters) w(result);
  if (agent.compactRequested && !agent.dead) {
    agent.compactRequested = false;
    await compactNow(agent, 'requested').catch((e: unknown) =>
      agent.log.add('error', `compaction failed: ${errText(e)}`),
    );
  }
  agent.drain();
}

export async function turn(agent: Agent, text: string, signal: AbortSignal): Promise<TurnResult> {
  setState(agent, 'thinking');
  const rt = await agent.ensureRuntime();
  for (const c of await sessionStartHooks(agent, rt, agent.history.messages.length > 0)) addContext(agent, c, 'hook');
  turnStarts(agent);
  const hooked = takeInterrupt(agent, text) ? { context: [] } : await userPromptHooks(agent, text);
  if (hooked.block) return { reply: '', error: hooked.block };
  if (agent.deps.enrich && !text.startsWith('<system-proc-interrupt')) {
    try {
      const present = new Set(
        sentView(agent).flatMap((m) =>
          m.role === 'user' && m.kind === 'skill' ? [SKILL_NAME.exec(m.content)?.[1] ?? ''] : [],
        ),
      );
      for (const c of await agent.deps.enrich({
        agent: agent,
        prompt: text,
        tools: [...rt.tools.values()],
        cwd: agent.cfg.cwd,
        present,
      })) {
        addContext(agent, c.text, c.name, c.name === 'skill' ? 'skill' : 'hint');
      }
    } catch (e) {
      agent.log.add('info', `could not match skills and tools to the prompt: ${errText(e)}`, { name: 'enrich' });
    }
  }
  for (const c of hooked.context) addContext(agent, c, 'hook');
  agent.deps.store.batch(() => {
    agent.log.add('user', text);
    agent.history.append({ role: 'user', content: text });
  });
  const backend = agent.backend();
  const maxSteps = agent.budget.steps ?? agent.cfg.maxSteps ?? rt.profile.maxSteps;
  let steps = 0;
  let errorRounds = 0;
  let sameRounds = 0;
  let lastSig = '';
  let reply = '';
  for (;;) {
    if (signal.aborted) return { reply, stopped: true };
    const finalRound = steps >= maxSteps;
    if (finalRound) {
      addContext(
        agent,
        `You have used all ${maxSteps} steps of this turn. Do not call any more tools: reply with a final summary of what you did, what works, and what remains to be done.`,
        'maxsteps',
      );
    } else if (steps > 0 && steps % PLAN_EVERY === 0 && agent.session().plan.trim()) {
      addContext(agent, `The session plan (re-read it and keep to it):\n\n${agent.session().plan}`, 'plan');
    }
    if (agent.injection !== undefined) {
      const inj = agent.injection;
      agent.injection = undefined;
      // An injection is a prompt too, and an agent may write one (its own ctl, a sub-agent's): the same hooks.
      const checked = await userPromptHooks(agent, inj);
      if (!checked.block) {
        for (const c of checked.context) addContext(agent, c, 'hook');
        agent.log.add('user', inj, { name: 'inject' });
        agent.history.append({ role: 'user', content: inj });
      }
    }
    setState(agent, 'thinking');
    const r = await respond(agent, backend, rt, finalRound ? [] : rt.specs, signal);
    if (!r) return { reply, stopped: true };
    if (r.text.trim()) reply = r.text;
    agent.deps.store.batch(() => {
      for (const c of r.calls) agent.log.add('call', c.args, { name: c.name });
      // Anthropic refuses a continuation whose thinking lost its signature; Gemini 3 the same for calls (kept in r.calls).
      agent.history.append({
        role: 'assistant',
        content: r.text,
        ...(r.reasoning ? { reasoning: r.reasoning } : {}),
        ...(r.signature ? { reasoningSignature: r.signature } : {}),
        ...(r.calls.length ? { toolCalls: r.calls } : {}),
      });
    });
    // The final round ends the turn too: its Stop hooks run, and one that blocks then leaves it unconfirmed.
    const ending = !r.calls.length || finalRound;
    const { goOn, error: stopError } = ending ? await stopHooks(agent, finalRound) : {};
    if (stopError) return { reply, error: stopError };
    if (goOn) addContext(agent, goOn, 'hook');
    else if (ending) break;
    steps++;
    if (agent.budget.tokens !== undefined && agent.stats.turnTokens > agent.budget.tokens) {
      const msg = `token budget exhausted: this sub-agent used ${agent.stats.turnTokens} tokens of its ${agent.budget.tokens}`;
      agent.log.add('error', msg, { name: 'budget' });
      return { reply, error: msg };
    }
    // A Stop hook that blocked sends the model round again, within the budget like any round.
    if (goOn) continue;
    setState(agent, 'calling');
    const results = await (agent.deps.checkpoints?.round(agent, r.calls, rt.tools, () =>
      runTools(agent, rt, r.calls, signal),
    ) ?? runTools(agent, rt, r.calls, signal));
    if (signal.aborted) return { reply, stopped: true };
    errorRounds = results.every((x) => x.isError) ? errorRounds + 1 : 0;
    const sig = JSON.stringify(r.calls.map((c) => [c.name, c.args]));
    sameRounds = sig === lastSig ? sameRounds + 1 : 1;
    lastSig = sig;
    if (errorRounds >= ERROR_ROUNDS_ABORT) {
      const msg = `aborting the turn: the last ${ERROR_ROUNDS_ABORT} tool rounds all failed`;
      agent.log.add('error', msg, { name: 'errors' });
      return { reply, error: msg };
    }
    if (errorRounds === ERROR_ROUNDS_NUDGE) {
      addContext(
        agent,
        `Your last ${ERROR_ROUNDS_NUDGE} tool rounds all failed. Stop and think about why, then try a different approach.`,
        'nudge',
      );
    }
    if (sameRounds === STALL_ROUNDS) {
      const msg = `You have made the same tool calls ${STALL_ROUNDS} rounds in a row. You are stuck: do something different, or stop and explain what is blocking you.`;
      agent.log.add('stalled', msg);
      agent.history.append({ role: 'user', content: `<context>\n${msg}\n</context>` });
    }
    await refreshTools(agent, rt);
    if (agent.compactRequested) {
      agent.compactRequested = false;
      await compactNow(agent, 'requested', signal);
    }
  }
  return { reply };
}

/** A context block: sent to the model, hidden in the chat view. */
export function addContext(agent: Agent, text: string, name: string, kind: ContextKind = 'context'): void {
  agent.deps.store.batch(() => {
    agent.log.add('context', text, { name });
    agent.history.append({ role: 'user', kind, content: `<context>\n${text}\n</context>` });
  });
}
