/**
 * Prompts coming in: a `/cmd` runs at once, anything else joins the queue, which runs one turn at a time, in order,
 * while the session is not paused.
 */
import type { Agent } from './agent.js';
import { AgentError } from './errors.js';
import { runTurn } from './turn.js';

/**
 * A prompt as a user types it: `/cmd` is a ctl command (run at once, even mid-turn), `!cmd` a shell command,
 * anything else a prompt to the model. Returns what happened to it.
 */
export async function submit(agent: Agent, text: string): Promise<'started' | 'queued' | 'command'> {
  if (agent.dead) throw new AgentError(`agent ${agent.name} is dead`);
  const t = text.replace(/\n+$/, '');
  if (!t.trim()) throw new AgentError('empty prompt');
  if (t.startsWith('/')) {
    const out = await agent.ctl(t.slice(1));
    agent.log.add('info', out.trimEnd() || 'ok', { name: 'command' });
    return 'command';
  }
  return agent.enqueue(t);
}

/** Adds a prompt to the queue; it starts at once when the agent is idle and its session not paused. */
export function enqueue(agent: Agent, text: string): 'started' | 'queued' {
  if (agent.dead) throw new AgentError(`agent ${agent.name} is dead`);
  agent.queue.push(text);
  if (agent.running || agent.session().paused) return 'queued';
  agent.drain();
  return 'started';
}

/** Starts the next queued prompt if the agent can run one. */
export function drain(agent: Agent): void {
  if (agent.running || agent.dead || agent.session().paused) return;
  const next = agent.queue.shift();
  if (next !== undefined) agent.current = runTurn(agent, next);
}

/** Text to add to the running turn before its next model request (replaces a pending injection). */
export function inject(agent: Agent, text: string): void {
  agent.injection = text;
}
