/**
 * Checkpoints of an agent's writable roots around each tool round that can write, and rewinds to them
 * (docs/checkpoints.md). The daemon does this itself, as the owner's process, against the files the agent's
 * sandbox policy makes writable: the roots come from the same policy toolsrv confines the tools with, so a
 * change made by any process a tool started (a shell's `sed -i`, a build) is inside them.
 *
 * Each round's checkpoint holds two manifests, the state before the round (`pre`) and after it (`post`):
 * `diff` is what the round changed; a rewind restores a `pre`; and what changed between one round's `post`
 * and the next one's `pre` (or since the last `post`) was changed by someone else — the user — and is a
 * conflict a rewind lists instead of overwriting. A rewind is a checkpoint too (its `pre` is the state it
 * replaced), listed last, so rewinding to it undoes it.
 */
import { CHECKPOINT_FILES, CHECKPOINT_IDX, CHECKPOINT_INFO } from '../../formats/olliesrv.js';
import { lstatSync, readFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileStamp } from '../../platform/file-stamp.js';
import { unifiedDiff } from '../../tools/common/diff.js';
import {
  canonical,
  DEFAULT_CHECKPOINT_RULES,
  loadPolicy,
  parsePolicyFile,
  PROJECT_POLICY_NAME,
  TRUST_FILE_NAME,
  type CheckpointRules,
} from '../../toolsrv/public.js';
import type { Message, ToolCall } from '../backend/types.js';
import type { ToolInfo } from '../../toolsrv/protocol.js';
import type { AgentStore } from '../store/agents.js';
import type { Agent } from '../agent/agent.js';
import { applyChanges, type Change } from './restore.js';
import { wholeChanges, type WholeChanges } from './whole.js';
import { changes, rescan, scan, sameEntry, type ManifestDelta } from './scan.js';
import { DirWatch } from './watch.js';
import { CheckpointStore, type Checkpoint, type Entry, type Manifest, type Tree } from './store.js';

export interface CheckpointOptions {
  configDir: string;
  dataDir: string;
  runtimeDir: string;
  store: AgentStore;
  log: (m: string) => void;
  /** Retention when no policy says otherwise (tests shorten it). */
  keep?: CheckpointRules['keep'];
  /** false: walk every root at every checkpoint instead of watching for changes (the bench compares both). */
  watch?: boolean;
  /**
   * Whether the agent's tools run on this machine. The roots are walked here: for an agent whose toolsrv runs on
   * another host the same paths here are other files, so its rounds are not checkpointed and rewinds refused.
   */
  local?: (a: AgentLike) => boolean;
}

export class CheckpointError extends Error {
  override name = 'CheckpointError';
}

/** The agent's state the service needs (a structural view, so tests can pass a stand-in of the loop's Agent). */
type AgentLike = Pick<Agent, 'id' | 'sessionId' | 'cfg' | 'history' | 'busy' | 'log'>;

interface AgentState {
  /** The last manifest taken and its hash: the stat cache of the next walk. */
  last?: { hash: string; manifest: Manifest };
  /** Operations on this agent's checkpoints run one at a time. */
  chain: Promise<unknown>;
  /** The directories that changed since `last` was taken, when every one has been watched since. */
  watch?: DirWatch;
  /** The roots `watch` watches. */
  watched?: string;
  /** When a checkpoint of it was last taken (idle agents give their watches back). */
  used: number;
  /** The checkpoint whose round is running now (the only one without a `post` that is read from the workspace). */
  running?: number;
  /** Bytes that reads of the running round's files and diff stored (at most max_total a round). */
  liveBytes: number;
}

const BINARY = /\0/;
const MAX_DIFF_BYTES = 1 << 20;

export class Checkpoints {
  readonly store: CheckpointStore;
  private readonly agents = new Map<string, AgentState>();
  private readonly policies = new Map<
    string,
    { stamp: string; roots: string[]; rules: CheckpointRules; exclude: Set<string> }
  >();
  private lastSweep = 0;

  constructor(private readonly o: CheckpointOptions) {
    this.store = new CheckpointStore(o.dataDir);
  }

  private state(a: AgentLike): AgentState {
    const key = `${a.sessionId}/${a.id}`;
    let s = this.agents.get(key);
    if (!s) {
      s = { chain: Promise.resolve(), used: Date.now(), liveBytes: 0 };
      this.agents.set(key, s);
    }
    return s;
  }

  /** Runs `fn` after the agent's earlier checkpoint operations. */
  private serial<T>(a: AgentLike, fn: () => Promise<T> | T): Promise<T> {
    const s = this.state(a);
    const next = s.chain.then(fn, fn);
    s.chain = next.catch(() => undefined);
    return next;
  }

  // ---- roots -------------------------------------------------------------------------------------------

