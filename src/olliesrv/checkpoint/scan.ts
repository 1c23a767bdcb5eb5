/**
 * Walks the writable roots and records every file, link and directory, the way git's index finds unchanged
 * files: an entry whose size, mtime, ctime and inode match the last walk's keeps its hash without being read.
 * Only new or changed files are read, hashed and stored (once per content: the store is by hash). An entry
 * whose mtime is not older than the walk that recorded it is read again ("racily clean": it may have changed
 * within the same timestamp tick).
 *
 * Never followed: symbolic links (recorded as links), `.git` (neither walked nor ever written), the skip rules'
 * names and paths. Files larger than max_file are listed but not stored.
 */
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  realpathSync,
  type Dirent,
} from 'node:fs';
import { join } from 'node:path';
import type { CheckpointStore, Entry, FileEntry, Manifest, Tree, TreeEntry, WholeEntry } from './store.js';
import { identical, sha256 } from './store.js';
import type { DirWatch } from './watch.js';

export interface ScanRules {
  skip: string[];
  /** Directories tracked as a whole (same matching as skip; a name in both is tracked as a whole). */
  whole?: string[];
  maxFile: number;
  /** Refuse to checkpoint a root with more entries than this. */
  maxEntries?: number;
  /** Refuse to checkpoint roots whose files (those stored) add up to more bytes than this. */
  maxTotal?: number;
  /** Absolute paths never walked: the policy's denied paths (Ollie's own data dir may lie inside a workspace). */
  exclude?: ReadonlySet<string>;
}

export interface ScanResult {
  manifest: Manifest;
  /** Whether any entry differs from the previous manifest (when false, the previous manifest's hash stands). */
  dirty: boolean;
  /** Content bytes newly stored. */
  bytes: number;
  /** Files read and hashed. */
  hashed: number;
  /** From rescan: the entries that differ from the previous manifest, and the paths gone from it. */
  delta?: ManifestDelta;
}

export interface ManifestDelta {
  set: Record<string, Record<string, Entry>>;
  del: Record<string, string[]>;
}

const MAX_ENTRIES = 200_000;

/** `.git` is never checkpointed nor written; nor the names restore uses for its temporary files. */
export const isProtectedName = (name: string): boolean => name === '.git' || name.startsWith('.ollie-rewind-');

/** A matcher for the skip rules: plain names match at any depth; a rule with / or * matches the relative path. */
export function skipMatcher(rules: string[]): (name: string, rel: string) => boolean {
  const m = pathMatcher(rules);
  return (name, rel) => isProtectedName(name) || m(name, rel);
}

/** Names, relative paths and globs (`*` within a component, `**` across): the matching of skip and whole. */
export function pathMatcher(rules: string[]): (name: string, rel: string) => boolean {
  const names = new Set(rules.filter((r) => !r.includes('/') && !r.includes('*')));
  const globs = rules
    .filter((r) => r.includes('/') || r.includes('*'))
    .map((r) => {
      const body = r
        .replace(/\/$/, '')
        .split('**')
        .map((part) =>
          part
            .split('*')
            .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
            .join('[^/]*'),
        )
        .join('.*');
      // A rule without a slash (a glob on a name) matches at any depth.
      return new RegExp(r.includes('/') ? `^${body}$` : `(^|/)${body}$`);
    });
  return (name, rel) => names.has(name) || globs.some((g) => g.test(rel));
}

/** Walks directories into a root's entry map, reusing the hashes of unchanged files from the previous map. */
class Walker {
  bytes = 0;
  hashed = 0;
  dirty = false;
  /** Bytes of the files this walk saw (those small enough to be stored). */
  private total = 0;
  private lastYield = performance.now();
  /** Entries written that are not identical to the previous ones (rescan's delta). */
  readonly set: Record<string, Entry> = {};
  private count = 0;
  private readonly skip: (name: string, rel: string) => boolean;
  private readonly whole: (name: string, rel: string) => boolean;
  /** The inode of the last directory entry() saw. */
  private lastIno = 0;
  /** The root as the kernel names it (the policy's path may go through a link the owner made). */
  private readonly realRoot: string;

