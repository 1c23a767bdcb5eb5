/**
 * Brings files back to a checkpoint without ever following a link a tool planted. Node has no openat(), so
 * directories are opened one component at a time with O_NOFOLLOW|O_DIRECTORY from the root down, and every
 * change is made through /proc/self/fd/N/NAME: the kernel resolves the descriptor to the directory it was
 * opened on, and NAME is a single component that unlink, rename, mkdir and symlink never follow. A directory
 * swapped for a link to / after the walk is refused at its open (ELOOP), not written through.
 *
 * Files are written under a temporary name in their directory and renamed into place, so a hard link in the
 * workspace to a file elsewhere is replaced, never written through. `.git` is never touched.
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmdirSync,
  symlinkSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Entry, Tree, TreeEntry, WholeEntry } from './store.js';
import { isProtectedName } from './scan.js';

const MAX_OPEN_DIRS = 64;
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const at = (fd: number, name: string): string => `/proc/self/fd/${fd}/${name}`;

/** One change to make: `entry` undefined removes the path. Bytes come from `content(hash)`. */
export interface Change {
  rel: string;
  entry: Entry | undefined;
}

export class RestoreError extends Error {
  override name = 'RestoreError';
}

/** Directory descriptors of one root, opened without following links, cached for one restore. */
class DirFds {
  private readonly fds = new Map<string, number>();

  /** `rootFd`: the root already opened (a directory being built; closed with the rest). */
  constructor(
    private readonly root: string,
    rootFd?: number,
  ) {
    if (rootFd !== undefined) this.fds.set('', rootFd);
  }

  /** The descriptor of directory `rel` ('' is the root); `create` makes missing ones (0700 until their mode is set). */
  open(rel: string, create: boolean): number | undefined {
    const have = this.fds.get(rel);
    if (have !== undefined) return have;
    let fd: number;
    if (rel === '') {
      fd = openSync(this.root, DIR_FLAGS);
    } else {
      const slash = rel.lastIndexOf('/');
      const parentRel = slash < 0 ? '' : rel.slice(0, slash);
      const name = rel.slice(slash + 1);
      if (isProtectedName(name) || name === '..' || name === '.' || name === '')
        throw new RestoreError(`refused: ${rel} is not a path a rewind writes`);
      const parent = this.open(parentRel, create);
      if (parent === undefined) return undefined;
      try {
        fd = openSync(at(parent, name), DIR_FLAGS);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ELOOP' || code === 'ENOTDIR')
          throw new RestoreError(`refused: ${rel} is not a directory (a link or a file stands there)`);
        if (code !== 'ENOENT' || !create) {
          if (code === 'ENOENT') return undefined;
          throw e;
        }
        mkdirSync(at(parent, name), { mode: 0o700 });
        fd = openSync(at(parent, name), DIR_FLAGS);
      }
    }
    this.fds.set(rel, fd);
    // A whole directory of thousands of directories must not hold a descriptor each (the process's limit may be
    // 1,024): the oldest are closed, and opened again one component at a time, without following links, when
    // needed. The root stays (a directory being built has no path to open it by).
    if (this.fds.size > MAX_OPEN_DIRS) {
      for (const [k, v] of this.fds) {
        if (k === '' || k === rel) continue;
        closeSync(v);
        this.fds.delete(k);
        if (this.fds.size <= MAX_OPEN_DIRS / 2) break;
      }
    }
    return fd;
  }

  forget(rel: string): void {
    const fd = this.fds.get(rel);
    if (fd !== undefined) closeSync(fd);
    this.fds.delete(rel);
  }

  close(): void {
    for (const fd of this.fds.values()) closeSync(fd);
    this.fds.clear();
  }
}

const split = (rel: string): [string, string] => {
  const slash = rel.lastIndexOf('/');
  return [slash < 0 ? '' : rel.slice(0, slash), rel.slice(slash + 1)];
};

/** What one restore did, for the rewind's report. */
export interface Applied {
  written: string[];
  removed: string[];
  failed: string[];
}

/**
 * Applies `changes` under `root`: removals first (deepest first, so directories are empty when they go), then
 * directories (shallowest first), then files and links.
 */
