import { afterEach, describe, expect, it } from 'vitest';
import { build, Dir, Each, EachFile, Leaf, NamespaceError, OREAD, ORDWR, OWRITE } from '../../src/ninep/index.js';
import { serve, type TestServer } from './helpers.js';

const invalid = (root: Parameters<typeof build>[0]): string => {
  try {
    build(root, { uid: 'u' });
  } catch (e) {
    expect(e).toBeInstanceOf(NamespaceError);
    return (e as Error).message;
  }
  throw new Error('build accepted an invalid namespace');
};

describe('namespace declaration', () => {
  it('is validated when built, naming the path of each problem', () => {
    expect(invalid(Dir('/', Leaf('a', { read: () => '' }), Leaf('a', { read: () => '' })))).toMatch(
      '/a: duplicate name',
    );
    expect(invalid(Dir('/', Leaf('b', { read: () => '', stream: async function* () {} })))).toMatch(
      '/b: more than one read handler (read, stream)',
    );
    expect(invalid(Dir('/', Leaf('c', { write: () => undefined, rdwr: () => '' })))).toMatch(
      '/c: write cannot be combined with rdwr',
    );
    expect(invalid(Dir('/', Leaf('d', {})))).toMatch('/d: a leaf needs a handler');
    expect(invalid(Dir('/', Leaf('e', { mode: 0o666, read: () => '' })))).toMatch(
      '/e: mode 666 allows writing but there is no write handler',
    );
    expect(invalid(Dir('/', Leaf('f/g', { read: () => '' })))).toMatch('bad name');
    expect(invalid(Dir('/', Leaf('..', { read: () => '' })))).toMatch('bad name');
    expect(invalid(Dir('/', Dir('x', Each('p', { list: () => [] }), Each('q', { list: () => [] }))))).toMatch(
      '/x: more than one template directory',
    );
    expect(invalid(Dir('/', Each('p', { list: () => [] }, Each('p', { list: () => [] }))))).toMatch(
      '/{p}/{p}: parameter {p} is already bound above',
    );
    expect(invalid(Dir('/', Leaf('h', { mode: 0o1777, read: () => '' })))).toMatch('not permission bits');
  });

  it('derives modes from handlers and generates help from doc strings', () => {
    const ns = build(
      Dir(
        '/',
        Leaf('ro', { doc: 'read me', read: () => '' }),
        Leaf('wo', { doc: 'write me', write: () => undefined }),
        Leaf('rw', { rdwr: () => '' }),
        Each('s', { list: () => [], doc: 'sessions' }, Leaf('ctl', { doc: 'control', rdwr: () => '' })),
      ),
      { uid: 'u', help: true },
    );
    const help = ns.help();
    expect(help).toMatch(/-r--r--r--\s+\/ro\s+read\s+read me/);
    expect(help).toMatch(/--w--w--w-\s+\/wo\s+write\s+write me/);
    expect(help).toMatch(/-rw-rw-rw-\s+\/rw\s+rdwr/);
    expect(help).toMatch(/\/\{s\}\/ctl\s+rdwr\s+control/);
    expect(help).toMatch(/\/help\s+read/);
  });
});