  constructor(
    private readonly root: string,
    private readonly rules: ScanRules,
    private readonly store: CheckpointStore,
    /** The previous entries of this root and when they were taken (undefined: nothing to compare with). */
    private readonly old: Record<string, Entry>,
    private readonly oldAt: number | undefined,
    readonly out: Record<string, Entry>,
    private readonly watch: DirWatch | undefined,
    /** From rescan: the directories the watch reported (absolute), to tell which whole directories changed. */
    private readonly changedDirs?: ReadonlySet<string>,
  ) {
    this.skip = skipMatcher(rules.skip);
    this.whole = pathMatcher(rules.whole ?? []);
    try {
      this.realRoot = realpathSync.native(root);
    } catch {
      this.realRoot = root;
    }
    this.count = Object.keys(out).length;
  }

  /**
   * Reads directory `relDir`: its entries, and the subdirectories that are new (all of them when `deep`).
   * Says whether it was there to read.
   */
  async dir(relDir: string, deep: boolean, seen?: string[]): Promise<'ok' | 'gone' | 'unreadable'> {
    const dir = relDir ? join(this.root, relDir) : this.root;
    if (deep) this.watch?.add(dir);
    else this.watch?.renew(dir);
    let fd: number;
    let names: Dirent[];
    try {
      fd = openDir(dir, relDir ? join(this.realRoot, relDir) : this.realRoot);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // ENAMETOOLONG: a tool moved a tree below another until its paths passed PATH_MAX. Failing here would
      // leave every later round of the workspace without a checkpoint; that subtree alone is left as it was.
      if (code === 'EACCES' || code === 'EPERM' || code === 'ENAMETOOLONG') {
        // Kept as it was, not taken for empty: a tool made it unreadable, the files in it may still be there.
        const prefix = relDir ? `${relDir}/` : '';
        if (deep) for (const [k, v] of Object.entries(this.old)) if (k.startsWith(prefix)) this.out[k] = v;
        return 'unreadable';
      }
      // Gone, or no longer a directory where the listing saw one (a link now stands there): the parent's next
      // reading says what it became.
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP' || code === 'EXDEV') return 'gone';
      throw e;
    }
    const subdirs: string[] = [];
    try {
      // Everything below goes through the opened directory: a component swapped for a link from now on is not
      // followed (the kernel resolves /proc/self/fd/N to the directory that was opened).
      const at = `/proc/self/fd/${fd}`;
      try {
        names = readdirSync(at, { withFileTypes: true });
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return 'gone';
        throw e;
      }
      const limit = this.rules.maxEntries ?? MAX_ENTRIES;
      for (const d of names) {
        // The daemon serves everyone while a large tree is read: other work gets a turn every 20 ms.
        if (performance.now() - this.lastYield > 20) {
          await new Promise((r) => setImmediate(r));
          this.lastYield = performance.now();
        }
        const rel = relDir ? `${relDir}/${d.name}` : d.name;
        const whole = !isProtectedName(d.name) && this.whole(d.name, rel);
        if (!whole && this.skip(d.name, rel)) continue;
        const abs = join(dir, d.name);
        if (this.rules.exclude?.has(abs)) continue;
        if (!(rel in this.out) && ++this.count > limit) {
          throw new Error(
            `${this.root} holds more than ${limit} entries: not checkpointed (add its large directories to checkpoint.skip in sandbox.yaml)`,
          );
        }
        let e: Entry | undefined;
        if (whole) {
          const w = await this.wholeDir(`${at}/${d.name}`, rel, deep);
          e = w === 'other' ? this.entry(`${at}/${d.name}`, rel) : w;
        } else e = this.entry(`${at}/${d.name}`, rel);
        if (!e) continue;
        this.out[rel] = e;
        seen?.push(rel);
        const o = this.old[rel];
        if (!o || !identical(o, e)) this.set[rel] = e;
        // A directory that was there is walked again whole when another one stands at its name now (moved in,
        // or made anew): its watch was on the one before.
        if (e.t === 'd' && (deep || o?.t !== 'd' || (this.watch && this.watch.inode(abs) !== this.lastIno)))
          subdirs.push(rel);
      }
    } finally {
      closeSync(fd);
    }
    // Walked after this directory is closed, so a deep tree holds one descriptor at a time.
    for (const rel of subdirs) await this.dir(rel, true);
    return 'ok';
  }

