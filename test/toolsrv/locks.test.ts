import { afterEach, describe, expect, it } from 'vitest';
import { LockTable, type LockKind } from '../../src/toolsrv/exec/locks.js';
import { startEnv, until, type Env } from './helpers.js';

const P = (path: string): LockKind => ({ kind: 'path', path });
const G: LockKind = { kind: 'global' };
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Acquires and records the order of grants. */
function taker(t: LockTable, order: string[]) {
  return (name: string, lock: LockKind, signal?: AbortSignal) => {
    const p = t.acquire(lock, signal).then((release) => {
      order.push(name);
      return release;
    });
    p.catch(() => undefined);
    return p;
  };
}

describe('LockTable', () => {
  it('serializes one path in arrival order and runs different paths together', async () => {
    const t = new LockTable();
    const order: string[] = [];
    const take = taker(t, order);
    const a1 = take('a1', P('/a'));
    const a2 = take('a2', P('/a'));
    const a3 = take('a3', P('/a'));
    const b1 = take('b1', P('/b'));
    await tick();
    expect(order).toEqual(['a1', 'b1']);
    (await a1)();
    await tick();
    expect(order).toEqual(['a1', 'b1', 'a2']);
    (await a2)();
    (await b1)();
    (await a3)();
    await tick();
    expect(order).toEqual(['a1', 'b1', 'a2', 'a3']);
    expect(t.snapshot()).toEqual({ held: [], waiting: [] });
  });

  it('does not starve a waiting global: later requests queue behind it', async () => {
    const t = new LockTable();
    const order: string[] = [];
    const take = taker(t, order);
    const a = take('a', P('/a'));
    const g = take('g', G);
    const b = take('b', P('/b')); // would fit beside /a, but a global waits ahead of it
    const a2 = take('a2', P('/a'));
    await tick();
    expect(order).toEqual(['a']);
    (await a)();
    await tick();
    expect(order).toEqual(['a', 'g']);
    (await g)();
    await tick();
    expect(order).toEqual(['a', 'g', 'b', 'a2']);
    (await b)();
    (await a2)();
  });

  it('a global waits for every holder and excludes everything while held', async () => {
    const t = new LockTable();
    const order: string[] = [];
    const take = taker(t, order);
    const a = take('a', P('/a'));
    const b = take('b', P('/b'));
    const g = take('g', G);
    await tick();
    (await a)();
    await tick();
    expect(order).toEqual(['a', 'b']);
    (await b)();
    await tick();
    expect(order).toEqual(['a', 'b', 'g']);
    const c = take('c', P('/c'));
    await tick();
    expect(order).toEqual(['a', 'b', 'g']);
    (await g)();
    await tick();
    expect(order).toEqual(['a', 'b', 'g', 'c']);
    (await c)();
  });

  it("a session's global excludes its own session only; a path excludes that path in every session", async () => {
    const t = new LockTable();
    const order: string[] = [];
    const take = taker(t, order);
    const ga = take('ga', { kind: 'global', session: 'A' });
    const gb = take('gb', { kind: 'global', session: 'B' });
    const pa = take('pa', { kind: 'path', path: '/x', session: 'A' });
    const pb = take('pb', { kind: 'path', path: '/y', session: 'B' });
    await tick();
    // B's global and path run beside A's global; A's own path waits for it.
    expect(order).toEqual(['ga', 'gb']);
    (await gb)();
    await tick();
    expect(order).toEqual(['ga', 'gb', 'pb']);
    const pbx = take('pbx', { kind: 'path', path: '/y', session: 'A' });
    await tick();
    expect(order).not.toContain('pbx');
    (await pb)();
    (await ga)();
    await tick();
    expect(order).toEqual(['ga', 'gb', 'pb', 'pa', 'pbx']);
    (await pa)();
    (await pbx)();
    expect(t.snapshot()).toEqual({ held: [], waiting: [] });
  });

  it('a cancelled request leaves the queue and unblocks what queued behind it', async () => {
    const t = new LockTable();
    const order: string[] = [];
    const take = taker(t, order);
    const a = take('a', P('/a'));
    const ac = new AbortController();
    const g = take('g', G, ac.signal);
    const b = take('b', P('/b'));
    await tick();
    expect(order).toEqual(['a']);
    ac.abort(new Error('flushed'));
    await expect(g).rejects.toThrow('flushed');
    await tick();
    expect(order).toEqual(['a', 'b']); // b no longer waits behind the global
    (await a)();
    (await b)();
    expect(t.snapshot()).toEqual({ held: [], waiting: [] });
    // Releasing twice is harmless.
    const again = await take('x', G);
    again();
    again();
    expect(t.snapshot().held).toEqual([]);
  });
});

