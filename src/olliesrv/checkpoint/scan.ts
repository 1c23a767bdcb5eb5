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
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { CheckpointStore, Entry, FileEntry, Manifest } from './store.js';
import { sha256 } from './store.js';

export interface ScanRules {
  skip: string[];
  maxFile: number;
  /** Refuse to checkpoint a root with more entries than this. */
  maxEntries?: number;
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
}

const MAX_ENTRIES = 200_000;

/** `.git` is never checkpointed nor written; nor the names restore uses for its temporary files. */
export const isProtectedName = (name: string): boolean => name === '.git' || name.startsWith('.ollie-rewind-');

/** A matcher for the skip rules: plain names match at any depth; a rule with / or * matches the relative path. */
export function skipMatcher(rules: string[]): (name: string, rel: string) => boolean {
  const names = new Set(rules.filter((r) => !r.includes('/') && !r.includes('*')));
  const globs = rules
    .filter((r) => r.includes('/') || r.includes('*'))
    .map((r) => {
      const body = r.replace(/\/$/, '').split('**').map((part) => part.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')).join('.*');
      // A rule without a slash (a glob on a name) matches at any depth.
      return new RegExp(r.includes('/') ? `^${body}$` : `(^|/)${body}$`);
    });
  return (name, rel) => isProtectedName(name) || names.has(name) || globs.some((g) => g.test(rel));
}

/**
 * One walk of `roots`. `prev` is the last manifest of these roots (the stat cache); contents of new or changed
 * files go into `store`.
 */
export function scan(roots: string[], rules: ScanRules, store: CheckpointStore, prev: Manifest | undefined): ScanResult {
  const at = Date.now();
  const skip = skipMatcher(rules.skip);
  const limit = rules.maxEntries ?? MAX_ENTRIES;
  const manifest: Manifest = { at, roots: {} };
  let dirty = !prev || Object.keys(prev.roots).join('\0') !== [...roots].join('\0');
  let bytes = 0;
  let hashed = 0;
  for (const root of roots) {
    const old = prev?.roots[root] ?? {};
    const out: Record<string, Entry> = {};
    let count = 0;
    const walk = (dir: string, relDir: string): void => {
      let names: import('node:fs').Dirent[];
      try {
        names = readdirSync(dir, { withFileTypes: true });
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        // A directory the walk cannot read (a tool made it 000) is kept as it was, not taken for empty.
        if (code === 'EACCES' || code === 'ENOENT' || code === 'ENOTDIR') return;
        throw e;
      }
      for (const d of names) {
        const rel = relDir ? `${relDir}/${d.name}` : d.name;
        if (skip(d.name, rel)) continue;
        const abs = join(dir, d.name);
        if (rules.exclude?.has(abs)) continue;
        if (++count > limit) throw new Error(`${root} holds more than ${limit} entries: not checkpointed (add its large directories to checkpoint.skip in sandbox.yaml)`);
        let st;
        try {
          st = lstatSync(abs);
        } catch {
          continue; // gone since the listing
        }
        const before = old[rel];
        if (st.isSymbolicLink()) {
          let target: string;
          try {
            target = readlinkSync(abs);
          } catch {
            continue;
          }
          if (!before || before.t !== 'l' || before.target !== target) dirty = true;
          out[rel] = { t: 'l', target };
        } else if (st.isDirectory()) {
          const mode = st.mode & 0o7777;
          if (!before || before.t !== 'd' || before.mode !== mode) dirty = true;
          out[rel] = { t: 'd', mode };
          walk(abs, rel);
        } else if (st.isFile()) {
          const e: FileEntry = { t: 'f', mode: st.mode & 0o7777, size: st.size, mtime: st.mtimeMs, ctime: st.ctimeMs, ino: st.ino };
          const p = prev && before?.t === 'f' ? before : undefined;
          if (p && p.size === e.size && p.mtime === e.mtime && p.ctime === e.ctime && p.ino === e.ino && p.mode === e.mode && p.mtime < prev!.at && p.ctime < prev!.at) {
            if (p.h) e.h = p.h;
            if (p.big) e.big = true;
          } else {
            dirty = true;
            if (e.size > rules.maxFile) e.big = true;
            else {
              const data = readRegular(abs);
              if (data === undefined) continue;
              e.h = sha256(data);
              e.size = data.length;
              bytes += store.put(e.h, data);
              hashed++;
            }
          }
          out[rel] = e;
        }
        // Sockets, FIFOs and devices are not files a rewind could bring back: left out.
      }
    };
    walk(root, '');
    if (!dirty && Object.keys(old).length !== Object.keys(out).length) dirty = true;
    manifest.roots[root] = out;
  }
  return { manifest, dirty, bytes, hashed };
}

/** A regular file's bytes, opened without following a link or blocking on a FIFO swapped in since the listing. */
function readRegular(abs: string): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    return readFileSync(fd);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** The paths whose entries differ between two manifests, per root, as [root, rel, before, after]. */
export function changes(a: Manifest | undefined, b: Manifest): Array<[string, string, Entry | undefined, Entry | undefined]> {
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
  const f = b as FileEntry;
  if (a.big || f.big) return !!a.big && !!f.big && a.size === f.size && a.mtime === f.mtime;
  return a.h === f.h && a.mode === f.mode;
}
