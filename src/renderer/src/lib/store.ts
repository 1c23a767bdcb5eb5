/**
 * The renderer's state (zustand) and the one controller that fills it from olliesrv. The tree, the states
 * and the approvals come from the `event` stream (one streaming Rdwr per connection) plus a re-read of the
 * index file an event names; nothing polls. The chat of the selected agent streams from its log's tail (`log.from`).
 */
import { create } from 'zustand';
import { Client } from '../../../ninep/index.js';
import { Api, type ConsoleEntry } from './api.js';
import { ChatLog } from './chatlog.js';
import { appendEntry, loadConsole, saveConsole } from './consolelog.js';
import {
  agentCommandLine, maskKeys, parseAgentIdx, parseBackends, parseEndedIdx, parseBypassRules, parseCheckedModels, parseEvent, parseKv, parsePending, parseProcIdx, parseProviders, parseSearch, parseSessionIdx, setupRequest, treeOrder, unmaskKeys,
  type AgentInfo, type BackendInfo, type BypassRule, type Event, type Pending, type ProcInfo, type ProviderInfo, type SearchHit, type SessionInfo,
} from './parse.js';
import { openChannel } from './transport.js';
import { AGENT_CTL, AGENT_NEW, CFG, PROC_CTL, SESSION_CTL, SESSION_NEW, STATS } from '../../../formats/olliesrv.js';

export type Dialog =
  | { kind: 'new-session' }
  | { kind: 'new-agent'; session: string }
  | { kind: 'agent-cfg'; session: string; agent: string }
  /** Killing cannot be undone: the tree's Kill asks first. */
  | { kind: 'confirm-kill'; session: string; agent?: string }
  | null;

/** What the main area shows: the selected agent's chat, full-text search, or the configuration files. */
export type View = 'chat' | 'search' | 'settings' | 'setup';

export interface SearchState {
  query: string;
  hits: SearchHit[];
  busy: boolean;
  /** The query the hits answer (undefined before the first search). */
  done?: string;
  error?: string;
}

export interface Selection {
  session?: string;
  agent?: string;
}

export interface State {
  conn: 'connecting' | 'open' | 'down';
  connError?: string;
  /** Seconds until the next reconnect attempt while down. */
  retryIn?: number;
  sessions: Record<string, SessionInfo>;
  sessionOrder: string[];
  /** Agents per session id, in tree order. */
  agents: Record<string, AgentInfo[]>;
  pending: Record<string, Pending>;
  collapsed: Record<string, boolean>;
  selected: Selection;
  /** The selected agent's chat; `chatVersion` changes when it does. */
  chat?: ChatLog;
  chatVersion: number;
  chatEnded: boolean;
  stats: Record<string, string>;
  cfg: Record<string, string>;
  /** The selected agent's prompt queue (olliesrv's `queue` file): prompts written while it works. */
  queue: Record<string, string[]>;
  console: ConsoleEntry[];
  consoleOpen: boolean;
  dialog: Dialog;
  /** The bypass request the approval dialog shows, if any. */
  approving?: string;
  notice?: { text: string; error: boolean };
  backends: BackendInfo[];
  profiles: string[];
  /** The root files have been read once (so an empty backend list means none is configured). */
  loaded: boolean;
  view: View;
  /** The selected agent's background processes (its `proc/idx`), and whether their panel is open. */
  procs: ProcInfo[];
  procsOpen: boolean;
  /** The process whose output the panel shows. */
  procPid?: number;
  search: SearchState;
  /** A block to scroll to and mark in the chat (a search result that was opened). */
  highlight?: string;
}

const restored = loadConsole();
/** Console lines are numbered by the page, not per connection: restored lines and new ones never share a key. */
let consoleSeq = restored.entries.reduce((m, e) => Math.max(m, e.seq), 0);

export const useStore = create<State>(() => ({
  conn: 'connecting',
  sessions: {},
  sessionOrder: [],
  agents: {},
  pending: {},
  collapsed: {},
  selected: {},
  chatVersion: 0,
  chatEnded: false,
  stats: {},
  cfg: {},
  queue: {},
  console: restored.entries,
  consoleOpen: restored.open,
  dialog: null,
  backends: [],
  profiles: [],
  loaded: false,
  view: 'chat',
  procs: [],
  procsOpen: false,
  search: { query: '', hits: [], busy: false },
}));

