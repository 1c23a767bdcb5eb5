/**
 * The agent loop's side of hooks: one function per event, called from one line in agent.ts each, which fires
 * the event (hooks.ts), shows every hook that ran as a `hook` block in the agent's chat, and returns what the
 * loop must do (a prompt blocked, context for the model, a tool call denied, rewritten or sent for approval).
 */
import type { ProcResult } from '../../toolsrv/protocol.js';
import { hiddenChar } from '../store/shellwords.js';
import type { PreparedCall, ModelResult } from '../agent/dispatch.js';
import type { ChatLog } from '../agent/chatlog.js';
import type { HookEvent } from './config.js';
import type { HookOutcome, HookRecord, Hooks, HookSite } from './hooks.js';

/** What of an agent the hooks need (agent.ts's Agent has it). */
export interface HookedAgent {
  readonly id: string;
  readonly sessionId: string;
  readonly depth: number;
  name: string;
  transient: boolean;
  cfg: { cwd: string; sandboxRoot?: string };
  readonly log: Pick<ChatLog, 'add'>;
  /** The daemon's hooks; absent, none run. */
  readonly deps: { readonly hooks?: Hooks };
}

function site(a: HookedAgent): HookSite {
  return {
    sessionId: a.sessionId,
    agentId: a.id,
    agentName: a.name,
    cwd: a.cfg.cwd,
    root: a.cfg.sandboxRoot ?? a.cfg.cwd,
  };
}

/** One line for the chat: the event, the tool, how it ended, in how long, the command; then its output. */
export function describeRecord(r: HookRecord): string {
  const how =
    r.exit === 'timeout'
      ? `killed (${r.why})`
      : r.exit === 'killed'
        ? `killed${r.why ? ` (${r.why})` : ''}`
        : r.exit === 'notrun'
          ? 'not run'
          : `exit ${r.exit}`;
  // How it ended first: the chat shows the first line alone, cut to the width.
  const head = `${r.event} hook${r.tool ? ` (${r.tool})` : ''}: ${how}, ${r.ms} ms: \`${r.command}\``;
  return r.output ? `${head}\n${r.output}` : head;
}

async function fire(
  a: HookedAgent,
  event: HookEvent,
  input: Record<string, unknown>,
  tool?: string,
): Promise<HookOutcome | undefined> {
  if (!a.deps.hooks) return undefined;
  const out = await a.deps.hooks.fire(event, site(a), input, tool);
  for (const r of out.records) a.log.add('info', describeRecord(r), { name: 'hook' });
  for (const n of out.notes) a.log.add('info', n, { name: 'hook' });
  return out;
}

/** Runtimes whose SessionStart has fired: once per runtime (an agent's first turn, after a restart, a profile switch). */
const started = new WeakSet<object>();

/** SessionStart: context for the model from the hooks' stdout. */
export async function sessionStartHooks(a: HookedAgent, runtime: object, resumed: boolean): Promise<string[]> {
  if (!a.deps.hooks || started.has(runtime)) return [];
  started.add(runtime);
  return (await fire(a, 'SessionStart', { source: resumed ? 'resume' : 'startup' }))?.context ?? [];
}

/**
 * The background-process interrupts toolsrv delivered to each agent, until their turn takes them. Only these skip
 * the UserPrompt hooks: a prompt an agent writes (its own, a sub-agent's) can look like one, and must not.
 */
const interrupts = new WeakMap<object, string[]>();

/** Marks `text` as an interrupt toolsrv sent to `a` (runtime.ts, before it is queued). */
export function markInterrupt(a: object, text: string): void {
  const list = interrupts.get(a) ?? [];
  list.push(text);
  interrupts.set(a, list);
}

/** Whether `text`, about to start a turn, is an interrupt toolsrv sent (each counts once). */
export function takeInterrupt(a: object, text: string): boolean {
  const list = interrupts.get(a);
  const i = list?.indexOf(text) ?? -1;
  if (i < 0) return false;
  list!.splice(i, 1);
  return true;
}

/** Agents whose last Stop hook blocked (Claude Code's stop_hook_active: a hook can tell it already had its say). */
const stopBlocked = new WeakSet<object>();
/** Agents whose last Stop blocked only because a guard that fails closed failed. */
const stopFailed = new WeakSet<object>();

/**
 * A turn starts (a prompt, or an interrupt toolsrv sent, which skips the UserPrompt hooks): what the Stop hooks of
 * the last one said is forgotten. Not for text injected into a running turn: the agent may inject its own, and its
 * guard's failures must still count as running (else it goes round until its step limit).
 */
export function turnStarts(a: object): void {
  stopBlocked.delete(a);
  stopFailed.delete(a);
}

/** UserPrompt: the prompt may be blocked (the reason is the turn's error), or get context. */
export async function userPromptHooks(a: HookedAgent, prompt: string): Promise<{ block?: string; context: string[] }> {
  // A prompt injected into the turn is new work: a hook that insisted once may insist again.
  stopBlocked.delete(a);
  const out = await fire(a, 'UserPrompt', { prompt });
  if (!out) return { context: [] };
  if (out.block) {
    a.log.add('error', `The prompt was blocked by a UserPrompt hook: ${out.block}`, { name: 'hook' });
    return { block: `blocked by a UserPrompt hook: ${out.block}`, context: [] };
  }
  return { context: out.context };
}

/**
 * PreToolUse: a result for the model when a hook blocks the call; otherwise the call as it is to run — its
 * arguments rewritten (updatedInput, merged into them) and, for "ask", marked for a person's approval (toolsrv
 * raises it through the bypass queue and runs the call sandboxed once approved).
 */
