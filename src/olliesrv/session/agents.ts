/**
 * The agents of every session, by session and name: creation (with profile defaults), sub-agents, renames,
 * kills, and restoring all of them from the store at start-up.
 */
import { AGENT_IDX, ENDED_IDX, EVENTS, SEARCH_HITS } from '../../formats/olliesrv.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, AgentError, lastOutcome, type AgentCfg, type AgentState } from '../agent/agent.js';
import type { AgentDeps, SessionView } from '../agent/deps.js';
import { closeDanglingCalls } from '../agent/history.js';
import type { GenerationParams } from '../backend/types.js';
import type { AgentRow } from '../store/agents.js';
import { addSubagent, emptyStats } from '../agent/stats.js';
import { checkName, remoteDir, resolvedDir, type Sessions } from './registry.js';

/** How deep sub-agents may nest (a top-level agent is depth 0). */
export const MAX_DEPTH = 3;
/** Default limits of a sub-agent's turn, unless the call sets steps= and tokens=. */
export const SUBAGENT_STEPS = 50;
export const SUBAGENT_TOKENS = 2_000_000;

export interface NewAgent {
  name?: string;
  cwd?: string;
  backend?: string;
  model?: string;
  /** Profile name. */
  agent?: string;
  /** Id or name of the agent this one is a sub-agent of. */
  parent?: string;
  /** Where its sandbox policy is loaded for, when not its cwd (AgentCfg.sandboxRoot); never from a request. */
  sandboxRoot?: string;
}

export interface SubAgentCall extends NewAgent {
  prompt: string;
  steps?: number;
  tokens?: number;
}

/** An agent that ended, kept read-only: its log stays readable (`session/S/ended/ID/`) and searchable. */
export interface EndedAgent {
  id: string;
  sessionId: string;
  name: string;
  parent: string;
  depth: number;
  /** When it ended (ms) and how: finished (a sub-agent's turn is over), killed, or interrupted (the daemon stopped). */
  ended: number;
  how: string;
  last: string;
}

const PARAM_KEYS = new Set(['temperature', 'topP', 'topK', 'maxTokens', 'seed', 'thinkingBudget', 'reasoningEffort']);

export class Agents {
  /** session id → agent name → agent */
  private readonly bySession = new Map<string, Map<string, Agent>>();
  /** session id → agent id → the record of an agent that ended */
  private readonly endedBySession = new Map<string, Map<string, EndedAgent>>();
  private readonly deps: AgentDeps;

  constructor(
    private readonly sessions: Sessions,
    deps: Omit<AgentDeps, 'rename' | 'peers'>,
    /** The profile of an agent whose creator names none. */
    private readonly defaultProfile: () => string = () => 'default',
  ) {
    this.deps = {
      ...deps,
      rename: (a, name) => this.rename(a, name),
      peers: { add: (a, n) => this.peerAdd(a, n), del: (a, n) => this.peerDel(a, n), names: (a) => this.peerNames(a) },
    };
  }

  private view(sessionId: string): () => SessionView {
    let cached: SessionView | undefined;
    return () => {
      if (!cached || !this.sessions.has(cached.name) || this.sessions.get(cached.name).id !== sessionId) {
        cached = this.sessions.all().find((s) => s.id === sessionId);
      }
      if (!cached) throw new AgentError(`session ${sessionId} is gone`);
      return cached;
    };
  }

  /** Brings back every agent of every session; drops sub-agents whose caller died with the daemon. */
  restore(): void {
    for (const s of this.sessions.all()) {
      const m = new Map<string, Agent>();
      this.bySession.set(s.id, m);
      for (const row of this.deps.store.bySession(s.id)) {
        if (row.ended) {
          this.keepEnded(
            row.id,
            s.id,
            row.shown_name || row.name,
            row.parent,
            row.depth,
            row.ended,
            row.ended_how ?? '',
            lastOutcome(this.deps.store.blocks(row.id)),
          );
          continue;
        }
        if ((JSON.parse(row.cfg) as { transient?: boolean }).transient) {
          // Its caller died with the daemon: nobody waits for its reply, but what it did stays readable.
          const at = Date.now();
          this.deps.store.end(row.id, 'interrupted', at);
          this.keepEnded(
            row.id,
            s.id,
            row.name,
            row.parent,
            row.depth,
            at,
            'interrupted',
            lastOutcome(this.deps.store.blocks(row.id)),
          );
          continue;
        }
        m.set(row.name, new Agent(row, this.view(s.id), this.deps));
      }
      // Peer links are restored after all agents, dropping links to agents that are gone.
      const ids = new Set([...m.values()].map((a) => a.id));
      for (const a of m.values()) {
        const kept = (a.cfg.peers ?? []).filter((id) => ids.has(id));
        if (kept.length !== (a.cfg.peers ?? []).length) {
          a.cfg.peers = kept;
          a.saveCfg();
        }
      }
    }
  }