  /** The writable roots of the agent's sandbox and the checkpoint rules, from its policy (cached per policy files' state). */
  rootsOf(a: AgentLike): { roots: string[]; rules: CheckpointRules; exclude: Set<string> } {
    const cwd = canonical(a.cfg.sandboxRoot ?? a.cfg.cwd);
    const stamp = [
      join(this.o.configDir, 'sandbox.yaml'),
      join(this.o.configDir, TRUST_FILE_NAME),
      join(cwd, PROJECT_POLICY_NAME),
    ]
      .map(fileStamp)
      .join('|');
    const hit = this.policies.get(cwd);
    if (hit?.stamp === stamp) return hit;
    const tmp = canonical(tmpdir());
    const policy = loadPolicy({
      configDir: this.o.configDir,
      dataDir: this.o.dataDir,
      cwd,
      home: homedir(),
      runtimeDir: this.o.runtimeDir,
      tmpDir: tmp,
    });
    const rules = policy.checkpoint ?? DEFAULT_CHECKPOINT_RULES;
    const within = (p: string, d: string): boolean => d === '/' || p === d || p.startsWith(`${d}/`);
    const candidates = [...new Set([...(policy.resolved?.rw ?? []), ...(policy.resolved?.rwx ?? [])])].filter((p) => {
      if (p === '/' || ['/dev', '/proc', '/sys', '/run'].some((d) => within(p, d))) return false;
      // The temp dirs are left out unless asked for; a workspace that happens to lie in one is not.
      if (!rules.tmp && p !== cwd && (within(p, tmp) || p === '/tmp' || p === '/var/tmp')) return false;
      try {
        return lstatSync(p).isDirectory();
      } catch {
        return false;
      }
    });
    // A root inside another is walked as part of it.
    const roots = candidates.filter((p) => !candidates.some((q) => q !== p && within(p, q))).sort();
    const exclude = new Set(
      [...policy.filesystem.deny, this.o.dataDir, this.o.configDir, this.o.runtimeDir].map(canonical),
    );
    const entry = { stamp, roots, rules, exclude };
    this.policies.set(cwd, entry);
    return entry;
  }

  /**
   * A path as the owner reads it: relative to the agent's working directory when inside it. A name with a
   * control character, a quote or a backslash is quoted as a JSON string (as git quotes such names): the agent
   * names its files, and a newline or tab in a name would otherwise forge lines of files, diff and a rewind's reply.
   */
  private display(a: AgentLike, root: string, rel: string, suffix = ''): string {
    const abs = join(root, rel);
    const r = relative(canonical(a.cfg.cwd), abs);
    const p = (r && !r.startsWith('..') && !r.startsWith('/') ? r : abs) + suffix;
    // A file named " (whole: …" would read as a directory tracked as a whole in `files`: quoted too.
    return [...p].some((ch) => ch < ' ' || ch === '\x7f' || ch === '"' || ch === '\\') ||
      (!suffix && p.includes(' (whole: '))
      ? JSON.stringify(p)
      : p;
  }

  // ---- taking checkpoints --------------------------------------------------------------------------------

  /** The last manifest of the agent (the stat cache), from memory or its index. */
  private lastManifest(a: AgentLike, list: Checkpoint[]): { hash: string; manifest: Manifest } | undefined {
    const s = this.state(a);
    if (s.last) return s.last;
    const rec = list[list.length - 1];
    const hash = rec?.post ?? rec?.pre;
    if (!hash) return undefined;
    try {
      s.last = { hash, manifest: this.store.manifest(hash) };
    } catch {
      return undefined;
    }
    return s.last;
  }

