import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer, WebSocket } from 'ws';
import {
  build,
  Client,
  Dir,
  Each,
  Leaf,
  messagePortChannel,
  parseAddress,
  Server,
  webSocketChannel,
  type MessagePortLike,
  type WebSocketLike,
} from '../../src/ninep/index.js';
import { dial, listen, SocketInUseError } from '../../src/ninep/node.js';

/** a/b/.../q/leaf: deeper than one Twalk can go. */
const deepChain = (names: string[]): ReturnType<typeof Dir> | ReturnType<typeof Leaf> =>
  names.length ? Dir(names[0]!, deepChain(names.slice(1))) : Leaf('leaf', { read: () => 'deep\n' });

const ns = () =>
  build(
    Dir(
      '/',
      Leaf('hello', { read: () => 'hello\n' }),
      Leaf('slow', {
        rdwr: async (_c, req) => {
          await new Promise((r) => setTimeout(r, Number(req)));
          return req;
        },
      }),
      Leaf('never', {
        blockOnce: (_c, signal) =>
          new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      }),
      Dir('deep', Each('n', { list: () => ['x'] }, deepChain('abcdefghijklmnopq'.split('')))),
    ),
    { uid: 'alice' },
  );

describe('transports', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ninep-transport-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('creates the Unix socket 0600 inside a 0700 directory, replaces a stale one and refuses a live one', async () => {
    const path = join(dir, 'rt', 'sub', 'n.sock');
    const l = await listen(new Server({ fs: ns() }), { kind: 'unix', path });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'rt', 'sub')).mode & 0o777).toBe(0o700);
    await expect(listen(new Server({ fs: ns() }), { kind: 'unix', path })).rejects.toBeInstanceOf(SocketInUseError);
    await l.close();
    // A stale socket: bound by a process that is gone (here, a server closed without unlinking).
    const stale = net.createServer();
    await new Promise<void>((r) => stale.listen(path, r));
    const fd = (stale as unknown as { _handle: { close(): void } })._handle;
    fd.close();
    const l2 = await listen(new Server({ fs: ns() }), { kind: 'unix', path });
    const c = await dial(`unix!${path}`, { uname: 'alice' });
    expect(await c.readText('hello')).toBe('hello\n');
    c.close();
    await l2.close();
  });

  it('refuses to put a socket in a directory others can enter, or over a file that is not a socket', async () => {
    const open = join(dir, 'open');
    mkdirSync(open);
    chmodSync(open, 0o755);
    await expect(listen(new Server({ fs: ns() }), { kind: 'unix', path: join(open, 's.sock') })).rejects.toThrow(
      /open to other users/,
    );
    const priv = join(dir, 'priv');
    mkdirSync(priv, { mode: 0o700 });
    writeFileSync(join(priv, 'f'), 'x');
    await expect(listen(new Server({ fs: ns() }), { kind: 'unix', path: join(priv, 'f') })).rejects.toThrow(
      /not a socket/,
    );
  });

  it('serves TCP on loopback', async () => {
    const l = await listen(new Server({ fs: ns() }), { kind: 'tcp', host: '127.0.0.1', port: 0 });
    expect(l.address.kind).toBe('tcp');
    const port = l.address.kind === 'tcp' ? l.address.port : 0;
    const c = await dial(`tcp!127.0.0.1!${port}`, { uname: 'alice' });
    expect(await c.readText('hello')).toBe('hello\n');
    c.close();
    await l.close();
  });

  it('works over a MessagePort', async () => {
    const { port1, port2 } = new MessageChannel();
    const server = new Server({ fs: ns() });
    server.serve(messagePortChannel(port1 as unknown as MessagePortLike));
    const c = await Client.connect(messagePortChannel(port2 as unknown as MessagePortLike), { uname: 'alice' });
    expect(await c.readText('hello')).toBe('hello\n');
    expect(await c.readText('deep/x/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/leaf')).toBe('deep\n');
    c.close();
    await new Promise((r) => setTimeout(r, 20));
    expect(server.connections.size).toBe(0);
  });

  it('works over a WebSocket', async () => {
    const server = new Server({ fs: ns() });
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    wss.on('connection', (ws) => server.serve(webSocketChannel(ws as unknown as WebSocketLike)));
    await new Promise((r) => wss.once('listening', r));
    const port = (wss.address() as net.AddressInfo).port;
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    await new Promise((r, j) => {
      ws.once('open', r);
      ws.once('error', j);
    });
    const c = await Client.connect(webSocketChannel(ws as unknown as WebSocketLike), { uname: 'alice' });
    expect(await c.readText('hello')).toBe('hello\n');
    c.close();
    await new Promise<void>((r) => wss.close(() => r()));
  });

  it('parses dial strings', () => {
    expect(parseAddress('unix!/a/b')).toEqual({ kind: 'unix', path: '/a/b' });
    expect(parseAddress('/a/b')).toEqual({ kind: 'unix', path: '/a/b' });
    expect(parseAddress('tcp!localhost!564')).toEqual({ kind: 'tcp', host: 'localhost', port: 564 });
    expect(() => parseAddress('tcp!localhost!99999')).toThrow(/bad port/);
    expect(() => parseAddress('udp!x!1')).toThrow(/expected unix/);
  });
});

