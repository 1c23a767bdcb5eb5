/**
 * The one controller of the renderer: it fills the state (state.ts) from olliesrv (sync.ts) and carries out the
 * user's actions, each one file operation (or a few), visible in the 9P console.
 */
import {
  agentCommandLine,
  maskKeys,
  parseBackends,
  parseBypassRules,
  parseCheckedModels,
  parseProviders,
  parseSearch,
  setupRequest,
  unmaskKeys,
  type BypassRule,
  type ProviderInfo,
  type SearchHit,
} from './parse.js';
import { agentKey, agentPath, findAgent, get, notify, sessionPath, set } from './state.js';
import { Sync } from './sync.js';
import {
  AGENT_CTL,
  AGENT_NEW,
  BYPASS_RULES_WRITE,
  bypassDecisionLine,
  PROC_CTL,
  SESSION_CTL,
  SESSION_NEW,
} from '../../../formats/olliesrv.js';
import { maskMcp, unmaskMcp } from './mcpmask.js';

export { agentKey, agentPath, findAgent, nextFrame, notify, selectedAgent, sessionPath, useStore } from './state.js';
export type { Dialog, SearchState, Selection, State, View } from './state.js';

class Controller extends Sync {
  async createSession(fields: { name?: string; cwd?: string; remote?: string }): Promise<string> {
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

  /** Replaces the queue (edits and removals in the prompt box). */
  async setQueue(sid: string, aid: string, items: string[]): Promise<void> {
    set((s) => ({ queue: { ...s.queue, [agentKey(sid, aid)]: items } }));
    await this.need().write(`${agentPath(sid, aid)}/queue`, `${JSON.stringify(items)}\n`);
    await this.reloadQueue(sid, aid);
  }

  async resolve(id: string, decision: 'approve' | 'deny', remember?: string): Promise<void> {
    const p = get().pending[id];
    if (!p) return;
    await this.need().write(`${sessionPath(p.session)}/bypass`, `${bypassDecisionLine(id, decision, remember)}\n`);
    // The resolved event removes it too; doing it now keeps the dialog from showing a decided request.
    this.dropPending(id);
  }

  /** The remembered bypass approvals (the root `bypassrules`). */
  async bypassRules(): Promise<BypassRule[]> {
    return parseBypassRules(await this.need().read('bypassrules'));
  }

  async revokeBypassRule(id: string): Promise<void> {
    await this.need().write('bypassrules', `${BYPASS_RULES_WRITE.format('revoke', [id])}\n`);
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
    await this.need().write(
      `${this.procPath(sid, aid, pid)}/ctl`,
      `${PROC_CTL.format('resize', [String(cols), String(rows)])}\n`,
    );
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
    const a =
      s && get().agents[s.id]?.find((x) => (hit.agentId ? x.id === hit.agentId : x.name === hit.agent && !x.ended));
    if (!s || !a) throw new Error(`${hit.session}/${hit.agent} is gone`);
    const block = JSON.parse(await this.need().rdwr(`${agentPath(s.id, a.id)}/block`, `${hit.block}\n`)) as {
      role?: string;
    };
    this.select({ session: s.id, agent: a.id });
    set({ view: 'chat', highlight: hit.block });
    void this.reveal(hit.block);
    return block.role ?? '';
  }

  /** The root `sandbox` file: what the tool sandbox applies on the daemon's machine (JSON). */
  readSandbox(): Promise<string> {
    return this.need().read('sandbox');
  }

  /** A session's MCP servers (`session/S/mcp/status`, JSON; docs/mcp.md). */
  readMcp(sid: string): Promise<string> {
    return this.need().read(`session/${sid}/mcp/status`);
  }

  /** `reload`, or `restart|stop|start SERVER`, for a session's MCP servers. */
  mcpCtl(sid: string, command: string): Promise<void> {
    return this.need().write(`session/${sid}/mcp/ctl`, command);
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
    else if (name === 'mcp.json') await this.need().write(`config/${name}`, unmaskMcp(t, saved ?? ''), maskMcp(t));
    else await this.need().write(`config/${name}`, t);
    // A new backends.conf is live at once: the new-agent dialog and the status bar read `backends`.
    if (name === 'backends.conf') set({ backends: parseBackends(await this.need().readOr('backends', '')) });
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
