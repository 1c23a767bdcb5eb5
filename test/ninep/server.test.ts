import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  build,
  Dir,
  Each,
  Ename,
  Leaf,
  NOFID,
  NOTAG,
  OREAD,
  ORCLOSE,
  ORDWR,
  OTRUNC,
  OWRITE,
  QTDIR,
  sharedSecretAuth,
  sharedSecretResponder,
  Type,
  unpackStats,
  type Namespace,
  type RMessage,
} from '../../src/ninep/index.js';
import { serve, type RawConn, type TestServer } from './helpers.js';

/** A stream the test feeds by hand; `ended` resolves when the server stops reading it. */
function feed() {
  const queue: string[] = [];
  let wake: (() => void) | undefined;
  let aborted = 0;
  return {
    push(s: string) {
      queue.push(s);
      wake?.();
    },
    get aborted() {
      return aborted;
    },
    async *stream(signal: AbortSignal): AsyncGenerator<string> {
      signal.addEventListener('abort', () => {
        aborted++;
        wake?.();
      });
      while (!signal.aborted) {
        if (queue.length) yield queue.shift()!;
        else await new Promise<void>((r) => (wake = r));
      }
    },
  };
}

/** Counts the runs of the generated files' read handlers. */
const gen = { calls: 0 };

/** A write that waits for `gate` (or its flush, then has no effect) and records what it delivered. */
const slow = { delivered: [] as string[], gate: Promise.resolve(), open: (): void => undefined };
function closeGate(): void {
  slow.gate = new Promise<void>((r) => (slow.open = r));
}

function testNamespace(state: {
  counter: number;
  items: Map<string, string>;
  text: string;
  f: ReturnType<typeof feed>;
}): Namespace {
  return build(
    Dir(
      '/',
      Leaf('hello', { read: () => 'hello world\n' }),
      Leaf('secret', { mode: 0o600, uid: 'bob', text: { get: () => 'bob only\n', set: () => undefined } }),
      Leaf('counter', { read: () => `${state.counter}\n`, version: () => state.counter }),
      Leaf('gen', { read: () => (gen.calls++, 'x'.repeat(3000)) }),
      Leaf('sized', { read: () => (gen.calls++, 'sized\n'), size: () => 6 }),
      Leaf('text', { text: { get: () => state.text, set: (_c, v) => void (state.text = v) } }),
      Leaf('echo', { rdwr: (_c, req) => `echo:${req}` }),
      Leaf('feed', { stream: (_c, signal) => state.f.stream(signal) }),
      Leaf('slow', {
        write: async (_c, data, _o, signal) => {
          await new Promise<void>((resolve, reject) => {
            signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
            void slow.gate.then(resolve);
          });
          slow.delivered.push(new TextDecoder().decode(data));
        },
      }),
      Leaf('tmp', {
        read: () => 'temporary\n',
        write: () => undefined,
        remove: () => void state.items.set('tmp-removed', '1'),
      }),
      Dir(
        'items',
        { create: (_c, name) => void state.items.set(name, '') },
        Each(
          'item',
          {
            list: () => [...state.items.keys()],
            rename: (c, n) => {
              state.items.set(n, state.items.get(c.params.item!)!);
              state.items.delete(c.params.item!);
            },
            remove: (c) => void state.items.delete(c.params.item!),
          },
          Leaf('value', {
            text: {
              get: (c) => state.items.get(c.params.item!) ?? '',
              set: (c, v) => void state.items.set(c.params.item!, v),
            },
          }),
        ),
      ),
    ),
    { uid: 'alice' },
  );
}

