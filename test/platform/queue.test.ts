import { describe, expect, it } from 'vitest';
import { Feed, WakeQueue } from '../../src/platform/queue.js';

async function next<T>(it: AsyncIterator<T>): Promise<IteratorResult<T>> {
  return it.next();
}

describe('WakeQueue', () => {
  it('hands over everything queued at once, and waits for the next value when empty', async () => {
    const q = new WakeQueue<number>([1]);
    const ac = new AbortController();
    const it = q.batches(ac.signal);
    q.push(2);
    expect((await next(it)).value).toEqual([1, 2]);
    const waiting = next(it);
    let settled = false;
    void waiting.then(() => (settled = true));
    await Promise.resolve();
    expect(settled).toBe(false);
    q.push(3);
    expect((await waiting).value).toEqual([3]);
  });

  it('gives what is queued before it ends, then ends', async () => {
    const q = new WakeQueue<string>();
    q.push('a');
    q.end();
    q.push('ignored');
    const got: string[][] = [];
    for await (const b of q.batches(new AbortController().signal)) got.push(b);
    expect(got).toEqual([['a']]);
  });

  it('ends a waiting reader at once when its signal aborts', async () => {
    const q = new WakeQueue<number>();
    const ac = new AbortController();
    const it = q.batches(ac.signal);
    const waiting = next(it);
    ac.abort();
    expect((await waiting).done).toBe(true);
  });

  it('drops the backlog of a reader over its limit and says how many were lost', async () => {
    const q = new WakeQueue<number>([], 3);
    for (let i = 0; i < 5; i++) q.push(i);
    // 0,1,2 queued; 3 overflows (4 lost); 4 queued afresh.
    const it = q.batches(new AbortController().signal);
    expect((await next(it)).value).toEqual([4]);
    expect(q.takeDropped()).toBe(4);
    expect(q.takeDropped()).toBe(0);
  });

  it('wakes a reader with an empty batch when only drops are left to report', async () => {
    const q = new WakeQueue<number>([], 1);
    q.push(1);
    q.push(2);
    const it = q.batches(new AbortController().signal);
    expect((await next(it)).value).toEqual([]);
    expect(q.takeDropped()).toBe(2);
  });
});

describe('Feed', () => {
  it('gives each follower its snapshot, then every value pushed after it subscribed, then ends at close', async () => {
    const f = new Feed<number>();
    f.push(0); // before anyone follows: lost to all
    const ac = new AbortController();
    const a = f.follow(ac.signal, () => [10]);
    const b = f.follow(ac.signal);
    const firstA = a.next();
    const firstB = b.next();
    f.push(1);
    f.push(2);
    f.close();
    const rest = async (it: AsyncGenerator<number>, first: Promise<IteratorResult<number>>): Promise<number[]> => {
      const out: number[] = [];
      const r = await first;
      if (!r.done) out.push(r.value);
      for await (const v of { [Symbol.asyncIterator]: () => it }) out.push(v);
      return out;
    };
    expect(await rest(a, firstA)).toEqual([10, 1, 2]);
    expect(await rest(b, firstB)).toEqual([1, 2]);
    // A closed feed gives a new follower its snapshot and nothing more.
    const late: number[] = [];
    for await (const v of f.follow(ac.signal, () => [7])) late.push(v);
    expect(late).toEqual([7]);
  });
});
