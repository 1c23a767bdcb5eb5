/**
 * The checkpoint store in Ollie's data dir (denied to every tool): file contents and manifests by SHA-256, each
 * written once, and one index per agent. Files 0600, directories 0700.
 *
 *   DATA/checkpoints/objects/ab/cdef…        contents and manifests (JSON), by hash
 *   DATA/checkpoints/agents/SESSION/AGENT.json  the agent's checkpoints, oldest first
 */
import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { ParsedObjects } from './parsed-objects.js';

/** A file as a checkpoint saw it. `h` is its content's hash; a file over max_file has none (`big`). */
export type FileEntry = {
  t: 'f';
  mode: number;
  size: number;
  mtime: number;
  ctime: number;
  ino: number;
  h?: string;
  big?: true;
};
/** An entry of a directory tracked as a whole (its tree) is one of these: never a whole directory itself. */
export type TreeEntry = FileEntry | { t: 'l'; target: string } | { t: 'd'; mode: number };
/**
 * A directory tracked as a whole (checkpoint.whole): one entry of the manifest. `fp` fingerprints the metadata of
 * everything under it (path, type, size, mtime, ctime, inode, mode, link target: no contents read); `tree` is the
 * stored tree object (its entries, with content hashes of the files, pointing at blobs of the store); `sum` hashes
 * its contents alone (what a rewind and a diff compare: a touch changes `fp` and `tree`, not `sum`). `ino` is the
 * directory's own inode (another directory renamed into its place is read again); `at` is when its tree was read
 * (the racily-clean limit of the next reading).
 */
export type WholeEntry = {
  t: 'w';
  mode: number;
  ino: number;
  fp: string;
  tree: string;
  sum: string;
  files: number;
  size: number;
  at: number;
};
export type Entry = TreeEntry | WholeEntry;

/**
 * A whole directory's tree object: its entries by path relative to it, and the paths under it a checkpoint does
 * not hold (`.git`, skipped names, denied paths) that a rewind moves over into the restored directory as they are.
 */
export interface Tree {
  entries: Record<string, TreeEntry>;
  kept?: string[];
}

/** Every root's entries by path relative to it ('/'-separated); `at`: when the walk started (for racy stat entries). */
export interface Manifest {
  at: number;
  roots: Record<string, Record<string, Entry>>;
}

export interface Checkpoint {
  id: number;
  turn: number;
  time: number;
  kind: 'round' | 'rewind';
  /** The state before the round (or before the rewind), a manifest hash. */
  pre: string;
  /** The state after it, once it ended. */
  post?: string;
  /** Paths that differ between pre and post. */
  changed: number;
  /** Bytes this checkpoint added to the store. */
  bytes: number;
  /** Where the conversation stood: its epoch and the number of messages before the round's model reply. */
  epoch: number;
  at: number;
  /** The prompt the turn answers (epoch:index), to tell turns apart. */
  prompt: string;
  /** For a rewind: the checkpoint it went back to, and what it did. */
  target?: number;
  note?: string;
  /** Paths the owner marked reviewed in this checkpoint's diff. */
  reviewed?: string[];
}

/** A manifest as stored: whole, or the entries that differ from its base manifest. */
type StoredManifest =
  Manifest | { base: string; at: number; set: Record<string, Record<string, Entry>>; del: Record<string, string[]> };

/** A tree as stored: whole, or the entries that differ from its base tree. */
type StoredTree = Tree | { base: string; set: Record<string, TreeEntry>; del: string[]; kept?: string[] };

/** Deltas on deltas: at most this many before a manifest is stored whole again. */
const MAX_CHAIN = 32;

const sameKeys = (a: object, b: object): boolean =>
  Object.keys(a).sort().join('\0') === Object.keys(b).sort().join('\0');

