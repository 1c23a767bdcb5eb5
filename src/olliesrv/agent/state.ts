/** The agent's state as it publishes it (bus topics, waiters), and how a stored log says the last turn ended. */
import type { Agent } from './agent.js';
import { closeDanglingCalls } from './history.js';
import type { AgentState, TurnOutcome } from './types.js';

/**
 * The outcome of the last turn in a stored log (newest block first back to the prompt that started it), so that a
 * turn that failed before a restart still says so after it.
 */
export function lastOutcome(stored: string[]): TurnOutcome {
  for (let i = stored.length - 1; i >= 0; i--) {
    const b = JSON.parse(stored[i]!) as { role?: string; name?: string };
    if (b.role === 'error') return 'error';
    if (b.role === 'info' && b.name === 'stopped') return 'stopped';
    if (b.role === 'user') return 'ok';
  }
  return stored.length ? 'ok' : '-';
}

/** The daemon died during a turn: say so, and make the history valid again. */
export function recoverInterrupted(agent: Agent): void {
  for (const m of closeDanglingCalls(
    agent.history.messages,
    'error: interrupted: the daemon stopped before this tool call finished',
  ))
    agent.history.append(m);
  agent.log.add('info', 'The previous turn was interrupted (the daemon stopped while it ran).', {
    name: 'interrupted',
  });
  agent.deps.store.setRunning(agent.id, false);
}

export function topic(agent: Agent, event: string): string {
  return `session.${agent.sessionId}.agent.${agent.id}.${event}`;
}

export function setState(agent: Agent, s: AgentState): void {
  const before = agent.state;
  agent.st = s;
  agent.announceState(before);
}

/** Publishes the state if it changed (also called when the session is paused or resumed). */
export function announceState(agent: Agent, before: AgentState): void {
  const now = agent.state;
  if (now === before) return;
  agent.deps.bus.publish(topic(agent, 'state'), now);
  const w = agent.stateWaiters;
  agent.stateWaiters = [];
  for (const f of w) f();
}

/** Resolves at the next state change. */
export function stateChange(agent: Agent, signal: AbortSignal): Promise<AgentState> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    agent.stateWaiters.push(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(agent.state);
    });
  });
}