describe('9P server', () => {
  let srv: TestServer<unknown>;
  let state: Parameters<typeof testNamespace>[0];
  let raw: RawConn;

  const attach = async (r: RawConn, fid = 1, uname = 'alice'): Promise<void> => {
    expect((await r.rpc(NOTAG, { type: Type.Tversion, msize: 8192, version: '9P2000' })).type).toBe(Type.Rversion);
    expect((await r.rpc(1, { type: Type.Tattach, fid, afid: NOFID, uname, aname: '' })).type).toBe(Type.Rattach);
  };
  const text = (m: RMessage): string =>
    m.type === Type.Rread ? new TextDecoder().decode(m.data) : `(not Rread: type ${m.type})`;
  const ename = (m: RMessage): string => (m.type === Type.Rerror ? m.ename : `(not an error: type ${m.type})`);

  beforeEach(async () => {
    state = { counter: 0, items: new Map([['a', 'A']]), text: 'original', f: feed() };
    srv = (await serve({ fs: testNamespace(state), maxMsize: 65536 })) as TestServer<unknown>;
    raw = await srv.raw();
  });
  afterEach(() => srv.close());

  it('negotiates msize and version, and refuses requests before Tversion', async () => {
    expect(ename(await raw.rpc(3, { type: Type.Tattach, fid: 1, afid: NOFID, uname: 'alice', aname: '' }))).toBe(
      Ename.noVersion,
    );
    const big = await raw.rpc(NOTAG, { type: Type.Tversion, msize: 1 << 30, version: '9P2000' });
    expect(big).toMatchObject({ type: Type.Rversion, msize: 65536, version: '9P2000' });
    const small = await raw.rpc(NOTAG, { type: Type.Tversion, msize: 4096, version: '9P2000.L' });
    expect(small).toMatchObject({ msize: 4096, version: '9P2000' });
    expect(await raw.rpc(NOTAG, { type: Type.Tversion, msize: 4096, version: 'SomethingElse' })).toMatchObject({
      version: 'unknown',
    });
  });

  it('answers Tauth with "no auth required" and attaches with afid NOFID, as plan9port 9p does', async () => {
    await raw.rpc(NOTAG, { type: Type.Tversion, msize: 8192, version: '9P2000' });
    expect(ename(await raw.rpc(0, { type: Type.Tauth, afid: 5, uname: 'alice', aname: '' }))).toBe(Ename.noAuth);
    const a = await raw.rpc(0, { type: Type.Tattach, fid: 1, afid: NOFID, uname: 'alice', aname: '' });
    expect(a.type).toBe(Type.Rattach);
    if (a.type === Type.Rattach) expect(a.qid.type).toBe(QTDIR);
    expect(ename(await raw.rpc(0, { type: Type.Tattach, fid: 2, afid: 7, uname: 'alice', aname: '' }))).toBe(
      Ename.noAuth,
    );
  });

  it('rejects unknown and reused fids', async () => {
    await attach(raw);
    expect(ename(await raw.rpc(2, { type: Type.Tattach, fid: 1, afid: NOFID, uname: 'alice', aname: '' }))).toBe(
      Ename.dupFid,
    );
    expect(ename(await raw.rpc(2, { type: Type.Twalk, fid: 99, newfid: 2, wnames: [] }))).toBe(Ename.badFid);
    expect((await raw.rpc(2, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['hello'] })).type).toBe(Type.Rwalk);
    expect(ename(await raw.rpc(2, { type: Type.Twalk, fid: 1, newfid: 2, wnames: [] }))).toBe(Ename.dupFid);
    expect((await raw.rpc(2, { type: Type.Tclunk, fid: 2 })).type).toBe(Type.Rclunk);
    expect(ename(await raw.rpc(2, { type: Type.Tclunk, fid: 2 }))).toBe(Ename.badFid);
    expect(ename(await raw.rpc(2, { type: Type.Tread, fid: 77, offset: 0, count: 10 }))).toBe(Ename.badFid);
  });

  it('serves tag 0, answers a duplicate tag with an error, and keeps serving while a read blocks', async () => {
    await attach(raw);
    await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['feed'] });
    await raw.rpc(0, { type: Type.Topen, fid: 2, mode: OREAD });
    raw.send({ type: Type.Tread, tag: 0, fid: 2, offset: 0, count: 100 });
    // Tag 0 is now pending on a blocked read: reusing it is an error; other tags go on being served.
    expect(ename(await raw.rpc(0, { type: Type.Tstat, fid: 1 }))).toBe(Ename.dupTag);
    for (let t = 1; t <= 5; t++) expect((await raw.rpc(t, { type: Type.Tstat, fid: 1 })).type).toBe(Type.Rstat);
    state.f.push('data');
    expect(text(await raw.reply(0))).toBe('data');
  });

  it('flush of a blocked read: the read is answered (interrupted) before the Rflush, and no data is lost', async () => {
    await attach(raw);
    await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['feed'] });
    await raw.rpc(0, { type: Type.Topen, fid: 2, mode: OREAD });
    raw.send({ type: Type.Tread, tag: 5, fid: 2, offset: 0, count: 100 });
    await new Promise((r) => setTimeout(r, 20));
    expect((await raw.rpc(6, { type: Type.Tflush, oldtag: 5 })).type).toBe(Type.Rflush);
    // lib9p's order: the original's reply first, then the Rflush.
    expect(raw.replies.map((r) => r.tag)).toEqual([5]);
    expect(ename(await raw.reply(5))).toBe(Ename.interrupted);
    state.f.push('after flush');
    // The flushed tag may be reused once the Rflush came; the chunk goes to the next read, not to the flushed one.
    expect(text(await raw.rpc(5, { type: Type.Tread, fid: 2, offset: 0, count: 100 }))).toBe('after flush');
    expect(raw.replies.filter((r) => r.tag === 5)).toHaveLength(0);
    // Flushing a tag that is not pending is answered at once.
    expect((await raw.rpc(7, { type: Type.Tflush, oldtag: 1234 })).type).toBe(Type.Rflush);
  });

  it('flush of a write in progress: no effect after the Rflush unless its reply came first', async () => {
    await attach(raw);
    await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['slow'] });
    await raw.rpc(0, { type: Type.Topen, fid: 2, mode: OWRITE });
    slow.delivered = [];
    closeGate();
    raw.send({ type: Type.Twrite, tag: 5, fid: 2, offset: 0, data: new TextEncoder().encode('abandoned') });
    await new Promise((r) => setTimeout(r, 20));
    expect((await raw.rpc(6, { type: Type.Tflush, oldtag: 5 })).type).toBe(Type.Rflush);
    expect(ename(await raw.reply(5))).toBe(Ename.interrupted);
    slow.open();
    await new Promise((r) => setTimeout(r, 20));
    expect(slow.delivered).toEqual([]);
    // Flushed while being answered at once (a text file's write is taken on arrival): its reply precedes the Rflush.
    await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 3, wnames: ['text'] });
    await raw.rpc(0, { type: Type.Topen, fid: 3, mode: OWRITE | OTRUNC });
    raw.send({ type: Type.Twrite, tag: 5, fid: 3, offset: 0, data: new TextEncoder().encode('done') });
    raw.send({ type: Type.Tflush, tag: 6, oldtag: 5 });
    await raw.reply(6);
    expect(raw.replies.map((r) => r.type)).toEqual([Type.Rwrite]);
    raw.replies.length = 0;
    expect((await raw.rpc(7, { type: Type.Tclunk, fid: 3 })).type).toBe(Type.Rclunk);
    expect(state.text).toBe('done');
    slow.gate = Promise.resolve();
    raw.replies.length = 0;
    expect(
      (await raw.rpc(5, { type: Type.Twrite, fid: 2, offset: 0, data: new TextEncoder().encode('next') })).type,
    ).toBe(Type.Rwrite);
    expect(slow.delivered).toEqual(['next']);
  });

  it('flush of a walk: the walk is answered first and its fid stands; the connection goes on', async () => {
    await attach(raw);
    raw.send({ type: Type.Twalk, tag: 5, fid: 1, newfid: 2, wnames: ['hello'] });
    raw.send({ type: Type.Tflush, tag: 6, oldtag: 5 });
    await raw.reply(6);
    expect(raw.replies.map((r) => r.type)).toEqual([Type.Rwalk]);
    raw.replies.length = 0;
    expect(ename(await raw.rpc(5, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['hello'] }))).toBe(Ename.dupFid);
    expect((await raw.rpc(5, { type: Type.Topen, fid: 2, mode: OREAD })).type).toBe(Type.Ropen);
    expect(text(await raw.rpc(5, { type: Type.Tread, fid: 2, offset: 0, count: 100 }))).toBe('hello world\n');
    for (let i = 0; i < 10; i++) expect((await raw.rpc(i, { type: Type.Tstat, fid: 2 })).type).toBe(Type.Rstat);
  });

  it('closing the connection cancels pending reads and clunks every fid', async () => {
    await attach(raw);
    for (const fid of [2, 3]) {
      await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: fid, wnames: ['feed'] });
      await raw.rpc(0, { type: Type.Topen, fid, mode: OREAD });
      raw.send({ type: Type.Tread, tag: fid + 10, fid, offset: 0, count: 100 });
    }
    await new Promise((r) => setTimeout(r, 20));
    expect(srv.server.connections.size).toBe(1);
    raw.close();
    for (let i = 0; i < 100 && (state.f.aborted < 2 || srv.server.connections.size); i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(state.f.aborted).toBe(2);
    expect(srv.server.connections.size).toBe(0);
  });

  it('checks permissions against the attach uname', async () => {
    await attach(raw, 1, 'alice');
    await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['secret'] });
    expect(ename(await raw.rpc(0, { type: Type.Topen, fid: 2, mode: OREAD }))).toBe(Ename.perm);
    await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 3, wnames: ['hello'] });
    expect(ename(await raw.rpc(0, { type: Type.Topen, fid: 3, mode: OWRITE }))).toBe(Ename.perm);
    expect(ename(await raw.rpc(0, { type: Type.Topen, fid: 3, mode: OREAD | OTRUNC }))).toBe(Ename.perm);
    const bob = await srv.raw();
    await attach(bob, 1, 'bob');
    await bob.rpc(0, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['secret'] });
    expect((await bob.rpc(0, { type: Type.Topen, fid: 2, mode: ORDWR })).type).toBe(Type.Ropen);
  });

  it('enforces open modes: directories are read-only, I/O needs a matching open, ORCLOSE removes on clunk', async () => {
    await attach(raw);
    await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['items'] });
    expect(ename(await raw.rpc(0, { type: Type.Topen, fid: 2, mode: OWRITE }))).toBe(Ename.isDir);
    await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 3, wnames: ['hello'] });
    expect(ename(await raw.rpc(0, { type: Type.Tread, fid: 3, offset: 0, count: 10 }))).toBe(Ename.notOpen);
    await raw.rpc(0, { type: Type.Topen, fid: 3, mode: OREAD });
    expect(ename(await raw.rpc(0, { type: Type.Topen, fid: 3, mode: OREAD }))).toBe(Ename.opened);
    expect(ename(await raw.rpc(0, { type: Type.Twrite, fid: 3, offset: 0, data: new Uint8Array(1) }))).toBe(
      Ename.notOpen,
    );
    expect(ename(await raw.rpc(0, { type: Type.Twalk, fid: 3, newfid: 9, wnames: [] }))).toBe(Ename.walkDone);
    await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 4, wnames: ['tmp'] });
    expect((await raw.rpc(0, { type: Type.Topen, fid: 4, mode: OREAD | ORCLOSE })).type).toBe(Type.Ropen);
    expect(state.items.has('tmp-removed')).toBe(false);
    await raw.rpc(0, { type: Type.Tclunk, fid: 4 });
    expect(state.items.has('tmp-removed')).toBe(true);
  });

  it('refuses a count larger than msize - 24', async () => {
    await attach(raw); // msize 8192
    await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['hello'] });
    await raw.rpc(0, { type: Type.Topen, fid: 2, mode: OREAD });
    expect(ename(await raw.rpc(0, { type: Type.Tread, fid: 2, offset: 0, count: 8192 - 23 }))).toMatch(
      /count exceeds msize/,
    );
    expect((await raw.rpc(0, { type: Type.Tread, fid: 2, offset: 0, count: 8192 - 24 })).type).toBe(Type.Rread);
  });

  it('walks partially: returns the qids it got and does not create newfid', async () => {
    await attach(raw);
    const r = await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['items', 'nope', 'value'] });
    expect(r.type).toBe(Type.Rwalk);
    if (r.type === Type.Rwalk) expect(r.qids).toHaveLength(1);
    expect(ename(await raw.rpc(0, { type: Type.Tstat, fid: 2 }))).toBe(Ename.badFid);
    expect(ename(await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['nope'] }))).toMatch(
      /file not found/,
    );
    expect(ename(await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 2, wnames: ['hello', 'x'] }))).not.toBe('');
    const up = await raw.rpc(0, { type: Type.Twalk, fid: 1, newfid: 3, wnames: ['items', '..', 'hello'] });
    expect(up.type === Type.Rwalk && up.qids.length).toBe(3);
  });

  it('reads directories as whole stat entries with consistent offsets', async () => {
    const c = await srv.client();
    for (let i = 0; i < 30; i++) state.items.set(`item-${i}`, String(i));
    const all = await c.ls('items');
    expect(all.map((s) => s.name).sort()).toEqual([...state.items.keys()].sort());
    // Read with a small count: every chunk holds whole entries, and offsets continue where the last read ended.
    const f = await c.open('items', OREAD);
    const names: string[] = [];
    let offset = 0;
    for (;;) {
      const d = await f.read(offset, 150);
      if (d.length === 0) break;
      names.push(...unpackStats(d).map((s) => s.name));
      offset += d.length;
    }
    expect(names.sort()).toEqual(all.map((s) => s.name).sort());
    await expect(f.read(7, 150)).rejects.toThrow(/bad offset/);
    await expect(f.read(0, 10)).rejects.toThrow(/too small/);
    await f.clunk();
  });

  it('keeps qid.path stable across walks and bumps qid.vers when content changes', async () => {
    const c = await srv.client();
    const a = await c.stat('counter');
    const b = await c.stat('counter');
    expect(a.qid.path).toBe(b.qid.path);
    expect(a.qid.vers).toBe(b.qid.vers);
    state.counter++;
    const after = await c.stat('counter');
    expect(after.qid.path).toBe(a.qid.path);
    expect(after.qid.vers).not.toBe(a.qid.vers);
    expect((await c.stat('hello')).qid.path).not.toBe(a.qid.path);
  });

  it('stat never runs a read handler; a generated file is computed once per open fid, again on a read at offset 0', async () => {
    const c = await srv.client();
    gen.calls = 0;
    const st = await c.stat('gen');
    await Promise.all(Array.from({ length: 20 }, () => c.stat('gen')));
    expect(st.length).toBe(0);
    expect((await c.stat('sized')).length).toBe(6);
    expect(await c.ls('/')).not.toHaveLength(0);
    expect(gen.calls).toBe(0);
    const f = await c.open('gen', OREAD);
    await f.stat();
    expect(gen.calls).toBe(0);
    let got = 0;
    for (let off = 0; ;) {
      const d = await f.read(off, 1000);
      if (!d.length) break;
      got += d.length;
      off += d.length;
    }
    expect(got).toBe(3000);
    expect(gen.calls).toBe(1);
    await f.read(0, 10);
    expect(gen.calls).toBe(2);
    await f.clunk();
    // Without a version hook, qid.vers counts the writes made through the namespace.
    const v0 = (await c.stat('text')).qid.vers;
    await c.write('text', 'changed', { truncate: true });
    expect((await c.stat('text')).qid.vers).not.toBe(v0);
  });

  it('creates, renames (wstat) and removes through the namespace hooks', async () => {
    const c = await srv.client();
    const f = await c.create('items/fresh', 0o20000000000 | 0o755, OREAD);
    await f.clunk();
    expect(state.items.has('fresh')).toBe(true);
    const stBefore = await c.stat('items/fresh/value');
    await c.rename('items/fresh', 'renamed');
    expect([...state.items.keys()]).toContain('renamed');
    expect(stBefore.name).toBe('value');
    await c.write('items/renamed/value', 'v2', { truncate: true });
    expect(state.items.get('renamed')).toBe('v2');
    await c.remove('items/renamed');
    expect(state.items.has('renamed')).toBe(false);
    await expect(c.remove('hello')).rejects.toThrow(/remove prohibited/);
    await expect(c.create('hello2', 0o644, OWRITE)).rejects.toThrow(/create prohibited/);
    await expect(c.rename('hello', 'x')).rejects.toThrow(/cannot be renamed/);
  });

  it('answers R-messages and unknown types from a client with Rerror and keeps the connection', async () => {
    await attach(raw);
    raw.send({ type: Type.Rclunk, tag: 9 });
    expect(ename(await raw.reply(9))).toMatch(/unexpected message/);
    expect((await raw.rpc(10, { type: Type.Tstat, fid: 1 })).type).toBe(Type.Rstat);
  });
});

