/**
 * The 9P console's log: what it keeps, and keeping it across a reload of the page.
 *
 * Reads repeat: every state change of the selected agent re-reads its stats, queue and processes, so a prompt
 * used to leave some 40 near-identical lines. A read (read, ls, stat) the log already holds among its recent
 * lines is not added again: that line moves to the end and counts the repeat. Writes are never merged: each one
 * is an action someone may want to replay.
 */
import type { ConsoleEntry } from './api.js';

export const CONSOLE_MAX = 500;
/** How far back a repeated read is looked for. */
const COALESCE_WINDOW = 50;
const STORAGE_KEY = 'ollie.console';

/** The tab's sessionStorage (through globalThis: this module is also loaded by unit tests, which have no DOM). */
interface TabStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}
const storage = (): TabStorage | undefined => (globalThis as { sessionStorage?: TabStorage }).sessionStorage;

const isRead = (command: string): boolean => /^ollie-9p (read|ls|stat) /.test(command);

export function appendEntry(list: ConsoleEntry[], e: ConsoleEntry, max = CONSOLE_MAX): ConsoleEntry[] {
  if (isRead(e.command)) {
    for (let i = list.length - 1; i >= Math.max(0, list.length - COALESCE_WINDOW); i--) {
      const old = list[i]!;
      if (old.command !== e.command || old.error !== e.error) continue;
      const merged: ConsoleEntry = { ...e, seq: old.seq, count: (old.count ?? 1) + 1 };
      return [...list.slice(0, i), ...list.slice(i + 1), merged];
    }
  }
  const next = [...list, e];
  return next.length > max ? next.slice(next.length - max) : next;
}

/** The log and whether the console was open, as this tab left them (sessionStorage: per tab, gone with it). */
export function loadConsole(): { entries: ConsoleEntry[]; open: boolean } {
  try {
    const v = JSON.parse(storage()?.getItem(STORAGE_KEY) ?? 'null') as { entries?: unknown; open?: unknown } | null;
    const entries = Array.isArray(v?.entries)
      ? (v.entries as ConsoleEntry[]).filter((x) => typeof x?.command === 'string' && typeof x.seq === 'number')
      : [];
    return { entries: entries.slice(-CONSOLE_MAX), open: v?.open === true };
  } catch {
    // Unreadable or refused storage: an empty log, as on a first start.
    return { entries: [], open: false };
  }
}

export function saveConsole(entries: ConsoleEntry[], open: boolean): void {
  try {
    storage()?.setItem(STORAGE_KEY, JSON.stringify({ entries, open }));
  } catch {
    // Full or refused: the log lives on in this page, it just does not survive a reload.
  }
}