/** Every field equal (stat fields included: they are the next walk's cache). */
export function identical(a: Entry, b: Entry): boolean {
  if (a.t !== b.t) return false;
  if (a.t === 'w') {
    const w = b as WholeEntry;
    return a.mode === w.mode && a.ino === w.ino && a.fp === w.fp && a.tree === w.tree && a.at === w.at;
  }
  if (a.t === 'l') return a.target === (b as typeof a).target;
  if (a.t === 'd') return a.mode === (b as typeof a).mode;
  const f = b as FileEntry;
  return (
    a.mode === f.mode &&
    a.size === f.size &&
    a.mtime === f.mtime &&
    a.ctime === f.ctime &&
    a.ino === f.ino &&
    a.h === f.h &&
    a.big === f.big
  );
}

function delta(
  base: Manifest,
  m: Manifest,
): { set: Record<string, Record<string, Entry>>; del: Record<string, string[]>; size: number } {
  const set: Record<string, Record<string, Entry>> = {};
  const del: Record<string, string[]> = {};
  let size = 0;
  for (const [root, entries] of Object.entries(m.roots)) {
    const old = base.roots[root] ?? {};
    for (const [rel, e] of Object.entries(entries)) {
      const o = old[rel];
      if (o && identical(o, e)) continue;
      (set[root] ??= {})[rel] = e;
      size++;
    }
    for (const rel of Object.keys(old)) {
      if (rel in entries) continue;
      (del[root] ??= []).push(rel);
      size++;
    }
  }
  return { set, del, size };
}

export const sha256 = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex');

export class CheckpointStore {
  readonly root: string;
  readonly objects: string;

  constructor(dataDir: string) {
    this.root = join(dataDir, 'checkpoints');
    this.objects = join(this.root, 'objects');
  }

