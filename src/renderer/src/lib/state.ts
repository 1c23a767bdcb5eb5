/**
 * The renderer's state (zustand): what the GUI shows, the paths of sessions and agents in the namespace, notices,
 * and the 9P console (kept across a reload of the page). The controller (store.ts, sync.ts) fills it from olliesrv.
 */
import { create } from 'zustand';
import type { ConsoleEntry } from './api.js';
import type { ChatLog } from './chatlog.js';
import { appendEntry, loadConsole, saveConsole } from './consolelog.js';
import type { AgentInfo, BackendInfo, Pending, ProcInfo, SearchHit, SessionInfo } from './parse.js';

export type Dialog =
  | { kind: 'new-session' }
  | { kind: 'new-agent'; session: string }
  | { kind: 'agent-cfg'; session: string; agent: string }
  /** Killing cannot be undone: the tree's Kill asks first. */
  | { kind: 'confirm-kill'; session: string; agent?: string }
  /** "Connect to…": this machine's daemon or another machine's over ssh. */
  | { kind: 'connect-to' }
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
  /** The daemon the GUI talks to: '' for this machine's, else `ssh!HOST[!SOCK]` ("Connect to…"). */
  daemon: string;
  /** This machine's ssh Host aliases (its `sshhosts`), read while connected to it: "Connect to…" offers them. */
  localHosts: string[];
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
  daemon: '',
  localHosts: [],
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

export const set = useStore.setState;
export const get = useStore.getState;

/** Adds a 9P operation to the console, numbered by the page. */
export function logConsole(e: ConsoleEntry): void {
  set((s) => ({ console: appendEntry(s.console, { ...e, seq: ++consoleSeq }) }));
}

// The console survives a reload of the page (sessionStorage), written at most once per 250 ms and when the page goes.
let saveTimer: ReturnType<typeof setTimeout> | undefined;
const saveNow = (): void => {
  clearTimeout(saveTimer);
  saveTimer = undefined;
  saveConsole(get().console, get().consoleOpen);
};
useStore.subscribe((s, prev) => {
  if ((s.console !== prev.console || s.consoleOpen !== prev.consoleOpen) && !saveTimer)
    saveTimer = setTimeout(saveNow, 250);
});
if (typeof window !== 'undefined') window.addEventListener('pagehide', saveNow);

export const sessionPath = (sid: string): string => `session/${get().sessions[sid]?.name ?? sid}`;
/** A live agent's directory (by name), or an ended one's read-only record (by id: its name may be taken again). */
export function agentPath(sid: string, aid: string): string {
  const a = get().agents[sid]?.find((x) => x.id === aid);
  return a?.ended ? `${sessionPath(sid)}/ended/${aid}` : `${sessionPath(sid)}/agent/${a?.name ?? aid}`;
}
export const isEnded = (sid: string, aid: string): boolean => !!get().agents[sid]?.find((x) => x.id === aid)?.ended;
export const agentKey = (sid: string, aid: string): string => `${sid}/${aid}`;
export const findAgent = (sid?: string, aid?: string): AgentInfo | undefined =>
  sid && aid ? get().agents[sid]?.find((a) => a.id === aid) : undefined;
/** The selected agent, as a selector for useStore (a component re-renders when what it picks of it changes). */
export const selectedAgent = (s: State): AgentInfo | undefined =>
  s.selected.session && s.selected.agent
    ? s.agents[s.selected.session]?.find((a) => a.id === s.selected.agent)
    : undefined;

/** Runs `fn` on the next animation frame, or soon when the page is hidden (where frames do not come). */
export function nextFrame(fn: () => void): void {
  if (typeof requestAnimationFrame === 'function' && document.visibilityState === 'visible')
    requestAnimationFrame(() => fn());
  else setTimeout(fn, 16);
}

export function notify(text: string, error = false): void {
  set({ notice: { text, error } });
}
