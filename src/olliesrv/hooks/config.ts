/**
 * Lifecycle hooks as configured: `hooks.json` in the user's config dir (global) and `.ollie-hooks.json` at a
 * project's root (the directory whose sandbox policy the agent has). The shape is Claude Code's, so existing
 * hooks port:
 *
 *   {"hooks": {"PreToolUse": [{"matcher": "shell|file_write", "hooks": [{"type": "command", "command": "…", "timeout": 30}]}]}}
 *
 * A project's file lies in the workspace, which the agent writes: like the project sandbox file
 * (toolsrv/sandbox/trust.ts) it applies only while the owner trusts that exact file (its SHA-256 at its
 * canonical path). Files are read on every event, so an edit applies from the next one; reading costs a stat and
 * a small read. A malformed file is an error naming the file and the field; the other file's hooks still run.
 */
import { closeSync, constants, fstatSync, openSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_HOOKS_FILE_NAME, readTrusted, sha256 } from '../../toolsrv/public.js';

export const HOOKS_FILE = 'hooks.json';
export const PROJECT_HOOKS_NAME = PROJECT_HOOKS_FILE_NAME;

export const HOOK_EVENTS = [
  'SessionStart',
  'UserPrompt',
  'PreToolUse',
  'PostToolUse',
  'Stop',
  'SubagentStop',
  'PreCompact',
  'Notification',
] as const;
export type HookEvent = (typeof HOOK_EVENTS)[number];

/** Claude Code's names for the same events. */
const ALIASES: Record<string, HookEvent> = { UserPromptSubmit: 'UserPrompt' };

/** Seconds a hook may run when its entry names no timeout. */
export const DEFAULT_HOOK_TIMEOUT = 60;
/** The longest timeout an entry may ask for: a hook holds up the agent while it runs. */
export const MAX_HOOK_TIMEOUT = 3600;
/** A hooks file larger than this is refused unread. */
const MAX_FILE = 1 << 20;

export interface HookCommand {
  command: string;
  timeoutSec: number;
  /**
   * A hook that fails (exits with anything but 0 or 2, times out, is killed at its output cap, cannot run) blocks
   * what it guards instead of letting it through: a guard the agent can make fail is otherwise no guard.
   */
  failClosed: boolean;
  /** The matcher it was listed under ('' matches everything). */
  matcher: string;
  /** The file it came from. */
  source: string;
}

interface Matcher {
  re: RegExp;
  hooks: HookCommand[];
}

export type HookTable = Map<HookEvent, Matcher[]>;

export class HookConfigError extends Error {
  override name = 'HookConfigError';
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Parses a hooks file; throws HookConfigError naming `file` and the field that is wrong. */
export function parseHooks(file: string, text: string): HookTable {
  const table: HookTable = new Map();
  if (!text.trim()) return table;
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new HookConfigError(`${file}: not JSON: ${(e as Error).message}`);
  }
  if (!isObject(doc)) throw new HookConfigError(`${file}: expected an object {"hooks": {EVENT: [...]}}`);
  for (const k of Object.keys(doc))
    if (k !== 'hooks' && k !== '$schema' && k !== 'disableAllHooks')
      throw new HookConfigError(`${file}: unknown key ${JSON.stringify(k)} (expected "hooks")`);
  if (doc.disableAllHooks === true) return table;
  if (doc.hooks === undefined) return table;
  if (!isObject(doc.hooks)) throw new HookConfigError(`${file}: "hooks" must be an object of events`);
  for (const [name, list] of Object.entries(doc.hooks)) {
    const event: HookEvent | undefined = ALIASES[name] ?? HOOK_EVENTS.find((e) => e === name);
    const at = `${file}: hooks.${name}`;
    if (!event)
      throw new HookConfigError(
        `${at}: unknown event (known: ${HOOK_EVENTS.join(', ')}; UserPromptSubmit is taken for UserPrompt)`,
      );
    if (!Array.isArray(list)) throw new HookConfigError(`${at}: expected a list of {"matcher", "hooks"} entries`);
    const matchers = table.get(event) ?? [];
    list.forEach((entry: unknown, i) => {
      const where = `${at}[${i}]`;
      if (!isObject(entry))
        throw new HookConfigError(`${where}: expected an object {"matcher": REGEX, "hooks": [...]}`);
      for (const k of Object.keys(entry))
        if (k !== 'matcher' && k !== 'hooks') throw new HookConfigError(`${where}: unknown key ${JSON.stringify(k)}`);
      const m = entry.matcher ?? '';
      if (typeof m !== 'string')
        throw new HookConfigError(`${where}.matcher: must be a string (a regular expression over the tool name)`);
      let re: RegExp;
      try {
        // Claude Code's matchers: "" and "*" match everything; anything else is a regular expression over the
        // whole tool name ("Edit|Write" matches those two, not "NotebookEdit").
        re = m === '' || m === '*' ? /^/ : new RegExp(`^(?:${m})$`);
      } catch (e) {
        throw new HookConfigError(`${where}.matcher: not a regular expression: ${(e as Error).message}`);
      }
      if (!Array.isArray(entry.hooks))
        throw new HookConfigError(`${where}.hooks: expected a list of {"type": "command", "command": …}`);
      const hooks = entry.hooks.map((h: unknown, j): HookCommand => {
        const hw = `${where}.hooks[${j}]`;
        if (!isObject(h)) throw new HookConfigError(`${hw}: expected an object {"type": "command", "command": "…"}`);
        for (const k of Object.keys(h))
          if (!['type', 'command', 'timeout', 'failClosed'].includes(k))
            throw new HookConfigError(`${hw}: unknown key ${JSON.stringify(k)}`);
        if (h.type !== 'command')
          throw new HookConfigError(`${hw}.type: must be "command" (the only kind of hook Ollie runs)`);
        if (typeof h.command !== 'string' || !h.command.trim())
          throw new HookConfigError(`${hw}.command: must be a non-empty shell command`);
        if (h.command.includes('\0')) throw new HookConfigError(`${hw}.command: holds a NUL character`);
        const t = h.timeout ?? DEFAULT_HOOK_TIMEOUT;
        if (typeof t !== 'number' || !Number.isFinite(t) || t <= 0 || t > MAX_HOOK_TIMEOUT)
          throw new HookConfigError(
            `${hw}.timeout: must be a number of seconds above 0 and at most ${MAX_HOOK_TIMEOUT}`,
          );
        if (h.failClosed !== undefined && typeof h.failClosed !== 'boolean')
          throw new HookConfigError(`${hw}.failClosed: must be true or false`);
        return { command: h.command, timeoutSec: t, failClosed: h.failClosed === true, matcher: m, source: file };
      });
      matchers.push({ re, hooks });
    });
    table.set(event, matchers);
  }
  return table;
}