  private mkdirs(dir: string): void {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  objectPath(hash: string): string {
    if (!/^[0-9a-f]{64}$/.test(hash)) throw new Error(`not an object hash: ${JSON.stringify(hash)}`);
    return join(this.objects, hash.slice(0, 2), hash.slice(2));
  }

  has(hash: string): boolean {
    return existsSync(this.objectPath(hash));
  }

  /** Stores `data` under `hash` unless it is there; the bytes written (0 when it was). */
  put(hash: string, data: Uint8Array): number {
    const p = this.objectPath(hash);
    if (existsSync(p)) return 0;
    writeWhole(p, data, () => this.mkdirs(dirname(p)));
    return data.length;
  }

  get(hash: string): Buffer {
    return readFileSync(this.objectPath(hash));
  }

  /**
   * Stores a manifest; its hash and the bytes written. Given the manifest it follows (`base`), it is stored as
   * the entries that differ from it, unless that chain is long or the difference large: a round that changes
   * ten files of ten thousand writes ten entries, not ten thousand.
   */
  putManifest(
    m: Manifest,
    base?: { hash: string; manifest: Manifest },
    known?: { set: Record<string, Record<string, Entry>>; del: Record<string, string[]> },
  ): { hash: string; bytes: number } {
    let stored: StoredManifest = m;
    const depth = base ? (this.manifests.depth(base.hash) ?? MAX_CHAIN) + 1 : 0;
    if (base && depth < MAX_CHAIN && sameKeys(base.manifest.roots, m.roots)) {
      // The walk that made `m` from `base` may know the difference already (a rescan of a few directories).
      const d = known
        ? {
            ...known,
            size:
              [...Object.values(known.set)].reduce((n, r) => n + Object.keys(r).length, 0) +
              [...Object.values(known.del)].reduce((n, r) => n + r.length, 0),
          }
        : delta(base.manifest, m);
      if (d.size * 4 < Object.values(base.manifest.roots).reduce((n, r) => n + Object.keys(r).length, 0))
        stored = { base: base.hash, at: m.at, set: d.set, del: d.del };
    }
    const text = JSON.stringify(stored);
    const hash = sha256(text);
    this.manifests.remember(hash, m, 'base' in stored ? depth : 0);
    return { hash, bytes: this.put(hash, Buffer.from(text)) };
  }

  /** A manifest whole (a delta applied to its base, and so on down the chain). */
  manifest(hash: string): Manifest {
    const hit = this.manifests.get(hash);
    if (hit) return hit;
    const stored = JSON.parse(this.get(hash).toString('utf8')) as StoredManifest;
    if (!('base' in stored)) {
      this.manifests.remember(hash, stored, 0);
      return stored;
    }
    const base = this.manifest(stored.base);
    const roots: Manifest['roots'] = {};
    for (const [root, entries] of Object.entries(base.roots)) {
      const out = { ...entries, ...stored.set[root] };
      for (const rel of stored.del[root] ?? []) delete out[rel];
      roots[root] = out;
    }
    const m = { at: stored.at, roots };
    this.manifests.remember(hash, m, (this.manifests.depth(stored.base) ?? 0) + 1);
    return m;
  }

  /**
   * Stores a whole directory's tree object; its hash and the bytes written (0 when it was there). Given the tree
   * it follows (`base`, a stored tree's hash), it is stored as the entries that differ from it, as manifests are:
   * a build that rewrites a hundred files of a node_modules of thousands writes a hundred entries, not the tree.
   */
  putTree(tree: Tree, base?: string): { hash: string; bytes: number } {
    let stored: StoredTree = tree;
    let depth = 0;
    if (base !== undefined) {
      try {
        const b = this.tree(base);
        const d = (this.trees.depth(base) ?? MAX_CHAIN) + 1;
        if (d < MAX_CHAIN) {
          const set: Record<string, TreeEntry> = {};
          const del: string[] = [];
          for (const [k, e] of Object.entries(tree.entries)) {
            const o = b.entries[k];
            if (!o || !identical(o, e)) set[k] = e;
          }
          for (const k of Object.keys(b.entries)) if (!(k in tree.entries)) del.push(k);
          if ((Object.keys(set).length + del.length) * 4 < Object.keys(b.entries).length) {
            stored = { base, set, del, ...(tree.kept && { kept: tree.kept }) };
            depth = d;
          }
        }
      } catch {
        // the base is gone: stored whole
      }
    }
    const text = JSON.stringify(stored);
    const hash = sha256(text);
    this.trees.remember(hash, tree, depth);
    return { hash, bytes: this.put(hash, Buffer.from(text)) };
  }

  /** A whole directory's tree object, whole (a delta applied to its base, and so on down the chain). */
  tree(hash: string): Tree {
    const hit = this.trees.get(hash);
    if (hit) return hit;
    const stored = JSON.parse(this.get(hash).toString('utf8')) as StoredTree;
    if (typeof stored !== 'object' || stored === null) throw new Error(`checkpoint object ${hash} is not a tree`);
    if ('base' in stored) {
      if (typeof stored.set !== 'object' || !Array.isArray(stored.del))
        throw new Error(`checkpoint object ${hash} is not a tree`);
      const base = this.tree(stored.base);
      const entries = { ...base.entries, ...stored.set };
      for (const k of stored.del) delete entries[k];
      const t: Tree = stored.kept ? { entries, kept: stored.kept } : { entries };
      this.trees.remember(hash, t, (this.trees.depth(stored.base) ?? 0) + 1);
      return t;
    }
    if (typeof stored.entries !== 'object' || stored.entries === null)
      throw new Error(`checkpoint object ${hash} is not a tree`);
    this.trees.remember(hash, stored, 0);
    return stored;
  }

  /**
   * The stored tree objects `hash` needs: itself and its bases, down to the first one `known` holds (gc walks many
   * trees sharing bases: each stored object is read once).
   */
  treeChain(hash: string, known?: ReadonlySet<string>): string[] {
    return this.baseChain(hash, known);
  }

  /**
   * `hash` and the objects it is stored as a delta of, base after base, down to a whole one, one that does not read
   * (a broken chain ends there), or the first one `known` holds.
   */
  private baseChain(hash: string, known?: ReadonlySet<string>): string[] {
    const out: string[] = [];
    for (let h: string | undefined = hash; h && out.length <= MAX_CHAIN + 1 && !known?.has(h);) {
      out.push(h);
      let stored: StoredTree | StoredManifest;
      try {
        stored = JSON.parse(this.get(h).toString('utf8')) as StoredTree | StoredManifest;
      } catch {
        break;
      }
      h = 'base' in stored ? stored.base : undefined;
    }
    return out;
  }

  private readonly trees = new ParsedObjects<Tree>(8);

  /** The stored manifests `hash` needs: itself and its bases. */
  chain(hash: string): string[] {
    return this.baseChain(hash);
  }

  private readonly manifests = new ParsedObjects<Manifest>(16);

  indexPath(sessionId: string, agentId: string): string {
    const ok = (id: string): boolean => /^[\w.-]+$/.test(id) && id !== '.' && id !== '..';
    if (!ok(sessionId) || !ok(agentId)) throw new Error(`bad session or agent id: ${sessionId}/${agentId}`);
    return join(this.root, 'agents', sessionId, `${agentId}.json`);
  }

  readIndex(sessionId: string, agentId: string): Checkpoint[] {
    try {
      return JSON.parse(readFileSync(this.indexPath(sessionId, agentId), 'utf8')) as Checkpoint[];
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new Error(`checkpoint index of agent ${agentId}: ${(e as Error).message}`);
    }
  }

  writeIndex(sessionId: string, agentId: string, list: Checkpoint[]): void {
    const p = this.indexPath(sessionId, agentId);
    writeWhole(p, Buffer.from(JSON.stringify(list)), () => this.mkdirs(dirname(p)));
  }

  dropSession(sessionId: string): void {
    if (!/^[\w.-]+$/.test(sessionId) || sessionId === '.' || sessionId === '..') return;
    rmSync(join(this.root, 'agents', sessionId), { recursive: true, force: true });
  }

  /** Every index on disk, as (session, agent, checkpoints). */
  *indexes(): Generator<{ session: string; agent: string; list: Checkpoint[] }> {
    const dir = join(this.root, 'agents');
    let sessions: string[] = [];
    try {
      sessions = readdirSync(dir);
    } catch {
      return;
    }
    for (const s of sessions) {
      for (const f of readdirSync(join(dir, s))) {
        if (!f.endsWith('.json')) continue;
        const agent = f.slice(0, -5);
        yield { session: s, agent, list: this.readIndex(s, agent) };
      }
    }
  }

  /** Every stored object: hash, size, mtime. */
  *allObjects(): Generator<{ hash: string; size: number; mtime: number }> {
    let fans: string[] = [];
    try {
      fans = readdirSync(this.objects);
    } catch {
      return;
    }
    for (const fan of fans) {
      for (const rest of readdirSync(join(this.objects, fan))) {
        if (rest.includes('.tmp')) continue;
        const st = statSync(join(this.objects, fan, rest));
        yield { hash: fan + rest, size: st.size, mtime: st.mtimeMs };
      }
    }
  }

  removeObject(hash: string): void {
    try {
      unlinkSync(this.objectPath(hash));
    } catch {
      // gone already
    }
  }
}

let tmpSeq = 0;

/** Writes a file whole (0600): a temporary name, then a rename, so a reader never sees it half written. */
function writeWhole(p: string, data: Uint8Array, mkdirs: () => void): void {
  const tmp = `${p}.tmp${process.pid}.${tmpSeq++}`;
  let fd: number;
  try {
    fd = openSync(tmp, 'wx', 0o600);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    mkdirs();
    fd = openSync(tmp, 'wx', 0o600);
  }
  try {
    let off = 0;
    while (off < data.length) off += writeSync(fd, data, off, data.length - off);
    if (data.length > 1 << 20) fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, p);
}