const set = useStore.setState;
const get = useStore.getState;

// The console survives a reload of the page (sessionStorage), written at most once per 250 ms and when the page goes.
let saveTimer: ReturnType<typeof setTimeout> | undefined;
const saveNow = (): void => {
  clearTimeout(saveTimer);
  saveTimer = undefined;
  saveConsole(get().console, get().consoleOpen);
};
useStore.subscribe((s, prev) => {
  if ((s.console !== prev.console || s.consoleOpen !== prev.consoleOpen) && !saveTimer) saveTimer = setTimeout(saveNow, 250);
});
if (typeof window !== 'undefined') window.addEventListener('pagehide', saveNow);

export const sessionPath = (sid: string): string => `session/${get().sessions[sid]?.name ?? sid}`;
/** A live agent's directory (by name), or an ended one's read-only record (by id: its name may be taken again). */
export function agentPath(sid: string, aid: string): string {
  const a = get().agents[sid]?.find((x) => x.id === aid);
  return a?.ended ? `${sessionPath(sid)}/ended/${aid}` : `${sessionPath(sid)}/agent/${a?.name ?? aid}`;
}
const isEnded = (sid: string, aid: string): boolean => !!get().agents[sid]?.find((x) => x.id === aid)?.ended;
export const agentKey = (sid: string, aid: string): string => `${sid}/${aid}`;
export const findAgent = (sid?: string, aid?: string): AgentInfo | undefined =>
  sid && aid ? get().agents[sid]?.find((a) => a.id === aid) : undefined;

/** Runs `fn` on the next animation frame, or soon when the page is hidden (where frames do not come). */
export function nextFrame(fn: () => void): void {
  if (typeof requestAnimationFrame === 'function' && document.visibilityState === 'visible') requestAnimationFrame(() => fn());
  else setTimeout(fn, 16);
}

export function notify(text: string, error = false): void {
  set({ notice: { text, error } });
}

/**
 * Blocks read when a chat opens: a few screens, whatever the log's length (first paint costs the same at 1k and
 * 100k blocks). Older pages are PAGE blocks; a search hit further back is reached in REVEAL_PAGE steps.
 */
const TAIL = 200;
const PAGE = 500;
const REVEAL_PAGE = 5000;

/** Coalesces chat updates to one per animation frame: streaming at any rate costs one render per frame. */
let frameQueued = false;
function bumpChat(): void {
  if (frameQueued) return;
  frameQueued = true;
  const flush = (): void => {
    frameQueued = false;
    set((s) => ({ chatVersion: s.chatVersion + 1 }));
  };
  nextFrame(flush);
}

class Controller {
  api?: Api;
  private conn?: AbortController;
  private chatAbort?: AbortController;
  /** The page of older blocks being read, if any (one at a time per chat). */
  private older?: { log: ChatLog; done: Promise<boolean> };
  private backoff = 500;
  private started = false;

  /** Idempotent: React's StrictMode runs mount effects twice in development. */
  start(): void {
    if (this.started) return;
    this.started = true;
    void this.connect();
  }

  private logOp = (e: ConsoleEntry): void => {
    set((s) => ({ console: appendEntry(s.console, { ...e, seq: ++consoleSeq }) }));
  };