describe('locks in toolsrv', () => {
  let env: Env | undefined;
  afterEach(async () => {
    await env?.close();
    env = undefined;
  });

  it('holds write-scope calls on one path apart, lets other paths and read-scope calls run, and drops a flushed waiter', async () => {
    env = await startEnv({
      w: {
        meta: {
          description: 'write',
          scope: 'write',
          pathArg: 'path',
          args: { type: 'object', properties: { path: { type: 'string' }, tag: { type: 'string' } } },
        },
        script: '#!/bin/sh\nread -r a\necho "start $(date +%s%N)"\nsleep 0.3\necho "end $(date +%s%N)"\n',
      },
      r: { meta: { description: 'read', scope: 'read' }, script: '#!/bin/sh\necho read\n' },
      g: {
        meta: { description: 'global' },
        script: '#!/bin/sh\necho "start $(date +%s%N)"\nsleep 0.2\necho "end $(date +%s%N)"\n',
      },
    });
    const c = await env.client();
    await c.write('ctl', 'load w r g');
    const span = (out: string): [number, number] => {
      const m = /start (\d+)\nend (\d+)/.exec(out)!;
      return [Number(m[1]) / 1e6, Number(m[2]) / 1e6];
    };
    const t0 = Date.now();
    const [x1, x2, y] = await Promise.all([
      env.call(c, { tool: 'w', args: { path: 'f.txt' } }),
      env.call(c, { tool: 'w', args: { path: `${env.dir}/f.txt` } }), // the same file, named absolutely
      env.call(c, { tool: 'w', args: { path: 'other.txt' } }),
    ]);
    const [s1, e1] = span(x1.output);
    const [s2, e2] = span(x2.output);
    const [s3] = span(y.output);
    expect(s2 >= e1 || s1 >= e2).toBe(true); // never overlapping on f.txt
    expect(Math.abs(s3 - Math.min(s1, s2))).toBeLessThan(250); // other.txt ran alongside
    expect(Date.now() - t0).toBeLessThan(1500);

    // A global waits for the writer; a read-scope call does not wait at all.
    const writing = env.call(c, { tool: 'w', args: { path: 'f.txt' } });
    await until(() => env!.ts.core.locks.snapshot().held.length === 1);
    const glob = env.call(c, { tool: 'g', args: {} });
    const t1 = Date.now();
    const read = await env.call(c, { tool: 'r', args: {} });
    expect(read.output).toBe('read\n');
    expect(Date.now() - t1).toBeLessThan(250);
    const [wr, gr] = await Promise.all([writing, glob]);
    expect(span(gr.output)[0]).toBeGreaterThanOrEqual(span(wr.output)[1]);

    // Flushing a call that waits for its lock takes it out of the queue: nothing of it ever runs.
    const holder = env.call(c, { tool: 'w', args: { path: 'f.txt' } });
    await until(() => env!.ts.core.locks.snapshot().held.length === 1);
    const ac = new AbortController();
    const waiter = env.call(c, { tool: 'w', args: { path: 'f.txt' } }, ac.signal);
    waiter.catch(() => undefined);
    await until(() => env!.ts.core.locks.snapshot().waiting.length === 1);
    const procsBefore = env.ts.core.procs.size;
    ac.abort();
    await expect(waiter).rejects.toThrow();
    await until(() => env!.ts.core.locks.snapshot().waiting.length === 0);
    await holder;
    await until(() => env!.ts.core.locks.snapshot().held.length === 0, 'the holder to release its lock');
    expect(env.ts.core.procs.size).toBe(procsBefore);
    expect(env.ts.core.locks.snapshot()).toEqual({ held: [], waiting: [] });
  });

  it('shares the lock table between agents', async () => {
    env = await startEnv({
      w: {
        meta: {
          description: 'write',
          scope: 'write',
          pathArg: 'path',
          args: { type: 'object', properties: { path: { type: 'string' } } },
        },
        script: '#!/bin/sh\nsleep 0.3\n',
      },
    });
    const a = await env.client('a');
    const b = await env.client('b');
    await a.write('ctl', 'load w');
    await b.write('ctl', 'load w');
    const first = env.call(a, { tool: 'w', args: { path: '/tmp/shared-lock' } });
    await until(() => env!.ts.core.locks.snapshot().held.length === 1);
    const t = Date.now();
    await env.call(b, { tool: 'w', args: { path: '/tmp/shared-lock' } });
    expect(Date.now() - t).toBeGreaterThanOrEqual(250);
    await first;
  });
});