  private keepEnded(
    id: string,
    sessionId: string,
    name: string,
    parent: string,
    depth: number,
    ended: number,
    how: string,
    last: string,
  ): EndedAgent {
    let m = this.endedBySession.get(sessionId);
    if (!m) this.endedBySession.set(sessionId, (m = new Map()));
    const e: EndedAgent = { id, sessionId, name, parent, depth, ended, how, last };
    m.set(id, e);
    return e;
  }

  /** The agents of a session that ended, oldest first. */
  endedList(sessionName: string): EndedAgent[] {
    return [...(this.endedBySession.get(this.sessions.get(sessionName).id)?.values() ?? [])];
  }

  ended(sessionName: string, id: string): EndedAgent {
    const e = this.endedBySession.get(this.sessions.get(sessionName).id)?.get(id);
    if (!e) throw new AgentError(`no ended agent ${JSON.stringify(id)} in session ${sessionName}`);
    return e;
  }

  /** An ended agent's log as JSONL, every block (a record: it does not grow). */
  endedLog(e: EndedAgent): string {
    return this.deps.store
      .blocks(e.id)
      .map((b) => `${b}\n`)
      .join('');
  }

  endedBlock(e: EndedAgent, blockId: string): string | undefined {
    const b = this.deps.store.block(e.id, blockId);
    return b === undefined ? undefined : `${b}\n`;
  }

  /** Removes an ended agent's record for good: its log and its search entries go. */
  forget(sessionName: string, id: string): void {
    const e = this.ended(sessionName, id);
    this.deps.store.delete(e.id);
    this.endedBySession.get(e.sessionId)?.delete(e.id);
  }

  /** `ended/idx`: session-id, agent-id, name, parent-id, depth, ended (ms), how, last turn's outcome. */
  endedIdx(sessionName: string): string {
    return this.endedList(sessionName)
      .map(
        (e) =>
          ENDED_IDX.formatRow({
            session: e.sessionId,
            id: e.id,
            name: e.name,
            parent: e.parent || null,
            depth: e.depth,
            ended: e.ended,
            how: e.how,
            last: none(e.last),
          }) + '\n',
      )
      .join('');
  }

  private sessionAgents(a: Agent): Map<string, Agent> {
    const m = this.bySession.get(a.sessionId);
    if (!m || m.get(a.name) !== a) throw new AgentError(`agent ${a.name} is gone`);
    return m;
  }

  private peerByName(a: Agent, name: string): Agent {
    const b = this.sessionAgents(a).get(name);
    if (!b) throw new AgentError(`no agent named ${JSON.stringify(name)} in this session`);
    if (b === a) throw new AgentError('an agent cannot be its own peer');
    return b;
  }

  private link(a: Agent, b: Agent, on: boolean): void {
    for (const [x, y] of [
      [a, b],
      [b, a],
    ] as const) {
      const set = new Set(x.cfg.peers ?? []);
      if (on) set.add(y.id);
      else set.delete(y.id);
      x.cfg.peers = [...set];
      x.saveCfg();
      this.deps.bus.publish(`session.${x.sessionId}.agent.${x.id}.peer.${on ? 'add' : 'del'}`, y.name);
    }
  }

  /** Links two agents of a session both ways: each gets a peer/{other} file. */
  peerAdd(a: Agent, name: string): void {
    this.link(a, this.peerByName(a, name), true);
  }

  peerDel(a: Agent, name: string): void {
    const b = this.peerByName(a, name);
    if (!(a.cfg.peers ?? []).includes(b.id)) throw new AgentError(`${name} is not a peer of ${a.name}`);
    this.link(a, b, false);
  }

  peerNames(a: Agent): string[] {
    const m = this.sessionAgents(a);
    const byId = new Map([...m.values()].map((x) => [x.id, x.name]));
    return (a.cfg.peers ?? []).flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
  }

