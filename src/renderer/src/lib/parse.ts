/** Parsers for the daemon's text files and events (formats in issue 3 §2 and seed 003 phases 38–39). */

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

/** session/idx: id, name, paused, connected, remote, cwd. */
export function parseSessionIdx(text: string): SessionInfo[] {
  return lines(text).map((l) => {
    const f = l.split('\t');
    const remote = f[4] && f[4] !== '-' ? f[4] : '';
    return { id: f[0] ?? '', name: f[1] ?? '', paused: f[2] === '1', connected: f[3] === '1', remote, cwd: f.slice(5).join('\t') };
  });
}

/** session/{s}/agent/idx: session-id, agent-id, agent-name, parent-id, depth, state. */
export function parseAgentIdx(text: string): AgentInfo[] {
  return lines(text).map((l) => {
    const f = l.split('\t');
    const parent = f[3] ?? '';
    return {
      session: f[0] ?? '',
      id: f[1] ?? '',
      name: f[2] ?? '',
      parent: parent === '-' || parent === '0' ? '' : parent,
      depth: Number(f[4] ?? 0) || 0,
      state: (f[5] ?? 'idle').trim(),
      last: (f[6] ?? '-').trim() || '-',
    };
  });
}

/** `session/S/ended/idx`: session, id, name, parent, depth, ended (ms), how, last. */
export function parseEndedIdx(text: string): AgentInfo[] {
  return lines(text).map((l) => {
    const f = l.split('\t');
    const parent = f[3] ?? '';
    return {
      session: f[0] ?? '',
      id: f[1] ?? '',
      name: f[2] ?? '',
      parent: parent === '-' ? '' : parent,
      depth: Number(f[4] ?? 0) || 0,
      state: 'ended',
      last: (f[7] ?? '-').trim() || '-',
      ended: (f[6] ?? '').trim() || 'ended',
    };
  });
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
}

/** One event line: `topic payload`. */
export function parseEvent(line: string): Event {
  const sp = line.indexOf(' ');
  const topic = sp === -1 ? line : line.slice(0, sp);
  const payload = sp === -1 ? '' : line.slice(sp + 1);
  const t = topic.split('.');
  if (t[0] === 'session' && t.length >= 3) {
    if (t[2] === 'agent' && t.length >= 5) return { topic, payload, session: t[1], agent: t[3], kind: t.slice(4).join('.') };
    return { topic, payload, session: t[1], kind: t.slice(2).join('.') };
  }
  return { topic, payload, kind: topic };
}

/** A field olliesrv escaped (\\ \n \t \r \u{HEX}) back to its text. */
export function unescapeField(text: string): string {
  return text.replace(/\\(u\{([0-9a-fA-F]{1,6})\}|[\\ntr])/g, (_m, e: string, hex?: string) => {
    if (hex) return String.fromCodePoint(parseInt(hex, 16));
    return ({ n: '\n', t: '\t', r: '\r', '\\': '\\' } as Record<string, string>)[e] ?? e;
  });
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
    out.push(c === '\n' ? { mark: '↵', title: 'newline: a second command' } : c === '\t' ? { mark: '⇥', title: 'tab' } : { mark: `⟨${code}⟩`, title: `invisible character ${code}` });
    // The line break itself stays, after its mark.
    plain = c === '\n' ? '\n' : '';
  }
  if (plain) out.push(plain);
  return out;
}

/** The root `bypassrules`: id, tool, prefix|exact, rule, scope, created. */
export function parseBypassRules(text: string): BypassRule[] {
  return lines(text).map((l) => {
    const [id = '', tool = '', kind = '', rule = '', scope = '', created = ''] = l.split('\t');
    return { id, tool, kind, rule, scope, created };
  });
}

/**
 * session/{s}/bypass, the pending requests: tab-separated `id agent tool cwd command reason remember rule`
 * (olliesrv; the command escaped), or one JSON BypassRequest per line (id, agent, tool, cmd, cwd, reason),
 * toolsrv's own form.
 */
export function parsePending(text: string, session: string): Pending[] {
  const out: Pending[] = [];
  for (const l of lines(text)) {
    try {
      const j = JSON.parse(l) as Record<string, unknown>;
      const s = (k: string): string => (typeof j[k] === 'string' ? (j[k] as string) : '');
      if (s('id')) out.push({ id: s('id'), session, agent: s('agent'), tool: s('tool') || undefined, cmd: s('cmd'), cwd: s('cwd'), reason: s('reason') || undefined });
      continue;
    } catch {
      // Not JSON: the tab-separated form.
    }
    const f = l.split('\t');
    const remember = f[6] === 'prefix' || f[6] === 'exact' || f[6] === 'once' ? f[6] : undefined;
    if (f[0]) {
      out.push({
        id: f[0], session, agent: f[1] ?? '', tool: f[2] || undefined, cwd: f[3] ?? '', cmd: unescapeField(f[4] ?? ''), reason: f[5] || undefined,
        ...(remember && { remember, rule: f[7] ?? '' }),
      });
    }
  }
  return out;
}

