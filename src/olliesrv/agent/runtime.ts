/**
 * The agent's runtime: its profile, resolved system prompt, toolsrv connection and the tools the model is sent,
 * built before the first turn and dropped when the profile, cwd or tools change.
 */
import type { ToolHost } from '../toolclient/host.js';
import type { ToolInfo } from '../../toolsrv/protocol.js';
import type { ToolSpec } from '../backend/types.js';
import { envRefusal } from '../session/envrules.js';
import type { Agent } from './agent.js';
import { errText } from './errors.js';
import { resolvePrompt, type Profile } from './profiles.js';
import { spec, TOOL_SEARCH_SPEC, toolsPrompt } from './tooling.js';
import { isMcpTool, MCP_WAIT } from '../mcp/tools.js';
import { markInterrupt } from '../hooks/agent.js';

export interface Runtime {
  profile: Profile;
  promptText: string;
  host?: ToolHost;
  rev: number;
  tools: Map<string, ToolInfo>;
  /** What the model is sent: the hot tools, the ones loaded by hand, tool_search, then those it loaded. */
  specs: ToolSpec[];
  /** Deferred tools the model loaded (tool_search, or a call by name), in the order it did. */
  active: Set<string>;
  system: string;
  /** Aborted when the runtime is dropped. */
  life: AbortController;
  /** Settles when the toolsrv connection is set up (at once, unless the tools came from the cache). */
  ready: Promise<unknown>;
}

/** How many finished background processes an agent keeps listing. */
export const KEEP_FINISHED_PROCS = 20;

export function env(agent: Agent): Record<string, string> {
  const sessionEnv: Record<string, string> = {};
  for (const l of agent.session().env.split('\n')) {
    const eq = l.indexOf('=');
    // The registry refuses such variables and drops stored ones; checked again where they would take effect.
    if (eq > 0 && !envRefusal(l.slice(0, eq))) sessionEnv[l.slice(0, eq)] = l.slice(eq + 1);
  }
  return {
    ...agent.deps.baseEnv,
    ...sessionEnv,
    OLLIE_SESSION_ID: agent.sessionId,
    OLLIE_UNAME: agent.id,
    OLLIE_AGENT_NAME: agent.name,
    PWD: agent.cfg.cwd,
  };
}

/** What a prompt command knows of Ollie: where its files are (the daemon's dirs, never the session's) and who asks. */
export function promptIdentity(agent: Agent): Record<string, string> {
  const { OLLIE_DATA, OLLIE_CONFIG } = agent.deps.baseEnv;
  return {
    ...(OLLIE_DATA !== undefined && { OLLIE_DATA }),
    ...(OLLIE_CONFIG !== undefined && { OLLIE_CONFIG }),
    OLLIE_SESSION_ID: agent.sessionId,
    OLLIE_UNAME: agent.id,
    OLLIE_AGENT_NAME: agent.name,
  };
}

export async function ensureRuntime(agent: Agent): Promise<Runtime> {
  if (agent.runtime) return agent.runtime;
  agent.building ??= buildRuntime(agent).finally(() => (agent.building = undefined));
  agent.runtime = await agent.building;
  return agent.runtime;
}