  /**
   * `peer/{name}`: delivers text to a peer exactly as a prompt (queued while it is busy), marked with the sender.
   * No link, no delivery: the link is the access control.
   */
  sendPeer(from: Agent, toName: string, text: string): void {
    const to = this.peerByName(from, toName);
    if (!(from.cfg.peers ?? []).includes(to.id)) throw new AgentError(`${toName} is not a peer of ${from.name}`);
    const body = text.replace(/\n+$/, '');
    if (!body.trim()) throw new AgentError('empty peer message');
    from.log.add('info', `→ ${to.name}: ${body}`, { name: 'peer' });
    to.enqueue(`<peer-message from="${from.name}">\n${body}\n</peer-message>`);
    this.deps.bus.publish(`session.${to.sessionId}.agent.${to.id}.peer.message`, from.name);
  }

  private map(sessionName: string): Map<string, Agent> {
    const s = this.sessions.get(sessionName);
    let m = this.bySession.get(s.id);
    if (!m) this.bySession.set(s.id, (m = new Map()));
    return m;
  }

  list(sessionName: string): Agent[] {
    return [...this.map(sessionName).values()];
  }

  has(sessionName: string, name: string): boolean {
    return this.sessions.has(sessionName) && this.map(sessionName).has(name);
  }

  get(sessionName: string, name: string): Agent {
    const a = this.map(sessionName).get(name);
    if (!a) throw new AgentError(`no agent named ${JSON.stringify(name)} in session ${sessionName}`);
    return a;
  }

  /**
   * By id or name. The id wins: names are chosen by whoever creates an agent (an agent names its sub-agents),
   * and a name that spells another agent's id must not take over that agent's address nor its token.
   */
  find(sessionName: string, idOrName: string): Agent {
    const m = this.map(sessionName);
    const a = [...m.values()].find((x) => x.id === idOrName) ?? m.get(idOrName);
    if (!a) throw new AgentError(`no agent ${JSON.stringify(idOrName)} in session ${sessionName}`);
    return a;
  }

  all(): Agent[] {
    return [...this.bySession.values()].flatMap((m) => [...m.values()]);
  }

  create(sessionName: string, opts: NewAgent & { transient?: boolean; params?: GenerationParams }): Agent {
    const session = this.sessions.get(sessionName);
    const m = this.map(sessionName);
    const profileName = opts.agent ?? this.defaultProfile();
    const profile = this.deps.profiles.get(profileName);
    const named = opts.backend ?? profile.backend;
    // A backend asked for by name must exist. Without one the agent takes the default, and while none is configured
    // it is made all the same: its first prompt then fails at once saying how to configure one, and once there is a
    // default it follows it (Agent.backend()).
    if (named !== undefined) this.deps.backends.get(named);
    const backend = named ?? this.deps.backends.defaultName;
    // Resolved once, here: the sandbox then refuses a working directory that a symlink redirects later.
    const cwd = this.deps.remoteSession?.(session.id)
      ? remoteDir(opts.cwd ?? session.cwd)
      : resolvedDir(opts.cwd ?? session.cwd);
    const parent = opts.parent ? this.find(sessionName, opts.parent) : undefined;
    const depth = parent ? parent.depth + 1 : 0;
    let name = opts.name;
    if (name !== undefined) {
      checkName(name);
      if (m.has(name))
        throw new AgentError(`an agent named ${JSON.stringify(name)} already exists in session ${sessionName}`);
      if ([...m.values()].some((x) => x.id === name))
        throw new AgentError(
          `${JSON.stringify(name)} is the id of an agent of session ${sessionName}, not a name for another`,
        );
    } else {
      const base = opts.transient ? `sub-${randomBytes(3).toString('hex')}` : profileName;
      name = base;
      for (let i = 2; m.has(name); i++) name = `${base}-${i}`;
    }
    const cfg: AgentCfg & { transient?: boolean } = {
      profile: profileName,
      backend,
      model: opts.model ?? profile.model ?? '',
      cwd,
      params: opts.params ?? {},
      tools: [],
      ...(opts.sandboxRoot !== undefined && { sandboxRoot: opts.sandboxRoot }),
      ...(opts.transient ? { transient: true } : {}),
    };
    const row: AgentRow = {
      id: randomUUID(),
      session: session.id,
      name,
      parent: parent?.id ?? '',
      depth,
      cfg: JSON.stringify(cfg),
      epoch: 0,
      stats: JSON.stringify(emptyStats()),
      running: 0,
      created: Date.now(),
    };
    this.deps.store.insert(row);
    const a = new Agent(row, this.view(session.id), this.deps);
    a.transient = !!opts.transient;
    m.set(name, a);
    this.deps.bus.publish(`session.${session.id}.agent.${a.id}.new`, name);
    // Start the runtime (prompt, toolsrv, provider) now, so that the first prompt does not wait for it; a
    // failure here is reported by the turn that needs the runtime.
    a.ensureRuntime().catch(() => undefined);
    return a;
  }