/** The commands of `table` for `event`, whose matcher matches `tool` (events without a tool match every entry). */
export function matching(table: HookTable, event: HookEvent, tool?: string): HookCommand[] {
  const out: HookCommand[] = [];
  for (const m of table.get(event) ?? []) if (tool === undefined || m.re.test(tool)) out.push(...m.hooks);
  return out;
}

/** Reads a file once, refusing a link, a FIFO or anything but a small regular file; undefined when absent. */
function readRegular(file: string): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw new HookConfigError(`${file}: ${code === 'ELOOP' ? 'a symbolic link: refused' : (e as Error).message}`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new HookConfigError(`${file}: not a regular file`);
    if (st.size > MAX_FILE) throw new HookConfigError(`${file}: larger than ${MAX_FILE} bytes`);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

export interface LoadedHooks {
  tables: HookTable[];
  /** Why a file is not applied (malformed, untrusted): shown to the user, never fatal. */
  problems: string[];
  /**
   * Set when the project's file was trusted but is gone, changed or no longer a regular file: its hooks may have
   * been the owner's guard, and the agent writes the workspace, so one edit must not lift them. Tool calls are
   * refused with this reason until the owner trusts the file again or untrusts it (as toolsrv does for a tampered
   * project sandbox file).
   */
  tampered?: string;
}

/** The canonical path of a project's hooks file (the trust list holds canonical paths). */
export function projectHooksFile(projectRoot: string): string {
  let root = projectRoot;
  try {
    root = realpathSync(projectRoot);
  } catch {
    // A root that is gone has no file either.
  }
  return join(root, PROJECT_HOOKS_NAME);
}

/** The global hooks and, when the owner trusts it as it is now, the project's. */
export function loadHooks(configDir: string, projectRoot: string | undefined): LoadedHooks {
  const tables: HookTable[] = [];
  const problems: string[] = [];
  const global = join(configDir, HOOKS_FILE);
  try {
    const bytes = readRegular(global);
    if (bytes) tables.push(parseHooks(global, bytes.toString('utf8')));
  } catch (e) {
    problems.push((e as Error).message);
  }
  let tampered: string | undefined;
  if (projectRoot !== undefined) {
    const file = projectHooksFile(projectRoot);
    const refused = 'tool calls are refused until the owner trusts it again or untrusts it';
    let trusted: string | undefined;
    let bytes: Buffer | undefined;
    let unread = false;
    try {
      trusted = readTrusted(configDir).get(file);
      bytes = readRegular(file);
    } catch (e) {
      // A link, a FIFO, too large, unreadable: a trusted file made so is tampered with.
      unread = true;
      if (trusted !== undefined) tampered = `${(e as Error).message}; it was trusted, so ${refused}`;
      else problems.push((e as Error).message);
    }
    if (!unread) {
      if (!bytes) {
        if (trusted !== undefined) tampered = `${file} was trusted but is gone; ${refused}`;
      } else if (trusted === undefined) {
        problems.push(
          `${file} is not applied: the owner has not trusted it (\`ollie trust ${file}\`, or "trust ${file}" written to config/trust)`,
        );
      } else if (trusted !== sha256(bytes)) {
        // What is hashed is what is parsed: the bytes are read once.
        tampered = `${file} changed since the owner trusted it; ${refused}`;
      } else {
        try {
          tables.push(parseHooks(file, bytes.toString('utf8')));
        } catch (e) {
          problems.push((e as Error).message);
        }
      }
    }
    if (tampered) problems.push(`${tampered} (\`ollie trust ${file}\` or \`ollie trust --untrust ${file}\`)`);
  }
  return { tables, problems, ...(tampered && { tampered }) };
}
