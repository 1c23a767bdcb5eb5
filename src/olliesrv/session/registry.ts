/**
 * Sessions: the stable hosts that agents live in. The registry holds them by name (the namespace's key) and
 * writes every change through to the store, then announces it on the event bus.
 */
import { EVENTS } from '../../formats/olliesrv.js';
import { randomUUID } from 'node:crypto';
import { realpathSync, statSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import type { EventBus } from '../event/bus.js';
import type { SessionRow, SessionStore } from '../store/sessions.js';
import { envRefusal, envRefusalMessage } from './envrules.js';

export class SessionError extends Error {
  override name = 'SessionError';
}

/** Names that would collide with the files beside the session directories. */
const RESERVED = new Set(['new', 'idx', '.', '..']);

export function checkName(name: string): void {
  if (!name) throw new SessionError('name must not be empty');
  if (RESERVED.has(name)) throw new SessionError(`name ${JSON.stringify(name)} is reserved`);
  if (name.length > 128) throw new SessionError('name is longer than 128 characters');
  // Names are path elements and fields of tab-separated index lines.
  if (/[/\s\p{Cc}]/u.test(name))
    throw new SessionError(`name ${JSON.stringify(name)} contains '/', whitespace or a control character`);
}

export function checkCwd(cwd: string): void {
  if (!isAbsolute(cwd)) throw new SessionError(`cwd ${JSON.stringify(cwd)} is not an absolute path`);
  let ok = false;
  try {
    ok = statSync(cwd).isDirectory();
  } catch {
    // Reported below.
  }
  if (!ok) throw new SessionError(`cwd ${cwd} is not an existing directory`);
}

/**
 * `cwd` checked (absolute, an existing directory) and resolved (symlinks, `..`): how agents keep their working
 * directories, so that the sandbox can tell an honest one from one a tool redirected since (see Confinement.wrap).
 */
export function resolvedDir(cwd: string): string {
  checkCwd(cwd);
  try {
    return realpathSync(cwd);
  } catch {
    return cwd;
  }
}

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Validates and normalises session environment text: KEY=value lines; blank lines and # comments dropped. A
 * variable the session environment may not set (session/envrules.ts) is refused, and nothing is stored.
 */
export function parseEnv(text: string): string {
  const out: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const eq = line.indexOf('=');
    const key = eq === -1 ? line : line.slice(0, eq);
    if (eq === -1 || !ENV_KEY.test(key))
      throw new SessionError(`env line ${i + 1}: expected KEY=value, got ${JSON.stringify(line)}`);
    const why = envRefusal(key);
    if (why) throw new SessionError(envRefusalMessage(key, why, `env line ${i + 1}`));
    out.push(line);
  });
  return out.length ? `${out.join('\n')}\n` : '';
}

/**
 * The lines of a stored environment that may still be set, and the refused ones. A database written before a
 * rule existed may hold such a variable: it is dropped, not honoured.
 */
export function sanitizeStoredEnv(env: string): { env: string; dropped: Array<{ name: string; why: string }> } {
  const kept: string[] = [];
  const dropped: Array<{ name: string; why: string }> = [];
  for (const line of env.split('\n')) {
    if (!line) continue;
    const eq = line.indexOf('=');
    const name = eq === -1 ? line : line.slice(0, eq);
    const why = eq === -1 || !ENV_KEY.test(name) ? 'not a KEY=value line' : envRefusal(name);
    if (why) dropped.push({ name, why });
    else kept.push(line);
  }
  return { env: kept.length ? `${kept.join('\n')}\n` : '', dropped };
}

export const GOAL_STATES = ['running', 'complete', 'blocked', 'error'];

/** The status word of a goalstatus value (its first word). */
export function goalState(status: string): string {
  return status.trim().split(/\s/, 1)[0] ?? '';
}

export class Session {
  constructor(private row: SessionRow) {}
  get id(): string {
    return this.row.id;
  }
  get name(): string {
    return this.row.name;
  }
  get cwd(): string {
    return this.row.cwd;
  }
  get env(): string {
    return this.row.env;
  }
  get plan(): string {
    return this.row.plan;
  }
  get paused(): boolean {
    return this.row.paused;
  }
  get goal(): string {
    return this.row.goal;
  }
  get goalstatus(): string {
    return this.row.goalstatus;
  }
  get workflow(): string {
    return this.row.workflow;
  }
  /** @internal */
  update(patch: Partial<SessionRow>): void {
    this.row = { ...this.row, ...patch };
  }
}

export interface NewSession {
  name?: string;
  cwd?: string;
  /** The tools run on another host: cwd is a path there, so it is only checked to be absolute. */
  remote?: boolean;
}

/** A working directory on a remote host: absolute (it can only be checked there). */
export function remoteDir(cwd: string): string {
  if (!isAbsolute(cwd)) throw new SessionError(`cwd ${JSON.stringify(cwd)} is not an absolute path`);
  return cwd;
}

export class Sessions {
  private readonly byName = new Map<string, Session>();
  /** Set by the agent registry: end a session's agents before it goes; tell them about pause and resume. */
  hooks: {
    kill?: (id: string) => void;
    paused?: (id: string, paused: boolean) => void;
    /** A goal was set while no workflow ran: start the session's workflow. */
    goal?: (s: Session) => void;
  } = {};
  /** Readers of goalwait, by session id. */
  private readonly goalWaiters = new Map<string, Array<() => void>>();

