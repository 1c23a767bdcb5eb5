/**
 * One agent: its identity, configuration, history, chat log, prompt queue and the turn loop (seed 000, "The
 * Agent Loop"): stream the model's reply, run the tool calls it asks for through toolsrv, append the results,
 * and go round again until the model answers without calling a tool. One turn at a time; prompts that arrive
 * while a turn runs wait in the queue and run in order after it.
 */
import { join } from 'node:path';
import { ContextOverflowError, RateLimitError } from '../backend/errors.js';
import { retryDelay } from '../backend/retry.js';
import type { Backend, GenerationParams, Message, ToolCall, ToolSpec } from '../backend/types.js';
import type { AgentRow } from '../store/agents.js';
import type { ToolHost } from '../toolclient/host.js';
import type { ToolInfo } from '../../toolsrv/protocol.js';
import { ChatLog } from './chatlog.js';
import { runCommand } from './commands.js';
import { summarize, summaryMessage, tailStart } from './compaction.js';
import type { AgentDeps, SessionView } from './deps.js';
import { batches, forModel, prepare, type ModelResult } from './dispatch.js';
import { closeDanglingCalls, History } from './history.js';
import { resolvePrompt, type Profile } from './profiles.js';
import { envRefusal } from '../session/envrules.js';
import { addUsage, parseStats, startTurn, type Stats } from './stats.js';

export type AgentState = 'idle' | 'thinking' | 'calling' | 'paused' | 'compacting';

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

const NOTHING_TO_COMPACT = 'nothing to compact\n';

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