  private async connect(): Promise<void> {
    set({ conn: 'connecting', retryIn: undefined });
    let client: Client;
    try {
      // The gateway (the preload's port, or the token-checked WebSocket) speaks for the user who runs olliesrv,
      // so the GUI attaches as that user, like ollie-9p does: the namespace's owner, read from its root.
      const probe = await Client.connect(await openChannel(), { uname: 'none' });
      const owner = await probe.stat('/').then((st) => st.uid, () => 'none');
      probe.close();
      client = await Client.connect(await openChannel(), { uname: owner });
    } catch (e) {
      this.down((e as Error).message);
      return;
    }
    this.backoff = 500;
    const api = new Api(client, this.logOp);
    this.api = api;
    const conn = new AbortController();
    this.conn = conn;
    set({ conn: 'open', connError: undefined });
    // Subscribe before reading the indexes, so that nothing that happens in between is missed.
    const events = this.events(api, conn.signal);
    await this.reloadAll();
    const sel = get().selected;
    if (sel.session && sel.agent && findAgent(sel.session, sel.agent)) this.openChat(sel.session, sel.agent);
    try {
      await events;
      if (!conn.signal.aborted) this.down('the event stream ended');
    } catch (e) {
      if (!conn.signal.aborted) this.down((e as Error).message);
    }
  }

  /** Daemon unreachable: reconnect with exponential backoff (0.5 s doubling to 10 s), counting down. */
  private down(why: string): void {
    this.conn?.abort();
    this.chatAbort?.abort();
    this.api?.client.close();
    this.api = undefined;
    const wait = this.backoff;
    this.backoff = Math.min(this.backoff * 2, 10_000);
    set({ conn: 'down', connError: why, retryIn: Math.ceil(wait / 1000) });
    setTimeout(() => void this.connect(), wait);
  }

  reconnectNow(): void {
    this.backoff = 500;
    if (get().conn === 'down') void this.connect();
  }

  private async events(api: Api, signal: AbortSignal): Promise<void> {
    let rest = '';
    for await (const text of api.stream('event', { request: '*\n', signal })) {
      const parts = (rest + text).split('\n');
      rest = parts.pop() ?? '';
      for (const line of parts) if (line) await this.onEvent(parseEvent(line)).catch((e: unknown) => notify((e as Error).message, true));
    }
  }

  private async onEvent(e: Event): Promise<void> {
    const sid = e.session;
    if (e.kind === 'ollie.overflow') return this.reloadAll();
    if (!sid) return;
    if (!e.agent) {
      switch (e.kind) {
        case 'new':
        case 'rename':
          await this.reloadSessions();
          if (e.kind === 'new') await this.reloadAgents(sid);
          return;
        case 'kill':
          return this.dropSession(sid);
        case 'pause':
        case 'resume':
          set((s) => {
            const cur = s.sessions[sid];
            return cur ? { sessions: { ...s.sessions, [sid]: { ...cur, paused: e.kind === 'pause' } } } : {};
          });
          return;
        default:
          return;
      }
    }
    const aid = e.agent;
    switch (e.kind) {
      case 'new':
      case 'rename':
        return this.reloadAgents(sid);
      case 'kill': {
        // The agent ends; ended/idx has its record (a finished sub-agent stays in the tree). A killed agent's
        // open chat goes back to the session; a finished sub-agent's stays, now read from its record.
        const sel = get().selected;
        const wasOpen = sel.session === sid && sel.agent === aid;
        await this.reloadAgents(sid);
        const now = findAgent(sid, aid);
        if (wasOpen && (!now || now.ended === 'killed')) this.select({ session: sid });
        return;
      }
      case 'state':
        return this.onState(sid, aid, e.fields.state ?? e.payload.trim());
      case 'turn': {
        // Sent just before the state goes idle: the tree's dot then says whether the turn failed.
        const last = e.fields.how || '-';
        set((s) => ({ agents: { ...s.agents, [sid]: (s.agents[sid] ?? []).map((a) => (a.id === aid ? { ...a, last } : a)) } }));
        return;
      }
      case 'bypass.request': {
        const { id, cmd = '', cwd = '', tool } = e.fields;
        if (!id) return;
        set((s) => ({ pending: { ...s.pending, [id]: { id, session: sid, agent: aid, cmd: cmd ?? '', cwd: cwd ?? '', ...(tool && { tool }) } } }));
        if (!get().approving) set({ approving: id });
        // The event carries id, command, cwd and tool; the pending file adds the sandbox's reason and the rule.
        await this.reloadPending(sid);
        return;
      }
      case 'bypass.resolved': {
        this.dropPending(e.fields.id ?? '');
        return;
      }
      default:
        return;
    }
  }

