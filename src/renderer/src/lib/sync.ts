/**
 * The controller's half that follows olliesrv: the connection (reconnecting with backoff), the `event` stream (one
 * streaming Rdwr per connection) plus a re-read of the index file an event names, and the selected agent's chat
 * streamed from its log's tail (`log.from`); nothing polls.
 */
import { CFG, LOG_FROM, STATS } from '../../../formats/olliesrv.js';
import { Client } from '../../../ninep/index.js';
import { Api, type ConsoleEntry } from './api.js';
import { ChatLog } from './chatlog.js';
import {
  parseAgentIdx,
  parseBackends,
  parseEndedIdx,
  parseEvent,
  parseKv,
  parsePending,
  parseProcIdx,
  parseSessionIdx,
  treeOrder,
  type Event,
} from './parse.js';
import {
  agentKey,
  agentPath,
  findAgent,
  get,
  isEnded,
  logConsole,
  nextFrame,
  notify,
  sessionPath,
  set,
  type Selection,
} from './state.js';
import { openChannel } from './transport.js';

/**
 * Blocks read when a chat opens: a few screens, whatever the log's length (first paint costs the same at 1k and
 * 100k blocks). Older pages are PAGE blocks; a search hit further back is reached in REVEAL_PAGE steps.
 */
const TAIL = 200;
const PAGE = 500;
const REVEAL_PAGE = 5000;
/** Where the tab keeps the daemon chosen in "Connect to…". */
const DAEMON_KEY = 'ollie.daemon';

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

/** The connection to olliesrv and what it keeps up to date: the tree, states, approvals, the open chat. */
export class Sync {
  api?: Api;
  private conn?: AbortController;
  private chatAbort?: AbortController;
  /** The page of older blocks being read, if any (one at a time per chat). */
  private older?: { log: ChatLog; done: Promise<boolean> };
  private backoff = 500;
  private started = false;
  /** Counts connection attempts: an attempt overtaken by a switch of daemon ("Connect to…") gives up. */
  private attempt = 0;
  private retryTimer?: ReturnType<typeof setTimeout>;

  /** Idempotent: React's StrictMode runs mount effects twice in development. */
  start(): void {
    if (this.started) return;
    this.started = true;
    // A reload of the page stays on the daemon chosen in "Connect to…" (kept for this tab only).
    let daemon = '';
    try {
      daemon = sessionStorage.getItem(DAEMON_KEY) ?? '';
    } catch {
      // Storage refused: this machine.
    }
    if (daemon) this.showDaemon(daemon);
    void this.connect();
  }

  private showDaemon(daemon: string): void {
    set({ daemon });
    document.title = daemon ? `Ollie — ${daemon}` : 'Ollie';
    try {
      if (daemon) sessionStorage.setItem(DAEMON_KEY, daemon);
      else sessionStorage.removeItem(DAEMON_KEY);
    } catch {
      // Storage refused: the choice lasts until a reload.
    }
  }

  private logOp = (e: ConsoleEntry): void => logConsole(e);

  private async connect(): Promise<void> {
    const attempt = ++this.attempt;
    clearTimeout(this.retryTimer);
    const daemon = get().daemon;
    set({ conn: 'connecting', retryIn: undefined });
    let client: Client;
    try {
      // The gateway (the preload's port, or the token-checked WebSocket) speaks for the user who runs olliesrv,
      // so the GUI attaches as that user, like ollie-9p does: the namespace's owner, read from its root. Over ssh
      // it is the remote daemon's owner (the remote user, when the daemon there is theirs).
      const probe = await Client.connect(await openChannel(daemon), { uname: 'none' });
      const owner = await probe.stat('/').then(
        (st) => st.uid,
        () => 'none',
      );
      probe.close();
      client = await Client.connect(await openChannel(daemon), { uname: owner });
    } catch (e) {
      if (attempt === this.attempt) this.down((e as Error).message);
      return;
    }
    if (attempt !== this.attempt) return void client.close();
    this.backoff = 500;
    const api = new Api(client, this.logOp);
    this.api = api;
    const conn = new AbortController();
    this.conn = conn;
    set({ conn: 'open', connError: undefined });
    // Subscribe before reading the indexes, so that nothing that happens in between is missed.
    const events = this.events(api, conn.signal);
    await this.reloadAll();
    if (!daemon) void api.readOr('sshhosts', '').then((t) => set({ localHosts: t.split('\n').filter(Boolean) }));
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
    this.retryTimer = setTimeout(() => void this.connect(), wait);
  }

