/**
 * One agent: its identity, configuration, history, chat log, prompt queue and runtime. The class holds the agent's
 * state; what it does lives beside it, one job per file: prompt intake (intake.ts), the turn loop (turn.ts), one
 * model request (request.ts), fitting a request into the window (fit.ts), tool rounds (toolround.ts), the runtime
 * of prompt and tools (runtime.ts), ctl commands (control.ts), published state (state.ts). One turn at a time;
 * prompts that arrive while a turn runs wait in the queue and run in order after it.
 */
import type { Backend } from '../backend/types.js';
import type { AgentRow } from '../store/agents.js';
import type { ToolHost } from '../toolclient/host.js';
import type { ToolInfo } from '../../toolsrv/protocol.js';
import { ChatLog, WINDOW } from './chatlog.js';
import { runCommand } from './commands.js';
import { Correction } from './context.js';
import * as control from './control.js';
import type { AgentDeps, SessionView } from './deps.js';
import { AgentError } from './errors.js';
import * as fit from './fit.js';
import { History } from './history.js';
import * as intake from './intake.js';
import * as runtime from './runtime.js';
import type { Runtime } from './runtime.js';
import * as state from './state.js';
import { lastOutcome, recoverInterrupted } from './state.js';
import { parseStats, type Stats } from './stats.js';
import type { AgentCfg, AgentState, BackgroundProc, Budget, TurnOutcome, TurnResult } from './types.js';

export { AgentError, ContextBudgetError, overflowFigures } from './errors.js';
export { lastOutcome } from './state.js';
export type { AgentCfg, AgentState, BackgroundProc, Budget, TurnOutcome, TurnResult } from './types.js';

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

  // The agent's working state, shared with its modules (turn.ts, fit.ts, runtime.ts, …); not for callers outside agent/.
  st: AgentState = 'idle';
  running = false;
  abort?: AbortController;
  injection?: string;
  compactRequested = false;
  runtime?: Runtime;
  building?: Promise<Runtime>;
  turnWaiters: Array<(r: TurnResult) => void> = [];
  stateWaiters: Array<() => void> = [];
  dead = false;
  /** The running turn, awaited by kill() so that nothing is written for an agent that is gone. */
  current?: Promise<void>;
  contextLen?: { key: string; n: number };
  /** A window smaller than configured, learned from a provider's overflow error (per backend/model). */
  learnedWindow?: { key: string; n: number };
  readonly correction = new Correction();

  constructor(
    row: AgentRow,
    readonly session: () => SessionView,
    readonly deps: AgentDeps,
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
    if (row.running) recoverInterrupted(this);
  }

  get state(): AgentState {
    if (this.st === 'idle' && this.session().paused) return 'paused';
    return this.st;
  }

  get busy(): boolean {
    return this.running;
  }

  isDead(): boolean {
    return this.dead;
  }

  saveCfg(): void {
    if (!this.dead) this.deps.store.setCfg(this.id, JSON.stringify(this.cfg));
  }

  // ---- state (state.ts) -------------------------------------------------------------------------------------

  announceState(before: AgentState): void {
    state.announceState(this, before);
  }

  stateChange(signal: AbortSignal): Promise<AgentState> {
    return state.stateChange(this, signal);
  }

  /** Resolves when the next turn (or the current one) ends. */
  nextTurn(): Promise<TurnResult> {
    return new Promise((resolve) => this.turnWaiters.push(resolve));
  }

  // ---- prompts (intake.ts) ----------------------------------------------------------------------------------

  submit(text: string): Promise<'started' | 'queued' | 'command'> {
    return intake.submit(this, text);
  }

  enqueue(text: string): 'started' | 'queued' {
    return intake.enqueue(this, text);
  }

  drain(): void {
    intake.drain(this);
  }

  inject(text: string): void {
    intake.inject(this, text);
  }

  /** A ctl command; returns its reply. */
  ctl(command: string): Promise<string> {
    return runCommand(this, command, this.deps);
  }

  // ---- runtime: profile, prompt, tools (runtime.ts) ---------------------------------------------------------

  env(): Record<string, string> {
    return runtime.env(this);
  }

  ensureRuntime(): Promise<Runtime> {
    return runtime.ensureRuntime(this);
  }

  resetRuntime(): Promise<void> {
    return runtime.resetRuntime(this);
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

  async systemPrompt(): Promise<string> {
    return (await this.ensureRuntime()).system;
  }

  // ---- context size (fit.ts) --------------------------------------------------------------------------------

  contextLength(): Promise<number> {
    return fit.contextLength(this);
  }

  contextEstimate(): number {
    return fit.contextEstimate(this);
  }

  // ---- ctl commands (control.ts) ----------------------------------------------------------------------------

  stop(): boolean {
    return control.stop(this);
  }

  backend(): Backend {
    return control.backend(this);
  }

  loadTool(name: string): Promise<void> {
    return control.loadTool(this, name);
  }

  compact(): Promise<string> {
    return control.compact(this);
  }

  restore(): string {
    return control.restore(this);
  }

  clear(): void {
    control.clear(this);
  }

  switchProfile(name: string): Promise<void> {
    return control.switchProfile(this, name);
  }

  setCwd(cwd: string): Promise<void> {
    return control.setCwd(this, cwd);
  }

  kill(): Promise<void> {
    return control.kill(this);
  }
}
