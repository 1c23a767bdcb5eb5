/**
 * A feed: values pushed by one side, read as async iterables by any number of followers. Each follower
 * starts from what `snapshot` gives it and then gets every value pushed after it subscribed, in order; it
 * ends when its signal aborts or the feed is closed. The 9P stream handlers (bypass/pending, proc output,
 * proc/interrupts) are all followers of a feed.
 */
const END = Symbol('end');

export class Feed<T> {
  private readonly followers = new Set<(v: T | typeof END) => void>();
  private closed = false;

  push(v: T): void {
    for (const f of this.followers) f(v);
  }

  close(): void {
    this.closed = true;
    for (const f of this.followers) f(END);
    this.followers.clear();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Values from now on, after the ones `first` returns (taken at the same moment, so none is lost or doubled). */
  async *follow(signal: AbortSignal, first: () => T[] = () => []): AsyncGenerator<T> {
    const queue: Array<T | typeof END> = [...first()];
    if (this.closed) queue.push(END);
    let wake: (() => void) | undefined;
    const listener = (v: T | typeof END): void => {
      queue.push(v);
      wake?.();
    };
    const onAbort = (): void => wake?.();
    if (!this.closed) this.followers.add(listener);
    signal.addEventListener('abort', onAbort);
    try {
      for (;;) {
        while (queue.length) {
          const v = queue.shift()!;
          if (v === END) return;
          yield v;
        }
        if (signal.aborted) return;
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
      }
    } finally {
      this.followers.delete(listener);
      signal.removeEventListener('abort', onAbort);
    }
  }
}
