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
  mkdirSync,
  openSync,
  renameSync,
  rmdirSync,
  symlinkSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Entry } from './store.js';
import { isProtectedName } from './scan.js';

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

  constructor(private readonly root: string) {}

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
        if (current[c.rel]!.t === 'd') {
          dirs.forget(c.rel);
          rmdirSync(at(parent, name));
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
        if (e.t === 'l') {
          const tmp = `.ollie-rewind-${randomBytes(6).toString('hex')}`;
          symlinkSync(e.target, at(parent, tmp));
          renameSync(at(parent, tmp), at(parent, name));
        } else {
          if (!e.h) continue; // a file over max_file: never stored, left as it is
          const data = content(e.h);
          const tmp = `.ollie-rewind-${randomBytes(6).toString('hex')}`;
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