  /**
   * The agent's roots now: the manifest's hash, the manifest, and the bytes it added. With a watch that has
   * seen every directory since the last one, only the directories that changed are read again (none: nothing
   * is read); otherwise everything is walked, and watched from then on.
   */
  private async snapshot(
    a: AgentLike,
    list: Checkpoint[],
  ): Promise<{ hash: string; manifest: Manifest; bytes: number; base?: string; changedFiles?: number }> {
    const { roots, rules, exclude } = this.rootsOf(a);
    const s = this.state(a);
    s.used = Date.now();
    const prev = this.lastManifest(a, list);
    const scanRules = {
      skip: rules.skip,
      whole: rules.whole,
      maxFile: rules.maxFile,
      maxTotal: rules.maxTotal,
      exclude,
    };
    const key = `${roots.join('\0')}|${rules.skip.join('\0')}|${rules.whole.join('\0')}|${rules.maxFile}|${rules.maxTotal}`;
    let r;
    if (prev && s.last === prev && s.watch && !s.watch.broken && s.watched === key) {
      const changed = await s.watch.take();
      // Whole directories not all watched are read at every checkpoint (their stat only, unless they changed).
      if (!changed.size && !s.watch.partial.size) return { hash: prev.hash, manifest: prev.manifest, bytes: 0 };
      r = await rescan(prev.manifest, scanRules, this.store, changed, s.watch);
    } else {
      s.watch?.close();
      s.watch = this.o.watch === false ? undefined : new DirWatch();
      s.watched = key;
      r = await scan(roots, scanRules, this.store, prev?.manifest, s.watch);
    }
    if (!r.dirty && prev) {
      // Nothing changed: the previous manifest stands (its `at` stays, so its racy entries are read again next time).
      return { hash: prev.hash, manifest: prev.manifest, bytes: 0 };
    }
    const m = this.store.putManifest(r.manifest, prev, r.delta);
    this.state(a).last = { hash: m.hash, manifest: r.manifest };
    const changedFiles = r.delta && prev ? countDelta(prev.manifest, r.delta, this.wholeCount) : undefined;
    return {
      hash: m.hash,
      manifest: r.manifest,
      bytes: r.bytes + m.bytes,
      ...(prev && changedFiles !== undefined && { base: prev.hash, changedFiles }),
    };
  }

  /** Whether a round of these calls can write: any tool of scope write or global (or one not known). */
  static writes(calls: readonly ToolCall[], tools: ReadonlyMap<string, ToolInfo>): boolean {
    return calls.some((c) => {
      const t = tools.get(c.name);
      return t ? t.scope !== 'read' : c.name !== 'tool_search';
    });
  }

  /**
   * Runs one tool round between two checkpoints when it can write. A checkpoint that fails is logged in the
   * agent's chat and never stops the round.
   */
  async round<T>(
    a: AgentLike,
    calls: readonly ToolCall[],
    tools: ReadonlyMap<string, ToolInfo>,
    run: () => Promise<T>,
  ): Promise<T> {
    if (!Checkpoints.writes(calls, tools) || this.o.local?.(a) === false) return run();
    let rec: Checkpoint | undefined;
    try {
      rec = await this.serial(a, () => this.begin(a));
    } catch (e) {
      a.log.add('info', `no checkpoint before this round: ${(e as Error).message}`, { name: 'checkpoint' });
    }
    const s = this.state(a);
    if (rec) {
      s.running = rec.id;
      s.liveBytes = 0;
    }
    try {
      return await run();
    } finally {
      if (rec) {
        const id = rec.id;
        await this.serial(a, () => this.end(a, id)).catch((e: unknown) =>
          a.log.add('info', `the checkpoint after this round failed: ${(e as Error).message}`, { name: 'checkpoint' }),
        );
        if (s.running === id) s.running = undefined;
      }
    }
  }

  private promptKey(a: AgentLike): string {
    const msgs = a.history.messages;
    let i = msgs.length - 1;
    while (i >= 0 && !(msgs[i]!.role === 'user' && (msgs[i] as { kind?: string }).kind === undefined)) i--;
    return `${a.history.epoch}:${i}`;
  }

  private async begin(a: AgentLike): Promise<Checkpoint> {
    const list = this.store.readIndex(a.sessionId, a.id);
    const snap = await this.snapshot(a, list);
    const last = list[list.length - 1];
    const prompt = this.promptKey(a);
    const rec: Checkpoint = {
      id: (last?.id ?? 0) + 1,
      turn: last ? (last.prompt === prompt ? last.turn : last.turn + 1) : 1,
      time: Date.now(),
      kind: 'round',
      pre: snap.hash,
      changed: 0,
      bytes: snap.bytes,
      epoch: a.history.epoch,
      // The round's model reply (the calls) is the last message: a rewind of the conversation goes to before it.
      at: Math.max(0, a.history.length - 1),
      prompt,
    };
    list.push(rec);
    this.retain(list, Date.now());
    this.store.writeIndex(a.sessionId, a.id, list);
    return rec;
  }

  private async end(a: AgentLike, id: number): Promise<void> {
    const list = this.store.readIndex(a.sessionId, a.id);
    const rec = list.find((c) => c.id === id);
    if (!rec) return;
    const snap = await this.snapshot(a, list);
    rec.post = snap.hash;
    rec.bytes += snap.bytes;
    // A rescan from the round's own start knows what changed; otherwise the two manifests are compared.
    rec.changed =
      rec.post === rec.pre
        ? 0
        : snap.base === rec.pre && snap.changedFiles !== undefined
          ? snap.changedFiles
          : countFiles(changes(this.store.manifest(rec.pre), snap.manifest), this.wholeCount);
    this.store.writeIndex(a.sessionId, a.id, list);
    this.maybeSweep();
  }

  // ---- reading -----------------------------------------------------------------------------------------