  private onState(sid: string, aid: string, state: string): void {
    set((s) => ({ agents: { ...s.agents, [sid]: (s.agents[sid] ?? []).map((a) => (a.id === aid ? { ...a, state } : a)) } }));
    const sel = get().selected;
    if (sel.session === sid && sel.agent === aid) {
      // Stats (with the queue: a turn starting or ending is when olliesrv takes a prompt off it) after each step.
      // A background process starts in a tool call (calling → thinking) and its exit arrives as a prompt (a new
      // turn): proc/idx can change only then, so it is read on those changes and never polled.
      if (state !== 'calling') void this.reloadStats();
      if (state === 'thinking' || state === 'idle') void this.reloadProcs(sid, aid);
    }
  }

  private dropPending(id: string): void {
    set((s) => {
      const { [id]: _gone, ...pending } = s.pending;
      const approving = s.approving === id ? Object.keys(pending)[0] : s.approving;
      return { pending, approving };
    });
  }

  private dropSession(sid: string): void {
    set((s) => {
      const { [sid]: _s, ...sessions } = s.sessions;
      const { [sid]: _a, ...agents } = s.agents;
      const pending = Object.fromEntries(Object.entries(s.pending).filter(([, p]) => p.session !== sid));
      return { sessions, agents, pending, sessionOrder: s.sessionOrder.filter((x) => x !== sid) };
    });
    if (get().selected.session === sid) this.select({});
  }

  async reloadAll(): Promise<void> {
    const api = this.api;
    if (!api) return;
    const [backends, profiles] = await Promise.all([api.readOr('backends', ''), api.readOr('agents', '')]);
    const first = !get().loaded;
    set({ backends: parseBackends(backends), profiles: profiles.split('\n').filter(Boolean), loaded: true });
    // A first run: nothing can answer until a backend is set up, so that is what the page opens on (once per page).
    if (first && get().backends.length === 0 && get().view === 'chat') set({ view: 'setup' });
    await this.reloadSessions();
    await Promise.all(get().sessionOrder.map((sid) => Promise.all([this.reloadAgents(sid), this.reloadPending(sid)])));
  }

  async reloadSessions(): Promise<void> {
    const api = this.api;
    if (!api) return;
    const list = parseSessionIdx(await api.read('session/idx'));
    set((s) => ({
      sessions: Object.fromEntries(list.map((x) => [x.id, x])),
      sessionOrder: list.map((x) => x.id),
      agents: Object.fromEntries(list.map((x) => [x.id, s.agents[x.id] ?? []])),
    }));
    if (get().selected.session && !get().sessions[get().selected.session!]) this.select({});
  }

  async reloadAgents(sid: string): Promise<void> {
    const api = this.api;
    if (!api || !get().sessions[sid]) return;
    // Sessions from before the agent namespace have no agent/idx: they simply have no agents. Agents that ended
    // (finished sub-agents, killed agents) come from ended/idx: the tree keeps sub-agents, Search opens any.
    const [text, ended] = await Promise.all([api.readOr(`${sessionPath(sid)}/agent/idx`, ''), api.readOr(`${sessionPath(sid)}/ended/idx`, '')]);
    set((s) => ({ agents: { ...s.agents, [sid]: treeOrder([...parseAgentIdx(text), ...parseEndedIdx(ended)]) } }));
  }

  async reloadPending(sid: string): Promise<void> {
    const api = this.api;
    if (!api || !get().sessions[sid]) return;
    const list = parsePending(await api.readOr(`${sessionPath(sid)}/bypass`, ''), sid);
    set((s) => {
      const pending = Object.fromEntries(Object.entries(s.pending).filter(([, p]) => p.session !== sid));
      for (const p of list) {
        const known = s.pending[p.id];
        pending[p.id] = { ...known, ...p, agent: p.agent || known?.agent || '', cmd: p.cmd || known?.cmd || '', cwd: p.cwd || known?.cwd || '' };
      }
      const approving = s.approving && pending[s.approving] ? s.approving : Object.keys(pending)[0];
      return { pending, approving };
    });
  }