  /**
   * A directory tracked as a whole: one entry. Unless the watch vouches that nothing under it changed (it is the
   * same directory, every directory under it watched, no event from any), everything under it is listed and
   * `lstat`ed through descriptors as the walk does (never through a link); files are hashed only when their stat
   * differs from its previous tree's (or is racily clean), so an unchanged directory reads no contents and
   * stores nothing. 'other': not a directory (any more): recorded as what it is.
   */
  private async wholeDir(abs: string, rel: string, deep: boolean): Promise<WholeEntry | 'other' | undefined> {
    let st;
    try {
      st = lstatSync(abs);
    } catch {
      return undefined;
    }
    if (!st.isDirectory()) return 'other';
    const absDir = join(this.root, rel);
    const old = this.old[rel]?.t === 'w' ? (this.old[rel] as WholeEntry) : undefined;
    const mode = st.mode & 0o7777;
    if (
      !deep &&
      old &&
      this.watch &&
      !this.watch.broken &&
      !this.watch.partial.has(absDir) &&
      old.ino === st.ino &&
      old.mode === mode &&
      ![...(this.changedDirs ?? [])].some((d) => d === absDir || d.startsWith(`${absDir}/`))
    ) {
      return old;
    }
    let prevTree: Tree | undefined;
    try {
      prevTree = old ? this.store.tree(old.tree) : undefined;
    } catch {
      prevTree = undefined; // a lost tree object: every file is read again
    }
    const startedAt = Date.now();
    let entries: Record<string, TreeEntry> = {};
    let kept: string[] = [];
    const wasDirty = this.dirty;
    let watched = !!this.watch && !this.watch.broken;
    const limit = this.rules.maxEntries ?? MAX_ENTRIES;
    /**
     * Lists directory `sub` of it into `entries` and `kept`, and walks its subdirectories: all of them, or with
     * `known`, only those not in the previous tree or standing on another inode than the watch was made on (the
     * others, watched all along with nothing reported, keep their previous entries).
     */
    const walk = async (sub: string, known = false): Promise<'ok' | 'gone' | 'unreadable'> => {
      const relDir = sub ? `${rel}/${sub}` : rel;
      const dirAbs = join(this.root, relDir);
      if (watched && !this.watch!.addInWhole(dirAbs)) watched = false;
      let fd: number;
      try {
        fd = openDir(dirAbs, join(this.realRoot, relDir));
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'EACCES' || code === 'EPERM' || code === 'ENAMETOOLONG') return 'unreadable';
        if (code !== 'ENOENT' && code !== 'ENOTDIR' && code !== 'ELOOP' && code !== 'EXDEV') throw e;
        return 'gone';
      }
      const subdirs: string[] = [];
      try {
        const at = `/proc/self/fd/${fd}`;
        let names: Dirent[];
        try {
          names = readdirSync(at, { withFileTypes: true });
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
          throw e;
        }
        for (const d of names) {
          if (performance.now() - this.lastYield > 20) {
            await new Promise((r) => setImmediate(r));
            this.lastYield = performance.now();
          }
          const inner = sub ? `${sub}/${d.name}` : d.name;
          const full = `${rel}/${inner}`;
          // A rewind's own leftovers are neither held nor kept; .git, skipped names and denied paths are not
          // held, and a rewind of the directory moves them over as they are.
          if (d.name.startsWith('.ollie-rewind-')) continue;
          if (isProtectedName(d.name) || this.skip(d.name, full) || this.rules.exclude?.has(join(dirAbs, d.name))) {
            kept.push(inner);
            continue;
          }
          if (++this.count > limit) {
            throw new Error(
              `${this.root} holds more than ${limit} entries: not checkpointed (add its large directories to checkpoint.skip in sandbox.yaml)`,
            );
          }
          const e = this.entry(`${at}/${d.name}`, full, prevTree?.entries[inner], old?.at);
          if (!e || e.t === 'w') continue;
          entries[inner] = e;
          if (
            e.t === 'd' &&
            (!known || prevTree?.entries[inner]?.t !== 'd' || this.watch?.inode(join(dirAbs, d.name)) !== this.lastIno)
          )
            subdirs.push(inner);
        }
      } finally {
        closeSync(fd);
      }
      for (const s of subdirs) {
        // Walked whole: whatever the previous tree held below it goes first.
        if (known) dropBelow(s);
        const r = await walk(s);
        // Gone or swapped for a link since it was listed: left out, as the walk leaves it out.
        if (r !== 'ok') delete entries[s];
        // One the daemon cannot read (a tool made it 000) is not held but kept: a rewind of the directory moves
        // it over as it is, rather than dropping files it never saw.
        if (r === 'unreadable') kept.push(s);
      }
      return 'ok';
    };
    /** Removes what the entries and kept paths hold below `k`, and its watches. */
    const dropBelow = (k: string): void => {
      const prefix = `${k}/`;
      for (const x of Object.keys(entries)) if (x.startsWith(prefix)) delete entries[x];
      kept = kept.filter((x) => !x.startsWith(prefix));
      this.watch?.removeTree(join(absDir, k));
    };
    // The directories under it the watch reported, shallowest first ('' is itself).
    const reported = [...(this.changedDirs ?? [])]
      .filter((d) => d === absDir || d.startsWith(`${absDir}/`))
      .map((d) => (d === absDir ? '' : d.slice(absDir.length + 1)))
      .sort((a, b) => a.split('/').length - b.split('/').length);
    let there: 'ok' | 'gone' | 'unreadable' = 'ok';
    // Watched all along, the same directory, and told which directories under it changed: only those are read
    // again (a build rewriting 100 files of 5,000 lists their directories, not the 5,000). Otherwise: all of it.
    const incremental =
      !deep &&
      !!old &&
      !!prevTree &&
      watched &&
      !this.watch!.partial.has(absDir) &&
      old.ino === st.ino &&
      this.watch!.inode(absDir) === st.ino &&
      reported.length > 0;
    if (incremental) {
      entries = { ...prevTree!.entries };
      kept = [...(prevTree!.kept ?? [])];
      const children = new Map<string, string[]>();
      for (const k of [...Object.keys(entries), ...kept]) {
        const slash = k.lastIndexOf('/');
        const parent = slash < 0 ? '' : k.slice(0, slash);
        (children.get(parent) ?? children.set(parent, []).get(parent)!).push(k);
      }
      for (const sub of reported) {
        // Gone, no longer a directory, or dropped with its parent: the parent's reading said what it became.
        if (sub !== '' && entries[sub]?.t !== 'd') continue;
        const before = children.get(sub) ?? [];
        const keptBefore = new Set(kept);
        for (const k of before) delete entries[k];
        kept = kept.filter((k) => !before.includes(k));
        const r = await walk(sub, true);
        if (r !== 'ok') {
          // It went (or became unreadable) between the event and now: read all of it, as without the watch.
          there = 'gone';
          break;
        }
        for (const k of before) {
          const was = prevTree!.entries[k];
          const wasDir = was?.t === 'd' || (keptBefore.has(k) && !was);
          // A directory that went, or is something else now, takes what was below it along.
          if (wasDir && entries[k]?.t !== 'd') dropBelow(k);
        }
      }
    }
    if (!incremental || there !== 'ok') {
      entries = {};
      kept = [];
      there = await walk('');
    }
    this.dirty = wasDirty;
    if (this.watch && !this.watch.broken) {
      if (watched) this.watch.partial.delete(absDir);
      else {
        this.watch.removeTree(absDir);
        this.watch.partial.add(absDir);
      }
    }
    // Unreadable itself: kept as it was (its files may still be there), or, never read, left out (a rewind then
    // refuses to replace it).
    if (there === 'unreadable') return old;
    if (there === 'gone') return undefined;
    const keys = Object.keys(entries).sort();
    const fp = entriesDigest(
      keys,
      entries,
      (k, e) => `${k}\0f\0${e.mode}\0${e.size}\0${e.mtime}\0${e.ctime}\0${e.ino}`,
    );
    const sorted: Record<string, TreeEntry> = {};
    let files = 0;
    let size = 0;
    for (const k of keys) {
      const e = entries[k]!;
      sorted[k] = e;
      if (e.t === 'f') {
        files++;
        size += e.size;
      }
    }
    kept.sort();
    // The same metadata and the same contents (a racily clean file read again gave its old hash): the entry
    // stands, and nothing is stored.
    if (
      old &&
      prevTree &&
      old.fp === fp &&
      old.mode === mode &&
      old.ino === st.ino &&
      keys.every((k) => {
        const e = entries[k]!;
        const p = prevTree.entries[k];
        return e.t !== 'f' || (p?.t === 'f' && p.h === e.h);
      }) &&
      (prevTree.kept ?? []).join('\0') === kept.join('\0')
    )
      return old;
    const tree: Tree = kept.length ? { entries: sorted, kept } : { entries: sorted };
    const put = this.store.putTree(tree, old && prevTree ? old.tree : undefined);
    this.bytes += put.bytes;
    const sum = entriesDigest(keys, entries, (k, e) =>
      e.big ? `${k}\0big\0${e.size}\0${e.mtime}` : `${k}\0f\0${e.mode}\0${e.h}`,
    );
    this.dirty = true;
    return { t: 'w', mode, ino: st.ino, fp, tree: put.hash, sum, files, size, at: startedAt };
  }

  private entry(
    abs: string,
    rel: string,
    before: Entry | undefined = this.old[rel],
    oldAt: number | undefined = this.oldAt,
  ): Entry | undefined {
    let st;
    try {
      st = lstatSync(abs);
    } catch {
      return undefined; // gone since the listing
    }
    if (st.isSymbolicLink()) {
      let target: string;
      try {
        target = readlinkSync(abs);
      } catch {
        return undefined;
      }
      if (!before || before.t !== 'l' || before.target !== target) this.dirty = true;
      return { t: 'l', target };
    }
    if (st.isDirectory()) {
      this.lastIno = st.ino;
      const mode = st.mode & 0o7777;
      if (!before || before.t !== 'd' || before.mode !== mode) this.dirty = true;
      return { t: 'd', mode };
    }
    // Sockets, FIFOs and devices are not files a rewind could bring back: left out.
    if (!st.isFile()) return undefined;
    const e: FileEntry = {
      t: 'f',
      mode: st.mode & 0o7777,
      size: st.size,
      mtime: st.mtimeMs,
      ctime: st.ctimeMs,
      ino: st.ino,
    };
    // Counted over what this walk reads (a rescan: the changed directories), so a lower bound that stops a
    // workspace of gigabytes before it is copied.
    if (st.size <= this.rules.maxFile) this.total += st.size;
    if (this.rules.maxTotal !== undefined && this.total > this.rules.maxTotal) {
      throw new Error(
        `${this.root} holds more than ${this.rules.maxTotal} bytes of files: not checkpointed (name its large directories in checkpoint.skip, or raise checkpoint.max_total, in sandbox.yaml)`,
      );
    }
    const p = before?.t === 'f' ? before : undefined;
    const at = oldAt;
    if (
      p &&
      at !== undefined &&
      p.size === e.size &&
      p.mtime === e.mtime &&
      p.ctime === e.ctime &&
      p.ino === e.ino &&
      p.mode === e.mode &&
      p.mtime < at &&
      p.ctime < at
    ) {
      if (p.h) e.h = p.h;
      if (p.big) e.big = true;
      return e;
    }
    this.dirty = true;
    if (e.size > this.rules.maxFile) {
      e.big = true;
      return e;
    }
    const data = readRegular(abs, this.rules.maxFile);
    if (data === undefined) return undefined;
    if (data === 'big') {
      // Grown past max_file since its lstat: listed, not read.
      e.big = true;
      return e;
    }
    e.h = sha256(data);
    e.size = data.length;
    this.bytes += this.store.put(e.h, data);
    this.hashed++;
    return e;
  }
}

