/**
 * Path locks, shared by every agent of this toolsrv. A read-scope call takes none; a write-scope call holds
 * its path exclusively; a global call holds everything exclusively.
 *
 * Fairness: requests wait in one FIFO queue, and a request is granted only when it conflicts neither with a
 * held lock nor with any request queued before it. So writes to other paths may pass a queued write, but
 * nothing passes a queued global, which therefore waits at most for the locks held when it arrived.
 * Cancellation: an aborted request leaves the queue at once, and whatever it was blocking is reconsidered.
 *
 * On a toolsrv several sessions share (a remote host's), a global lock is its session's: path locks still hold
 * across sessions, but one session's call that runs for as long as its agent asks (the timeout flag) must not
 * stop every call of the others.
 */
export type LockKind = { kind: 'global'; session?: string } | { kind: 'path'; path: string; session?: string };

interface Waiter {
  lock: LockKind;
  grant: () => void;
}

/** Two paths conflict when equal, whoever holds them; a global conflicts with everything of its session (or of all, unnamed). */
const conflicts = (a: LockKind, b: LockKind): boolean => {
  if (a.kind === 'path' && b.kind === 'path') return a.path === b.path;
  return a.session === undefined || b.session === undefined || a.session === b.session;
};

export class LockTable {
  private readonly held = new Map<number, LockKind>();
  private readonly queue: Waiter[] = [];
  private nextId = 1;

  /** Waits for the lock; resolves with its release function. Rejects with the signal's reason when aborted. */
  acquire(lock: LockKind, signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      const release = (): void => {
        if (this.held.delete(id)) this.pump();
      };
      const w: Waiter = {
        lock,
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          this.held.set(id, lock);
          resolve(release);
        },
      };
      const onAbort = (): void => {
        const i = this.queue.indexOf(w);
        if (i < 0) return;
        this.queue.splice(i, 1);
        reject(signal!.reason as Error);
        this.pump();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.queue.push(w);
      this.pump();
    });
  }

  private pump(): void {
    const ahead: LockKind[] = [];
    for (let i = 0; i < this.queue.length;) {
      const w = this.queue[i]!;
      const blocked =
        ahead.some((a) => conflicts(a, w.lock)) || [...this.held.values()].some((h) => conflicts(h, w.lock));
      if (blocked) {
        ahead.push(w.lock);
        i++;
      } else {
        this.queue.splice(i, 1);
        w.grant();
      }
    }
  }

  /** For `stat`-like views and tests: what is held and what waits, in order. */
  snapshot(): { held: LockKind[]; waiting: LockKind[] } {
    return { held: [...this.held.values()], waiting: this.queue.map((w) => w.lock) };
  }
}
