/**
 * One agent: its identity, configuration, history, chat log, prompt queue and the turn loop (seed 000, "The
 * Agent Loop"): stream the model's reply, run the tool calls it asks for through toolsrv, append the results,
 * and go round again until the model answers without calling a tool. One turn at a time; prompts that arrive
 * while a turn runs wait in the queue and run in order after it.
 */
import { EVENTS } from '../../formats/olliesrv.js';
import { join, relative } from 'node:path';
import { ContextOverflowError, RateLimitError } from '../backend/errors.js';
import { retryDelay } from '../backend/retry.js';
import { preciseCounting } from '../backend/tokens.js';
import type { Backend, ContextKind, GenerationParams, Message, ToolCall, ToolSpec } from '../backend/types.js';
import type { AgentRow } from '../store/agents.js';
import type { ToolHost } from '../toolclient/host.js';
import type { ToolInfo } from '../../toolsrv/protocol.js';
import { ChatLog, WINDOW } from './chatlog.js';
import { runCommand } from './commands.js';
import { summarize, summaryMessage, tailStart } from './compaction.js';
import { Correction, measure, RECENT_ROUNDS, total, view, type Parts } from './context.js';
import type { AgentDeps, SessionView } from './deps.js';
import { batches, forModel, prepare, type ModelResult } from './dispatch.js';
import { closeDanglingCalls, History } from './history.js';
import { resolvePrompt, type Profile } from './profiles.js';
import { envRefusal } from '../session/envrules.js';
import { addUsage, parseStats, startTurn, type Stats } from './stats.js';
import { describeLoaded, searchTools, spec, TOOL_SEARCH, TOOL_SEARCH_SPEC, toolsPrompt } from './tooling.js';

export type AgentState = 'idle' | 'thinking' | 'calling' | 'paused' | 'compacting';
/** How the agent's last turn ended: `-` before its first. Kept apart from the state, which stays `idle` after any turn. */
export type TurnOutcome = '-' | 'ok' | 'error' | 'stopped';

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

export interface AgentCfg {
  profile: string;
  backend: string;
  /** Empty: the backend's default model. */
  model: string;
  cwd: string;
  /** Overrides of the profile's generation parameters. */
  params: GenerationParams;
  /** Overrides of the profile's limits. */
  maxSteps?: number;
  compactAt?: number;
  /** Tools loaded with tool_load, reloaded when toolsrv restarts. */
  tools: string[];
  /** Ids of the agents linked as peers (links are both ways; see Agents.peerAdd). */
  peers?: string[];
  /**
   * The directory whose sandbox policy the agent's tools get, when it is not `cwd`: an agent's sub-agent keeps its
   * creator's policy (see fs/spec.ts confineNewAgent), never the one its own subdirectory would give.
   */
  sandboxRoot?: string;
}

/** Limits of a sub-agent's turn. */
export interface Budget {
  steps?: number;
  tokens?: number;
}

export interface TurnResult {
  /** The model's last text of the turn. */
  reply: string;
  error?: string;
  stopped?: boolean;
}

/** Safety thresholds of the loop (seed 000, "Safety Mechanisms"). */
export const ERROR_ROUNDS_NUDGE = 5;
export const ERROR_ROUNDS_ABORT = 10;
export const STALL_ROUNDS = 5;
export const PLAN_EVERY = 10;

/** The skill a `skill` context block holds (skills/matcher.ts writes its name first). */
const SKILL_NAME = /^<context>\nSkill "([^"]+)"/;
/** Overflow errors one request may meet, each answered with a smaller request, before the turn gives up. */
export const MAX_OVERFLOWS = 4;
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

/** A background process an agent started, as its proc/ directory shows it. */
export interface BackgroundProc {
  pid: number;
  tool: string;
  /** The call's arguments, as the model wrote them. */
  args: string;
  started: number;
  /** Set when it has exited. */
  status?: string;
  exit?: number | null;
}

/** How many finished background processes an agent keeps listing. */
const KEEP_FINISHED_PROCS = 20;

export class AgentError extends Error {
  override name = 'AgentError';
}

/** A request that cannot be made to fit the model's window: the message says what takes the room. */
export class ContextBudgetError extends AgentError {
  override name = 'ContextBudgetError';
}

/** The provider's own count and limit, from the wording of its context-length error, when it gives them. */
export function overflowFigures(message: string): { actual?: number; limit?: number } {
  const pats: Array<[RegExp, 'al' | 'la' | 'l' | 'a']> = [
    [/maximum context length is (\d+) tokens\. However, your messages resulted in (\d+) tokens/i, 'la'],
    [/prompt is too long: (\d+) tokens > (\d+)/i, 'al'],
    [/input token count \((\d+)\) exceeds the maximum number of tokens allowed \((\d+)\)/i, 'al'],
    [/prompt token count of (\d+) exceeds the limit of (\d+)/i, 'al'],
    [/exceeds the context length \((\d+) > (\d+)\)/i, 'al'],
    [/maximum context length is (\d+)/i, 'l'],
  ];
  for (const [re, order] of pats) {
    const m = re.exec(message);
    if (!m) continue;
    const a = Number(m[1]);
    const b = Number(m[2]);
    if (order === 'al') return { actual: a, limit: b };
    if (order === 'la') return { limit: a, actual: b };
    return { limit: a };
  }
  return {};
}

/** What one request is made of, ready to send. */
interface Fitted {
  messages: Message[];
  parts: Parts;
  /** Tokens as counted (total of parts) and as corrected by the provider's reports. */
  raw: number;
  estimate: number;
}