export function applyChanges(
  root: string,
  changes: Change[],
  current: Record<string, Entry>,
  content: (hash: string) => Buffer,
  tree: (hash: string) => Tree = () => {
    throw new RestoreError('no tree objects given');
  },
): Applied {
  const dirs = new DirFds(root);
  const done: Applied = { written: [], removed: [], failed: [] };
  const fail = (rel: string, e: unknown): void => void done.failed.push(`${rel}: ${(e as Error).message}`);
  for (const c of changes) {
    if (c.rel.split('/').some((p) => isProtectedName(p) || p === '..' || p === '.' || p === ''))
      throw new RestoreError(`refused: ${c.rel} is not a path a rewind writes`);
  }
  try {
    // Anything that must go: removed paths, and paths whose kind changes (a file where a directory will be).
    const removals = changes
      .filter((c) => current[c.rel] && (!c.entry || c.entry.t !== current[c.rel]!.t))
      .sort((a, b) => b.rel.split('/').length - a.rel.split('/').length || (a.rel < b.rel ? 1 : -1));
    for (const c of removals) {
      const [parentRel, name] = split(c.rel);
      try {
        const parent = dirs.open(parentRel, false);
        if (parent === undefined) continue;
        const t = current[c.rel]!.t;
        if (t === 'd') {
          dirs.forget(c.rel);
          rmdirSync(at(parent, name));
        } else if (t === 'w') {
          dirs.forget(c.rel);
          removeTree(parent, name);
        } else unlinkSync(at(parent, name));
        done.removed.push(c.rel);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
        fail(c.rel, e);
      }
    }
    const adds = changes
      .filter((c) => c.entry)
      .sort(
        (a, b) =>
          (a.entry!.t === 'd' ? 0 : 1) - (b.entry!.t === 'd' ? 0 : 1) ||
          a.rel.split('/').length - b.rel.split('/').length,
      );
    for (const c of adds) {
      const e = c.entry!;
      const [parentRel, name] = split(c.rel);
      try {
        if (e.t === 'd') {
          const fd = dirs.open(c.rel, true)!;
          fchmodSync(fd, e.mode & 0o777);
          done.written.push(c.rel);
          continue;
        }
        const parent = dirs.open(parentRel, true)!;
        if (e.t === 'w') {
          restoreWhole(parent, name, c.rel, e, current[c.rel], tree, content);
        } else if (e.t === 'l' || e.h) writeLeaf(parent, name, e, content);
        else continue; // a file over max_file: never stored, left as it is
        done.written.push(c.rel);
      } catch (err) {
        fail(c.rel, err);
      }
    }
  } finally {
    dirs.close();
  }
  return done;
}

const tmpName = (): string => `.ollie-rewind-${randomBytes(6).toString('hex')}`;

/** Writes a file or a link as `name` in the directory `parent`: a temporary name first, then a rename. */
function writeLeaf(
  parent: number,
  name: string,
  e: TreeEntry & { t: 'f' | 'l' },
  content: (hash: string) => Buffer,
): void {
  const tmp = tmpName();
  if (e.t === 'l') {
    symlinkSync(e.target, at(parent, tmp));
    renameSync(at(parent, tmp), at(parent, name));
    return;
  }
  const data = content(e.h!);
  const fd = openSync(
    at(parent, tmp),
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    0o600,
  );
  try {
    let off = 0;
    while (off < data.length) off += writeSync(fd, data, off, data.length - off);
    // No set-id bits come back from a checkpoint.
    fchmodSync(fd, e.mode & 0o777);
    if (!fstatSync(fd).isFile()) throw new RestoreError('not a regular file');
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(at(parent, tmp), at(parent, name));
  } catch (err) {
    unlinkSync(at(parent, tmp));
    throw err;
  }
}

/**
 * Removes `name` in the directory `parent` and everything below it without following a link: each directory is
 * opened with O_NOFOLLOW|O_DIRECTORY and emptied through its descriptor, so a directory swapped for a link while
 * it is removed loses the link, never what the link points at.
 */