export async function preToolUseHooks(a: HookedAgent, p: PreparedCall): Promise<ModelResult | undefined> {
  const out = await fire(
    a,
    'PreToolUse',
    { tool_name: p.call.name, tool_input: p.args ?? {}, tool_use_id: p.call.id },
    p.call.name,
  );
  if (!out) return undefined;
  if (out.block) {
    const text = `error: the call was blocked by a PreToolUse hook: ${out.block}`;
    return { content: text, full: text, isError: true };
  }
  let ask = out.ask;
  if (out.updatedInput) {
    // A hook may change what the tool does, not where it runs: leaving the sandbox stays the model's request and
    // a person's decision.
    const { bypass: _b, ...rest } = out.updatedInput;
    const rewritten = { ...p.args, ...rest };
    a.log.add('info', `A PreToolUse hook rewrote the arguments of ${p.call.name}: ${JSON.stringify(rewritten)}`, {
      name: 'hook',
    });
    // The hooks ran side by side, each on the model's arguments: a guard among them never saw the rewrite (which
    // may be the agent's own, from a workspace script a hook runs). They judge the call as it will run, once more;
    // a second rewrite is not taken, so that what runs is what they passed.
    const again = await fire(
      a,
      'PreToolUse',
      { tool_name: p.call.name, tool_input: rewritten, tool_use_id: p.call.id },
      p.call.name,
    );
    if (again?.block) {
      const text = `error: the call, as a PreToolUse hook rewrote it, was blocked by a PreToolUse hook: ${again.block}`;
      return { content: text, full: text, isError: true };
    }
    ask ??= again?.ask;
    p.args = rewritten;
  }
  if (ask) p.flags = { ...p.flags, ask: visibleReason(ask) };
  return undefined;
}

/** Longest ask reason shown to the person: what the call is comes from toolsrv, not from the hook. */
const ASK_REASON_MAX = 500;

/**
 * An ask's reason as the approval shows it: one line, every control or invisible character as \u{HEX}, cut. A
 * hook's output may be the agent's (a workspace script a trusted hook runs): in a terminal an escape could redraw
 * the request it stands in, a bidi override could reverse it.
 */
export function visibleReason(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  const shown = [...flat].map((c) => (hiddenChar(c) ? `\\u{${c.codePointAt(0)!.toString(16)}}` : c)).join('');
  return shown.length > ASK_REASON_MAX ? `${shown.slice(0, ASK_REASON_MAX)}…` : shown;
}

/** PostToolUse: what a blocking hook (or its additionalContext) says joins the tool's result for the model. */
export async function postToolUseHooks(
  a: HookedAgent,
  p: PreparedCall,
  res: ProcResult,
  r: ModelResult,
): Promise<ModelResult> {
  if (res.status === 'refused' || res.status === 'background') return r;
  const response = { output: r.full, status: res.status, exit: res.exit, is_error: r.isError };
  const out = await fire(
    a,
    'PostToolUse',
    { tool_name: p.call.name, tool_input: p.args ?? {}, tool_response: response, tool_use_id: p.call.id },
    p.call.name,
  );
  const said = [...(out?.block ? [`PostToolUse hook: ${out.block}`] : []), ...(out?.context ?? [])];
  if (!said.length) return r;
  const add = `\n\n[${said.join('\n')}]`;
  return { ...r, content: r.content + add, full: r.full + add };
}

/**
 * Stop (SubagentStop for a sub-agent): when a hook blocks, `goOn`, the text to send the model so that it goes on;
 * nothing to let the turn end. A guard that fails closed and fails sends the model round once (the agent may have
 * broken it, and can mend it); failing again at the next end, it ends the turn with `error`: what it guards was
 * never confirmed, and a guard that cannot run would otherwise keep the model going, round after paid round, until
 * the step limit. `last`: the turn's final round (its step limit reached): a hook that blocks then ends the turn
 * with `error`, as there is no round left to satisfy it — else an agent that keeps calling tools until its step
 * limit would end its turn as done without its Stop guard ever having let it.
 */
export async function stopHooks(a: HookedAgent, last = false): Promise<{ goOn?: string; error?: string }> {
  const event: HookEvent = a.depth > 0 || a.transient ? 'SubagentStop' : 'Stop';
  const out = await fire(a, event, { stop_hook_active: stopBlocked.has(a) });
  if (!out?.block) {
    stopBlocked.delete(a);
    stopFailed.delete(a);
    return {};
  }
  if (last) {
    const error = `the turn ends unconfirmed at its step limit: ${out.block}`;
    a.log.add('error', `A ${event} hook blocked in the turn's last round: ${error}`, { name: 'hook' });
    return { error };
  }
  if (out.onlyFailures) {
    if (stopFailed.has(a)) {
      const error = `the turn ends unconfirmed: ${out.block}, again`;
      a.log.add('error', `A ${event} hook failed twice running: ${error}`, { name: 'hook' });
      return { error };
    }
    stopFailed.add(a);
  } else stopFailed.delete(a);
  stopBlocked.add(a);
  return { goOn: `A ${event} hook did not let the turn end yet: ${out.block}` };
}

/** PreCompact: told before the history is summarized (its hooks cannot stop it). */
export async function preCompactHooks(a: HookedAgent, requested: boolean): Promise<void> {
  await fire(a, 'PreCompact', { trigger: requested ? 'manual' : 'auto', custom_instructions: '' });
}

/** Notification: the agent waits for a person (an approval). */
export async function notificationHooks(a: HookedAgent | undefined, message: string): Promise<void> {
  if (a) await fire(a, 'Notification', { message });
}