  constructor(
    private readonly store: SessionStore,
    private readonly bus: EventBus,
    private readonly defaultCwd: string,
    log: (msg: string) => void = () => undefined,
  ) {
    for (const row of store.all()) {
      const clean = sanitizeStoredEnv(row.env);
      if (clean.dropped.length) {
        for (const d of clean.dropped)
          log(`session ${row.name}: dropped ${d.name} from its stored environment: ${d.why}`);
        store.setEnv(row.id, clean.env);
        row.env = clean.env;
      }
      this.byName.set(row.name, new Session(row));
    }
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  all(): Session[] {
    return [...this.byName.values()];
  }

  /** By name, or by id: tools know their session by OLLIE_SESSION_ID, which a rename does not change. */
  has(name: string): boolean {
    return this.byName.has(name) || this.byId(name) !== undefined;
  }

  get(name: string): Session {
    const s = this.byName.get(name) ?? this.byId(name);
    if (!s) throw new SessionError(`no session named ${JSON.stringify(name)}`);
    return s;
  }

  private byId(id: string): Session | undefined {
    if (id.length !== 36) return undefined;
    for (const s of this.byName.values()) if (s.id === id) return s;
    return undefined;
  }

  create(opts: NewSession): Session {
    const id = randomUUID();
    const name = opts.name ?? id.split('-')[0]!;
    checkName(name);
    if (this.byName.has(name)) throw new SessionError(`a session named ${JSON.stringify(name)} already exists`);
    const cwd = opts.cwd ?? this.defaultCwd;
    if (opts.remote) remoteDir(cwd);
    else checkCwd(cwd);
    const row: SessionRow = {
      id,
      name,
      cwd,
      env: '',
      plan: '',
      paused: false,
      created: Date.now(),
      goal: '',
      goalstatus: '',
      workflow: 'conductor',
    };
    this.store.insert(row);
    const s = new Session(row);
    this.byName.set(name, s);
    this.bus.publish(`session.${id}.new`, name);
    return s;
  }

  rename(nameOrId: string, newName: string): Session {
    const s = this.get(nameOrId);
    const oldName = s.name;
    if (oldName === newName) return s;
    checkName(newName);
    if (this.byName.has(newName)) throw new SessionError(`a session named ${JSON.stringify(newName)} already exists`);
    this.store.rename(s.id, newName);
    s.update({ name: newName });
    this.byName.delete(oldName);
    this.byName.set(newName, s);
    this.bus.publish(
      `session.${s.id}.rename`,
      EVENTS.payload(`session.${s.id}.rename`, { old: oldName, new: newName }),
    );
    return s;
  }

  kill(nameOrId: string): void {
    const s = this.get(nameOrId);
    this.hooks.kill?.(s.id);
    this.store.delete(s.id);
    this.byName.delete(s.name);
    this.bus.publish(`session.${s.id}.kill`);
  }

  setPaused(name: string, paused: boolean): void {
    const s = this.get(name);
    if (s.paused === paused) return;
    this.store.setPaused(s.id, paused);
    s.update({ paused });
    this.bus.publish(`session.${s.id}.${paused ? 'pause' : 'resume'}`);
    this.hooks.paused?.(s.id, paused);
  }

  setEnv(name: string, text: string): void {
    const s = this.get(name);
    const env = parseEnv(text);
    this.store.setEnv(s.id, env);
    s.update({ env });
  }

  setPlan(name: string, plan: string): void {
    const s = this.get(name);
    this.store.setPlan(s.id, plan);
    s.update({ plan });
  }

  /** Sets the goal; starts the workflow when none runs (status empty, complete, blocked or error). */
  setGoal(name: string, text: string): void {
    const s = this.get(name);
    const goal = text.trim();
    if (!goal) throw new SessionError('the goal is empty');
    this.store.setGoal(s.id, `${goal}\n`);
    s.update({ goal: `${goal}\n` });
    if (goalState(s.goalstatus) === 'running') return;
    this.setGoalStatus(name, 'running');
    this.hooks.goal?.(s);
  }

  /** First line running|complete|blocked|error, then an optional summary. Wakes goalwait readers. */
  setGoalStatus(name: string, text: string): void {
    const s = this.get(name);
    const state = goalState(text);
    if (!GOAL_STATES.includes(state))
      throw new SessionError(`goal status must start with ${GOAL_STATES.join(', ')}; got ${JSON.stringify(state)}`);
    const value = `${text.trim()}\n`;
    this.store.setGoalStatus(s.id, value);
    s.update({ goalstatus: value });
    this.bus.publish(`session.${s.id}.goal`, state);
    const w = this.goalWaiters.get(s.id) ?? [];
    this.goalWaiters.delete(s.id);
    for (const f of w) f();
  }

  /** How many goalwait readers wait on this session's next goal status. */
  goalReaders(name: string): number {
    return this.goalWaiters.get(this.get(name).id)?.length ?? 0;
  }

  /** goalwait: resolves with the status after its next change. */
  waitGoal(name: string, signal: AbortSignal): Promise<string> {
    const s = this.get(name);
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      const list = this.goalWaiters.get(s.id) ?? [];
      list.push(() => {
        signal.removeEventListener('abort', onAbort);
        resolve(s.goalstatus);
      });
      this.goalWaiters.set(s.id, list);
    });
  }

  setWorkflow(name: string, workflow: string): void {
    const s = this.get(name);
    this.store.setWorkflow(s.id, workflow);
    s.update({ workflow });
  }

  save(): void {
    this.store.checkpoint();
  }
}