  list(a: AgentLike): Checkpoint[] {
    return this.store.readIndex(a.sessionId, a.id);
  }

  get(a: AgentLike, id: string): Checkpoint {
    const c = /^\d+$/.test(id) ? this.list(a).find((x) => x.id === Number(id)) : undefined;
    if (!c)
      throw new CheckpointError(`no checkpoint ${JSON.stringify(id)} of agent ${a.id} (checkpoint/idx lists them)`);
    return c;
  }

  /** checkpoint/idx: id, turn, time, files changed, bytes; oldest first. */
  idx(a: AgentLike): string {
    return CHECKPOINT_IDX.format(
      this.list(a).map((c) => ({
        id: c.id,
        turn: c.turn,
        time: new Date(c.time).toISOString(),
        changed: c.changed,
        bytes: c.bytes,
      })),
    );
  }

  /** checkpoint/ID/info: key=value. */
  info(a: AgentLike, id: string): string {
    const c = this.get(a, id);
    const reviewed = c.reviewed ?? [];
    return CHECKPOINT_INFO.format({
      id: c.id,
      turn: c.turn,
      time: new Date(c.time).toISOString(),
      kind: c.kind,
      changed: c.changed,
      bytes: c.bytes,
      done: c.post ? 1 : 0,
      ...(c.target !== undefined && { target: c.target }),
      ...(c.note && { note: c.note }),
      reviewed: reviewed.length,
    });
  }

  /** The round's changes: before, after (the workspace now while the round has not ended). */
  private async roundChanges(
    a: AgentLike,
    c: Checkpoint,
  ): Promise<Array<[string, string, Entry | undefined, Entry | undefined]>> {
    // Only the running round is read from the workspace: a round whose checkpoint after it failed (its files
    // passed max_total) would otherwise be walked, and its files copied into the store, at every read.
    const s = this.state(a);
    if (!c.post && s.running !== c.id)
      throw new CheckpointError(
        `checkpoint ${c.id} has no record of the files after its round (the checkpoint after it failed: see the chat)`,
      );
    const pre = this.store.manifest(c.pre);
    if (c.post) return changes(pre, this.store.manifest(c.post));
    // The running round is walked again at each read, within max_total, and its reads together store at most
    // max_total: else an agent reading its own diff over and over while its files change would copy them into
    // the store each time. One read at a time, so that the sum is checked before each walk.
    return this.serial(a, async () => {
      const { rules, exclude } = this.rootsOf(a);
      if (s.liveBytes > rules.maxTotal)
        throw new CheckpointError(
          `checkpoint ${c.id}: reads while its round runs have stored checkpoint.max_total (${rules.maxTotal} bytes) of its files; read it again once the round has ended`,
        );
      const r = await scan(
        Object.keys(pre.roots),
        { skip: rules.skip, whole: rules.whole, maxFile: rules.maxFile, maxTotal: rules.maxTotal, exclude },
        this.store,
        pre,
      );
      s.liveBytes += r.bytes;
      return changes(pre, r.manifest);
    });
  }

  /** checkpoint/ID/files: one line per changed path: A (added), D (deleted), M (modified), T (type changed). */
  async files(a: AgentLike, id: string): Promise<string> {
    return CHECKPOINT_FILES.format(
      (await this.roundChanges(a, this.get(a, id))).filter(isFileChange).map(([root, rel, x, y]) => ({
        change: !x ? 'A' : !y ? 'D' : x.t !== y.t ? 'T' : 'M',
        path:
          x?.t === 'w' || y?.t === 'w'
            ? `${this.display(a, root, rel, '/')} (whole: ${this.whole(x, y).list.length} files changed, ${this.whole(x, y).bytes} bytes)`
            : this.display(a, root, rel),
      })),
    );
  }

  /** checkpoint/ID/diff: a unified diff per changed file. */
  async diff(a: AgentLike, id: string): Promise<string> {
    const text = (e: Entry | undefined): string | undefined => {
      if (!e || e.t === 'd') return '';
      if (e.t === 'l') return `-> ${e.target}\n`;
      if (e.t !== 'f' || e.big || !e.h) return undefined;
      if (e.size > MAX_DIFF_BYTES) return undefined;
      const b = this.store.get(e.h);
      const s = b.toString('utf8');
      return BINARY.test(s) ? undefined : s;
    };
    let out = '';
    for (const [root, rel, x, y] of await this.roundChanges(a, this.get(a, id))) {
      if ((!x || x.t === 'd') && (!y || y.t === 'd')) continue;
      if (x?.t === 'w' || y?.t === 'w') {
        out += this.wholeDiff(this.display(a, root, rel, '/'), x, y);
        continue;
      }
      const name = this.display(a, root, rel);
      const before = text(x);
      const after = text(y);
      if (before === undefined || after === undefined) {
        out += `--- ${x ? `a/${name}` : '/dev/null'}\n+++ ${y ? `b/${name}` : '/dev/null'}\nBinary or large file ${name} differs\n`;
        continue;
      }
      const d = unifiedDiff(before, after, x ? `a/${name}` : '/dev/null', y ? `b/${name}` : '/dev/null');
      out +=
        d ||
        (x?.t === 'f' && y?.t === 'f' && x.mode !== y.mode
          ? `--- a/${name}\n+++ b/${name}\nmode ${x.mode.toString(8)} -> ${y.mode.toString(8)}\n`
          : '');
    }
    return out;
  }

