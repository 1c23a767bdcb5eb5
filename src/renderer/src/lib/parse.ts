/**
 * The daemon's text files and events as the GUI uses them, read through the formats declared with the namespace
 * (src/formats/olliesrv.ts): columns are taken by name, never by position, so a declaration that changes is followed
 * here without an edit.
 */
import {
  AGENT_CTL,
  AGENT_IDX,
  BACKENDS,
  BACKEND_SETUP,
  BYPASS,
  BYPASS_RULES,
  CHECKED_MODELS,
  CHECKPOINT_IDX,
  CHECKPOINT_INFO,
  ENDED_IDX,
  EVENTS,
  MODELS,
  PROC_IDX,
  PROVIDERS,
  SEARCH_HITS,
  SESSION_IDX,
} from '../../../formats/olliesrv.js';
import { unescapeField, type KeyValues, type Records, type Row } from '../../../formats/index.js';

export { unescapeField };

const rowsOf = (decl: Records, text: string): Row[] => decl.parseValid(text);

const str = (r: Row, k: string): string => r[k] ?? '';

export interface SessionInfo {
  id: string;
  name: string;
  paused: boolean;
  cwd: string;
  /** Whether its tool server serves it and is reachable (false too before its first tool use). */
  connected?: boolean;
  /** The host its tools run on, '' for this machine. */
  remote?: string;
}

export type AgentState = 'idle' | 'thinking' | 'calling' | 'paused' | 'compacting' | string;

export interface AgentInfo {
  session: string;
  id: string;
  name: string;
  /** Parent agent id, '' for a top-level agent. */
  parent: string;
  depth: number;
  state: AgentState;
  /** How the last turn ended: ok, error, stopped, or - before the first (older daemons: -). */
  last: string;
  /** Set for an agent that ended (a read-only record under session/S/ended/ID): finished, killed or interrupted. */
  ended?: string;
}

export interface Pending {
  id: string;
  session: string;
  agent: string;
  cmd: string;
  cwd: string;
  tool?: string;
  reason?: string;
  /**
   * What approving for the session or always would store, as olliesrv computed it from the request: a
   * `prefix` rule (these words, and the same with more arguments), an `exact` one, or `once` when the command
   * can only be approved once. Unknown until the session's bypass file has been read.
   */
  remember?: 'prefix' | 'exact' | 'once';
  rule?: string;
}

/** One remembered approval, a line of the root `bypassrules`. */
export interface BypassRule {
  id: string;
  tool: string;
  kind: string;
  rule: string;
  /** `global`, or `session NAME`. */
  scope: string;
  created: string;
}

const lines = (text: string): string[] => text.split('\n').filter((l) => l.trim() !== '');

/** session/idx (SESSION_IDX). */
export function parseSessionIdx(text: string): SessionInfo[] {
  return rowsOf(SESSION_IDX, text).map((r) => ({
    id: str(r, 'id'),
    name: str(r, 'name'),
    paused: r.paused === '1',
    connected: r.connected === '1',
    remote: str(r, 'remote'),
    cwd: str(r, 'cwd'),
  }));
}

/** The fields an agent row of agent/idx and ended/idx share. */
const agentOf = (r: Row, state: AgentState): AgentInfo => ({
  session: str(r, 'session'),
  id: str(r, 'id'),
  name: str(r, 'name'),
  parent: r.parent ?? '',
  depth: Number(r.depth ?? 0) || 0,
  state,
  last: r.last || '-',
});

/** session/{s}/agent/idx (AGENT_IDX). */
export function parseAgentIdx(text: string): AgentInfo[] {
  return rowsOf(AGENT_IDX, text).map((r) => agentOf(r, r.state || 'idle'));
}

/** `session/S/ended/idx` (ENDED_IDX). */
export function parseEndedIdx(text: string): AgentInfo[] {
  return rowsOf(ENDED_IDX, text).map((r) => ({
    ...agentOf(r, 'ended'),
    ended: r.how || 'ended',
  }));
}

/** Agents in tree order: each parent followed by its children (depth-first), roots in index order. */
export function treeOrder(agents: AgentInfo[]): AgentInfo[] {
  const ids = new Set(agents.map((a) => a.id));
  const children = new Map<string, AgentInfo[]>();
  for (const a of agents) {
    const p = a.parent && ids.has(a.parent) ? a.parent : '';
    children.set(p, [...(children.get(p) ?? []), a]);
  }
  const out: AgentInfo[] = [];
  const visit = (p: string): void => {
    for (const a of children.get(p) ?? []) {
      out.push(a);
      visit(a.id);
    }
  };
  visit('');
  return out;
}

export interface Event {
  topic: string;
  payload: string;
  /** session.{sid}.… */
  session?: string;
  /** session.{sid}.agent.{aid}.… */
  agent?: string;
  /** What happened: new, kill, rename, state, bypass.request, … */
  kind: string;
  /** The payload's fields by name, as the event's declaration names them (empty for an undeclared topic). */
  fields: Row;
}

