/**
 * Which directories of the roots changed since the last walk, from inotify (fs.watch, one watch per directory),
 * so that a checkpoint of an unchanged tree walks nothing and one with a few changes re-reads only their
 * directories. Every change made through a directory — by a tool, a build, the user's editor — is queued by
 * the kernel at the system call, before the process that made it can exit, so once the round's result has
 * arrived the events are there to be read.
 *
 * Anything that makes the watch incomplete (more directories than the cap, inotify's limits, a watch error)
 * marks it broken, and the next checkpoint walks everything again.
 */
import { lstatSync, watch, type FSWatcher } from 'node:fs';

/** More directories than this are walked each time instead (each watch is one of the user's inotify watches). */
export const MAX_WATCHED_DIRS = 4096;

export class DirWatch {
  /** Each watched directory's watcher and the inode it was made on (a directory replaced under its name is another). */
  private readonly watchers = new Map<string, { w: FSWatcher; ino: number | undefined }>();
  private dirty = new Set<string>();
  broken = false;
  /**
   * Directories tracked as a whole (absolute) whose subtree is not all watched (it passed its share of the cap):
   * read again at every checkpoint, while the rest of the roots stays watched.
   */
  readonly partial = new Set<string>();

  constructor(private readonly max = MAX_WATCHED_DIRS) {}

  /**
   * Starts watching `dir` (absolute); call before reading it, so a change during the read is not missed. A
   * directory watched already is watched again when another directory now stands at its path (its inode differs).
   */
  add(dir: string): void {
    if (this.broken) return;
    const have = this.watchers.get(dir);
    if (have && have.ino === inodeOf(dir)) return;
    if (!this.open(dir, this.max)) this.break();
  }

  /**
   * Watches `dir` afresh: a directory read again because it changed may have been removed and made anew under
   * the same name, even on the same inode number (the old watch then watches nothing). The new watch is made
   * before the old one is closed, so no change falls between.
   */
  renew(dir: string): void {
    if (this.broken || this.open(dir, this.max)) return;
    // Gone since it was listed: its parent's reading says so; the watch of the rest stands.
    if (inodeOf(dir) === undefined) this.removeTree(dir);
    else this.break();
  }

  /** The inode `dir` had when its watch was made (undefined: not watched). */
  inode(dir: string): number | undefined {
    return this.watchers.get(dir)?.ino;
  }

  /** A fresh watch of `dir` replacing any it had, within `cap` watches in all; false when over it or refused. */
  private open(dir: string, cap: number): boolean {
    const have = this.watchers.get(dir);
    if (!have && this.watchers.size >= cap) return false;
    try {
      const ino = inodeOf(dir);
      const w = watch(dir, { persistent: false }, () => this.dirty.add(dir));
      w.on('error', () => this.break());
      this.watchers.set(dir, { w, ino });
    } catch {
      return false;
    }
    have?.w.close();
    return true;
  }

  /**
   * Watches `dir`, a directory inside one tracked as a whole, within half the cap (a node_modules must not take
   * the watches the walked directories need, nor break the watch for them): false when over it, or when inotify
   * refuses. The caller then stops watching that whole directory and lists it in `partial`.
   */
  addInWhole(dir: string): boolean {
    if (this.broken) return false;
    // Read again because something under it changed: watched afresh, as renew() says why.
    return this.open(dir, this.max / 2);
  }

  /** Stops watching `dir` and everything below it (it was removed, or is now a file or a link). */
  removeTree(dir: string): void {
    for (const [d, { w }] of this.watchers) {
      if (d === dir || d.startsWith(`${dir}/`)) {
        w.close();
        this.watchers.delete(d);
      }
    }
  }

  /** The directories that changed since the last take, after letting the event loop read what the kernel queued. */
  async take(): Promise<Set<string>> {
    // Two turns of the loop: the inotify descriptor is read in a poll phase that may come after this one.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setTimeout(r, 0));
    await new Promise((r) => setImmediate(r));
    const d = this.dirty;
    this.dirty = new Set();
    return d;
  }

  private break(): void {
    this.broken = true;
    this.close();
  }

  close(): void {
    for (const { w } of this.watchers.values()) w.close();
    this.watchers.clear();
    this.partial.clear();
  }
}

function inodeOf(dir: string): number | undefined {
  try {
    return lstatSync(dir).ino;
  } catch {
    return undefined;
  }
}