  /** What changed under a directory tracked as a whole (either side may be something else, or nothing). */
  private whole(x: Entry | undefined, y: Entry | undefined): WholeChanges {
    return wholeChanges(this.store, x, y);
  }

  /** Files changed under a whole directory, for idx's count. */
  private readonly wholeCount = (x: Entry | undefined, y: Entry | undefined): number => this.whole(x, y).list.length;

  /**
   * A whole directory's part of the diff: one summary instead of a hunk per file (a build that rewrites a
   * thousand files of node_modules is one change to review), and the first paths it changed.
   */
  private wholeDiff(name: string, x: Entry | undefined, y: Entry | undefined): string {
    const w = this.whole(x, y);
    const count = (c: string): number => w.list.filter(([k]) => k === c).length;
    const quote = (p: string): string =>
      [...p].some((ch) => ch < ' ' || ch === '\x7f' || ch === '"' || ch === '\\') ? JSON.stringify(p) : p;
    const shown = w.list.slice(0, 20).map(([c, p]) => `  ${c} ${quote(p)}\n`);
    const more = w.list.length > 20 ? `  … and ${w.list.length - 20} more\n` : '';
    // The other side when it is not a whole directory: what stood there, or stands there now.
    const what = (e: Entry | undefined): string =>
      !e || e.t === 'w'
        ? ''
        : e.t === 'l'
          ? `a link to ${quote(e.target)}`
          : e.t === 'd'
            ? 'a directory walked file by file'
            : 'a file';
    const was = what(x) && `Before: ${what(x)}\n`;
    const now = what(y) && `Now: ${what(y)}\n`;
    return (
      `--- ${x ? `a/${name}` : '/dev/null'}\n+++ ${y ? `b/${name}` : '/dev/null'}\n` +
      was +
      now +
      `Whole directory ${name}: ${w.list.length} files changed (${count('A')} added, ${count('M')} modified, ${count('D')} deleted, ${count('T')} type changed), ${w.bytes} bytes\n` +
      shown.join('') +
      more
    );
  }

  reviewed(a: AgentLike, id: string): string {
    return (this.get(a, id).reviewed ?? []).map((p) => `${p}\n`).join('');
  }

  /** Writes to checkpoint/ID/reviewed: `PATH` or `+PATH` marks, `-PATH` unmarks, one per line. */
  markReviewed(a: AgentLike, id: string, text: string): Promise<void> {
    return this.serial(a, () => {
      const list = this.list(a);
      const c = list.find((x) => String(x.id) === id.trim());
      if (!c) throw new CheckpointError(`no checkpoint ${JSON.stringify(id)} of agent ${a.id}`);
      const set = new Set(c.reviewed ?? []);
      for (const line of text.split('\n')) {
        const l = line.trim();
        if (!l) continue;
        if (l.startsWith('-')) set.delete(l.slice(1).trim());
        else set.add(l.replace(/^\+/, '').trim());
      }
      c.reviewed = [...set].sort();
      this.store.writeIndex(a.sessionId, a.id, list);
    });
  }

  // ---- rewinding ---------------------------------------------------------------------------------------

  /**
   * `rewind ID [files|all] [force|keep]`: restores the files to checkpoint ID (the state before its round),
   * and with `all` the conversation to that point too. Files changed by someone other than the agent's rounds
   * since (conflicts) make it refuse, listing them, unless `force` (overwrite them) or `keep` (leave them,
   * rewind the rest).
   */
  rewind(a: AgentLike, args: string): Promise<string> {
    const words = args.trim().split(/\s+/).filter(Boolean);
    const id = words.shift();
    if (!id) throw new CheckpointError('usage: rewind ID [files|all] [force|keep]');
    let scope: 'files' | 'all' = 'files';
    let onConflict: 'refuse' | 'force' | 'keep' = 'refuse';
    for (const w of words) {
      if (w === 'files' || w === 'all') scope = w;
      else if (w === 'force' || w === 'keep') onConflict = w;
      else
        throw new CheckpointError(
          `rewind: unknown word ${JSON.stringify(w)}; usage: rewind ID [files|all] [force|keep]`,
        );
    }
    if (a.busy) throw new CheckpointError('the agent is running a turn: stop it (ctl stop) or wait, then rewind');
    if (this.o.local?.(a) === false)
      throw new CheckpointError("this agent's tools run on another host: its files are not checkpointed here");
    return this.serial(a, () => {
      if (a.busy) throw new CheckpointError('the agent is running a turn: stop it (ctl stop) or wait, then rewind');
      return this.rewindNow(a, id, scope, onConflict);
    });
  }