export function removeTree(parent: number, name: string): void {
  try {
    unlinkSync(at(parent, name));
    return;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    if (code !== 'EISDIR' && code !== 'EPERM') throw e;
  }
  let fd: number;
  try {
    fd = openSync(at(parent, name), DIR_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    // Swapped for a link or a file since the unlink: that goes, as itself.
    if (code === 'ELOOP' || code === 'ENOTDIR') return removeTree(parent, name);
    throw e;
  }
  try {
    for (const n of readdirSync(`/proc/self/fd/${fd}`)) removeTree(fd, n);
  } finally {
    closeSync(fd);
  }
  rmdirSync(at(parent, name));
}

/**
 * Brings back a directory tracked as a whole (`name` in `parent`): its tree is built in a fresh directory beside
 * it (a temporary name in the same parent, so on the same filesystem), through descriptors only; what the
 * checkpoint does not hold but the directory now has (`.git`, skipped names, denied paths, files over max_file)
 * is moved over as it is; then the current one is renamed aside, the new one renamed in, and the old one removed
 * (never following a link). The directory is never half restored in place: until the rename it is as it was.
 */
function restoreWhole(
  parent: number,
  name: string,
  rel: string,
  e: WholeEntry,
  cur: Entry | undefined,
  tree: (hash: string) => Tree,
  content: (hash: string) => Buffer,
): void {
  const want = tree(e.tree);
  // What stays as it is: the kept paths of the directory now, and its files over max_file the tree lists.
  const carry = new Set<string>();
  if (cur?.t === 'w') for (const k of tree(cur.tree).kept ?? []) carry.add(k);
  for (const [k, x] of Object.entries(want.entries)) if (x.t === 'f' && x.big) carry.add(k);
  for (const k of carry) {
    const slash = k.lastIndexOf('/');
    const dir = slash < 0 ? '' : k.slice(0, slash);
    if (dir && want.entries[dir]?.t !== 'd')
      throw new RestoreError(
        `${rel}/${k} is not held by the checkpoint and the restored directory has no ${rel}/${dir} to keep it in: not rewound`,
      );
  }
  for (const k of Object.keys(want.entries)) {
    if (k.split('/').some((p) => isProtectedName(p) || p === '..' || p === '.' || p === ''))
      throw new RestoreError(`refused: ${rel}/${k} is not a path a rewind writes`);
  }
  const tmp = tmpName();
  mkdirSync(at(parent, tmp), { mode: 0o700 });
  let built: DirFds | undefined;
  let moved = false;
  let swapped = false;
  try {
    built = new DirFds(`${rel} (being restored)`, openSync(at(parent, tmp), DIR_FLAGS));
    // The directory opened is the one just made, or one the agent renamed in under its name: then not empty
    // (or, if empty, no different from the one made).
    if (readdirSync(`/proc/self/fd/${built.open('', false)!}`).length)
      throw new RestoreError(`${rel}: the directory made to restore it into was replaced`);
    const keys = Object.keys(want.entries).sort((a, b) => a.split('/').length - b.split('/').length);
    for (const k of keys) {
      const x = want.entries[k]!;
      if (x.t === 'd') built.open(k, true);
    }
    for (const k of keys) {
      const x = want.entries[k]!;
      if (x.t === 'd' || (x.t === 'f' && !x.h)) continue;
      const [dir, leaf] = split(k);
      writeLeaf(built.open(dir, true)!, leaf, x, content);
    }
    // Modes last, deepest first: a directory restored read-only must not stop its own files being written.
    for (const k of [...keys].reverse()) {
      const x = want.entries[k]!;
      if (x.t === 'd') fchmodSync(built.open(k, false)!, x.mode & 0o777);
    }
    fchmodSync(built.open('', false)!, e.mode & 0o777);
    built.close();
    built = undefined;
    const aside = tmpName();
    if (!cur || cur.t === 'd') {
      // Something the checkpoint never held stands there (a directory it could not read), or a directory walked
      // file by file (the rules changed) that still holds what its walk skipped: left as it is, and never moved
      // (an agent's link moved away and back would be under the name again at a moment its owner did not expect).
      // Whatever appears there after this look makes the rename below fail, unless it is an empty directory.
      let there = true;
      try {
        lstatSync(at(parent, name));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        there = false;
      }
      if (there)
        throw new RestoreError(
          `${rel} holds files the checkpoint does not (unreadable, or skipped while it was not tracked as a whole): not replaced`,
        );
    } else {
      try {
        renameSync(at(parent, name), at(parent, aside));
        moved = true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    try {
      renameSync(at(parent, tmp), at(parent, name));
    } catch (err) {
      if (moved) renameSync(at(parent, aside), at(parent, name));
      throw err;
    }
    swapped = true;
    if (moved) {
      // What stays as it is moves from the old directory into the new one, both opened without following a link
      // (a link standing there is moved as a link); anything that cannot move keeps the old directory, aside.
      if (carry.size && cur?.t === 'w') {
        const from = new DirFds(`${rel} (before)`, openSync(at(parent, aside), DIR_FLAGS));
        const to = new DirFds(rel, openSync(at(parent, name), DIR_FLAGS));
        try {
          for (const k of carry) {
            const [dir, leaf] = split(k);
            try {
              const f = from.open(dir, false);
              if (f === undefined) continue;
              renameSync(at(f, leaf), at(to.open(dir, true)!, leaf));
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
                throw new RestoreError(
                  `${rel}/${k} could not be kept (${(err as Error).message}): the directory as it was is left at ${aside}`,
                );
            }
          }
        } finally {
          from.close();
          to.close();
        }
      }
      removeTree(parent, aside);
    }
  } catch (err) {
    if (swapped) throw err;
    built?.close();
    try {
      removeTree(parent, tmp);
    } catch {
      // left for the next walk to ignore (its name is a rewind's)
    }
    throw err;
  }
}