interface Runtime {
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

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

const errText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export class Agent {
  readonly id: string;
  readonly sessionId: string;
  readonly parent: string;
  readonly depth: number;
  readonly created: number;
  readonly log: ChatLog;
  readonly history: History;
  name: string;
  cfg: AgentCfg;
  stats: Stats;
  /** Prompts waiting for the current turn to end, oldest first. */
  queue: string[] = [];
  /** Removed when its one turn ends (a sub-agent). */
  transient = false;
  budget: Budget = {};
  /** How the last turn ended (agent/idx's `last` column, the `turn` event). */
  lastTurn: TurnOutcome;
  /** Background processes started by this agent, by pid (mirrored as proc/{pid}). */
  readonly procs = new Map<number, BackgroundProc>();

  private st: AgentState = 'idle';
  private running = false;
  private abort?: AbortController;
  private injection?: string;
  private compactRequested = false;
  private runtime?: Runtime;
  private building?: Promise<Runtime>;
  private turnWaiters: Array<(r: TurnResult) => void> = [];
  private stateWaiters: Array<() => void> = [];
  private dead = false;
  /** The running turn, awaited by kill() so that nothing is written for an agent that is gone. */
  private current?: Promise<void>;
  private contextLen?: { key: string; n: number };
  /** A window smaller than configured, learned from a provider's overflow error (per backend/model). */
  private learnedWindow?: { key: string; n: number };
  private readonly correction = new Correction();

  constructor(
    row: AgentRow,
    private readonly session: () => SessionView,
    private readonly deps: AgentDeps,
  ) {
    this.id = row.id;
    this.sessionId = row.session;
    this.parent = row.parent;
    this.depth = row.depth;
    this.created = row.created;
    this.name = row.name;
    this.cfg = JSON.parse(row.cfg) as AgentCfg;
    this.cfg.tools ??= [];
    this.cfg.params ??= {};
    this.stats = parseStats(row.stats);
    this.correction.factor = this.stats.estimateFactor;
    this.history = new History(deps.store, row.id, row.epoch);
    // Only the log's tail is loaded: older blocks are read from the store when a reader asks for them.
    const count = deps.store.nextBlockSeq(row.id);
    const store = deps.store;
    const tail = store.blockRange(row.id, Math.max(0, count - WINDOW), count);
    // How the last turn ended is in its last blocks, which the tail holds.
    this.lastTurn = lastOutcome(tail);
    this.log = new ChatLog(
      row.id,
      {
        count,
        tail,
        range: (from, to) => store.blockRange(row.id, from, to),
        seqOf: (id) => store.blockSeq(row.id, id),
      },
      (seq, id, json) => {
        if (this.dead) return false;
        store.addBlock(row.id, seq, id, json);
        return true;
      },
    );
    if (row.running) this.recoverInterrupted();
  }

  /** The daemon died during a turn: say so, and make the history valid again. */
  private recoverInterrupted(): void {
    for (const m of closeDanglingCalls(this.history.messages, 'error: interrupted: the daemon stopped before this tool call finished')) this.history.append(m);
    this.log.add('info', 'The previous turn was interrupted (the daemon stopped while it ran).', { name: 'interrupted' });
    this.deps.store.setRunning(this.id, false);
  }

  get state(): AgentState {
    if (this.st === 'idle' && this.session().paused) return 'paused';
    return this.st;
  }

  get busy(): boolean {
    return this.running;
  }

  private topic(event: string): string {
    return `session.${this.sessionId}.agent.${this.id}.${event}`;
  }

  private setState(s: AgentState): void {
    const before = this.state;
    this.st = s;
    this.announceState(before);
  }

  /** Publishes the state if it changed (also called when the session is paused or resumed). */
  announceState(before: AgentState): void {
    const now = this.state;
    if (now === before) return;
    this.deps.bus.publish(this.topic('state'), now);
    const w = this.stateWaiters;
    this.stateWaiters = [];
    for (const f of w) f();
  }

  /** Resolves at the next state change. */
  stateChange(signal: AbortSignal): Promise<AgentState> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      this.stateWaiters.push(() => {
        signal.removeEventListener('abort', onAbort);
        resolve(this.state);
      });
    });
  }

  /** Resolves when the next turn (or the current one) ends. */
  nextTurn(): Promise<TurnResult> {
    return new Promise((resolve) => this.turnWaiters.push(resolve));
  }

  env(): Record<string, string> {
    const sessionEnv: Record<string, string> = {};
    for (const l of this.session().env.split('\n')) {
      const eq = l.indexOf('=');
      // The registry refuses such variables and drops stored ones; checked again where they would take effect.
      if (eq > 0 && !envRefusal(l.slice(0, eq))) sessionEnv[l.slice(0, eq)] = l.slice(eq + 1);
    }
    return { ...this.deps.baseEnv, ...sessionEnv, OLLIE_SESSION_ID: this.sessionId, OLLIE_UNAME: this.id, OLLIE_AGENT_NAME: this.name, PWD: this.cfg.cwd };
  }

  /** What a prompt command knows of Ollie: where its files are (the daemon's dirs, never the session's) and who asks. */
  private promptIdentity(): Record<string, string> {
    const { OLLIE_DATA, OLLIE_CONFIG } = this.deps.baseEnv;
    return {
      ...(OLLIE_DATA !== undefined && { OLLIE_DATA }),
      ...(OLLIE_CONFIG !== undefined && { OLLIE_CONFIG }),
      OLLIE_SESSION_ID: this.sessionId,
      OLLIE_UNAME: this.id,
      OLLIE_AGENT_NAME: this.name,
    };
  }

  // ---- prompts ----------------------------------------------------------------------------------------------

  /**
   * A prompt as a user types it: `/cmd` is a ctl command (run at once, even mid-turn), `!cmd` a shell command,
   * anything else a prompt to the model. Returns what happened to it.
   */
  async submit(text: string): Promise<'started' | 'queued' | 'command'> {
    if (this.dead) throw new AgentError(`agent ${this.name} is dead`);
    const t = text.replace(/\n+$/, '');
    if (!t.trim()) throw new AgentError('empty prompt');
    if (t.startsWith('/')) {
      const out = await this.ctl(t.slice(1));
      this.log.add('info', out.trimEnd() || 'ok', { name: 'command' });
      return 'command';
    }
    return this.enqueue(t);
  }

  /** Adds a prompt to the queue; it starts at once when the agent is idle and its session not paused. */
  enqueue(text: string): 'started' | 'queued' {
    if (this.dead) throw new AgentError(`agent ${this.name} is dead`);
    this.queue.push(text);
    if (this.running || this.session().paused) return 'queued';
    this.drain();
    return 'started';
  }

  /** Starts the next queued prompt if the agent can run one. */
  drain(): void {
    if (this.running || this.dead || this.session().paused) return;
    const next = this.queue.shift();
    if (next !== undefined) this.current = this.runTurn(next);
  }

  /** A ctl command; returns its reply. */
  ctl(command: string): Promise<string> {
    return runCommand(this, command, this.deps);
  }

  /** Text to add to the running turn before its next model request (replaces a pending injection). */
  inject(text: string): void {
    this.injection = text;
  }

  stop(): boolean {
    if (!this.abort) return false;
    this.abort.abort(new AgentError('stopped'));
    return true;
  }

  // ---- the turn ---------------------------------------------------------------------------------------------

  private async runTurn(text: string): Promise<void> {
    this.running = true;
    const ac = new AbortController();
    this.abort = ac;
    this.deps.store.setRunning(this.id, true);
    startTurn(this.stats);
    let result: TurnResult;
    try {
      result = text.startsWith('!') ? await this.shell(text.slice(1).trim(), ac.signal) : await this.turn(text, ac.signal);
    } catch (e) {
      const msg = ac.signal.aborted ? 'stopped' : errText(e);
      if (!ac.signal.aborted) this.log.add('error', msg);
      result = { reply: '', error: ac.signal.aborted ? undefined : msg, stopped: ac.signal.aborted };
    }
    // A stopped turn may leave calls without results; the next request would be rejected without them.
    for (const m of closeDanglingCalls(this.history.messages, 'error: interrupted by the user before this tool call finished')) this.history.append(m);
    if (result.stopped) this.log.add('info', 'Stopped.', { name: 'stopped' });
    this.running = false;
    this.abort = undefined;
    this.injection = undefined;
    if (!this.dead) {
      this.deps.store.batch(() => {
        this.deps.store.setRunning(this.id, false);
        this.deps.store.setStats(this.id, JSON.stringify(this.stats));
      });
      // Before the state: a client that sees `idle` already knows whether the turn failed.
      this.lastTurn = result.error ? 'error' : result.stopped ? 'stopped' : 'ok';
      this.deps.bus.publish(this.topic('turn'), EVENTS.payload(this.topic('turn'), { how: this.lastTurn, error: result.error ?? null }));
      this.setState('idle');
    }
    const waiters = this.turnWaiters;
    this.turnWaiters = [];
    for (const w of waiters) w(result);
    if (this.compactRequested && !this.dead) {
      this.compactRequested = false;
      await this.compactNow('requested').catch((e: unknown) => this.log.add('error', `compaction failed: ${errText(e)}`));
    }
    this.drain();
  }

  private async turn(text: string, signal: AbortSignal): Promise<TurnResult> {
    this.setState('thinking');
    const rt = await this.ensureRuntime();
    if (this.deps.enrich && !text.startsWith('<system-proc-interrupt')) {
      try {
        const present = new Set(this.sentView().flatMap((m) => (m.role === 'user' && m.kind === 'skill' ? [SKILL_NAME.exec(m.content)?.[1] ?? ''] : [])));
        for (const c of await this.deps.enrich({ agent: this, prompt: text, tools: [...rt.tools.values()], cwd: this.cfg.cwd, present })) {
          this.addContext(c.text, c.name, c.name === 'skill' ? 'skill' : 'hint');
        }
      } catch (e) {
        this.log.add('info', `could not match skills and tools to the prompt: ${errText(e)}`, { name: 'enrich' });
      }
    }
    this.deps.store.batch(() => {
      this.log.add('user', text);
      this.history.append({ role: 'user', content: text });
    });
    const backend = this.backend();
    const maxSteps = this.budget.steps ?? this.cfg.maxSteps ?? rt.profile.maxSteps;
    let steps = 0;
    let errorRounds = 0;
    let sameRounds = 0;
    let lastSig = '';
    let reply = '';
    for (;;) {
      if (signal.aborted) return { reply, stopped: true };
      const finalRound = steps >= maxSteps;
      if (finalRound) {
        this.addContext(`You have used all ${maxSteps} steps of this turn. Do not call any more tools: reply with a final summary of what you did, what works, and what remains to be done.`, 'maxsteps');
      } else if (steps > 0 && steps % PLAN_EVERY === 0 && this.session().plan.trim()) {
        this.addContext(`The session plan (re-read it and keep to it):\n\n${this.session().plan}`, 'plan');
      }
      if (this.injection !== undefined) {
        const inj = this.injection;
        this.injection = undefined;
        this.log.add('user', inj, { name: 'inject' });
        this.history.append({ role: 'user', content: inj });
      }
      this.setState('thinking');
      const r = await this.respond(backend, rt, finalRound ? [] : rt.specs, signal);
      if (!r) return { reply, stopped: true };
      if (r.text.trim()) reply = r.text;
      this.deps.store.batch(() => {
        for (const c of r.calls) this.log.add('call', c.args, { name: c.name });
        // Anthropic refuses a continuation whose thinking lost its signature; Gemini 3 the same for calls (kept in r.calls).
        this.history.append({
          role: 'assistant',
          content: r.text,
          ...(r.reasoning ? { reasoning: r.reasoning } : {}),
          ...(r.signature ? { reasoningSignature: r.signature } : {}),
          ...(r.calls.length ? { toolCalls: r.calls } : {}),
        });
      });
      if (!r.calls.length || finalRound) break;
      steps++;
      if (this.budget.tokens !== undefined && this.stats.turnTokens > this.budget.tokens) {
        const msg = `token budget exhausted: this sub-agent used ${this.stats.turnTokens} tokens of its ${this.budget.tokens}`;
        this.log.add('error', msg, { name: 'budget' });
        return { reply, error: msg };
      }
      this.setState('calling');
      const results = await this.runTools(rt, r.calls, signal);
      if (signal.aborted) return { reply, stopped: true };
      errorRounds = results.every((x) => x.isError) ? errorRounds + 1 : 0;
      const sig = JSON.stringify(r.calls.map((c) => [c.name, c.args]));
      sameRounds = sig === lastSig ? sameRounds + 1 : 1;
      lastSig = sig;
      if (errorRounds >= ERROR_ROUNDS_ABORT) {
        const msg = `aborting the turn: the last ${ERROR_ROUNDS_ABORT} tool rounds all failed`;
        this.log.add('error', msg, { name: 'errors' });
        return { reply, error: msg };
      }
      if (errorRounds === ERROR_ROUNDS_NUDGE) {
        this.addContext(`Your last ${ERROR_ROUNDS_NUDGE} tool rounds all failed. Stop and think about why, then try a different approach.`, 'nudge');
      }
      if (sameRounds === STALL_ROUNDS) {
        const msg = `You have made the same tool calls ${STALL_ROUNDS} rounds in a row. You are stuck: do something different, or stop and explain what is blocking you.`;
        this.log.add('stalled', msg);
        this.history.append({ role: 'user', content: `<context>\n${msg}\n</context>` });
      }
      await this.refreshTools(rt);
      if (this.compactRequested) {
        this.compactRequested = false;
        await this.compactNow('requested', signal);
      }
    }
    return { reply };
  }

  /** A context block: sent to the model, hidden in the chat view. */
  private addContext(text: string, name: string, kind: ContextKind = 'context'): void {
    this.deps.store.batch(() => {
      this.log.add('context', text, { name });
      this.history.append({ role: 'user', kind, content: `<context>\n${text}\n</context>` });
    });
  }

  /** One model response, with our retry policy. Undefined when the turn was stopped. */
  private async respond(
    backend: Backend,
    rt: Runtime,
    tools: ToolSpec[],
    signal: AbortSignal,
  ): Promise<{ text: string; reasoning: string; signature?: string; calls: ToolCall[] } | undefined> {
    let overflows = 0;
    const model = this.cfg.model || backend.defaultModel;
    const params = { ...rt.profile.params, ...this.cfg.params };
    let ceiling = Infinity;
    let refused: string | undefined;
    for (let attempt = 0; ; attempt++) {
      let textId: string | undefined;
      let reasonId: string | undefined;
      let text = '';
      let reasoning = '';
      let signature: string | undefined;
      const calls: ToolCall[] = [];
      const req = await this.fit(rt, tools, params, signal, ceiling, refused);
      try {
        const messages: Message[] = [{ role: 'system', content: rt.system }, ...req.messages];
        let usageSeen = false;
        for await (const ev of backend.stream({ model, messages, tools, params, signal })) {
          switch (ev.type) {
            case 'text':
              textId ??= this.log.begin('assistant');
              this.log.delta(textId, ev.delta);
              text += ev.delta;
              break;
            case 'reasoning':
              if (ev.signature) signature = ev.signature;
              if (!ev.delta) break;
              reasonId ??= this.log.begin('reasoning');
              this.log.delta(reasonId, ev.delta);
              reasoning += ev.delta;
              break;
            case 'tool-call':
              calls.push(ev.call);
              break;
            case 'usage':
              usageSeen = true;
              addUsage(this.stats, model, ev.usage);
              this.correction.observe(ev.usage.inputTokens, req.raw);
              this.stats.estimateFactor = this.correction.factor;
              break;
            case 'warning':
              this.log.add('info', ev.message, { name: 'window' });
              break;
            case 'finish':
              break;
          }
        }
        if (reasonId) this.log.end(reasonId);
        if (textId) this.log.end(textId);
        if (!usageSeen) this.stats.requests++;
        return { text, reasoning, signature, calls };
      } catch (e) {
        if (reasonId) this.log.end(reasonId);
        if (textId) this.log.end(textId);
        if (signal.aborted) return undefined;
        if (e instanceof ContextOverflowError) {
          // Our estimate was low or the window is smaller than we were told: learn both from the error, and
          // the next attempt must be smaller than this one, whatever the estimate says.
          if (++overflows > MAX_OVERFLOWS) throw new ContextBudgetError(`the model refused ${overflows} requests in a row as too long, the last one ~${req.estimate} tokens (${this.describe(req.parts)}); ${errText(e)}`);
          const fig = overflowFigures(errText(e));
          this.correction.overflow(req.raw, fig.actual);
          this.stats.estimateFactor = this.correction.factor;
          const window = await this.window();
          if (fig.limit && fig.limit < window) this.learnedWindow = { key: this.windowKey(), n: fig.limit };
          ceiling = req.raw - 1;
          refused = `the model refused a request of ~${req.estimate} tokens as too long (${errText(e)})`;
          this.log.add('info', `The model refused the request as too long (${errText(e)}); sending a smaller one (under ~${this.correction.apply(ceiling)} tokens).`, { name: 'overflow' });
          attempt--;
          continue;
        }
        const delay = (this.deps.retryDelay ?? retryDelay)(e, attempt);
        if (delay === null) throw e;
        const limited = e instanceof RateLimitError;
        this.log.add('retry', `${limited ? 'rate limited' : errText(e)}; retrying in ${(delay / 1000).toFixed(1)} s (attempt ${attempt + 2})`, {
          name: limited ? 'limitretry' : 'retry',
        });
        try {
          await sleep(delay, signal);
        } catch {
          return undefined;
        }
      }
    }
  }

  /** The parts of a request, in words. */
  private describe(p: Parts): string {
    return `system prompt ${p.system}, tool schemas ${p.tools}, history ${p.history}, skills and hints ${p.skills}, attachments ${p.attachments}`;
  }

  private spillDir(): string {
    return join(this.deps.outputDir, this.sessionId, this.id);
  }

  /** The history as it is sent now (stale tool output cut). */
  private sentView(extra: { maxTokens?: number; dropHints?: boolean } = {}): Message[] {
    return view(this.history.messages, { spillDir: this.spillDir(), recentRounds: RECENT_ROUNDS, ...extra });
  }

  private measured(rt: Runtime, tools: readonly ToolSpec[], messages: Message[]): Fitted {
    const parts = measure(rt.system, tools, messages);
    const raw = total(parts);
    return { messages, parts, raw, estimate: this.correction.apply(raw) };
  }

  /** Tokens a request may take: the window less the reply's room, and at most compactAt of the window. */
  private async tokenBudget(params: GenerationParams): Promise<number> {
    const window = await this.window();
    const reserve = params.maxTokens ?? Math.min(8192, Math.floor(window / 4));
    const at = this.cfg.compactAt ?? this.runtime?.profile.compactAt ?? 0.75;
    return Math.max(256, Math.floor(Math.min(window - reserve, window * at)));
  }

  /**
   * The request to send, within the budget (and under `ceiling` counted tokens after an overflow). Shrinks in
   * this order: the oldest turns into a summary; the tool results and arguments of the kept tail cut to
   * excerpts, tighter each step; skills and hints left out. What still does not fit is an error that says
   * what takes the room.
   */
  private async fit(rt: Runtime, tools: readonly ToolSpec[], params: GenerationParams, signal: AbortSignal, ceiling = Infinity, refused?: string): Promise<Fitted> {
    const budget = await this.tokenBudget(params);
    const fits = (f: Fitted): boolean => f.estimate <= budget && f.raw <= ceiling;
    // In counted (uncorrected) tokens, the unit of every message's size; after an overflow, what the provider
    // will take rather than what we thought it would.
    const room = Math.min(Math.floor(budget / this.correction.factor), ceiling);
    const done = (f: Fitted): Fitted => {
      this.stats.context = f.parts;
      return f;
    };
    let f = this.measured(rt, tools, this.sentView());
    // Near the window, a few per cent decide: count exactly from here on (the tokenizer loads once, ~100 ms).
    if (f.estimate > budget * PRECISE_FROM) {
      await preciseCounting();
      f = this.measured(rt, tools, this.sentView());
    }
    if (fits(f)) return done(f);
    const over = `the request would be ~${f.estimate} tokens, over the budget of ${budget}`;
    // 1. The oldest turns into a summary, when they are worth a request.
    try {
      const did = await this.compactNow(over, signal, room, KEEP_SHARE, { rt, tools, force: ceiling !== Infinity });
      if (did) f = this.measured(rt, tools, this.sentView());
      if (fits(f)) return done(f);
    } catch (e) {
      if (signal.aborted) throw e;
      this.log.add('info', `compaction failed (${errText(e)}); cutting tool output instead`, { name: 'compaction' });
    }
    // 2. The kept tail's tool results and arguments, cut tighter each step.
    for (const share of CUT_SHARES) {
      f = this.measured(rt, tools, this.sentView({ maxTokens: Math.floor(room * share) }));
      if (fits(f)) return done(this.noteCut(f, budget));
    }
    // 3. Skills and hints.
    f = this.measured(rt, tools, this.sentView({ maxTokens: Math.floor(room * CUT_SHARES.at(-1)!), dropHints: true }));
    if (fits(f)) return done(this.noteCut(f, budget));
    const window = await this.window();
    const fixed = this.correction.apply(f.parts.system + f.parts.tools);
    const advice =
      fixed > budget
        ? `the system prompt and tool schemas alone take ~${fixed}: use a profile with a shorter prompt or fewer tools (autoLoad), or a model with a larger window`
        : `what is left is the conversation itself (the latest prompt or summary): shorten the prompt, \`ctl clear\`, or use a model with a larger window`;
    throw new ContextBudgetError(
      `${refused ? `${refused}, and nothing is left to shrink: ` : ''}the request does not fit ${this.cfg.model || this.backend().defaultModel}'s window of ${window} tokens ` +
        `(budget ${budget} after room for the reply): ~${f.estimate} tokens after compacting and cutting (${this.describe(f.parts)}); ${advice}. ` +
        `If the window is larger than ${window}, set context= for backend ${this.cfg.backend} in backends.conf.`,
    );
  }

  /** Says once per request that tool output of the kept tail was cut to fit. */
  private noteCut(f: Fitted, budget: number): Fitted {
    this.log.add('info', `Cut large tool output in the recent history to fit the budget of ${budget} tokens (now ~${f.estimate}); the whole texts are in ${this.spillDir()}.`, { name: 'compaction' });
    return f;
  }

  private async runTools(rt: Runtime, calls: ToolCall[], signal: AbortSignal): Promise<ModelResult[]> {
    await rt.ready;
    const prepared = calls.map((c) => prepare(c, rt.tools));
    const deferred = new Set(this.deferred(rt).map((t) => t.name));
    const results: ModelResult[] = new Array<ModelResult>(prepared.length);
    const spillDir = join(this.deps.outputDir, this.sessionId, this.id);
    for (const batch of batches(prepared)) {
      if (signal.aborted) break;
      await Promise.all(
        batch.map(async (p) => {
          const i = prepared.indexOf(p);
          let r: ModelResult;
          if (p.call.name === TOOL_SEARCH) r = await this.toolSearch(rt, p.call);
          else if (p.invalid) r = { content: p.invalid, full: p.invalid, isError: true };
          else if (!rt.host) r = { content: 'error: tools are unavailable: no tool server runs for this session', full: 'tools are unavailable', isError: true };
          else {
            try {
              const res = await rt.host.call({ tool: p.call.name, args: p.args!, flags: p.flags }, signal);
              if (res.status === 'background') this.procs.set(res.pid, { pid: res.pid, tool: p.call.name, args: p.call.args, started: Date.now() });
              r = forModel(res, { root: this.deps.outputDir, dir: spillDir, name: p.call.id.replace(/[^\w.-]/g, '_') });
              // A listed tool called by name: toolsrv validated and ran it; its schema goes out from now on.
              if (deferred.has(p.call.name)) this.activate(rt, [p.call.name]);
            } catch (e) {
              if (signal.aborted) return;
              const msg = `error: ${errText(e)}`;
              r = { content: msg, full: msg, isError: true };
            }
          }
          results[i] = r;
          this.deps.store.batch(() => {
            this.log.add('tool', r.full, { name: p.call.name, ...(r.format ? { format: r.format } : {}) });
            this.history.append({ role: 'tool', toolCallId: p.call.id, name: p.call.name, content: r.content, ...(r.isError ? { isError: true } : {}) });
          });
        }),
      );
    }
    return results.filter(Boolean);
  }

  /** `!cmd`: runs a shell command through toolsrv; the output joins the history as context. */
  private async shell(cmd: string, signal: AbortSignal): Promise<TurnResult> {
    this.setState('calling');
    const rt = await this.ensureRuntime();
    await rt.ready;
    this.log.add('user', `!${cmd}`);
    if (!rt.host) throw new AgentError('no tool server runs for this session');
    const res = await rt.host.call({ tool: 'shell', args: { command: cmd } }, signal);
    const r = forModel(res, { root: this.deps.outputDir, dir: join(this.deps.outputDir, this.sessionId, this.id), name: `shell-${Date.now()}` });
    this.log.add('tool', r.full, { name: 'shell', ...(r.format ? { format: r.format } : {}) });
    this.history.append({ role: 'user', kind: 'attachment', content: `<context>\nThe user ran \`${cmd}\`:\n${r.content}\n</context>` });
    return { reply: r.full, error: r.isError ? r.content : undefined };
  }

  // ---- runtime: profile, prompt, tools ----------------------------------------------------------------------

  async ensureRuntime(): Promise<Runtime> {
    if (this.runtime) return this.runtime;
    this.building ??= this.buildRuntime().finally(() => (this.building = undefined));
    this.runtime = await this.building;
    return this.runtime;
  }

  private async buildRuntime(): Promise<Runtime> {
    // The provider package loads while the prompt is resolved and toolsrv starts.
    // Without any backend this throws; the turn reports that after the prompt is in the log, where the user sees both.
    if (this.deps.backends.defaultName) void this.backend().prepare?.();
    const profile = this.deps.profiles.get(this.cfg.profile);
    const env = this.env();
    const wanted = [...new Set([...profile.autoLoad, ...this.cfg.tools])];
    const cacheKey = this.deps.toolCache?.key(wanted);
    const cached = cacheKey ? this.deps.toolCache!.get(cacheKey) : undefined;
    const rt: Runtime = {
      profile, promptText: '', rev: -1, tools: new Map(), specs: [], active: new Set(), system: '', life: new AbortController(), ready: Promise.resolve(),
    };
    const connect = async (): Promise<void> => {
      const st = await this.deps.tools(this.sessionId);
      if (st) {
        const { OLLIE_SESSION_ID: _s, OLLIE_UNAME: _u, ...sessionEnv } = env;
        // Last, so that nothing in the session's environment stands in for it.
        const token: Record<string, string> = this.deps.token ? { OLLIE_TOKEN: this.deps.token(this.sessionId, this.id) } : {};
        const host = await st.forAgent(this.id, this.cfg.cwd, { ...sessionEnv, ...token }, this.cfg.sandboxRoot);
        // The agent's scope in toolsrv outlives a runtime (a profile switch, a cwd change): make it hold exactly
        // the profile's tools and the ones loaded by hand.
        // The commands are independent (one tool each), so they go out together: one round trip, not one each.
        const loaded = new Set((await host.list()).tools.map((t) => t.name));
        await Promise.all([
          ...[...loaded].filter((t) => !wanted.includes(t)).map((t) => host.ctl(`unload ${t}`).catch(() => undefined)),
          ...wanted.filter((t) => !loaded.has(t)).map((t) =>
            host.ctl(`load ${t}`).catch((e: unknown) => this.log.add('info', `could not load tool ${t}: ${errText(e)}`, { name: 'tools' })),
          ),
        ]);
        rt.host = host;
      }
      await this.refreshTools(rt, true);
      if (cacheKey && rt.host) this.deps.toolCache!.set(cacheKey, [...rt.tools.values()]);
      if (rt.host?.interrupts) void this.followInterrupts(rt.host, rt.life.signal);
    };
    if (cached) {
      // The schemas toolsrv gave last time: the first request goes out while toolsrv starts; calls wait for it.
      const prompt = await resolvePrompt(profile.prompt, this.cfg.cwd, this.promptIdentity(), this.deps.promptCommands);
      for (const w of prompt.warnings) this.log.add('info', w, { name: 'prompt' });
      rt.promptText = prompt.text;
      this.setTools(rt, cached);
      rt.ready = connect().catch((e: unknown) => this.log.add('error', `the tool server did not start: ${errText(e)}`, { name: 'tools' }));
    } else {
      // The prompt commands and the toolsrv connection are independent: run them side by side.
      const [prompt] = await Promise.all([resolvePrompt(profile.prompt, this.cfg.cwd, this.promptIdentity(), this.deps.promptCommands), connect()]);
      for (const w of prompt.warnings) this.log.add('info', w, { name: 'prompt' });
      rt.promptText = prompt.text;
      this.setTools(rt, [...rt.tools.values()]);
    }
    return rt;
  }

  /** Background processes that finished come back as prompts (queued while a turn runs). */
  private async followInterrupts(host: ToolHost, signal: AbortSignal): Promise<void> {
    try {
      for await (const i of host.interrupts!(signal)) {
        const p = this.procs.get(i.pid);
        if (p) Object.assign(p, { status: i.status, exit: i.exit });
        this.forgetFinishedProcs();
        if (!this.dead) this.enqueue(i.text);
      }
    } catch (e) {
      if (!signal.aborted) this.deps.log(`agent ${this.id}: lost background-process notifications: ${errText(e)}`);
    }
  }

  /** Re-reads the loaded tools when toolsrv's registry revision moved (or when forced). */
  private async refreshTools(rt: Runtime, force = false): Promise<void> {
    if (!rt.host) return;
    if (!force && (await rt.host.rev()) === rt.rev) return;
    const { rev, tools } = await rt.host.list();
    rt.rev = rev;
    this.setTools(rt, tools);
  }

  /**
   * The tools the model sees, and the system prompt with their prompts and the index of the deferred ones.
   * The system prompt depends only on the tiers, not on what the model loaded since, so that it stays
   * byte-identical for the provider's prompt cache.
   */
  private setTools(rt: Runtime, tools: ToolInfo[]): void {
    rt.tools = new Map(tools.map((t) => [t.name, t]));
    const sent = (t: ToolInfo): boolean => t.tier === 'hot' || this.cfg.tools.includes(t.name);
    const base = tools.filter(sent);
    const deferred = tools.filter((t) => !sent(t));
    for (const n of rt.active) if (!rt.tools.has(n) || sent(rt.tools.get(n)!)) rt.active.delete(n);
    rt.specs = [...base.map(spec), ...(deferred.length ? [TOOL_SEARCH_SPEC] : []), ...[...rt.active].map((n) => spec(rt.tools.get(n)!))];
    const tp = toolsPrompt(base, deferred);
    rt.system = tp ? `${rt.promptText.trimEnd()}\n\n${tp}\n` : rt.promptText;
  }

  /** Deferred tools whose schemas are not sent yet. */
  private deferred(rt: Runtime): ToolInfo[] {
    const sent = new Set(rt.specs.map((s) => s.name));
    return [...rt.tools.values()].filter((t) => !sent.has(t.name));
  }

  /** Sends these deferred tools' schemas from the next request on. */
  private activate(rt: Runtime, names: string[]): void {
    const sent = new Set(rt.specs.map((s) => s.name));
    const add = names.filter((n) => !sent.has(n) && rt.tools.has(n));
    if (!add.length) return;
    for (const n of add) rt.active.add(n);
    rt.specs = [...rt.specs, ...add.map((n) => spec(rt.tools.get(n)!))];
  }

  /** tool_search: loads deferred tools by name or by what they do. */
  private async toolSearch(rt: Runtime, call: ToolCall): Promise<ModelResult> {
    let query = '';
    try {
      const a = JSON.parse(call.args || '{}') as { query?: unknown };
      if (typeof a.query === 'string') query = a.query.trim();
    } catch {
      // answered below
    }
    if (!query) return { content: `error: ${TOOL_SEARCH} needs {"query": "tool names or words"}`, full: 'no query', isError: true };
    const deferred = this.deferred(rt);
    const found = await searchTools(query, deferred);
    this.activate(rt, found.map((t) => t.name));
    const text = describeLoaded(found, query, deferred);
    return { content: text, full: text, isError: false };
  }

  /** Drops the runtime: the next turn rebuilds it (profile, prompt, tools). */
  async resetRuntime(): Promise<void> {
    const old = this.runtime;
    this.runtime = undefined;
    old?.life.abort();
    await old?.host?.close().catch(() => undefined);
  }

  private forgetFinishedProcs(): void {
    const done = [...this.procs.values()].filter((p) => p.status);
    for (const p of done.slice(0, Math.max(0, done.length - KEEP_FINISHED_PROCS))) this.procs.delete(p.pid);
  }

  /** The toolsrv connection, for the proc/ mirror; refuses when there is none. */
  async procHost(): Promise<ToolHost> {
    const rt = await this.ensureRuntime();
    await rt.ready;
    if (!rt.host) throw new AgentError('no tool server runs for this session');
    return rt.host;
  }

  /** Loaded tools, as the model sees them. */
  async tools(): Promise<ToolInfo[]> {
    return [...(await this.ensureRuntime()).tools.values()];
  }

  async loadTool(name: string): Promise<void> {
    const rt = await this.ensureRuntime();
    await rt.ready;
    if (!rt.host) throw new AgentError('no tool server runs for this session');
    await rt.host.ctl(`load ${name}`);
    if (!this.cfg.tools.includes(name)) this.cfg.tools.push(name);
    this.saveCfg();
    await this.refreshTools(rt, true);
  }

  async systemPrompt(): Promise<string> {
    return (await this.ensureRuntime()).system;
  }

  saveCfg(): void {
    if (!this.dead) this.deps.store.setCfg(this.id, JSON.stringify(this.cfg));
  }

  /**
   * The agent's backend. When backends.conf no longer has it (an agent made before the user configured a backend,
   * or whose section was renamed or removed), the agent moves to the default backend, with that backend's model — the
   * old model name belongs to the old provider — and its log says so; a rename back later does not move it back.
   * Throws NoBackendError (at once, never retried) while no backend is configured at all.
   */
  backend(): Backend {
    const pool = this.deps.backends;
    if (pool.defaultName && !pool.names().includes(this.cfg.backend)) {
      const gone = this.cfg.backend;
      this.cfg.backend = pool.defaultName;
      this.cfg.model = '';
      this.saveCfg();
      const was = gone ? `backend "${gone}" is no longer configured` : 'no backend was configured when this agent was made';
      this.log.add('info', `${was}: using the default backend "${pool.defaultName}" and its model.`, { name: 'backend' });
    }
    return pool.get(this.cfg.backend);
  }

  // ---- context: size, compaction ----------------------------------------------------------------------------

  async contextLength(): Promise<number> {
    const backend = this.backend();
    const key = `${backend.name}/${this.cfg.model}`;
    if (this.contextLen?.key !== key) this.contextLen = { key, n: await backend.contextLength(this.cfg.model || undefined) };
    return this.contextLen.n;
  }

  private windowKey(): string {
    return `${this.cfg.backend}/${this.cfg.model}`;
  }

  /** The window requests must fit: the configured or discovered one, or less when the provider said so. */
  private async window(): Promise<number> {
    const n = await this.contextLength();
    const l = this.learnedWindow?.key === this.windowKey() ? this.learnedWindow.n : Infinity;
    return Math.min(n, l);
  }

  /** The size of the next request as it stands (system prompt, tools, history as sent), corrected. */
  contextEstimate(): number {
    const rt = this.runtime;
    const parts = measure(rt?.system ?? '', rt?.specs ?? [], this.sentView());
    // Before the first request there is no runtime: the last request's fixed parts stand in for it.
    if (!rt && this.stats.context) Object.assign(parts, { system: this.stats.context.system, tools: this.stats.context.tools });
    this.stats.context = parts;
    return this.correction.apply(total(parts));
  }

  /** `ctl compact`: now when idle, after the current round when a turn runs. */
  async compact(): Promise<string> {
    if (this.running) {
      this.compactRequested = true;
      return 'compaction will run after the current round\n';
    }
    this.running = true;
    try {
      return await this.compactNow('requested');
    } finally {
      this.running = false;
      this.drain();
    }
  }

  /**
   * Summarizes the oldest turns, keeping a tail of at most `keepShare` of the budget (counted tokens). Run by fit() (only when
   * the head is worth a request) and by hand (then anything older than the last message can go). Returns
   * the report, or '' when there was nothing to summarize.
   */
  private async compactNow(
    reason: string,
    signal?: AbortSignal,
    budget?: number,
    keepShare = KEEP_SHARE_REQUESTED,
    req?: { rt: Runtime; tools: readonly ToolSpec[]; force?: boolean },
  ): Promise<string> {
    const requested = budget === undefined;
    budget ??= Math.floor((await this.tokenBudget({ ...this.runtime?.profile.params, ...this.cfg.params })) / this.correction.factor);
    const msgs = this.history.messages;
    const sized = this.sentView();
    // The tail is sized as it will be sent once its oversized output is cut (the next step of fit()): a round
    // with one huge result stays, cut, rather than being summarized away with the turns before it.
    const cutSized = this.sentView({ maxTokens: Math.floor(budget * CUT_SHARES[0]!) });
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
      return requested ? `nothing to compact: the history is ${msgs.length} message(s), ~${headTokens} tokens, already as small as compaction makes it\n` : '';
    }
    const prev = this.st;
    this.setState('compacting');
    const rt = req?.rt ?? this.runtime;
    const before = rt ? this.measured(rt, req?.tools ?? rt.specs, sized).estimate : this.correction.apply(headTokens);
    this.log.add('info', `Compacting ${start} messages (~${headTokens} tokens; ${reason}).`, { name: 'compaction' });
    try {
      const backend = this.backend();
      const model = this.runtime?.profile.compactionModel ?? backend.compactionModel;
      const window = Math.min(await this.window(), await backend.contextLength(model).catch(() => Infinity));
      const summary = await summarize(backend, model, head, Math.floor(window / this.correction.factor), signal);
      const oldEpoch = this.history.epoch;
      this.history.replace([summaryMessage(summary, start), ...msgs.slice(start)]);
      this.stats.lastInputTokens = 0;
      this.stats.lastOutputTokens = 0;
      const after = rt ? this.measured(rt, req?.tools ?? rt.specs, this.sentView()).estimate : this.contextEstimate();
      if (!this.dead) this.deps.store.setStats(this.id, JSON.stringify(this.stats));
      const msg = `Compacted ${start} messages into a summary (request ~${before} → ~${after} tokens, system prompt and tools included). The history before it is kept (epoch ${oldEpoch}; ctl restore brings it back).`;
      this.log.add('info', msg, { name: 'compaction' });
      return `${msg}\n`;
    } finally {
      this.setState(prev);
    }
  }

  /** Brings back the history as it was before the last compaction or clear. */
  restore(): string {
    if (this.running) throw new AgentError('the agent is running; stop it first');
    const e = this.history.epoch;
    if (e === 0) throw new AgentError('there is no earlier history to restore');
    const older = this.deps.store.messages(this.id, e - 1).map((b) => JSON.parse(b) as Message);
    this.history.replace(older);
    this.log.add('info', `Restored the history of epoch ${e - 1} (${older.length} messages).`, { name: 'restore' });
    return `restored ${older.length} messages\n`;
  }

  clear(): void {
    if (this.running) throw new AgentError('the agent is running; stop it first');
    this.history.replace([]);
    this.stats.lastInputTokens = 0;
    this.stats.lastOutputTokens = 0;
    this.log.add('info', 'History cleared.', { name: 'clear' });
  }

  // ---- configuration ----------------------------------------------------------------------------------------

  /** Switches profile: a fresh runtime and an empty history (seed 000, "Agent Switching"). */
  async switchProfile(name: string): Promise<void> {
    if (this.running) throw new AgentError('the agent is running; stop it first');
    const p = this.deps.profiles.get(name);
    if (p.backend) this.deps.backends.get(p.backend);
    this.cfg.profile = name;
    if (p.backend) this.cfg.backend = p.backend;
    if (p.model) this.cfg.model = p.model;
    this.cfg.tools = [];
    this.saveCfg();
    await this.resetRuntime();
    this.history.replace([]);
    this.log.add('info', `Switched to profile ${name}; history cleared.`, { name: 'agent' });
  }

  async setCwd(cwd: string): Promise<void> {
    if (this.running) throw new AgentError('the agent is running; stop it first');
    this.cfg.cwd = cwd;
    // Only the owner (or a workflow, inside the session) moves an agent: out of its creator's directory, the
    // policy is its own directory's from then on.
    const root = this.cfg.sandboxRoot;
    if (root !== undefined && relative(root, cwd).startsWith('..')) delete this.cfg.sandboxRoot;
    this.saveCfg();
    await this.resetRuntime();
  }

  isDead(): boolean {
    return this.dead;
  }

  /**
   * Ends the agent at once: from here on nothing is stored for it (its rows may be deleted right after), its
   * turn is stopped, its log readers get EOF; its toolsrv connection closes when the turn has unwound.
   */
  kill(): Promise<void> {
    if (this.dead) return this.current ?? Promise.resolve();
    this.dead = true;
    this.history.detach();
    this.queue = [];
    this.stop();
    this.log.close();
    const w = this.stateWaiters;
    this.stateWaiters = [];
    for (const f of w) f();
    const done = (this.current ?? Promise.resolve()).then(() => this.resetRuntime());
    this.current = done;
    return done;
  }
}