/**
 * One walk of `roots`. `prev` is the last manifest of these roots (the stat cache); contents of new or changed
 * files go into `store`. With `watch`, every directory walked is watched from here on.
 */
export async function scan(
  roots: string[],
  rules: ScanRules,
  store: CheckpointStore,
  prev: Manifest | undefined,
  watch?: DirWatch,
): Promise<ScanResult> {
  const at = Date.now();
  const manifest: Manifest = { at, roots: {} };
  let dirty = !prev || Object.keys(prev.roots).join('\0') !== [...roots].join('\0');
  let bytes = 0;
  let hashed = 0;
  for (const root of roots) {
    const old = prev?.roots[root] ?? {};
    const w = new Walker(root, rules, store, old, prev?.at, {}, watch);
    await w.dir('', true);
    if (w.dirty || Object.keys(old).length !== Object.keys(w.out).length) dirty = true;
    bytes += w.bytes;
    hashed += w.hashed;
    manifest.roots[root] = w.out;
  }
  return { manifest, dirty, bytes, hashed };
}

/**
 * `prev` brought up to date by reading again only the directories in `changed` (absolute paths, from a DirWatch
 * that has watched every directory since `prev` was taken): their entries are compared and stored as a full walk
 * would, new subdirectories are walked, removed ones dropped with everything below them.
 */