  private async rewindNow(
    a: AgentLike,
    id: string,
    scope: 'files' | 'all',
    onConflict: 'refuse' | 'force' | 'keep',
  ): Promise<string> {
    const list = this.list(a);
    const i = list.findIndex((c) => String(c.id) === id);
    if (i < 0)
      throw new CheckpointError(`no checkpoint ${JSON.stringify(id)} of agent ${a.id} (checkpoint/idx lists them)`);
    const target = list[i]!;
    const now = await this.snapshot(a, list);
    const want = this.store.manifest(target.pre);

    // What someone other than the agent's rounds changed since: between one round's end and the next one's start,
    // and since the last one ended.
    const outside = new Set<string>();
    const key = (root: string, rel: string): string => `${root}\0${rel}`;
    const note = (x: string | undefined, y: Manifest): void => {
      if (!x) return;
      for (const [root, rel] of changes(this.store.manifest(x), y)) outside.add(key(root, rel));
    };
    for (let k = i + 1; k < list.length; k++) note(list[k - 1]!.post, this.store.manifest(list[k]!.pre));
    const last = list[list.length - 1]!;
    note(last.post ?? last.pre, now.manifest);

    const perRoot = new Map<string, Change[]>();
    const conflicts: string[] = [];
    const skippedBig: string[] = [];
    for (const root of Object.keys(want.roots)) {
      const w = want.roots[root]!;
      const cur = now.manifest.roots[root] ?? {};
      const list2: Change[] = [];
      for (const rel of new Set([...Object.keys(w), ...Object.keys(cur)])) {
        if (sameEntry(w[rel], cur[rel])) continue;
        const we = w[rel];
        if (we?.t === 'f' && we.big) {
          skippedBig.push(this.display(a, root, rel));
          continue;
        }
        if (outside.has(key(root, rel))) {
          // A directory tracked as a whole is one conflict: someone changed something under it.
          conflicts.push(this.display(a, root, rel, we?.t === 'w' || cur[rel]?.t === 'w' ? '/' : ''));
          if (onConflict !== 'force') continue;
        }
        list2.push({ rel, entry: we });
      }
      perRoot.set(root, list2);
    }
    if (conflicts.length && onConflict === 'refuse') {
      throw new CheckpointError(
        `not rewound: ${conflicts.length} file(s) were changed outside the agent's rounds since checkpoint ${target.id} ` +
          `(rewind ${id} … force overwrites them, keep leaves them and rewinds the rest):\n${conflicts.map((c) => `conflict\t${c}\n`).join('')}`,
      );
    }

    const rec: Checkpoint = {
      id: (last.id ?? 0) + 1,
      turn: last.turn,
      time: Date.now(),
      kind: 'rewind',
      pre: now.hash,
      changed: 0,
      bytes: now.bytes,
      epoch: a.history.epoch,
      at: a.history.length,
      prompt: last.prompt,
      target: target.id,
    };
    list.push(rec);
    this.store.writeIndex(a.sessionId, a.id, list);

    const written: string[] = [];
    const removed: string[] = [];
    const failed: string[] = [];
    for (const [root, cs] of perRoot) {
      if (!cs.length) continue;
      const cur = now.manifest.roots[root] ?? {};
      const wanted = want.roots[root] ?? {};
      const r = applyChanges(
        root,
        cs,
        cur,
        (h) => this.store.get(h),
        (h) => this.store.tree(h),
      );
      const slash = (p: string, e: Entry | undefined): string => (e?.t === 'w' ? '/' : '');
      written.push(...r.written.map((p) => this.display(a, root, p, slash(p, wanted[p]))));
      removed.push(...r.removed.map((p) => this.display(a, root, p, slash(p, cur[p]))));
      failed.push(...r.failed);
    }
    const after = await this.snapshot(a, list);
    rec.post = after.hash;
    rec.bytes += after.bytes;
    rec.changed = countFiles(changes(now.manifest, after.manifest), this.wholeCount);

    let conversation = '';
    if (scope === 'all') {
      const msgs = this.o.store
        .messages(a.id, target.epoch)
        .slice(0, target.at)
        .map((b) => JSON.parse(b) as Message);
      const oldEpoch = a.history.epoch;
      a.history.replace(msgs);
      conversation = `conversation: ${msgs.length} messages (the later history is kept as epoch ${oldEpoch}; rewind ${rec.id} all undoes this)\n`;
    }
    rec.note = `rewound to ${target.id}: ${written.length} written, ${removed.length} removed${conflicts.length ? `, ${conflicts.length} conflict(s) ${onConflict === 'force' ? 'overwritten' : 'kept'}` : ''}`;
    this.store.writeIndex(a.sessionId, a.id, list);
    a.log.add(
      'info',
      `Rewound ${scope === 'all' ? 'files and conversation' : 'files'} to checkpoint ${target.id} (${rec.note}); checkpoint ${rec.id} undoes it.`,
      { name: 'rewind' },
    );
    return (
      `rewound to checkpoint ${target.id} as checkpoint ${rec.id} (rewind ${rec.id}${scope === 'all' ? ' all' : ''} undoes it)\n` +
      written.map((p) => `restored\t${p}\n`).join('') +
      removed.map((p) => `removed\t${p}\n`).join('') +
      conflicts.map((p) => `conflict\t${p}\t${onConflict === 'force' ? 'overwritten' : 'kept'}\n`).join('') +
      skippedBig.map((p) => `not stored\t${p}\n`).join('') +
      failed.map((p) => `failed\t${p}\n`).join('') +
      conversation
    );
  }

