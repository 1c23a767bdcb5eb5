/** What the agent's ctl commands do to it: stop, compact, restore, clear, switch profile or directory, load a tool, die. */
import { relative } from 'node:path';
import type { Backend, Message } from '../backend/types.js';
import type { Agent } from './agent.js';
import { AgentError } from './errors.js';
import { compactNow } from './fit.js';
import { refreshTools } from './runtime.js';

export function stop(agent: Agent): boolean {
  if (!agent.abort) return false;
  agent.abort.abort(new AgentError('stopped'));
  return true;
}

/**
 * The agent's backend. When backends.conf no longer has it (an agent made before the user configured a backend,
 * or whose section was renamed or removed), the agent moves to the default backend, with that backend's model — the
 * old model name belongs to the old provider — and its log says so; a rename back later does not move it back.
 * Throws NoBackendError (at once, never retried) while no backend is configured at all.
 */
export function backend(agent: Agent): Backend {
  const pool = agent.deps.backends;
  if (pool.defaultName && !pool.names().includes(agent.cfg.backend)) {
    const gone = agent.cfg.backend;
    agent.cfg.backend = pool.defaultName;
    agent.cfg.model = '';
    agent.saveCfg();
    const was = gone
      ? `backend "${gone}" is no longer configured`
      : 'no backend was configured when this agent was made';
    agent.log.add('info', `${was}: using the default backend "${pool.defaultName}" and its model.`, {
      name: 'backend',
    });
  }
  return pool.get(agent.cfg.backend);
}

export async function loadTool(agent: Agent, name: string): Promise<void> {
  const rt = await agent.ensureRuntime();
  await rt.ready;
  if (!rt.host) throw new AgentError('no tool server runs for this session');
  await rt.host.ctl(`load ${name}`);
  if (!agent.cfg.tools.includes(name)) agent.cfg.tools.push(name);
  agent.saveCfg();
  await refreshTools(agent, rt, true);
}

/** `ctl compact`: now when idle, after the current round when a turn runs. */
export async function compact(agent: Agent): Promise<string> {
  if (agent.running) {
    agent.compactRequested = true;
    return 'compaction will run after the current round\n';
  }
  agent.running = true;
  try {
    return await compactNow(agent, 'requested');
  } finally {
    agent.running = false;
    agent.drain();
  }
}

/** Brings back the history as it was before the last compaction or clear. */
export function restore(agent: Agent): string {
  if (agent.running) throw new AgentError('the agent is running; stop it first');
  const e = agent.history.epoch;
  if (e === 0) throw new AgentError('there is no earlier history to restore');
  const older = agent.deps.store.messages(agent.id, e - 1).map((b) => JSON.parse(b) as Message);
  agent.history.replace(older);
  agent.log.add('info', `Restored the history of epoch ${e - 1} (${older.length} messages).`, { name: 'restore' });
  return `restored ${older.length} messages\n`;
}

export function clear(agent: Agent): void {
  if (agent.running) throw new AgentError('the agent is running; stop it first');
  agent.history.replace([]);
  agent.stats.lastInputTokens = 0;
  agent.stats.lastOutputTokens = 0;
  agent.log.add('info', 'History cleared.', { name: 'clear' });
}

/** Switches profile: a fresh runtime and an empty history (the old one is another profile's conversation). */
export async function switchProfile(agent: Agent, name: string): Promise<void> {
  if (agent.running) throw new AgentError('the agent is running; stop it first');
  const p = agent.deps.profiles.get(name);
  if (p.backend) agent.deps.backends.get(p.backend);
  agent.cfg.profile = name;
  if (p.backend) agent.cfg.backend = p.backend;
  if (p.model) agent.cfg.model = p.model;
  agent.cfg.tools = [];
  agent.saveCfg();
  await agent.resetRuntime();
  agent.history.replace([]);
  agent.log.add('info', `Switched to profile ${name}; history cleared.`, { name: 'agent' });
}

export async function setCwd(agent: Agent, cwd: string): Promise<void> {
  if (agent.running) throw new AgentError('the agent is running; stop it first');
  agent.cfg.cwd = cwd;
  // Only the owner (or a workflow, inside the session) moves an agent: out of its creator's directory, the
  // policy is its own directory's from then on.
  const root = agent.cfg.sandboxRoot;
  if (root !== undefined && relative(root, cwd).startsWith('..')) delete agent.cfg.sandboxRoot;
  agent.saveCfg();
  await agent.resetRuntime();
}

/**
 * Ends the agent at once: from here on nothing is stored for it (its rows may be deleted right after), its
 * turn is stopped, its log readers get EOF; its toolsrv connection closes when the turn has unwound.
 */
export function kill(agent: Agent): Promise<void> {
  if (agent.dead) return agent.current ?? Promise.resolve();
  agent.dead = true;
  agent.history.detach();
  agent.queue = [];
  agent.stop();
  agent.log.close();
  const w = agent.stateWaiters;
  agent.stateWaiters = [];
  for (const f of w) f();
  const done = (agent.current ?? Promise.resolve()).then(() => agent.resetRuntime());
  agent.current = done;
  return done;
}