export async function rescan(
  prev: Manifest,
  rules: ScanRules,
  store: CheckpointStore,
  changed: Set<string>,
  watch: DirWatch,
): Promise<ScanResult> {
  const manifest: Manifest = { at: Date.now(), roots: {} };
  const delta: ManifestDelta = { set: {}, del: {} };
  let dirty = false;
  let bytes = 0;
  let hashed = 0;
  for (const [root, old] of Object.entries(prev.roots)) {
    const rels = [...changed, ...watch.partial]
      .filter((d) => d === root || d.startsWith(`${root}/`))
      .map((d) => (d === root ? '' : d.slice(root.length + 1)));
    // A change under a directory tracked as a whole (or one not all watched) is read by reading its parent
    // again, where the walk takes the whole directory as one entry.
    const mineSet = new Set<string>();
    for (const r of rels) {
      const parts = r ? r.split('/') : [];
      let whole = -1;
      for (let i = 1; i <= parts.length; i++) {
        if (old[parts.slice(0, i).join('/')]?.t === 'w') {
          whole = i;
          break;
        }
      }
      mineSet.add(whole < 0 ? r : parts.slice(0, whole - 1).join('/'));
    }
    const mine = [...mineSet].sort((a, b) => a.split('/').length - b.split('/').length);
    if (!mine.length) {
      manifest.roots[root] = old;
      continue;
    }
    // The previous children of the changed directories, found in one pass.
    const wanted = new Set(mine);
    const children = new Map<string, string[]>();
    for (const k of Object.keys(old)) {
      const slash = k.lastIndexOf('/');
      const parent = slash < 0 ? '' : k.slice(0, slash);
      if (wanted.has(parent)) (children.get(parent) ?? children.set(parent, []).get(parent)!).push(k);
    }
    const out: Record<string, Entry> = { ...old };
    const w = new Walker(root, rules, store, old, prev.at, out, watch, changed);
    const gone: string[] = [];
    for (const relDir of mine) {
      // Gone, or no longer a directory, or skipped: its parent's change says what it became.
      if (relDir !== '' && out[relDir]?.t !== 'd') continue;
      // A directory new since prev was walked whole when its parent was read.
      if (relDir !== '' && old[relDir]?.t !== 'd') continue;
      const before = children.get(relDir) ?? [];
      for (const k of before) delete out[k];
      const seen: string[] = [];
      const exists = await w.dir(relDir, false, seen);
      const now = new Set(seen);
      for (const k of before) {
        const e = old[k]!;
        if (now.has(k)) {
          // A directory that became something else loses its subtree.
          if ((e.t === 'd' || e.t === 'w') && out[k]!.t !== e.t) gone.push(...dropTree(out, k, root, watch));
          continue;
        }
        // A directory the daemon cannot read (a tool made it 000) is kept as it was, not taken for empty.
        if (exists === 'unreadable') out[k] = e;
        else {
          w.dirty = true;
          gone.push(k);
          if (e.t === 'd' || e.t === 'w') gone.push(...dropTree(out, k, root, watch));
        }
      }
    }
    if (Object.keys(w.set).length) w.dirty = true;
    if (w.dirty) dirty = true;
    const set: Record<string, Entry> = {};
    for (const [k, e] of Object.entries(w.set)) if (out[k] === e) set[k] = e;
    const del = [...new Set(gone)].filter((k) => !(k in out) && k in old);
    if (Object.keys(set).length) delta.set[root] = set;
    if (del.length) delta.del[root] = del;
    bytes += w.bytes;
    hashed += w.hashed;
    manifest.roots[root] = out;
  }
  return { manifest, dirty, bytes, hashed, delta };
}