describe('client', () => {
  let server: Server<unknown>;
  let path: string;
  let l: Awaited<ReturnType<typeof listen>>;
  beforeAll(async () => {
    path = join(mkdtempSync(join(tmpdir(), 'ninep-client-')), 's.sock');
    server = new Server({ fs: ns() }) as Server<unknown>;
    l = await listen(server, { kind: 'unix', path });
  });
  afterAll(() => l.close());

  it("pipelines requests: replies come back in the server's order, each to its caller", async () => {
    const c = await dial({ kind: 'unix', path }, { uname: 'alice' });
    const order: string[] = [];
    await Promise.all(['60', '5', '30'].map((ms) => c.rdwrText('slow', ms).then((r) => order.push(r))));
    expect(order).toEqual(['5', '30', '60']);
    const many = await Promise.all(Array.from({ length: 200 }, () => c.readText('hello')));
    expect(new Set(many)).toEqual(new Set(['hello\n']));
    c.close();
  });

  it('cancels with AbortSignal by sending Tflush; the connection stays usable', async () => {
    const c = await dial({ kind: 'unix', path }, { uname: 'alice' });
    const ac = new AbortController();
    const p = c.read('never', ac.signal);
    setTimeout(() => ac.abort(new Error('user stop')), 20);
    await expect(p).rejects.toThrow('user stop');
    expect(await c.readText('hello')).toBe('hello\n');
    c.close();
  });

  it('a cancelled walk leaks no fid and duplicates none: 30 more operations succeed', async () => {
    const c = await dial({ kind: 'unix', path }, { uname: 'alice' });
    for (const when of ['at once', 'after a tick']) {
      const ac = new AbortController();
      const p = c.walk('hello', ac.signal);
      if (when === 'at once') ac.abort(new Error('cancelled'));
      else setTimeout(() => ac.abort(new Error('cancelled')), 0);
      // Answered before its flush, the walk made a fid: the client clunks it and reports the cancel.
      await p.then(
        (f) => f.clunk(),
        (e: Error) => expect(e.message).toBe('cancelled'),
      );
    }
    const ac = new AbortController();
    const blocked = c.read('never', ac.signal);
    setTimeout(() => ac.abort(new Error('stop')), 10);
    await expect(blocked).rejects.toThrow('stop');
    for (let i = 0; i < 30; i++) expect(await c.readText('hello')).toBe('hello\n');
    const all = await Promise.all(Array.from({ length: 30 }, () => c.stat('hello')));
    expect(all.every((s) => s.name === 'hello')).toBe(true);
    c.close();
  });

  it('walks paths longer than 16 elements in several Twalks and reports where a walk failed', async () => {
    const c = await dial({ kind: 'unix', path }, { uname: 'alice' });
    expect(await c.readText('deep/x/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/leaf')).toBe('deep\n');
    await expect(c.readText('deep/x/a/nope/c')).rejects.toThrow('deep/x/a/nope: file not found');
    c.close();
  });

  it('rejects pending requests when the connection drops', async () => {
    const c = await dial({ kind: 'unix', path }, { uname: 'alice' });
    const p = c.read('never');
    await new Promise((r) => setTimeout(r, 10));
    server.close();
    await expect(p).rejects.toThrow(/closed/);
  });
});