describe('9P authentication', () => {
  it('requires the shared secret when an auth provider is set', async () => {
    const ns = build(Dir('/', Leaf('x', { read: () => 'x' })), { uid: 'alice' });
    const srv = await serve({ fs: ns, auth: sharedSecretAuth('s3cret') });
    try {
      const good = await srv.client({ authenticate: sharedSecretResponder('s3cret') });
      expect(await good.readText('x')).toBe('x');
      await expect(srv.client({ authenticate: sharedSecretResponder('wrong') })).rejects.toThrow(Ename.authFailed);
      await expect(srv.client()).rejects.toThrow(Ename.authFailed);
    } finally {
      await srv.close();
    }
  });

  it('takes a one-message secret sent together with the attach', async () => {
    const ns = build(Dir('/', Leaf('x', { read: () => 'x' })), { uid: 'alice' });
    const srv = await serve({ fs: ns, auth: sharedSecretAuth('s3cret') });
    const open = await serve({ fs: ns });
    try {
      const good = await srv.client({ authData: 's3cret' });
      expect(await good.readText('x')).toBe('x');
      await expect(srv.client({ authData: 'wrong' })).rejects.toThrow(Ename.authFailed);
      // A server without authentication says so on the Tauth, and that is the error given.
      await expect(open.client({ authData: 's3cret' })).rejects.toThrow(Ename.noAuth);
    } finally {
      await srv.close();
      await open.close();
    }
  });
});