  select(sel: Selection): void {
    // Picking an agent (the tree, a notification, a search hit) is asking to see its chat.
    if (sel.agent && get().view !== 'chat') set({ view: 'chat' });
    const cur = get().selected;
    if (cur.session === sel.session && cur.agent === sel.agent) return;
    set({ selected: sel, stats: {}, cfg: {}, procs: [], procPid: undefined, highlight: undefined });
    this.chatAbort?.abort();
    this.chatAbort = undefined;
    set({ chat: undefined, chatEnded: false });
    if (sel.session && sel.agent) this.openChat(sel.session, sel.agent);
  }

  /**
   * Opens the agent's log from its tail (`log.from`: the last TAIL blocks, then live; it ends when the agent
   * dies). Older blocks come a page at a time as the user scrolls up (loadOlder).
   */
  private openChat(sid: string, aid: string): void {
    const api = this.api;
    if (!api) return;
    this.chatAbort?.abort();
    const abort = new AbortController();
    this.chatAbort = abort;
    const log = new ChatLog();
    // An ended agent's record is read whole from its log.raw: it no longer grows, and has no log.from.
    const ended = isEnded(sid, aid);
    if (ended) log.hasOlder = false;
    set({ chat: log, chatEnded: false, chatVersion: get().chatVersion + 1 });
    void this.reloadStats();
    void this.reloadProcs(sid, aid);
    void (async () => {
      try {
        let seen = 0;
        const source = ended ? api.stream(`${agentPath(sid, aid)}/log.raw`, { signal: abort.signal }) : api.stream(`${agentPath(sid, aid)}/log.from`, { request: `tail ${TAIL}\n`, signal: abort.signal });
        for await (const text of source) {
          if (!log.push(text)) continue;
          bumpChat();
          // A background process that ended comes back as a <system-proc-interrupt> prompt: its status changed.
          let procEnded = false;
          for (; seen < log.blocks.length; seen++) {
            const b = log.blocks[seen]!;
            if (b.role === 'user' && b.content.startsWith('<system-proc-interrupt')) procEnded = true;
          }
          if (procEnded && log.blocks.length > 0) void this.reloadProcs(sid, aid);
        }
        if (!abort.signal.aborted) set({ chatEnded: true });
      } catch (e) {
        if (!abort.signal.aborted) notify(`chat: ${(e as Error).message}`, true);
      }
    })();
  }

  /**
   * Prepends the page of blocks before the oldest one shown (`log.from` with `before ID N`). One page at a time:
   * a call while one is loading returns the same promise. Resolves to false when nothing older is left.
   */
  loadOlder(pageSize = PAGE): Promise<boolean> {
    const log = get().chat;
    const { session, agent } = get().selected;
    const api = this.api;
    if (!log || !api || !session || !agent || !log.hasOlder) return Promise.resolve(false);
    if (this.older?.log === log) return this.older.done;
    const first = log.oldestFinal();
    // Nothing final yet: the tail held every block there was, and older ones cannot appear.
    if (!first) return Promise.resolve(false);
    const signal = this.chatAbort?.signal;
    const done = (async () => {
      try {
        let text = '';
        for await (const chunk of api.stream(`${agentPath(session, agent)}/log.from`, { request: `before ${first.id} ${pageSize}\n`, signal })) text += chunk;
        if (signal?.aborted || get().chat !== log) return false;
        if (log.prepend(text, pageSize) || !log.hasOlder) set((s) => ({ chatVersion: s.chatVersion + 1 }));
        return log.hasOlder;
      } catch (e) {
        if (!signal?.aborted) notify(`chat: older blocks: ${(e as Error).message}`, true);
        return false;
      } finally {
        if (this.older?.log === log) this.older = undefined;
      }
    })();
    this.older = { log, done };
    return done;
  }