  /**
   * A sub-agent: created, given a one-time snapshot of its caller's history (when a caller is named), sent the
   * prompt; resolves with its final reply when the turn ends, and the agent is removed. Aborting the signal
   * (the 9P request flushed) stops and removes it.
   */
  async spawn(sessionName: string, call: SubAgentCall, signal: AbortSignal): Promise<string> {
    const parent = call.parent ? this.find(sessionName, call.parent) : undefined;
    if (parent && parent.depth + 1 > MAX_DEPTH) {
      throw new AgentError(
        `sub-agent depth limit: ${parent.name} is at depth ${parent.depth}, and sub-agents may nest at most ${MAX_DEPTH} deep`,
      );
    }
    const a = this.create(sessionName, { ...call, transient: true });
    a.budget = { steps: call.steps ?? SUBAGENT_STEPS, tokens: call.tokens ?? SUBAGENT_TOKENS };
    if (parent) {
      const snapshot = [...parent.history.messages];
      snapshot.push(
        ...closeDanglingCalls(
          snapshot,
          'You are the sub-agent that this call started. Your task is the next message; do it and reply with the result.',
        ),
      );
      // One commit for the whole snapshot, not one per message.
      this.deps.store.batch(() => {
        for (const msg of snapshot) a.history.append(msg);
      });
    }
    const onAbort = () => void this.remove(sessionName, a, 'killed');
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const done = a.nextTurn();
      a.enqueue(call.prompt);
      const r = await done;
      if (signal.aborted) throw signal.reason;
      if (r.error && !r.reply) throw new AgentError(`sub-agent ${a.name} failed: ${r.error}`);
      if (r.stopped && !r.reply) throw new AgentError(`sub-agent ${a.name} was stopped before it replied`);
      const note = r.error ? `\n\n[sub-agent stopped early: ${r.error}]` : '';
      return `${r.reply}${note}\n`;
    } finally {
      signal.removeEventListener('abort', onAbort);
      // The sub-agent is about to be removed with its stats: its caller pays for it, so its usage stays there.
      if (parent && !parent.isDead()) {
        addSubagent(parent.stats, a.id, a.name, a.stats);
        this.deps.store.setStats(parent.id, JSON.stringify(parent.stats));
      }
      await this.remove(sessionName, a, 'finished');
    }
  }

  rename(a: Agent, newName: string): void {
    const m = [...this.bySession.values()].find((x) => x.get(a.name) === a);
    if (!m) throw new AgentError(`agent ${a.name} is gone`);
    if (newName === a.name) return;
    checkName(newName);
    if (m.has(newName))
      throw new AgentError(`an agent named ${JSON.stringify(newName)} already exists in this session`);
    if ([...m.values()].some((x) => x.id === newName && x !== a))
      throw new AgentError(`${JSON.stringify(newName)} is the id of an agent of this session, not a name for another`);
    this.deps.store.rename(a.id, newName);
    m.delete(a.name);
    const old = a.name;
    a.name = newName;
    m.set(newName, a);
    this.deps.bus.publish(
      `session.${a.sessionId}.agent.${a.id}.rename`,
      EVENTS.payload(`session.${a.sessionId}.agent.${a.id}.rename`, { old, new: newName }),
    );
  }

  /** Ends an agent; its row, log and search entries stay as a read-only record (`how` it ended). */
  private async remove(sessionName: string, a: Agent, how: 'finished' | 'killed'): Promise<void> {
    // (sessionName may be the session's id: map() resolves both.)
    if (a.isDead()) return;
    const m = this.sessions.has(sessionName) ? this.map(sessionName) : undefined;
    if (m?.get(a.name) === a) m.delete(a.name);
    const done = a.kill();
    // Removing an agent removes it from every peer set.
    for (const x of m?.values() ?? []) {
      if ((x.cfg.peers ?? []).includes(a.id)) {
        x.cfg.peers = x.cfg.peers!.filter((id) => id !== a.id);
        x.saveCfg();
      }
    }
    const at = Date.now();
    this.deps.store.end(a.id, how, at);
    // Recorded before the event, so that a client re-reading ended/idx on it finds the agent there.
    this.keepEnded(a.id, a.sessionId, a.name, a.parent, a.depth, at, how, a.lastTurn);
    this.deps.bus.publish(`session.${a.sessionId}.agent.${a.id}.kill`);
    await done;
  }

  kill(sessionName: string, name: string): Promise<void> {
    return this.remove(sessionName, this.get(sessionName, name), 'killed');
  }

  /** Called before a session is deleted: its agents end (their rows go with the session's). */
  dropSession(sessionId: string): void {
    // Its spill files go with it: whole tool outputs, which may hold what the session printed (secrets included).
    if (/^[\w-]+$/.test(sessionId)) rmSync(join(this.deps.outputDir, sessionId), { recursive: true, force: true });
    this.endedBySession.delete(sessionId);
    const m = this.bySession.get(sessionId);
    if (!m) return;
    this.bySession.delete(sessionId);
    for (const a of m.values()) {
      void a.kill();
      this.deps.bus.publish(`session.${sessionId}.agent.${a.id}.kill`);
    }
  }

  /** A session was paused or resumed: idle agents change state, resumed ones drain their queues. */
  sessionPaused(sessionId: string, paused: boolean): void {
    for (const a of this.bySession.get(sessionId)?.values() ?? []) {
      a.announceState((a.busy ? a.state : paused ? 'idle' : 'paused') as AgentState);
      if (!paused) a.drain();
    }
  }

  /**
   * Root `search`: matching blocks of every agent (of session `sessionId` only, and those `shown` keeps, when given), as
   * `session\tagent\tblock-id\trole\tsnippet\tagent-id\tended` lines (ended: `-` for a live agent, else how it
   * ended). Ended agents are searched unless `shown` filters: an agent principal finds only live relations.
   */
  search(text: string, sessionId?: string, shown?: (a: Agent) => boolean): string {
    const inScope = (sid: string): boolean => sessionId === undefined || sid === sessionId;
    const byId = new Map<string, { sessionId: string; name: string; ended: string }>(
      this.all()
        .filter((a) => inScope(a.sessionId) && (!shown || shown(a)))
        .map((a) => [a.id, { sessionId: a.sessionId, name: a.name, ended: '-' }]),
    );
    if (!shown) {
      for (const [sid, m] of this.endedBySession)
        if (inScope(sid))
          for (const e of m.values()) byId.set(e.id, { sessionId: sid, name: e.name, ended: e.how || 'ended' });
    }
    const names = new Map(this.sessions.all().map((s) => [s.id, s.name]));
    return this.deps.store
      .search(text)
      .flatMap((h) => {
        const a = byId.get(h.agent);
        const s = a && names.get(a.sessionId);
        return a && s
          ? [
              SEARCH_HITS.formatRow({
                session: s,
                agent: a.name,
                block: h.id,
                role: h.role,
                snippet: h.snippet,
                agent_id: h.agent,
                ended: none(a.ended),
              }) + '\n',
            ]
          : [];
      })
      .join('');
  }

  /** `agent/idx`: session-id, agent-id, name, parent-id, depth, state, last turn's outcome; of the agents `shown` keeps, if given. */
  idx(sessionName: string, shown?: (a: Agent) => boolean): string {
    const s = this.sessions.get(sessionName);
    return this.list(sessionName)
      .filter((a) => !shown || shown(a))
      .map(
        (a) =>
          AGENT_IDX.formatRow({
            session: s.id,
            id: a.id,
            name: a.name,
            parent: a.parent || null,
            depth: a.depth,
            state: a.state,
            last: none(a.lastTurn),
          }) + '\n',
      )
      .join('');
  }

  /** Parses generation parameters given as key=value (temperature=0.2 …). */
  static params(kv: Record<string, string>): GenerationParams {
    const p: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(kv)) {
      if (!PARAM_KEYS.has(k)) continue;
      if (k === 'reasoningEffort') p[k] = v;
      else {
        const n = Number(v);
        if (!Number.isFinite(n)) throw new AgentError(`${k}: ${JSON.stringify(v)} is not a number`);
        p[k] = n;
      }
    }
    return p as GenerationParams;
  }
}

/** `-` (and nothing) is how the records say none. */
const none = (v: string | undefined): string | null => (v === undefined || v === '' || v === '-' ? null : v);