/** key=value lines (stats, cfg). */
export function parseKv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const l of lines(text)) {
    const eq = l.indexOf('=');
    if (eq > 0) out[l.slice(0, eq).trim()] = l.slice(eq + 1).trim();
  }
  return out;
}

/** The ctl commands of an agent (issue 3 §3), for `/` completion. */
export const CTL_COMMANDS: { name: string; help: string }[] = [
  { name: 'stop', help: 'cancel the running turn' },
  { name: 'compact', help: 'compact the history now' },
  { name: 'clear', help: 'clear the history' },
  { name: 'inject', help: 'add text to the running turn' },
  { name: 'agent', help: 'switch profile (history cleared)' },
  { name: 'model', help: 'switch model' },
  { name: 'models', help: 'list models' },
  { name: 'backend', help: 'switch backend' },
  { name: 'tools', help: 'list loaded tools' },
  { name: 'tool_load', help: 'load a tool' },
  { name: 'cwd', help: 'change working directory' },
  { name: 'name', help: 'rename the agent' },
  { name: 'systemprompt', help: 'show the system prompt' },
  { name: 'context', help: 'show the context' },
  { name: 'usage', help: 'token usage and cost' },
];

export interface BackendInfo {
  name: string;
  type: string;
  url: string;
  model: string;
  isDefault: boolean;
}

/** Root `backends`: name (with * on the default), type, url, default model. */
export function parseBackends(text: string): BackendInfo[] {
  return lines(text).map((l) => {
    const [raw = '', type = '', url = '', model = ''] = l.split('\t');
    const isDefault = raw.endsWith('*');
    return { name: isDefault ? raw.slice(0, -1) : raw, type, url, model, isDefault };
  });
}

/** Root `models`: backend, model id, context length; an unreachable backend has `-` and a reason. */
export function parseModels(text: string): { backend: string; model: string; context?: number }[] {
  return lines(text)
    .map((l) => l.split('\t'))
    .filter((f) => f[1] && f[1] !== '-')
    .map((f) => ({ backend: f[0] ?? '', model: f[1]!, context: Number(f[2]) || undefined }));
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

/** `…/agent/{a}/proc/idx`: pid, tool, status, exit (`-` while running), arguments. */
export function parseProcIdx(text: string): ProcInfo[] {
  return lines(text)
    .map((l) => {
      const f = l.split('\t');
      const exit = f[3] ?? '-';
      return { pid: Number(f[0]), tool: f[1] ?? '', status: f[2] || 'running', exit: exit === '-' || exit === '' ? undefined : exit, args: f.slice(4).join('\t') };
    })
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

/** Root `search`'s reply: session, agent, block id, role, snippet (matched words in [brackets]), agent id, ended. */
export function parseSearch(text: string): SearchHit[] {
  return lines(text).map((l) => {
    const f = l.split('\t');
    const ended = f[6]?.trim() ?? '';
    return { session: f[0] ?? '', agent: f[1] ?? '', block: f[2] ?? '', role: f[3] ?? '', snippet: f[4] ?? '', agentId: f[5] ?? '', ended: ended === '-' ? '' : ended };
  });
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
export function groupHits(hits: SearchHit[]): { session: string; agents: { agent: string; ended: string; key: string; hits: SearchHit[] }[] }[] {
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
  for (const a of m[1]!.matchAll(/(\w+)="([^"]*)"/g)) attrs[a[1]!] = a[2]!.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&amp;/g, '&');
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
  return lines(text).map((l) => {
    const [id = '', label = '', type = '', url = '-', keyEnv = '-', key = ''] = l.split('\t');
    return { id, label, type, ...(url !== '-' ? { url } : {}), ...(keyEnv !== '-' ? { keyEnv } : {}), needsKey: key === 'needed' };
  });
}

/** `config/check`'s reply: model id and context length per line. */
export function parseCheckedModels(text: string): { id: string; context?: number }[] {
  return lines(text).map((l) => {
    const [id = '', ctx = '-'] = l.split('\t');
    return { id, ...(ctx !== '-' ? { context: Number(ctx) } : {}) };
  });
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
      if (key === undefined) throw new Error(`backends.conf:${i + 1}: the key of [${section}] is hidden (${KEY_MASK}) but [${section}] had no key to keep: type the key, or key = env:VARNAME`);
      return `${k[1]}${key}`;
    })
    .join('\n');
}

/** A `key=value` request for config/check and config/backend, and the same with the key masked (for the 9P console). */
export function setupRequest(fields: Record<string, string | undefined>): { data: string; shown: string } {
  const entries = Object.entries(fields).filter((e): e is [string, string] => !!e[1]);
  const text = (mask: boolean) => entries.map(([k, v]) => `${k}=${mask && k === 'key' ? KEY_MASK : v}\n`).join('');
  return { data: text(false), shown: text(true) };
}
