/** Running tool calls: the model's rounds (batched, through toolsrv), tool_search, and the user's `!cmd`. */
import { join } from 'node:path';
import type { ToolCall } from '../backend/types.js';
import type { ProcResult, ToolInfo } from '../../toolsrv/protocol.js';
import type { Agent } from './agent.js';
import {
  batches,
  forModel,
  MODEL_OUTPUT_CAP,
  prepare,
  type ModelResult,
  type PreparedCall,
  type SpillTo,
} from './dispatch.js';
import { AgentError, errText } from './errors.js';
import type { Runtime } from './runtime.js';
import { setState } from './state.js';
import { describeLoaded, searchTools, spec, TOOL_SEARCH } from './tooling.js';
import type { TurnResult } from './types.js';
import { postToolUseHooks, preToolUseHooks } from '../hooks/agent.js';
import { isMcpTool } from '../mcp/tools.js';
import { refreshTools } from './runtime.js';

export async function runTools(
  agent: Agent,
  rt: Runtime,
  calls: ToolCall[],
  signal: AbortSignal,
): Promise<ModelResult[]> {
  await rt.ready;
  // An MCP tool the list does not have yet (its server started or came back since): look again first.
  if (calls.some((c) => isMcpTool(c.name) && !rt.tools.has(c.name))) await refreshTools(agent, rt);
  const prepared = calls.map((c) => prepare(c, rt.tools));
  const deferred = new Set(deferredTools(agent, rt).map((t) => t.name));
  const results: ModelResult[] = new Array<ModelResult>(prepared.length);
  for (const batch of batches(prepared)) {
    if (signal.aborted) break;
    await Promise.all(
      batch.map(async (p) => {
        const i = prepared.indexOf(p);
        let r: ModelResult;
        let blocked: ModelResult | undefined;
        if (p.call.name === TOOL_SEARCH) r = await toolSearch(agent, rt, p.call);
        else if (p.invalid) r = { content: p.invalid, full: p.invalid, isError: true };
        else if (!rt.host)
          r = {
            content: 'error: tools are unavailable: no tool server runs for this session',
            full: 'tools are unavailable',
            isError: true,
          };
        else if ((blocked = await preToolUseHooks(agent, p))) r = blocked;
        else {
          try {
            const res = await rt.host.call({ tool: p.call.name, args: p.args!, flags: p.flags }, signal);
            if (res.status === 'background')
              agent.procs.set(res.pid, { pid: res.pid, tool: p.call.name, args: p.call.args, started: Date.now() });
            r = await postToolUseHooks(
              agent,
              p,
              res,
              forModel(res, await spillTo(agent, rt, res, p.call.id.replace(/[^\w.-]/g, '_'))),
            );
            // A listed tool called by name: toolsrv validated and ran it; its schema goes out from now on.
            if (deferred.has(p.call.name)) activate(agent, rt, [p.call.name]);
          } catch (e) {
            if (signal.aborted) return;
            const msg = `error: ${errText(e)}`;
            r = { content: msg, full: msg, isError: true };
          }
        }
        results[i] = r;
        agent.deps.store.batch(() => {
          agent.log.add('tool', r.full, { name: p.call.name, ...(r.format ? { format: r.format } : {}) });
          agent.history.append({
            role: 'tool',
            toolCallId: p.call.id,
            name: p.call.name,
            content: r.content,
            ...(r.isError ? { isError: true } : {}),
          });
        });
      }),
    );
  }
  return results.filter(Boolean);
}

/** `!cmd`: runs a shell command through toolsrv; the output joins the history as context. */
export async function runShell(agent: Agent, cmd: string, signal: AbortSignal): Promise<TurnResult> {
  setState(agent, 'calling');
  const rt = await agent.ensureRuntime();
  await rt.ready;
  agent.log.add('user', `!${cmd}`);
  if (!rt.host) throw new AgentError('no tool server runs for this session');
  // A `!cmd` prompt may come from an agent (its own prompt file, a sub-agent's first prompt): it is a shell call
  // like the model's, and meets the same PreToolUse and PostToolUse hooks.
  const id = `shell-${Date.now()}`;
  const p: PreparedCall = {
    call: { id, name: 'shell', args: JSON.stringify({ command: cmd }) },
    args: { command: cmd },
    flags: {},
  };
  const blocked = await preToolUseHooks(agent, p);
  if (blocked) {
    agent.log.add('tool', blocked.full, { name: 'shell' });
    return { reply: blocked.full, error: blocked.content };
  }
  // Checkpointed like the model's rounds: what the user's own command changes can be rewound too.
  const host = rt.host;
  const call = () => host.call({ tool: 'shell', args: p.args!, flags: p.flags }, signal);
  const res = await (agent.deps.checkpoints?.round(agent, [p.call], rt.tools, call) ?? call());
  const r = await postToolUseHooks(agent, p, res, forModel(res, await spillTo(agent, rt, res, id)));
  agent.log.add('tool', r.full, { name: 'shell', ...(r.format ? { format: r.format } : {}) });
  agent.history.append({
    role: 'user',
    kind: 'attachment',
    content: `<context>\nThe user ran \`${cmd}\`:\n${r.content}\n</context>`,
  });
  return { reply: r.full, error: r.isError ? r.content : undefined };
}

/** Deferred tools whose schemas are not sent yet. */
export function deferredTools(agent: Agent, rt: Runtime): ToolInfo[] {
  const sent = new Set(rt.specs.map((s) => s.name));
  return [...rt.tools.values()].filter((t) => !sent.has(t.name));
}

/** Sends these deferred tools' schemas from the next request on. */
export function activate(agent: Agent, rt: Runtime, names: string[]): void {
  const sent = new Set(rt.specs.map((s) => s.name));
  const add = names.filter((n) => !sent.has(n) && rt.tools.has(n));
  if (!add.length) return;
  for (const n of add) rt.active.add(n);
  rt.specs = [...rt.specs, ...add.map((n) => spec(rt.tools.get(n)!))];
}

/** tool_search: loads deferred tools by name or by what they do. */
export async function toolSearch(agent: Agent, rt: Runtime, call: ToolCall): Promise<ModelResult> {
  let query = '';
  try {
    const a = JSON.parse(call.args || '{}') as { query?: unknown };
    if (typeof a.query === 'string') query = a.query.trim();
  } catch {
    // answered below
  }
  if (!query)
    return { content: `error: ${TOOL_SEARCH} needs {"query": "tool names or words"}`, full: 'no query', isError: true };
  const deferred = deferredTools(agent, rt);
  const found = await searchTools(query, deferred);
  activate(
    agent,
    rt,
    found.map((t) => t.name),
  );
  const text = describeLoaded(found, query, deferred);
  return { content: text, full: text, isError: false };
}

/**
 * Where a long result of a call goes: the agent's spill dir here, or, when the session's tools run on another host,
 * its spill dir there (saved through toolsrv first), since the tools that read it run there.
 */
async function spillTo(agent: Agent, rt: Runtime, res: ProcResult, name: string): Promise<SpillTo> {
  const here = { root: agent.deps.outputDir, dir: join(agent.deps.outputDir, agent.sessionId, agent.id), name };
  if (!agent.deps.remoteSession?.(agent.sessionId) || !rt.host?.spill) return here;
  const full = forModel(res, { failed: '' }).full;
  if (Buffer.byteLength(full) <= MODEL_OUTPUT_CAP) return here;
  try {
    return { saved: await rt.host.spill(name, full) };
  } catch (e) {
    return { failed: `on the tools' host: ${errText(e)}` };
  }
}