  /**
   * "Connect to…": drops the current daemon's connection and what was read from it, and attaches to `daemon`
   * ('' for this machine's, else `ssh!HOST[!SOCK]`, which the owner's side checks and dials).
   */
  switchDaemon(daemon: string): void {
    this.conn?.abort();
    this.chatAbort?.abort();
    this.api?.client.close();
    this.api = undefined;
    this.backoff = 500;
    this.showDaemon(daemon);
    set({
      conn: 'connecting',
      connError: undefined,
      sessions: {},
      sessionOrder: [],
      agents: {},
      pending: {},
      approving: undefined,
      selected: {},
      chat: undefined,
      chatEnded: false,
      stats: {},
      cfg: {},
      queue: {},
      procs: [],
      procPid: undefined,
      loaded: false,
      view: 'chat',
    });
    void this.connect();
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
      for (const line of parts)
        if (line) await this.onEvent(parseEvent(line)).catch((e: unknown) => notify((e as Error).message, true));
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
        // A remote session's host changed, or its connection came or went (the tree's state dot).
        case 'remote':
        case 'tools':
          return this.reloadSessions();
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
        set((s) => ({
          agents: { ...s.agents, [sid]: (s.agents[sid] ?? []).map((a) => (a.id === aid ? { ...a, last } : a)) },
        }));
        return;
      }
      case 'bypass.request': {
        const { id, cmd = '', cwd = '', tool } = e.fields;
        if (!id) return;
        set((s) => ({
          pending: {
            ...s.pending,
            [id]: { id, session: sid, agent: aid, cmd: cmd ?? '', cwd: cwd ?? '', ...(tool && { tool }) },
          },
        }));
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
    set((s) => ({
      agents: { ...s.agents, [sid]: (s.agents[sid] ?? []).map((a) => (a.id === aid ? { ...a, state } : a)) },
    }));
    const sel = get().selected;
    if (sel.session === sid && sel.agent === aid) {
      // Stats (with the queue: a turn starting or ending is when olliesrv takes a prompt off it) after each step.
      // A background process starts in a tool call (calling → thinking) and its exit arrives as a prompt (a new
      // turn): proc/idx can change only then, so it is read on those changes and never polled.
      if (state !== 'calling') void this.reloadStats();
      if (state === 'thinking' || state === 'idle') void this.reloadProcs(sid, aid);
    }
  }

  protected dropPending(id: string): void {
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
    const [text, ended] = await Promise.all([
      api.readOr(`${sessionPath(sid)}/agent/idx`, ''),
      api.readOr(`${sessionPath(sid)}/ended/idx`, ''),
    ]);
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
        pending[p.id] = {
          ...known,
          ...p,
          agent: p.agent || known?.agent || '',
          cmd: p.cmd || known?.cmd || '',
          cwd: p.cwd || known?.cwd || '',
        };
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
        const source = ended
          ? api.stream(`${agentPath(sid, aid)}/log.raw`, { signal: abort.signal })
          : api.stream(`${agentPath(sid, aid)}/log.from`, {
              request: `${LOG_FROM.format('tail', [String(TAIL)])}\n`,
              signal: abort.signal,
            });
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
        for await (const chunk of api.stream(`${agentPath(session, agent)}/log.from`, {
          request: `${LOG_FROM.format('before', [first.id, String(pageSize)])}\n`,
          signal,
        }))
          text += chunk;
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
  protected async reveal(id: string): Promise<void> {
    const log = get().chat;
    for (let waits = 0; log && get().chat === log && !log.get(id) && log.hasOlder;) {
      // Until the tail has arrived there is nothing to page back from; it comes in one read, so 5 s is plenty.
      if (!log.oldestFinal()) {
        if (++waits > 100) break;
        await new Promise((r) => setTimeout(r, 50));
      } else if (!(await this.loadOlder(REVEAL_PAGE))) break;
    }
  }

  async reloadStats(): Promise<void> {
    const { session, agent } = get().selected;
    const api = this.api;
    if (!api || !session || !agent || isEnded(session, agent)) return;
    const base = agentPath(session, agent);
    const [stats, cfg] = await Promise.all([
      api.readOr(`${base}/stats`, ''),
      api.readOr(`${base}/cfg`, ''),
      this.reloadQueue(session, agent),
    ]);
    if (get().selected.agent === agent) set({ stats: parseKv(STATS, stats), cfg: parseKv(CFG, cfg) });
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

  protected need(): Api {
    if (!this.api) throw new Error('not connected to olliesrv');
    return this.api;
  }
}
