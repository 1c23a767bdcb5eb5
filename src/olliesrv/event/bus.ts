/**
 * The daemon's event bus: topics like `session.{sid}.rename` with a text payload, and subscribers with
 * filters (`*` matches one dot-separated segment, `>` the rest; `*` alone or an empty filter match all).
 *
 * Publishing never waits for anyone. Each subscriber has a bounded queue; one that falls more than
 * QUEUE_LIMIT events behind loses its backlog and gets a single `ollie.overflow {dropped}` event instead,
 * telling it to re-read the index files it mirrors. Other subscribers and the daemon are not affected.
 */
import { WakeQueue } from '../../platform/queue.js';
import { EVENTS } from '../../formats/olliesrv.js';

export const QUEUE_LIMIT = 4096;

export interface BusEvent {
  topic: string;
  payload: string;
}

export type Filter = (topic: string) => boolean;

/** Compiles a filter: patterns separated by whitespace; an event matching any of them passes. */
export function compileFilter(text: string): Filter {
  const patterns = text.split(/\s+/).filter(Boolean);
  if (patterns.length === 0 || patterns.includes('*') || patterns.includes('>')) return () => true;
  const compiled = patterns.map((p) => {
    const segs = p.split('.');
    const rest = segs.indexOf('>');
    if (rest !== -1 && rest !== segs.length - 1)
      throw new Error(`bad event filter ${JSON.stringify(p)}: '>' must be the last segment`);
    if (segs.some((s) => s === '')) throw new Error(`bad event filter ${JSON.stringify(p)}: empty segment`);
    return segs;
  });
  return (topic) => {
    const t = topic.split('.');
    return compiled.some((segs) => {
      for (let i = 0; i < segs.length; i++) {
        const s = segs[i]!;
        if (s === '>') return t.length > i;
        if (i >= t.length || (s !== '*' && s !== t[i])) return false;
      }
      return t.length === segs.length;
    });
  };
}

interface Subscription {
  filter: Filter;
  queue: WakeQueue<BusEvent>;
}

export class EventBus {
  private readonly subs = new Set<Subscription>();

  publish(topic: string, payload = ''): void {
    const e = { topic, payload };
    for (const s of this.subs) if (s.filter(topic)) s.queue.push(e);
  }

  get subscribers(): number {
    return this.subs.size;
  }

  /**
   * Lines of `topic payload\n`, as many as are queued per chunk, until `signal` aborts. The subscription
   * starts now, before the first chunk is asked for, so nothing published after this call is missed.
   */
  subscribe(filter: Filter, signal: AbortSignal): AsyncIterable<string> {
    const sub: Subscription = { filter, queue: new WakeQueue<BusEvent>([], QUEUE_LIMIT) };
    this.subs.add(sub);
    const subs = this.subs;
    signal.addEventListener('abort', () => subs.delete(sub), { once: true });
    return {
      async *[Symbol.asyncIterator]() {
        try {
          for await (const batch of sub.queue.batches(signal)) {
            const dropped = sub.queue.takeDropped();
            let out = dropped ? `${EVENTS.formatLine('ollie.overflow', { dropped })}\n` : '';
            for (const e of batch) out += e.payload ? `${e.topic} ${e.payload}\n` : `${e.topic}\n`;
            yield out;
          }
        } finally {
          subs.delete(sub);
        }
      },
    };
  }
}