/** One event line: `topic payload`, its payload's declared fields by name. */
export function parseEvent(line: string): Event {
  const e = EVENTS.split(line);
  let fields: Row | undefined;
  try {
    fields = EVENTS.fields(e);
  } catch {
    fields = undefined;
  }
  return { ...e, fields: fields ?? {} };
}

/**
 * A command as a person must see it: every character that would not show for what it is (controls, invisible
 * formatting such as bidi overrides, odd spaces) as a visible mark, and a newline as ↵ before the line break,
 * so that a second command never passes for a wrapped line of the first.
 */
export function visibleCommand(cmd: string): Array<string | { mark: string; title: string }> {
  const out: Array<string | { mark: string; title: string }> = [];
  let plain = '';
  for (const c of cmd) {
    const hidden = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/u.test(c) || (/\p{Zs}/u.test(c) && c !== ' ');
    if (!hidden) {
      plain += c;
      continue;
    }
    if (plain) out.push(plain);
    const code = `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
    out.push(
      c === '\n'
        ? { mark: '↵', title: 'newline: a second command' }
        : c === '\t'
          ? { mark: '⇥', title: 'tab' }
          : { mark: `⟨${code}⟩`, title: `invisible character ${code}` },
    );
    // The line break itself stays, after its mark.
    plain = c === '\n' ? '\n' : '';
  }
  if (plain) out.push(plain);
  return out;
}

/** The root `bypassrules` (BYPASS_RULES). */
export function parseBypassRules(text: string): BypassRule[] {
  return rowsOf(BYPASS_RULES, text).map((r) => ({
    id: str(r, 'id'),
    tool: str(r, 'tool'),
    kind: str(r, 'kind'),
    rule: str(r, 'rule'),
    scope: str(r, 'scope'),
    created: str(r, 'created'),
  }));
}

/**
 * session/{s}/bypass, the pending requests (BYPASS), or one JSON BypassRequest per line (id, agent, tool, cmd, cwd,
 * reason), toolsrv's own form.
 */
export function parsePending(text: string, session: string): Pending[] {
  const out: Pending[] = [];
  for (const l of lines(text)) {
    if (l.startsWith('{')) {
      try {
        const j = JSON.parse(l) as Record<string, unknown>;
        const s = (k: string): string => (typeof j[k] === 'string' ? (j[k] as string) : '');
        if (s('id'))
          out.push({
            id: s('id'),
            session,
            agent: s('agent'),
            tool: s('tool') || undefined,
            cmd: s('cmd'),
            cwd: s('cwd'),
            reason: s('reason') || undefined,
          });
        continue;
      } catch {
        // Not JSON: the records.
      }
    }
    const [r] = rowsOf(BYPASS, l);
    if (!r?.id) continue;
    const remember =
      r.remember === 'prefix' || r.remember === 'exact' || r.remember === 'once' ? r.remember : undefined;
    out.push({
      id: r.id,
      session,
      agent: str(r, 'agent'),
      tool: r.tool || undefined,
      cwd: str(r, 'cwd'),
      cmd: str(r, 'cmd'),
      reason: r.reason || undefined,
      ...(remember && { remember, rule: str(r, 'rule') }),
    });
  }
  return out;
}

/** key=value files (stats, cfg, proc stat) as their declaration reads them; {} when the text does not parse. */
export function parseKv(decl: KeyValues, text: string): Record<string, string> {
  try {
    return decl.parse(text);
  } catch {
    return {};
  }
}

/** The agent commands starting with `prefix`, for `/` completion: the daemon's own table (AGENT_CTL), so none is missing. */
export function ctlCompletions(prefix: string): { name: string; help: string; usage: string }[] {
  return AGENT_CTL.commands
    .filter((c) => c.name.startsWith(prefix))
    .map((c) => ({ name: c.name, help: c.help, usage: AGENT_CTL.usage(c) }));
}

/**
 * A `/command` line as typed, checked against the declared table and quoted as the daemon reads it; an unknown
 * command or a wrong count of arguments throws with the usage.
 */
export function agentCommandLine(typed: string): string {
  const c = AGENT_CTL.parse(typed);
  return AGENT_CTL.format(c.name, c.args);
}

export interface BackendInfo {
  name: string;
  type: string;
  url: string;
  model: string;
  isDefault: boolean;
}

/** Root `backends` (BACKENDS): the default's name ends in *. */
export function parseBackends(text: string): BackendInfo[] {
  return rowsOf(BACKENDS, text).map((r) => {
    const raw = str(r, 'name');
    const isDefault = raw.endsWith('*');
    return {
      name: isDefault ? raw.slice(0, -1) : raw,
      type: str(r, 'type'),
      url: str(r, 'url'),
      model: str(r, 'model'),
      isDefault,
    };
  });
}

/** Root `models` (MODELS); an unreachable backend's line (no model, an error) is left out. */
export function parseModels(text: string): { backend: string; model: string; context?: number }[] {
  return rowsOf(MODELS, text)
    .filter((r) => r.model)
    .map((r) => ({ backend: str(r, 'backend'), model: r.model!, context: Number(r.context) || undefined }));
}

export interface ProcInfo {
  pid: number;
  tool: string;
  /** `running`, or how it ended (exited, killed, …). */
  status: string;
  /** Exit code; undefined while it runs. */
  exit?: string;
  args: string;
}

/** `…/agent/{a}/proc/idx` (PROC_IDX). */
export function parseProcIdx(text: string): ProcInfo[] {
  return rowsOf(PROC_IDX, text)
    .map((r) => ({
      pid: Number(r.pid),
      tool: str(r, 'tool'),
      status: r.status || 'running',
      exit: r.exit ?? undefined,
      args: str(r, 'args'),
    }))
    .filter((p) => Number.isInteger(p.pid));
}

/** The command a process runs, from its JSON arguments (`command`), else the arguments as they are. */
export function procCommand(args: string): string {
  try {
    const v = JSON.parse(args) as Record<string, unknown>;
    if (v && typeof v.command === 'string') return v.command;
  } catch {
    // Not JSON: show it raw.
  }
  return args;
}

export interface SearchHit {
  session: string;
  agent: string;
  block: string;
  role: string;
  snippet: string;
  /** The agent's id ('' from daemons that do not say), and how it ended ('' while it lives). */
  agentId: string;
  ended: string;
}

/** Root `search`'s reply (SEARCH_HITS). */
export function parseSearch(text: string): SearchHit[] {
  return rowsOf(SEARCH_HITS, text).map((r) => ({
    session: str(r, 'session'),
    agent: str(r, 'agent'),
    block: str(r, 'block'),
    role: str(r, 'role'),
    snippet: str(r, 'snippet'),
    agentId: str(r, 'agent_id'),
    ended: r.ended ?? '',
  }));
}

/** A snippet cut into plain and matched parts (the words olliesrv put in [brackets]). */
export function snippetParts(snippet: string): { text: string; hit: boolean }[] {
  const out: { text: string; hit: boolean }[] = [];
  const re = /\[([^\]\n]*)\]/g;
  let at = 0;
  for (let m = re.exec(snippet); m; m = re.exec(snippet)) {
    if (m.index > at) out.push({ text: snippet.slice(at, m.index), hit: false });
    out.push({ text: m[1]!, hit: true });
    at = m.index + m[0].length;
  }
  if (at < snippet.length) out.push({ text: snippet.slice(at), hit: false });
  return out;
}

/** Search hits grouped by session, then agent, in the order olliesrv ranked them (best group first). */
/** Hits by session, then by agent (by id: a killed agent and a new one may share a name). */
export function groupHits(
  hits: SearchHit[],
): { session: string; agents: { agent: string; ended: string; key: string; hits: SearchHit[] }[] }[] {
  const sessions = new Map<string, Map<string, SearchHit[]>>();
  for (const h of hits) {
    let agents = sessions.get(h.session);
    if (!agents) sessions.set(h.session, (agents = new Map()));
    const key = h.agentId || h.agent;
    agents.set(key, [...(agents.get(key) ?? []), h]);
  }
  return [...sessions].map(([session, agents]) => ({
    session,
    agents: [...agents].map(([key, list]) => ({ agent: list[0]!.agent, ended: list[0]!.ended, key, hits: list })),
  }));
}

/** `path:LINE: message` (a config parser's error) → the line number, if the message names one. */
export function errorLine(message: string): number | undefined {
  const m = /:(\d+):/.exec(message);
  return m ? Number(m[1]) : undefined;
}

export interface ProcInterrupt {
  pid: number;
  cmd: string;
  status: string;
  exit?: string;
  /** The last lines of its output, escape sequences as written. */
  output: string;
}

/**
 * The prompt toolsrv sends when a background process ends: `<system-proc-interrupt id="N" cmd="…" status="…"
 * exit="…">` + the last lines of output + the closing tag. Attribute values are XML-escaped (&amp; &quot; &lt;).
 */
export function parseProcInterrupt(content: string): ProcInterrupt | undefined {
  const m = /^<system-proc-interrupt ([^>]*)>\n?([\s\S]*?)<\/system-proc-interrupt>\s*$/.exec(content);
  if (!m) return undefined;
  const attrs: Record<string, string> = {};
  for (const a of m[1]!.matchAll(/(\w+)="([^"]*)"/g))
    attrs[a[1]!] = a[2]!
      .replace(/&quot;/g, '"')
      .replace(/&lt;/g, '<')
      .replace(/&amp;/g, '&');
  const pid = Number(attrs.id);
  if (!Number.isInteger(pid)) return undefined;
  return { pid, cmd: attrs.cmd ?? '', status: attrs.status ?? '', exit: attrs.exit, output: m[2]! };
}

/** A provider the onboarding offers (root `config/providers`). */
export interface ProviderInfo {
  id: string;
  label: string;
  type: string;
  /** Its public endpoint; undefined when the user gives one. */
  url?: string;
  keyEnv?: string;
  needsKey: boolean;
}

export function parseProviders(text: string): ProviderInfo[] {
  return rowsOf(PROVIDERS, text).map((r) => ({
    id: str(r, 'id'),
    label: str(r, 'label'),
    type: str(r, 'type'),
    ...(r.url ? { url: r.url } : {}),
    ...(r.key_env ? { keyEnv: r.key_env } : {}),
    needsKey: r.key === 'needed',
  }));
}

/** `config/check`'s reply (CHECKED_MODELS). */
export function parseCheckedModels(text: string): { id: string; context?: number }[] {
  return rowsOf(CHECKED_MODELS, text).map((r) => ({
    id: str(r, 'model'),
    ...(r.context ? { context: Number(r.context) } : {}),
  }));
}

/** What the GUI shows in place of an API key written literally in backends.conf. */
export const KEY_MASK = '••••••••';
const KEY_LINE = /^(\s*key\s*=\s*)(.*?)\s*$/i;
const SECTION_LINE = /^\s*\[\s*([^\]]*?)\s*\]\s*$/;

/** Each section's literal key (not `env:NAME`, which is no secret) in a backends.conf. */
function literalKeys(text: string): Map<string, string> {
  const keys = new Map<string, string>();
  let section = '';
  for (const l of text.split('\n')) {
    const sec = SECTION_LINE.exec(l);
    if (sec) section = sec[1]!;
    const k = KEY_LINE.exec(l);
    if (k && !k[2]!.startsWith('env:')) keys.set(section, k[2]!);
  }
  return keys;
}

/** backends.conf as the GUI shows it: every literal key replaced by KEY_MASK (env: references stay). */
export function maskKeys(text: string): string {
  return text
    .split('\n')
    .map((l) => {
      const k = KEY_LINE.exec(l);
      return k && k[2] && !k[2].startsWith('env:') ? `${k[1]}${KEY_MASK}` : l;
    })
    .join('\n');
}

/**
 * The text to write for an edited, masked backends.conf: a key line still showing KEY_MASK gets the key its section
 * has in the file as read (`original`), so editing other lines never needs the key. Throws when the mask stands in a
 * section that had no key (a renamed section, or a line copied from another), naming the section and its line.
 */
export function unmaskKeys(edited: string, original: string): string {
  const keys = literalKeys(original);
  let section = '';
  return edited
    .split('\n')
    .map((l, i) => {
      const sec = SECTION_LINE.exec(l);
      if (sec) section = sec[1]!;
      const k = KEY_LINE.exec(l);
      if (!k || k[2] !== KEY_MASK) return l;
      const key = keys.get(section);
      if (key === undefined)
        throw new Error(
          `backends.conf:${i + 1}: the key of [${section}] is hidden (${KEY_MASK}) but [${section}] had no key to keep: type the key, or key = env:VARNAME`,
        );
      return `${k[1]}${key}`;
    })
    .join('\n');
}

/** A `key=value` request for config/check and config/backend, and the same with the key masked (for the 9P console). */
export function setupRequest(fields: Record<string, string | undefined>): { data: string; shown: string } {
  const entries = Object.entries(fields).filter((e): e is [string, string] => !!e[1]);
  // Each pair through the declaration (quoted when not plain); the mask is shown as is, never sent.
  const text = (mask: boolean) =>
    entries.map(([k, v]) => (mask && k === 'key' ? `key=${KEY_MASK}\n` : BACKEND_SETUP.format({ [k]: v }))).join('');
  return { data: text(false), shown: text(true) };
}

/** A checkpoint as `checkpoint/idx` lists it. */
export interface CheckpointRow {
  id: string;
  turn: string;
  time: string;
  changed: number;
  bytes: number;
}

export function parseCheckpointIdx(text: string): CheckpointRow[] {
  return rowsOf(CHECKPOINT_IDX, text).map((r) => ({
    id: str(r, 'id'),
    turn: str(r, 'turn'),
    time: str(r, 'time'),
    changed: Number(r.changed ?? 0),
    bytes: Number(r.bytes ?? 0),
  }));
}

/** `checkpoint/ID/info`. */
export function parseCheckpointInfo(text: string): Record<string, string> {
  return parseKv(CHECKPOINT_INFO, text);
}