  /** Loads older pages until block `id` is in the chat (a search hit further back than the tail). */
  private async reveal(id: string): Promise<void> {
    const log = get().chat;
    for (let waits = 0; log && get().chat === log && !log.get(id) && log.hasOlder; ) {
      // Until the tail has arrived there is nothing to page back from; it comes in one read, so 5 s is plenty.
      if (!log.oldestFinal()) {
        if (++waits > 100) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      else if (!(await this.loadOlder(REVEAL_PAGE))) break;
    }
  }

  async reloadStats(): Promise<void> {
    const { session, agent } = get().selected;
    const api = this.api;
    if (!api || !session || !agent || isEnded(session, agent)) return;
    const base = agentPath(session, agent);
    const [stats, cfg] = await Promise.all([api.readOr(`${base}/stats`, ''), api.readOr(`${base}/cfg`, ''), this.reloadQueue(session, agent)]);
    if (get().selected.agent === agent) set({ stats: parseKv(STATS, stats), cfg: parseKv(CFG, cfg) });
  }

  // Actions. Each is one file operation (or a few), visible in the 9P console.

  async createSession(fields: { name?: string; cwd?: string }): Promise<string> {
    // Quoted by the declaration: a cwd with spaces is one value.
    const req = SESSION_NEW.format(Object.fromEntries(Object.entries(fields).filter(([, v]) => v)));
    const name = (await this.need().rdwr('session/new', req)).trim();
    await this.reloadSessions();
    const s = Object.values(get().sessions).find((x) => x.name === name);
    if (s) this.select({ session: s.id });
    return name;
  }

  async createAgent(sid: string, fields: Record<string, string>): Promise<string> {
    const req = AGENT_NEW.format(Object.fromEntries(Object.entries(fields).filter(([, v]) => v)));
    const name = (await this.need().rdwr(`${sessionPath(sid)}/agent/new`, req)).trim();
    await this.reloadAgents(sid);
    const a = get().agents[sid]?.find((x) => x.name === name || x.id === name);
    if (a) this.select({ session: sid, agent: a.id });
    return name;
  }

  readCfg(sid: string, aid: string): Promise<string> {
    return this.need().read(`${agentPath(sid, aid)}/cfg`);
  }

  /** Writes key=value lines to the agent's cfg; olliesrv applies them, or refuses (with why) while it works. */
  async writeCfg(sid: string, aid: string, text: string): Promise<true> {
    await this.need().write(`${agentPath(sid, aid)}/cfg`, text.endsWith('\n') ? text : `${text}\n`);
    if (get().selected.agent === aid) await this.reloadStats();
    return true;
  }

  async renameSession(sid: string, name: string): Promise<void> {
    await this.need().write(`${sessionPath(sid)}/name`, `${name}\n`);
    await this.reloadSessions();
  }

  async renameAgent(sid: string, aid: string, name: string): Promise<void> {
    await this.need().write(`${agentPath(sid, aid)}/name`, `${name}\n`);
    await this.reloadAgents(sid);
  }

  /** A session command with its arguments, quoted by the declared table. */
  sessionCtl(sid: string, cmd: string, ...args: string[]): Promise<string> {
    return this.need().rdwr(`${sessionPath(sid)}/ctl`, `${SESSION_CTL.format(cmd, args)}\n`);
  }

  /** An agent command with its arguments, quoted by the declared table (`inject` text, a cwd with spaces). */
  agentCtl(sid: string, aid: string, cmd: string, ...args: string[]): Promise<string> {
    return this.need().rdwr(`${agentPath(sid, aid)}/ctl`, `${AGENT_CTL.format(cmd, args)}\n`);
  }

  /** A `/command` line as a person typed it, checked and quoted through the declared table (agentCommandLine). */
  async agentCommand(sid: string, aid: string, typed: string): Promise<string> {
    return this.need().rdwr(`${agentPath(sid, aid)}/ctl`, `${agentCommandLine(typed)}\n`);
  }

  /** Kills an agent: removing its directory (`rm`), as from a shell. */
  killAgent(sid: string, aid: string): Promise<void> {
    return this.need().remove(agentPath(sid, aid));
  }

  async prompt(sid: string, aid: string, text: string): Promise<void> {
    await this.need().write(`${agentPath(sid, aid)}/prompt`, text);
  }

  /** Sends a prompt; olliesrv runs it now or queues it while a turn runs (the queue is its `queue` file). */
  async submit(sid: string, aid: string, text: string): Promise<void> {
    await this.prompt(sid, aid, text);
    await this.reloadQueue(sid, aid);
  }

  async reloadQueue(sid: string, aid: string): Promise<void> {
    const api = this.api;
    if (!api || isEnded(sid, aid)) return;
    let items: string[] = [];
    try {
      const v: unknown = JSON.parse((await api.readOr(`${agentPath(sid, aid)}/queue`, '[]')) || '[]');
      if (Array.isArray(v)) items = v.filter((x): x is string => typeof x === 'string');
    } catch {
      // An unreadable queue shows as empty; the prompt box still works.
    }
    set((s) => ({ queue: { ...s.queue, [agentKey(sid, aid)]: items } }));
  }

  /** Replaces the queue (edits and removals in the prompt box). */
  async setQueue(sid: string, aid: string, items: string[]): Promise<void> {
    set((s) => ({ queue: { ...s.queue, [agentKey(sid, aid)]: items } }));
    await this.need().write(`${agentPath(sid, aid)}/queue`, `${JSON.stringify(items)}\n`);
    await this.reloadQueue(sid, aid);
  }

  async resolve(id: string, decision: 'approve' | 'deny', remember?: string): Promise<void> {
    const p = get().pending[id];
    if (!p) return;
    await this.need().write(`${sessionPath(p.session)}/bypass`, `${id} ${decision}${remember ? ` ${remember}` : ''}\n`);
    // The resolved event removes it too; doing it now keeps the dialog from showing a decided request.
    this.dropPending(id);
  }

  /** The remembered bypass approvals (the root `bypassrules`). */
  async bypassRules(): Promise<BypassRule[]> {
    return parseBypassRules(await this.need().read('bypassrules'));
  }

  async revokeBypassRule(id: string): Promise<void> {
    await this.need().write('bypassrules', `revoke ${id}\n`);
  }

  /** The selected agent's background processes, from its `proc/idx`. */
  async reloadProcs(sid: string, aid: string): Promise<void> {
    const api = this.api;
    const sel = get().selected;
    if (!api || sel.session !== sid || sel.agent !== aid || isEnded(sid, aid)) return;
    const procs = parseProcIdx(await api.readOr(`${agentPath(sid, aid)}/proc/idx`, ''));
    const now = get().selected;
    if (now.session !== sid || now.agent !== aid) return;
    set((s) => {
      // A process that just started is shown; otherwise the picked one stays while it exists, else the newest.
      const known = new Set(s.procs.map((p) => p.pid));
      const fresh = procs.filter((p) => !known.has(p.pid)).at(-1);
      const keep = s.procPid !== undefined && procs.some((p) => p.pid === s.procPid) ? s.procPid : procs.at(-1)?.pid;
      return { procs, procPid: fresh && s.procs.length > 0 ? fresh.pid : keep };
    });
  }

  procPath(sid: string, aid: string, pid: number): string {
    return `${agentPath(sid, aid)}/proc/${pid}`;
  }

  /**
   * Keystrokes for a tty process's terminal, written to its `in` (the owner's only: agents cannot type into
   * processes). The console shows them escaped, never as raw control characters.
   */
  async procInput(sid: string, aid: string, pid: number, data: string): Promise<void> {
    await this.need().write(`${this.procPath(sid, aid, pid)}/in`, data, JSON.stringify(data).slice(1, -1));
  }

  /** Sizes a tty process's terminal to the view (`resize COLS ROWS` to its ctl; the list is not re-read). */
  async procResize(sid: string, aid: string, pid: number, cols: number, rows: number): Promise<void> {
    await this.need().write(`${this.procPath(sid, aid, pid)}/ctl`, `${PROC_CTL.format('resize', [String(cols), String(rows)])}\n`);
  }

  /** `term`, `kill`, `signal N` or `dismiss`, written to the process's ctl. */
  async procCtl(sid: string, aid: string, pid: number, cmd: string, ...args: string[]): Promise<void> {
    await this.need().write(`${this.procPath(sid, aid, pid)}/ctl`, `${PROC_CTL.format(cmd, args)}\n`);
    await this.reloadProcs(sid, aid);
  }

  /** Root `search`: write the words, read the hits. */
  async search(query: string): Promise<void> {
    const q = query.trim();
    set((s) => ({ search: { ...s.search, query, busy: true, error: undefined } }));
    try {
      const hits = q ? parseSearch(await this.need().rdwr('search', `${q}\n`)) : [];
      set((s) => (s.search.query === query ? { search: { query, hits, busy: false, done: q } } : {}));
    } catch (e) {
      set((s) => ({ search: { ...s.search, busy: false, hits: [], done: q, error: (e as Error).message } }));
    }
  }

  /**
   * Opens a search hit: reads the block from its agent's `block` file (it may be gone since), then shows the
   * agent's chat scrolled to it. Returns the block's role, or throws when the agent or the block is gone.
   */
  async openHit(hit: SearchHit): Promise<string> {
    const s = Object.values(get().sessions).find((x) => x.name === hit.session);
    if (s && hit.agentId && !findAgent(s.id, hit.agentId)) await this.reloadAgents(s.id);
    // By id when the daemon gives it (a killed agent's name may belong to a new agent), else by name.
    const a = s && get().agents[s.id]?.find((x) => (hit.agentId ? x.id === hit.agentId : x.name === hit.agent && !x.ended));
    if (!s || !a) throw new Error(`${hit.session}/${hit.agent} is gone`);
    const block = JSON.parse(await this.need().rdwr(`${agentPath(s.id, a.id)}/block`, `${hit.block}\n`)) as { role?: string };
    this.select({ session: s.id, agent: a.id });
    set({ view: 'chat', highlight: hit.block });
    void this.reveal(hit.block);
    return block.role ?? '';
  }

  /** The root `sandbox` file: what the tool sandbox applies on the daemon's machine (JSON). */
  readSandbox(): Promise<string> {
    return this.need().read('sandbox');
  }

  /** A file under the root `config/` (empty when it does not exist yet). */
  readConfig(name: string): Promise<string> {
    return this.need().read(`config/${name}`);
  }

  /** The providers the onboarding offers (`config/providers`). */
  async providers(): Promise<ProviderInfo[]> {
    return parseProviders(await this.need().read('config/providers'));
  }

  /** Asks a candidate backend for its models, live (`config/check`): nothing is stored. */
  async checkBackend(fields: Record<string, string | undefined>): Promise<{ id: string; context?: number }[]> {
    const r = setupRequest(fields);
    return parseCheckedModels(await this.need().rdwr('config/check', r.data, r.shown));
  }

  /** Stores a backend (`config/backend`): olliesrv merges it into backends.conf and reloads. */
  async setupBackend(fields: Record<string, string | undefined>): Promise<string> {
    const r = setupRequest(fields);
    const reply = await this.need().rdwr('config/backend', r.data, r.shown);
    set({ backends: parseBackends(await this.need().readOr('backends', '')) });
    return reply.trim();
  }

  /**
   * Writes a config file; olliesrv parses it first and refuses it (with `file:line`) when it is bad. backends.conf
   * is shown masked (maskKeys): `saved` is the file as read, whose keys fill in the masked lines.
   */
  async writeConfig(name: string, text: string, saved?: string): Promise<void> {
    const t = text.endsWith('\n') ? text : `${text}\n`;
    if (name === 'backends.conf') await this.need().write(`config/${name}`, unmaskKeys(t, saved ?? ''), maskKeys(t));
    else await this.need().write(`config/${name}`, t);
    // A new backends.conf is live at once: the new-agent dialog and the status bar read `backends`.
    if (name === 'backends.conf') set({ backends: parseBackends(await this.need().readOr('backends', '')) });
  }

  private need(): Api {
    if (!this.api) throw new Error('not connected to olliesrv');
    return this.api;
  }
}

export const ollie = new Controller();

/** Runs an action, showing its error (or a short confirmation) in the notice bar. */
export async function act<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (e) {
    notify(`${what}: ${(e as Error).message}`, true);
    return undefined;
  }
}