/** Removes everything below `rel`; the paths removed. */
/**
 * The SHA-256 of a directory's entries (`keys`, sorted): a line each, a link by its target, a directory by its mode,
 * a file as `file` says (its metadata for a fingerprint, its contents for a sum).
 */
function entriesDigest(
  keys: string[],
  entries: Record<string, TreeEntry>,
  file: (k: string, e: FileEntry) => string,
): string {
  return sha256(
    keys
      .map((k) => {
        const e = entries[k]!;
        if (e.t === 'l') return `${k}\0l\0${e.target}`;
        if (e.t === 'd') return `${k}\0d\0${e.mode}`;
        return file(k, e);
      })
      .join('\n'),
  );
}

function dropTree(out: Record<string, Entry>, rel: string, root: string, watch: DirWatch): string[] {
  const removed: string[] = [];
  for (const k of Object.keys(out)) {
    if (!k.startsWith(`${rel}/`)) continue;
    delete out[k];
    removed.push(k);
  }
  watch.removeTree(join(root, rel));
  watch.partial.delete(join(root, rel));
  return removed;
}

/**
 * Opens directory `dir` without following a link at any component: the directory the kernel opened must be at
 * `expect` (the root's real path and the walk's own names), where an ancestor swapped for a link would show its
 * target's path instead.
 */