describe('namespace handler kinds over 9P', () => {
  let srv: TestServer<unknown> | undefined;
  afterEach(() => srv?.close());

  it('text: the writes of one open build the value, committed once at clunk; OTRUNC with no write empties it', async () => {
    let value = 'start';
    const commits: string[] = [];
    srv = (await serve({
      fs: build(
        Dir(
          '/',
          Leaf('t', {
            text: {
              get: () => value,
              set: (_c, v) => {
                value = v;
                commits.push(v);
              },
            },
          }),
        ),
        { uid: 'alice' },
      ),
    })) as TestServer<unknown>;
    const c = await srv.client({ msize: 4096 });
    const big = 'x'.repeat(10_000);
    await c.write('t', big, { truncate: true });
    expect(value).toBe(big);
    expect(commits).toEqual([big]);
    expect(await c.readText('t')).toBe(big);
    const f = await c.open('t', OWRITE | 0x10);
    await f.clunk();
    expect(value).toBe('');
    // A write past the end would leave a hole (and let a client make the server allocate at will).
    const g = await c.open('t', OWRITE);
    await expect(g.write(1 << 30, new TextEncoder().encode('x'))).rejects.toThrow(/would leave a hole/);
    await g.clunk();
    expect(value).toBe('');
  });

  // The time of a 4 KiB-chunk pass against a 1 MiB-chunk pass is a figure of bench/ninep.mjs.
  it('text: 2 MB in 4 KiB chunks or 1 MiB chunks is one commit per open; reading on the fid sees its writes', async () => {
    let value = '';
    let commits = 0;
    srv = (await serve({
      fs: build(Dir('/', Leaf('t', { text: { get: () => value, set: (_c, v) => void ((value = v), commits++) } })), {
        uid: 'alice',
      }),
    })) as TestServer<unknown>;
    const c = await srv.client();
    const data = new Uint8Array(2 * 1024 * 1024).fill(97);
    const pass = async (chunk: number): Promise<void> => {
      const f = await c.open('t', OWRITE | 0x10);
      const pending: Promise<number>[] = [];
      for (let off = 0; off < data.length; off += chunk) pending.push(f.write(off, data.subarray(off, off + chunk)));
      await Promise.all(pending);
      await f.clunk();
    };
    await pass(1 << 20);
    await pass(1 << 20);
    await pass(4096);
    expect(value.length).toBe(data.length);
    expect(commits).toBe(3);
    const f = await c.open('t', ORDWR | 0x10);
    await f.write(0, new TextEncoder().encode('hello'));
    expect(new TextDecoder().decode(await f.read(0, 100))).toBe('hello');
    await f.clunk();
    expect(value).toBe('hello');
  });

  it('EachFile: one file per listed name, with the name bound in ctx.params; removable; unlisted names do not walk', async () => {
    const names = new Set(['bob', 'carol']);
    const got: string[] = [];
    srv = (await serve({
      fs: build(
        Dir(
          '/',
          Dir(
            'peer',
            EachFile('peer', {
              list: () => [...names],
              remove: (ctx) => void names.delete(ctx.params.peer!),
              file: {
                mode: 0o222,
                write: (ctx, data) => void got.push(`${ctx.params.peer}:${new TextDecoder().decode(data)}`),
              },
            }),
          ),
        ),
        { uid: 'alice' },
      ),
    })) as TestServer<unknown>;
    const c = await srv.client();
    expect((await c.ls('peer')).map((s) => [s.name, s.mode & 0x80000000 ? 'dir' : 'file']).sort()).toEqual([
      ['bob', 'file'],
      ['carol', 'file'],
    ]);
    await c.write('peer/bob', 'hi bob');
    expect(got).toEqual(['bob:hi bob']);
    await expect(c.readText('peer/bob')).rejects.toThrow(/permission|denied/);
    await expect(c.write('peer/dave', 'x')).rejects.toThrow(/not found/);
    await c.remove('peer/carol');
    expect((await c.ls('peer')).map((s) => s.name)).toEqual(['bob']);
    expect(() => build(Dir('/', EachFile('x', { list: () => [], file: {} })), { uid: 'a' })).toThrow(
      /a leaf needs a handler/,
    );
  });

  it('rdwr: the reply of a write is read on the same fid; write errors reach the writer', async () => {
    srv = (await serve({
      fs: build(
        Dir(
          '/',
          Leaf('calc', {
            rdwr: (_c, req) => {
              if (!/^\d+\+\d+$/.test(req.trim())) throw new Error(`cannot add ${JSON.stringify(req.trim())}`);
              const [a, b] = req.split('+').map(Number);
              return `${a! + b!}\n`;
            },
          }),
        ),
        { uid: 'alice' },
      ),
    })) as TestServer<unknown>;
    const c = await srv.client();
    expect(await c.rdwrText('calc', '2+40')).toBe('42\n');
    await expect(c.rdwr('calc', 'two plus two')).rejects.toThrow('cannot add "two plus two"');
    // Several requests on one fid: each write replaces the reply.
    const f = await c.open('calc', ORDWR);
    await f.write(0, new TextEncoder().encode('1+1'));
    await f.write(0, new TextEncoder().encode('1+2'));
    expect(new TextDecoder().decode(await f.readAll())).toBe('3\n');
    await f.clunk();
  });

  it('blockOnce: the first read waits for the value; stream: reads follow the producer until it ends', async () => {
    let release: (v: string) => void = () => undefined;
    srv = (await serve({
      fs: build(
        Dir(
          '/',
          Leaf('wait', { blockOnce: () => new Promise<string>((r) => (release = r)) }),
          Leaf('count', {
            stream: async function* () {
              for (let i = 0; i < 5; i++) yield `${i}\n`;
            },
          }),
        ),
        { uid: 'alice' },
      ),
    })) as TestServer<unknown>;
    const c = await srv.client();
    const pending = c.readText('wait');
    await new Promise((r) => setTimeout(r, 20));
    release('changed\n');
    expect(await pending).toBe('changed\n');
    let all = '';
    for await (const chunk of c.stream('count')) all += new TextDecoder().decode(chunk);
    expect(all).toBe('0\n1\n2\n3\n4\n');
  });

  it('rdwrStream: the written filter shapes what is streamed; aborting ends the stream with Tflush', async () => {
    const seen: string[] = [];
    srv = (await serve({
      fs: build(
        Dir(
          '/',
          Leaf('ev', {
            rdwrStream: (_c, filter, signal) =>
              (async function* () {
                try {
                  for (let i = 0; !signal.aborted; i++) {
                    if (String(i).endsWith(filter.trim() || '')) yield `${i}\n`;
                    await new Promise((r) => setTimeout(r, 1));
                  }
                } finally {
                  seen.push('ended');
                }
              })(),
          }),
        ),
        { uid: 'alice' },
      ),
    })) as TestServer<unknown>;
    const c = await srv.client();
    const ac = new AbortController();
    const got: string[] = [];
    await expect(
      (async () => {
        for await (const chunk of c.stream('ev', { request: '7', signal: ac.signal })) {
          got.push(new TextDecoder().decode(chunk).trim());
          if (got.length === 3) ac.abort(new Error('enough'));
        }
      })(),
    ).rejects.toThrow('enough');
    expect(got).toEqual(['7', '17', '27']);
    for (let i = 0; i < 50 && !seen.length; i++) await new Promise((r) => setTimeout(r, 10));
    expect(seen).toEqual(['ended']);
    expect(await c.readText('/')).toBeDefined();
  });

  it('rdwrStream: a new request on the same fid replaces the subscription, even under a blocked read', async () => {
    const subs = new Set<{ filter: string; push: (s: string) => void }>();
    const publish = (ev: string): void => {
      for (const sub of subs) if (ev.startsWith(sub.filter)) sub.push(`${ev}\n`);
    };
    let ended = 0;
    srv = (await serve({
      fs: build(
        Dir(
          '/',
          Leaf('ev', {
            rdwrStream: (_c, filter, signal) => {
              // Subscribes when called (at the write), as the daemon's event bus does.
              const queue: string[] = [];
              let wake: (() => void) | undefined;
              const sub = { filter: filter.trim(), push: (s: string) => (queue.push(s), wake?.()) };
              subs.add(sub);
              signal.addEventListener('abort', () => wake?.(), { once: true });
              return (async function* () {
                try {
                  while (!signal.aborted) {
                    if (queue.length) yield queue.shift()!;
                    else await new Promise<void>((r) => (wake = r));
                  }
                } finally {
                  subs.delete(sub);
                  ended++;
                }
              })();
            },
          }),
        ),
        { uid: 'alice' },
      ),
    })) as TestServer<unknown>;
    const c = await srv.client();
    const f = await c.open('ev', ORDWR);
    await f.write(0, new TextEncoder().encode('a'));
    publish('a1');
    expect(new TextDecoder().decode(await f.read(0, 100))).toBe('a1\n');
    const blocked = f.read(0, 100);
    await new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 50; i++) await f.write(0, new TextEncoder().encode('b'));
    await new Promise((r) => setTimeout(r, 20));
    expect(subs.size).toBe(1);
    expect(ended).toBe(50);
    publish('a2');
    publish('b1');
    expect(new TextDecoder().decode(await blocked)).toBe('b1\n');
    publish('a3');
    publish('b2');
    expect(new TextDecoder().decode(await f.read(0, 100))).toBe('b2\n');
    await f.clunk();
    for (let i = 0; i < 50 && subs.size; i++) await new Promise((r) => setTimeout(r, 10));
    expect(subs.size).toBe(0);
  });

  it('a stream that fails after its read was flushed does not take the server down', async () => {
    let fail: (e: Error) => void = () => undefined;
    srv = (await serve({
      fs: build(
        Dir(
          '/',
          Leaf('bad', {
            stream: () => ({
              [Symbol.asyncIterator]: () => ({
                next: () => new Promise<IteratorResult<string>>((_r, j) => (fail = j)),
              }),
            }),
          }),
          Leaf('ok', { read: () => 'still here\n' }),
        ),
        { uid: 'alice' },
      ),
    })) as TestServer<unknown>;
    const c = await srv.client();
    const ac = new AbortController();
    const f = await c.open('bad', OREAD);
    const p = f.read(0, 100, ac.signal);
    await new Promise((r) => setTimeout(r, 10));
    ac.abort(new Error('stop'));
    await expect(p).rejects.toThrow('stop');
    fail(new Error('producer broke'));
    await f.clunk();
    await new Promise((r) => setTimeout(r, 10));
    expect(await c.readText('ok')).toBe('still here\n');
  });

  it('write: every Twrite reaches the handler as one message, with its offset', async () => {
    const got: Array<[string, number]> = [];
    srv = (await serve({
      fs: build(Dir('/', Leaf('in', { write: (_c, d, off) => void got.push([new TextDecoder().decode(d), off]) })), {
        uid: 'alice',
      }),
    })) as TestServer<unknown>;
    const c = await srv.client();
    const f = await c.open('in', OWRITE);
    await f.write(0, new TextEncoder().encode('one'));
    await f.write(3, new TextEncoder().encode('two'));
    await f.clunk();
    expect(got).toEqual([
      ['one', 0],
      ['two', 3],
    ]);
    await expect(c.open('in', OREAD)).rejects.toThrow('permission denied');
  });

  it('write with whole: a message is everything one fid writes, however split; delivered at clunk or at a new offset 0', async () => {
    const got: string[] = [];
    srv = (await serve({
      fs: build(
        Dir(
          '/',
          Leaf('in', { whole: true, write: (_c, d) => void got.push(new TextDecoder().decode(d)) }),
          Leaf('bad', { whole: true, write: () => Promise.reject(new Error('refused')) }),
        ),
        { uid: 'alice' },
      ),
    })) as TestServer<unknown>;
    const c = await srv.client({ msize: 4096 + 24 });
    const big = 'x'.repeat(20000) + 'end';
    await c.write('in', big);
    expect(got).toEqual([big]);
    const f = await c.open('in', OWRITE);
    await f.write(0, new TextEncoder().encode('one '));
    await f.write(4, new TextEncoder().encode('message'));
    expect(got).toHaveLength(1);
    await f.write(0, new TextEncoder().encode('second'));
    expect(got.slice(1)).toEqual(['one message']);
    await expect(f.write(2, new TextEncoder().encode('hole'))).rejects.toThrow('in order');
    await f.clunk();
    expect(got.slice(1)).toEqual(['one message', 'second']);
    // The handler's refusal is the clunk's error.
    await expect(c.write('bad', 'x')).rejects.toThrow('refused');
    expect(await c.stat('in')).toBeDefined();
  });
});