  // ---- retention ---------------------------------------------------------------------------------------

  private keepCache?: { stamp: string; keep: CheckpointRules['keep'] };

  /** Retention: the user's sandbox.yaml's `checkpoint.keep` (a project's file cannot set it), else the defaults. */
  private keep(): CheckpointRules['keep'] {
    if (this.o.keep) return this.o.keep;
    const file = join(this.o.configDir, 'sandbox.yaml');
    // No file ('-'): the defaults.
    const stamp = fileStamp(file);
    if (this.keepCache?.stamp !== stamp) {
      let keep = DEFAULT_CHECKPOINT_RULES.keep;
      if (stamp !== '-') {
        try {
          keep =
            parsePolicyFile(file, readFileSync(file, 'utf8'), {
              configDir: this.o.configDir,
              dataDir: this.o.dataDir,
              cwd: homedir(),
              home: homedir(),
              runtimeDir: this.o.runtimeDir,
              tmpDir: tmpdir(),
            }).checkpoint?.keep ?? keep;
        } catch (e) {
          this.o.log(`checkpoint retention: ${(e as Error).message}; using the defaults`);
        }
      }
      this.keepCache = { stamp, keep };
    }
    return this.keepCache.keep;
  }

  /** Drops an agent's checkpoints beyond the count and age limits (oldest first; the newest always stays). */
  private retain(list: Checkpoint[], now: number): number {
    const k = this.keep();
    let dropped = 0;
    while (list.length > 1 && (list.length > k.count || now - list[0]!.time > k.ageMs)) {
      list.shift();
      dropped++;
    }
    return dropped;
  }

  private maybeSweep(): void {
    if (Date.now() - this.lastSweep < 10 * 60_000) return;
    this.lastSweep = Date.now();
    // An agent idle for half an hour gives its inotify watches back; its next checkpoint walks its roots again.
    for (const st of this.agents.values()) {
      if (st.watch && Date.now() - st.used > 30 * 60_000) {
        st.watch.close();
        st.watch = undefined;
      }
    }
    setImmediate(() => {
      try {
        this.gcNow(60_000);
      } catch (e) {
        this.o.log(`checkpoint gc failed: ${(e as Error).message}`);
      }
    });
  }

  /** `ctl checkpoint gc`: applies retention to every agent, then removes what no checkpoint needs. */
  async gc(): Promise<string> {
    const running = [...this.agents.values()].map((s) => s.chain);
    await Promise.all(running);
    return this.gcNow(0);
  }

