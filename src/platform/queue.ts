/**
 * The project's one queue-and-wake primitive: values pushed by a producer wait in a reader's queue until the
 * reader takes them, all at once (one 9P read can carry many), waiting when there are none. The event bus's
 * subscriptions, the chat log's readers and toolsrv's feeds (proc output, bypass/pending, proc/interrupts) are
 * all made of it. src/ninep has no such queue (its blocked reads wait on the file server's async iterators),
 * and may not import this one: it depends on nothing of ours.
 */

/** One reader's queue. `limit`: a reader that falls that far behind loses its backlog, counted in `dropped`. */
export class WakeQueue<T> {
  private items: T[];
  private wake?: () => void;
  private ended = false;
  private lost = 0;

  constructor(
    first: T[] = [],
    private readonly limit = Number.POSITIVE_INFINITY,
  ) {
    this.items = first;
  }

  get length(): number {
    return this.items.length;
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** Queues `v` and wakes the reader. After end() values are ignored. */
  push(v: T): void {
    if (this.ended) return;
    if (this.items.length >= this.limit) {
      this.lost += this.items.length + 1;
      this.items = [];
    } else this.items.push(v);
    this.poke();
  }

  /** No more values: the reader gets what is queued, then its batches end. */
  end(): void {
    this.ended = true;
    this.poke();
  }

  /** How many values were dropped since the last call (a reader over `limit`); resets the count. */
  takeDropped(): number {
    const n = this.lost;
    this.lost = 0;
    return n;
  }

  /**
   * Everything queued, as batches: each waits until there is a value (or a drop to report, when the batch is
   * empty); they end once the queue has ended and been drained, or at once when `signal` aborts.
   */
  async *batches(signal: AbortSignal): AsyncGenerator<T[]> {
    const onAbort = (): void => this.poke();
    signal.addEventListener('abort', onAbort);
    try {
      for (;;) {
        if (signal.aborted) return;
        if (this.items.length || this.lost) {
          const batch = this.items;
          this.items = [];
          yield batch;
          continue;
        }
        if (this.ended) return;
        await new Promise<void>((r) => (this.wake = r));
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  private poke(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }
}

/**
 * A feed: values pushed by one side, followed by any number of readers, each through a WakeQueue of its own.
 * Each follower starts from what `first` gives it and then gets every value pushed after it subscribed, in
 * order; it ends when its signal aborts or the feed is closed.
 */
export class Feed<T> {
  private readonly followers = new Set<WakeQueue<T>>();
  private closed = false;

  push(v: T): void {
    for (const q of this.followers) q.push(v);
  }

  close(): void {
    this.closed = true;
    for (const q of this.followers) q.end();
    this.followers.clear();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Values from now on, after the ones `first` returns (taken at the same moment, so none is lost or doubled). */
  async *follow(signal: AbortSignal, first: () => T[] = () => []): AsyncGenerator<T> {
    const q = new WakeQueue<T>(first());
    if (this.closed) q.end();
    else this.followers.add(q);
    try {
      for await (const batch of q.batches(signal)) yield* batch;
    } finally {
      this.followers.delete(q);
    }
  }
}