interface Runtime {
  profile: Profile;
  promptText: string;
  host?: ToolHost;
  rev: number;
  tools: Map<string, ToolInfo>;
  specs: ToolSpec[];
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
    this.history = new History(deps.store, row.id, row.epoch);
    this.log = new ChatLog(row.id, deps.store.blocks(row.id), (seq, id, json) => {
      if (!this.dead) deps.store.addBlock(row.id, seq, id, json);
    });
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
        for (const c of await this.deps.enrich({ agent: this, prompt: text, tools: [...rt.tools.values()], cwd: this.cfg.cwd })) this.addContext(c.text, c.name);
      } catch (e) {
        this.log.add('info', `could not match skills and tools to the prompt: ${errText(e)}`, { name: 'enrich' });
      }
    }
    this.deps.store.batch(() => {
      this.log.add('user', text);
      this.history.append({ role: 'user', content: text });
    });
    const backend = this.deps.backends.get(this.cfg.backend);
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
      await this.maybeCompact(backend, signal);
    }
    return { reply };
  }

  /** A context block: sent to the model, hidden in the chat view. */
  private addContext(text: string, name: string): void {
    this.deps.store.batch(() => {
      this.log.add('context', text, { name });
      this.history.append({ role: 'user', content: `<context>\n${text}\n</context>` });
    });
  }

  /** One model response, with our retry policy. Undefined when the turn was stopped. */
  private async respond(
    backend: Backend,
    rt: Runtime,
    tools: ToolSpec[],
    signal: AbortSignal,
  ): Promise<{ text: string; reasoning: string; signature?: string; calls: ToolCall[] } | undefined> {
    let overflowHandled = false;
    const model = this.cfg.model || backend.defaultModel;
    const params = { ...rt.profile.params, ...this.cfg.params };
    for (let attempt = 0; ; attempt++) {
      let textId: string | undefined;
      let reasonId: string | undefined;
      let text = '';
      let reasoning = '';
      let signature: string | undefined;
      const calls: ToolCall[] = [];
      try {
        const messages: Message[] = [{ role: 'system', content: rt.system }, ...this.history.messages];
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
        if (e instanceof ContextOverflowError && !overflowHandled) {
          overflowHandled = true;
          this.log.add('info', `The context is full (${errText(e)}); compacting and retrying.`, { name: 'overflow' });
          if ((await this.compactNow('context overflow', signal)) === NOTHING_TO_COMPACT) throw e;
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

  private async runTools(rt: Runtime, calls: ToolCall[], signal: AbortSignal): Promise<ModelResult[]> {
    await rt.ready;
    const prepared = calls.map((c) => prepare(c, rt.tools));
    const results: ModelResult[] = new Array<ModelResult>(prepared.length);
    const spillDir = join(this.deps.outputDir, this.sessionId, this.id);
    for (const batch of batches(prepared)) {
      if (signal.aborted) break;
      await Promise.all(
        batch.map(async (p) => {
          const i = prepared.indexOf(p);
          let r: ModelResult;
          if (p.invalid) r = { content: p.invalid, full: p.invalid, isError: true };
          else if (!rt.host) r = { content: 'error: tools are unavailable: no tool server runs for this session', full: 'tools are unavailable', isError: true };
          else {
            try {
              const res = await rt.host.call({ tool: p.call.name, args: p.args!, flags: p.flags }, signal);
              if (res.status === 'background') this.procs.set(res.pid, { pid: res.pid, tool: p.call.name, args: p.call.args, started: Date.now() });
              r = forModel(res, { root: this.deps.outputDir, dir: spillDir, name: p.call.id.replace(/[^\w.-]/g, '_') });
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
    this.history.append({ role: 'user', content: `<context>\nThe user ran \`${cmd}\`:\n${r.content}\n</context>` });
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
    void this.deps.backends.get(this.cfg.backend).prepare?.();
    const profile = this.deps.profiles.get(this.cfg.profile);
    const env = this.env();
    const wanted = [...new Set([...profile.autoLoad, ...this.cfg.tools])];
    const cacheKey = this.deps.toolCache?.key(wanted);
    const cached = cacheKey ? this.deps.toolCache!.get(cacheKey) : undefined;
    const rt: Runtime = {
      profile, promptText: '', rev: -1, tools: new Map(), specs: [], system: '', life: new AbortController(), ready: Promise.resolve(),
    };
    const connect = async (): Promise<void> => {
      const st = await this.deps.tools(this.sessionId);
      if (st) {
        const { OLLIE_SESSION_ID: _s, OLLIE_UNAME: _u, ...sessionEnv } = env;
        // Last, so that nothing in the session's environment stands in for it.
        const token: Record<string, string> = this.deps.token ? { OLLIE_TOKEN: this.deps.token(this.sessionId, this.id) } : {};
        const host = await st.forAgent(this.id, this.cfg.cwd, { ...sessionEnv, ...token });
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

  /** The tools the model sees, and the system prompt with their prompts. */
  private setTools(rt: Runtime, tools: ToolInfo[]): void {
    rt.tools = new Map(tools.map((t) => [t.name, t]));
    rt.specs = tools.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }));
    const toolPrompts = tools.filter((t) => t.prompt.trim()).map((t) => `### ${t.name}\n${t.prompt.trim()}`);
    rt.system = toolPrompts.length ? `${rt.promptText.trimEnd()}\n\n## Tools\n\n${toolPrompts.join('\n\n')}\n` : rt.promptText;
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

  // ---- context: size, compaction ----------------------------------------------------------------------------

  async contextLength(): Promise<number> {
    const backend = this.deps.backends.get(this.cfg.backend);
    const key = `${backend.name}/${this.cfg.model}`;
    if (this.contextLen?.key !== key) this.contextLen = { key, n: await backend.contextLength(this.cfg.model || undefined) };
    return this.contextLen.n;
  }

  contextEstimate(): number {
    const reported = this.stats.lastInputTokens ? this.stats.lastInputTokens + this.stats.lastOutputTokens : 0;
    return Math.max(reported, this.history.estimateTokens());
  }

  private async maybeCompact(backend: Backend, signal: AbortSignal): Promise<void> {
    if (this.compactRequested) {
      this.compactRequested = false;
      await this.compactNow('requested', signal);
      return;
    }
    const limit = await backend.contextLength(this.cfg.model || undefined);
    const at = this.cfg.compactAt ?? this.runtime?.profile.compactAt ?? 0.75;
    if (this.contextEstimate() >= at * limit) await this.compactNow(`context at ${Math.round((100 * this.contextEstimate()) / limit)}% of ${limit} tokens`, signal);
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

  private async compactNow(reason: string, signal?: AbortSignal): Promise<string> {
    const msgs = this.history.messages;
    const start = tailStart(msgs);
    if (start < 2) return NOTHING_TO_COMPACT;
    const prev = this.st;
    this.setState('compacting');
    const before = this.contextEstimate();
    this.log.add('info', `Compacting ${start} messages (~${before} tokens; ${reason}).`, { name: 'compaction' });
    try {
      const backend = this.deps.backends.get(this.cfg.backend);
      const model = this.runtime?.profile.compactionModel ?? backend.compactionModel;
      const summary = await summarize(backend, model, msgs.slice(0, start), signal);
      const oldEpoch = this.history.epoch;
      this.history.replace([summaryMessage(summary, start), ...msgs.slice(start)]);
      this.stats.lastInputTokens = 0;
      this.stats.lastOutputTokens = 0;
      if (!this.dead) this.deps.store.setStats(this.id, JSON.stringify(this.stats));
      const msg = `Compacted ${start} messages into a summary (~${before} → ~${this.contextEstimate()} tokens). The history before it is kept (epoch ${oldEpoch}; ctl restore brings it back).`;
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