function openDir(dir: string, expect: string): number {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  let real: string;
  try {
    real = readlinkSync(`/proc/self/fd/${fd}`);
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  if (real !== expect) {
    closeSync(fd);
    throw Object.assign(new Error(`${dir} is reached through a link (it is ${real})`), { code: 'EXDEV' });
  }
  return fd;
}

/**
 * A regular file's bytes, opened without following a link or blocking on a FIFO swapped in since the listing;
 * 'big' when it holds more than `max` bytes (it may have grown since its lstat: never read whole into memory).
 */
function readRegular(abs: string, max: number): Buffer | 'big' | undefined {
  let fd: number;
  try {
    fd = openSync(abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return undefined;
    if (st.size > max) return 'big';
    // Read to the end, but never past max: the file may grow while it is read.
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(Math.max(st.size - total, 0) + 1, max + 1 - total, 1 << 20) || 1);
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      total += n;
      if (total > max) return 'big';
      chunks.push(n === buf.length ? buf : buf.subarray(0, n));
    }
    return Buffer.concat(chunks, total);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** The paths whose entries differ between two manifests, per root, as [root, rel, before, after]. */
export function changes(
  a: Manifest | undefined,
  b: Manifest,
): Array<[string, string, Entry | undefined, Entry | undefined]> {
  const out: Array<[string, string, Entry | undefined, Entry | undefined]> = [];
  const roots = new Set([...Object.keys(a?.roots ?? {}), ...Object.keys(b.roots)]);
  for (const root of roots) {
    const x = a?.roots[root] ?? {};
    const y = b.roots[root] ?? {};
    for (const rel of new Set([...Object.keys(x), ...Object.keys(y)])) {
      if (!sameEntry(x[rel], y[rel])) out.push([root, rel, x[rel], y[rel]]);
    }
  }
  return out.sort((p, q) => (p[0] === q[0] ? (p[1] < q[1] ? -1 : 1) : p[0] < q[0] ? -1 : 1));
}

/** Same content and kind (stat fields aside): what a rewind compares. */
export function sameEntry(a: Entry | undefined, b: Entry | undefined): boolean {
  if (!a || !b) return a === b;
  if (a.t !== b.t) return false;
  if (a.t === 'l') return a.target === (b as typeof a).target;
  if (a.t === 'd') return a.mode === (b as typeof a).mode;
  if (a.t === 'w') return a.sum === (b as WholeEntry).sum && a.mode === (b as WholeEntry).mode;
  const f = b as FileEntry;
  if (a.big || f.big) return !!a.big && !!f.big && a.size === f.size && a.mtime === f.mtime;
  return a.h === f.h && a.mode === f.mode;
}
