/**
 * What the main process needs to know for the tray and the notifications, learned the way every client learns
 * it: a 9P connection that follows `event` (bypass requests and resolutions from any agent, sub-agents
 * included; agent states, to tell when a turn ends) and reads the index files the events name. No Electron
 * imports, so that it is tested under plain Node against a daemon.
 */
import type { Client } from '../ninep/index.js';
import { unescapeField, type Records, type Row } from '../formats/index.js';
import { AGENT_IDX, BYPASS, EVENTS, SESSION_IDX } from '../formats/olliesrv.js';

export interface PendingRequest {
  id: string;
  sessionId: string;
  session: string;
  agentId: string;
  agent: string;
  tool: string;
  cmd: string;
  cwd: string;
}

export interface WatcherEvents {
  /** The pending list changed (the tray's badge and menu). */
  pending(list: PendingRequest[]): void;
  /** A new request arrived (a notification). */
  request(req: PendingRequest): void;
  /** An agent went from working to idle: its turn ended (`error`: why, when it ended in one). */
  turnEnded(e: { sessionId: string; session: string; agentId: string; agent: string; error?: string }): void;
}

// The bypass file's escaping is declared with its format (src/formats), shared by every client.
export { unescapeField };

const rowsOf = (decl: Records, text: string): Row[] => decl.parseValid(text);

/** A command a person can read in one menu line: newlines and invisible characters as marks, nothing dropped. */
export function visible(cmd: string): string {
  return [...cmd]
    .map((c) =>
      c === '\n'
        ? ' ↵ '
        : /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/u.test(c) || (/\p{Zs}/u.test(c) && c !== ' ')
          ? `⟨U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}⟩`
          : c,
    )
    .join('');
}

/**
 * Shortened for a menu label by cutting the middle, never the end: the tail is where `; curl x | sh` would be.
 */
export function middleEllipsis(text: string, max: number): string {
  const chars = [...text];
  if (chars.length <= max) return text;
  const head = Math.ceil((max - 1) * 0.4);
  return `${chars.slice(0, head).join('')}…${chars.slice(chars.length - (max - 1 - head)).join('')}`;
}

/** The whole of a command in lines of at most `width` characters (the tray's full view, one menu item each). */
export function wrapLines(text: string, width: number): string[] {
  const chars = [...text];
  const out: string[] = [];
  for (let i = 0; i < chars.length; i += width) out.push(chars.slice(i, i + width).join(''));
  return out.length ? out : [''];
}

/** Events the watcher subscribes to: one filter per kind, space-separated (the bus's filter syntax). */
export const WATCH_FILTER =
  'session.*.agent.*.state session.*.agent.*.turn session.*.agent.*.bypass.> session.*.rename session.*.kill ollie.overflow';

export class Watcher {
  private readonly sessions = new Map<string, string>();
  private readonly agents = new Map<string, { name: string; state: string; error?: string }>();
  private readonly pendingById = new Map<string, PendingRequest>();
  private readonly abort = new AbortController();
  private done?: Promise<void>;

  constructor(
    private readonly client: Client,
    private readonly on: WatcherEvents,
  ) {}

  get pending(): PendingRequest[] {
    return [...this.pendingById.values()];
  }

  /** Subscribes, then reads the current state; resolves once both are in place. The stream runs on. */
  async start(): Promise<void> {
    const stream = this.client.stream('event', { request: `${WATCH_FILTER}\n`, signal: this.abort.signal });
    // The subscription exists once the first read is outstanding; that read is where events queue up.
    const first = stream.next();
    await this.reload();
    this.done = this.follow(stream, first);
  }

  /** Ends when the connection or the event stream does. */
  get finished(): Promise<void> {
    return this.done ?? Promise.resolve();
  }

  close(): void {
    this.abort.abort();
  }

  private async follow(stream: AsyncGenerator<Uint8Array>, first: Promise<IteratorResult<Uint8Array>>): Promise<void> {
    const dec = new TextDecoder();
    let rest = '';
    try {
      for (let r = await first; !r.done; r = await stream.next()) {
        const lines = (rest + dec.decode(r.value, { stream: true })).split('\n');
        rest = lines.pop() ?? '';
        for (const l of lines) if (l) await this.onEvent(l).catch(() => undefined);
      }
    } catch (e) {
      if (!this.abort.signal.aborted) throw e;
    }
  }