export async function buildRuntime(agent: Agent): Promise<Runtime> {
  // The provider package loads while the prompt is resolved and toolsrv starts.
  // Without any backend this throws; the turn reports that after the prompt is in the log, where the user sees both.
  if (agent.deps.backends.defaultName) void agent.backend().prepare?.();
  const profile = agent.deps.profiles.get(agent.cfg.profile);
  const env = agent.env();
  const wanted = [...new Set([...profile.autoLoad, ...agent.cfg.tools])];
  const cacheKey = agent.deps.toolCache?.key(wanted);
  const cached = cacheKey ? agent.deps.toolCache!.get(cacheKey) : undefined;
  const rt: Runtime = {
    profile,
    promptText: '',
    rev: -1,
    tools: new Map(),
    specs: [],
    active: new Set(),
    system: '',
    life: new AbortController(),
    ready: Promise.resolve(),
  };
  const connect = async (): Promise<void> => {
    const st = await agent.deps.tools(agent.sessionId);
    if (st) {
      const { OLLIE_SESSION_ID: _s, OLLIE_UNAME: _u, ...sessionEnv } = env;
      // Last, so that nothing in the session's environment stands in for it.
      const token: Record<string, string> = agent.deps.token
        ? { OLLIE_TOKEN: agent.deps.token(agent.sessionId, agent.id) }
        : {};
      const host = await st.forAgent(agent.id, agent.cfg.cwd, { ...sessionEnv, ...token }, agent.cfg.sandboxRoot);
      // The agent's scope in toolsrv outlives a runtime (a profile switch, a cwd change): make it hold exactly
      // the profile's tools and the ones loaded by hand.
      // The commands are independent (one tool each), so they go out together: one round trip, not one each.
      await host.ctl(MCP_WAIT).catch(() => undefined);
      const loaded = new Set((await host.list()).tools.map((t) => t.name).filter((n) => !isMcpTool(n)));
      await Promise.all([
        ...[...loaded].filter((t) => !wanted.includes(t)).map((t) => host.ctl(`unload ${t}`).catch(() => undefined)),
        ...wanted
          .filter((t) => !loaded.has(t))
          .map((t) =>
            host
              .ctl(`load ${t}`)
              .catch((e: unknown) =>
                agent.log.add('info', `could not load tool ${t}: ${errText(e)}`, { name: 'tools' }),
              ),
          ),
      ]);
      rt.host = host;
    }
    await refreshTools(agent, rt, true);
    if (cacheKey && rt.host) agent.deps.toolCache!.set(cacheKey, [...rt.tools.values()]);
    if (rt.host?.interrupts) void followInterrupts(agent, rt.host, rt.life.signal);
  };
  if (cached) {
    // The schemas toolsrv gave last time: the first request goes out while toolsrv starts; calls wait for it.
    const prompt = await resolvePrompt(profile.prompt, agent.cfg.cwd, promptIdentity(agent), agent.deps.promptCommands);
    for (const w of prompt.warnings) agent.log.add('info', w, { name: 'prompt' });
    rt.promptText = prompt.text;
    setTools(agent, rt, cached);
    rt.ready = connect().catch((e: unknown) =>
      agent.log.add('error', `the tool server did not start: ${errText(e)}`, { name: 'tools' }),
    );
  } else {
    // The prompt commands and the toolsrv connection are independent: run them side by side.
    const [prompt] = await Promise.all([
      resolvePrompt(profile.prompt, agent.cfg.cwd, promptIdentity(agent), agent.deps.promptCommands),
      connect(),
    ]);
    for (const w of prompt.warnings) agent.log.add('info', w, { name: 'prompt' });
    rt.promptText = prompt.text;
    setTools(agent, rt, [...rt.tools.values()]);
  }
  return rt;
}

/** Background processes that finished come back as prompts (queued while a turn runs). */
export async function followInterrupts(agent: Agent, host: ToolHost, signal: AbortSignal): Promise<void> {
  try {
    for await (const i of host.interrupts!(signal)) {
      const p = agent.procs.get(i.pid);
      if (p) Object.assign(p, { status: i.status, exit: i.exit });
      forgetFinishedProcs(agent);
      if (!agent.dead) {
        markInterrupt(agent, i.text);
        agent.enqueue(i.text);
      }
    }
  } catch (e) {
    if (!signal.aborted) agent.deps.log(`agent ${agent.id}: lost background-process notifications: ${errText(e)}`);
  }
}

/** Re-reads the loaded tools when toolsrv's registry revision moved (or when forced). */
export async function refreshTools(agent: Agent, rt: Runtime, force = false): Promise<void> {
  if (!rt.host) return;
  if (!force && (await rt.host.rev()) === rt.rev) return;
  const { rev, tools } = await rt.host.list();
  rt.rev = rev;
  setTools(agent, rt, tools);
}

/**
 * The tools the model sees, and the system prompt with their prompts and the index of the deferred ones.
 * The system prompt depends only on the tiers, not on what the model loaded since, so that it stays
 * byte-identical for the provider's prompt cache.
 */
export function setTools(agent: Agent, rt: Runtime, tools: ToolInfo[]): void {
  rt.tools = new Map(tools.map((t) => [t.name, t]));
  const sent = (t: ToolInfo): boolean => t.tier === 'hot' || agent.cfg.tools.includes(t.name);
  const base = tools.filter(sent);
  const deferred = tools.filter((t) => !sent(t));
  for (const n of rt.active) if (!rt.tools.has(n) || sent(rt.tools.get(n)!)) rt.active.delete(n);
  rt.specs = [
    ...base.map(spec),
    ...(deferred.length ? [TOOL_SEARCH_SPEC] : []),
    ...[...rt.active].map((n) => spec(rt.tools.get(n)!)),
  ];
  const tp = toolsPrompt(base, deferred);
  rt.system = tp ? `${rt.promptText.trimEnd()}\n\n${tp}\n` : rt.promptText;
}

/** Drops the runtime: the next turn rebuilds it (profile, prompt, tools). */
export async function resetRuntime(agent: Agent): Promise<void> {
  const old = agent.runtime;
  agent.runtime = undefined;
  old?.life.abort();
  await old?.host?.close().catch(() => undefined);
}

export function forgetFinishedProcs(agent: Agent): void {
  const done = [...agent.procs.values()].filter((p) => p.status);
  for (const p of done.slice(0, Math.max(0, done.length - KEEP_FINISHED_PROCS))) agent.procs.delete(p.pid);
}