  /** `grace`: objects younger than this stay (one written by a checkpoint being taken now is not in its index yet). */
  private gcNow(grace: number): string {
    const k = this.keep();
    const now = Date.now();
    const indexes = [...this.store.indexes()];
    let dropped = 0;
    for (const ix of indexes) {
      const n = this.retain(ix.list, now);
      if (n) {
        dropped += n;
        this.store.writeIndex(ix.session, ix.agent, ix.list);
      }
    }
    const manifests = new Map<string, Manifest>();
    const load = (h: string): Manifest | undefined => {
      if (!manifests.has(h)) {
        try {
          manifests.set(h, this.store.manifest(h));
        } catch {
          return undefined;
        }
      }
      return manifests.get(h);
    };
    const trees = new Map<string, Tree | undefined>();
    const loadTree = (h: string): Tree | undefined => {
      if (!trees.has(h)) {
        try {
          trees.set(h, this.store.tree(h));
        } catch {
          trees.set(h, undefined);
        }
      }
      return trees.get(h);
    };
    const objects = new Map([...this.store.allObjects()].map((o) => [o.hash, o]));
    const live = (): Set<string> => {
      const set = new Set<string>();
      // Trees whose blobs are in `set`, and trees whose chain of bases is (kept apart from `set`, where a file
      // whose contents happen to be a tree's text would otherwise pass for a tree already counted).
      const rootsDone = new Set<string>();
      const chainDone = new Set<string>();
      for (const ix of indexes) {
        for (const c of ix.list) {
          for (const h of [c.pre, c.post]) {
            if (!h) continue;
            for (const link of this.store.chain(h)) set.add(link);
            const m = load(h);
            for (const entries of Object.values(m?.roots ?? {}))
              for (const e of Object.values(entries)) {
                if (e.t === 'f' && e.h) set.add(e.h);
                else if (e.t === 'w' && !rootsDone.has(e.tree)) {
                  // A whole directory's tree (and the trees it is a delta of) is a root for its blobs.
                  rootsDone.add(e.tree);
                  for (const link of this.store.treeChain(e.tree, chainDone)) {
                    set.add(link);
                    chainDone.add(link);
                  }
                  const t = loadTree(e.tree);
                  for (const x of Object.values(t?.entries ?? {})) if (x.t === 'f' && x.h) set.add(x.h);
                }
              }
          }
        }
      }
      return set;
    };
    let keep = live();
    const size = (): number => [...keep].reduce((n, h) => n + (objects.get(h)?.size ?? 0), 0);
    // Over the size limit: the oldest checkpoints of the whole store go first; each agent keeps its newest.
    while (size() > k.size) {
      const oldest = indexes.filter((ix) => ix.list.length > 1).sort((x, y) => x.list[0]!.time - y.list[0]!.time)[0];
      if (!oldest) break;
      oldest.list.shift();
      dropped++;
      this.store.writeIndex(oldest.session, oldest.agent, oldest.list);
      keep = live();
    }
    let freed = 0;
    let removed = 0;
    for (const o of objects.values()) {
      if (keep.has(o.hash) || now - o.mtime < grace) continue;
      this.store.removeObject(o.hash);
      freed += o.size;
      removed++;
    }
    for (const s of this.agents.values()) {
      s.last = undefined;
      s.watch?.close();
      s.watch = undefined;
    }
    return `checkpoints dropped ${dropped}\nobjects removed ${removed}\nbytes freed ${freed}\nbytes kept ${size()}\n`;
  }

  /** A session that is deleted: its agents' checkpoints go with it (their objects at the next gc). */
  forgetSession(sessionId: string): void {
    for (const [key, st] of this.agents) {
      if (!key.startsWith(`${sessionId}/`)) continue;
      st.watch?.close();
      this.agents.delete(key);
    }
    this.store.dropSession(sessionId);
  }
}

/** Directories show through their files; one that became a file or a link (or back) is a type change. */
const isFileChange = ([, , x, y]: [string, string, Entry | undefined, Entry | undefined]): boolean =>
  (!!x && x.t !== 'd') || (!!y && y.t !== 'd');

/** Files changed under a whole directory (either side may be something else): what it adds to a count. */
type WholeCount = (x: Entry | undefined, y: Entry | undefined) => number;

/** Changed files: a whole directory counts the files changed under it (and itself, when it became a file). */
const countOne = (x: Entry | undefined, y: Entry | undefined, whole: WholeCount): number =>
  x?.t === 'w' || y?.t === 'w'
    ? whole(x, y) + ((x && x.t !== 'w' && x.t !== 'd') || (y && y.t !== 'w' && y.t !== 'd') ? 1 : 0)
    : (!!x && x.t !== 'd') || (!!y && y.t !== 'd')
      ? 1
      : 0;

const countFiles = (list: Array<[string, string, Entry | undefined, Entry | undefined]>, whole: WholeCount): number =>
  list.reduce((n, [, , x, y]) => n + countOne(x, y, whole), 0);

/** Files (not directories) a rescan's delta adds, changes or removes. */
function countDelta(prev: Manifest, d: ManifestDelta, whole: WholeCount): number {
  let n = 0;
  for (const [root, set] of Object.entries(d.set)) {
    for (const [rel, e] of Object.entries(set)) {
      const o = prev.roots[root]?.[rel];
      if (sameEntry(o, e)) continue; // stat fields only
      n += countOne(o, e, whole);
    }
  }
  for (const [root, dels] of Object.entries(d.del))
    for (const rel of dels) n += countOne(prev.roots[root]?.[rel], undefined, whole);
  return n;
}