  private async reload(): Promise<void> {
    this.sessions.clear();
    for (const r of rowsOf(SESSION_IDX, await this.client.readText('session/idx')))
      if (r.id && r.name) this.sessions.set(r.id, r.name);
    const seen = new Set<string>();
    for (const [sid, sname] of this.sessions) {
      await this.reloadAgents(sname);
      const text = await this.client.readText(`session/${sname}/bypass`).catch(() => '');
      for (const r of rowsOf(BYPASS, text)) {
        const { id, agent: agentId = '', tool = '', cwd = '', cmd = '' } = r as Record<string, string>;
        if (!id) continue;
        seen.add(id);
        if (!this.pendingById.has(id))
          this.add(
            {
              id,
              sessionId: sid,
              session: sname,
              agentId,
              agent: this.agents.get(agentId)?.name ?? agentId,
              tool,
              cmd,
              cwd,
            },
            false,
          );
      }
    }
    for (const id of this.pendingById.keys()) if (!seen.has(id)) this.pendingById.delete(id);
    this.on.pending(this.pending);
  }

  private async reloadAgents(session: string): Promise<void> {
    const text = await this.client.readText(`session/${session}/agent/idx`).catch(() => '');
    for (const r of rowsOf(AGENT_IDX, text)) {
      if (!r.id) continue;
      const known = this.agents.get(r.id);
      this.agents.set(r.id, { name: r.name ?? r.id, state: known?.state ?? r.state ?? '' });
    }
  }

  private add(req: PendingRequest, announce: boolean): void {
    this.pendingById.set(req.id, req);
    if (announce) this.on.request(req);
  }

  private async onEvent(line: string): Promise<void> {
    const e = EVENTS.split(line);
    const { topic, payload } = e;
    const fields = EVENTS.fields(e) ?? {};
    if (topic === 'ollie.overflow') return this.reload();
    const t = topic.split('.');
    const sid = t[1] ?? '';
    if (t[2] === 'rename' || t[2] === 'kill') {
      if (t[2] === 'kill') {
        this.sessions.delete(sid);
        for (const [id, p] of this.pendingById) if (p.sessionId === sid) this.pendingById.delete(id);
        this.on.pending(this.pending);
      } else {
        const newName = fields.new;
        if (newName) this.sessions.set(sid, newName);
      }
      return;
    }
    const aid = t[3] ?? '';
    const kind = t.slice(4).join('.');
    let session = this.sessions.get(sid);
    if (!session) {
      await this.reload();
      session = this.sessions.get(sid) ?? sid;
    }
    if (!this.agents.has(aid)) await this.reloadAgents(session);
    const agent = this.agents.get(aid) ?? { name: aid, state: '' };
    if (kind === 'turn') {
      // Comes just before `state idle`: how the turn that is ending went.
      this.agents.set(aid, { ...agent, error: fields.how === 'error' ? fields.error || 'error' : undefined });
    } else if (kind === 'state') {
      const state = fields.state ?? payload.trim();
      const was = agent.state;
      this.agents.set(aid, { ...agent, state, error: undefined });
      if (state === 'idle' && was !== '' && was !== 'idle' && was !== 'paused') {
        this.on.turnEnded({
          sessionId: sid,
          session,
          agentId: aid,
          agent: agent.name,
          ...(agent.error ? { error: agent.error } : {}),
        });
      }
    } else if (kind === 'bypass.request') {
      const { id = '', cmd = '', cwd = '', tool = '' } = fields as Record<string, string>;
      if (!id) return;
      // The event has the request whole (id, command, cwd, tool: its declared payload, escaped like the file).
      this.add({ id, sessionId: sid, session, agentId: aid, agent: agent.name, tool, cmd, cwd }, true);
      this.on.pending(this.pending);
    } else if (kind === 'bypass.resolved') {
      const id = fields.id ?? '';
      if (this.pendingById.delete(id)) this.on.pending(this.pending);
    }
  }

  /** Approves or denies a request (the tray menu's items). */
  async resolve(id: string, decision: 'approve' | 'deny'): Promise<void> {
    const p = this.pendingById.get(id);
    if (!p) throw new Error(`no pending request ${id}`);
    await this.client.write(`session/${p.session}/bypass`, `${id} ${decision}\n`);
  }
}
