/**
 * Hostile clients: a client that never reads its replies, half-sent frames, too many requests, fids
 * and connections. Each is bounded, and a normal client keeps being answered.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  build,
  Dir,
  encode,
  IOHDRSZ,
  Leaf,
  NOFID,
  NOTAG,
  OREAD,
  Type,
  type FileServer,
  type RMessage,
} from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { RawConn, serve, type TestServer } from './helpers.js';

const MiB = 1024 * 1024;
const big = new Uint8Array(MiB).fill(120);
const ns = () =>
  build(
    Dir(
      '/',
      Leaf('hello', { read: () => 'hello\n' }),
      Leaf('big', { read: () => big }),
      Leaf('never', {
        blockOnce: (_c, signal) =>
          new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      }),
    ),
    { uid: 'alice' },
  );

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const rss = (): number => process.memoryUsage().rss;

let ts: TestServer<unknown> | undefined;
afterEach(async () => {
  await ts?.close();
  ts = undefined;
});

async function start(opts: Record<string, unknown> = {}, log?: string[]): Promise<TestServer<unknown>> {
  ts = await serve({
    fs: ns() as FileServer<unknown>,
    ...(log && { onProtocolError: (m: string) => log.push(m) }),
    ...opts,
  });
  return ts;
}

/** A raw connection versioned to `msize` and attached (fid 0). */
async function attached(t: TestServer<unknown>, msize = MiB + IOHDRSZ) {
  const r = await t.raw();
  expect((await r.rpc(NOTAG, { type: Type.Tversion, msize, version: '9P2000' })).type).toBe(Type.Rversion);
  expect((await r.rpc(1, { type: Type.Tattach, fid: 0, afid: NOFID, uname: 'alice', aname: '' })).type).toBe(
    Type.Rattach,
  );
  return r;
}

describe('write backpressure', () => {
  it('a client pipelining 1 MiB reads without reading its socket grows the server < 200 MB; others are answered within 1 s', async () => {
    const t = await start();
    const normal = await t.client();
    const hostile = await attached(t);
    expect((await hostile.rpc(2, { type: Type.Twalk, fid: 0, newfid: 1, wnames: ['big'] })).type).toBe(Type.Rwalk);
    expect((await hostile.rpc(3, { type: Type.Topen, fid: 1, mode: OREAD })).type).toBe(Type.Ropen);
    global.gc?.();
    const before = rss();
    hostile.sock.pause();
    // 600 MiB of replies asked for in one go: unbounded buffering would hold them all.
    const frames: Uint8Array[] = [];
    for (let tag = 10; tag < 610; tag++) frames.push(encode({ type: Type.Tread, tag, fid: 1, offset: 0, count: MiB }));
    hostile.send(Buffer.concat(frames));
    let peak = 0;
    let slowest = 0;
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      const t0 = Date.now();
      expect(await normal.readText('/hello')).toBe('hello\n');
      slowest = Math.max(slowest, Date.now() - t0);
      peak = Math.max(peak, rss() - before);
      await sleep(50);
    }
    expect(slowest).toBeLessThan(1000);
    console.log(`non-reading pipeliner: peak +${(peak / MiB).toFixed(1)} MB, slowest normal read ${slowest} ms`);
    expect(peak).toBeLessThan(200 * MiB);
    // Once the client reads again, the rest of its replies come.
    hostile.sock.resume();
    const last = await hostile.reply(609, 20_000);
    expect(last.type).toBe(Type.Rread);
  }, 40_000);
});

describe('per-connection limits', () => {
  it('refuses a request beyond maxOutstanding with an Rerror naming the limit', async () => {
    const t = await start({ maxOutstanding: 3 });
    const r = await attached(t, 8192);
    for (let i = 0; i < 4; i++) {
      expect((await r.rpc(10 + i, { type: Type.Twalk, fid: 0, newfid: 1 + i, wnames: ['never'] })).type).toBe(
        Type.Rwalk,
      );
      expect((await r.rpc(20 + i, { type: Type.Topen, fid: 1 + i, mode: OREAD })).type).toBe(Type.Ropen);
    }
    for (let i = 0; i < 3; i++) r.send({ type: Type.Tread, tag: 30 + i, fid: 1 + i, offset: 0, count: 100 });
    const refused = await r.rpc(33, { type: Type.Tread, fid: 4, offset: 0, count: 100 });
    expect(refused).toMatchObject({ type: Type.Rerror });
    expect((refused as RMessage & { ename: string }).ename).toMatch(/too many outstanding requests \(limit 3/);
    // A flush is still taken, and frees a place.
    expect((await r.rpc(40, { type: Type.Tflush, oldtag: 30 })).type).toBe(Type.Rflush);
    r.send({ type: Type.Tread, tag: 34, fid: 4, offset: 0, count: 100 });
    // Which is taken (it blocks): the limit is reached again.
    const again = await r.rpc(41, { type: Type.Tclunk, fid: 0 });
    expect((again as RMessage & { ename: string }).ename).toMatch(/too many outstanding requests/);
  });

  it('refuses a fid beyond maxFids with an Rerror naming the limit', async () => {
    const t = await start({ maxFids: 3 });
    const r = await attached(t, 8192);
    expect((await r.rpc(2, { type: Type.Twalk, fid: 0, newfid: 1, wnames: [] })).type).toBe(Type.Rwalk);
    expect((await r.rpc(3, { type: Type.Twalk, fid: 0, newfid: 2, wnames: [] })).type).toBe(Type.Rwalk);
    const refused = await r.rpc(4, { type: Type.Twalk, fid: 0, newfid: 3, wnames: [] });
    expect((refused as RMessage & { ename: string }).ename).toMatch(/too many fids \(limit 3/);
    expect((await r.rpc(5, { type: Type.Tclunk, fid: 2 })).type).toBe(Type.Rclunk);
    expect((await r.rpc(6, { type: Type.Twalk, fid: 0, newfid: 3, wnames: [] })).type).toBe(Type.Rwalk);
  });
});

describe('connection limits and timeouts', () => {
  it('closes 300 half-frame connections by the partial-frame timeout; the server grows < 100 MB meanwhile', async () => {
    // The server runs in its own process (from dist/: `npm run build:node` first) so its RSS is its own.
    const dir = mkdtempSync(join(tmpdir(), 'ninep-halves-'));
    const path = join(dir, 's.sock');
    const child = fork(
      new URL('./bounds-server.mjs', import.meta.url).pathname,
      [path, JSON.stringify({ frameTimeout: 1500 })],
      {
        execArgv: ['--expose-gc'],
      },
    );
    type Report = { rss: number; connections: number; log: string[] };
    const next = (): Promise<Report> => new Promise((r) => child.once('message', (m) => r(m as Report)));
    const ask = (): Promise<Report> => {
      const p = next();
      child.send('rss');
      return p;
    };
    try {
      await next();
      const before = (await ask()).rss;
      const normal = await dial({ kind: 'unix', path }, { uname: 'alice' });
      const conns: RawConn[] = [];
      for (let i = 0; i < 300; i++) {
        const r = await RawConn.open(path);
        expect((await r.rpc(NOTAG, { type: Type.Tversion, msize: MiB + IOHDRSZ, version: '9P2000' })).type).toBe(
          Type.Rversion,
        );
        // A Twrite declaring 1 MiB of data, of which half is sent.
        r.send(
          encode({ type: Type.Twrite, tag: 2, fid: 0, offset: 0, data: new Uint8Array(MiB) }).subarray(0, MiB / 2),
        );
        conns.push(r);
      }
      let peak = 0;
      let slowest = 0;
      const until = Date.now() + 30_000;
      while (conns.some((r) => !r.closed) && Date.now() < until) {
        const t0 = Date.now();
        expect(await normal.readText('/hello')).toBe('hello\n');
        slowest = Math.max(slowest, Date.now() - t0);
        peak = Math.max(peak, (await ask()).rss - before);
        await sleep(100);
      }
      console.log(`300 half frames: server peak +${(peak / MiB).toFixed(1)} MB, slowest normal read ${slowest} ms`);
      expect(conns.every((r) => r.closed)).toBe(true);
      expect(peak).toBeLessThan(100 * MiB);
      expect(slowest).toBeLessThan(1000);
      const report = await ask();
      expect(report.connections).toBe(1);
      expect(report.log.filter((m) => /a frame stayed unfinished for 1.5 s/.test(m))).toHaveLength(300);
      normal.close();
    } finally {
      child.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('keeps a frame mid-way while its bytes keep coming', async () => {
    const t = await start({ frameTimeout: 300 });
    const r = await attached(t, 8192);
    const frame = encode({ type: Type.Twalk, tag: 2, fid: 0, newfid: 1, wnames: ['hello'] });
    r.send(frame.subarray(0, 5));
    await sleep(200);
    r.send(frame.subarray(5));
    expect((await r.reply(2)).type).toBe(Type.Rwalk);
    await sleep(400);
    expect(r.closed).toBe(false);
  });

  it('closes a connection that never finishes Tversion, and refuses a large frame before it', async () => {
    const log: string[] = [];
    const t = await start({ versionTimeout: 300 }, log);
    const idle = await t.raw();
    expect(await idle.waitClosed(2000)).toBe(true);
    expect(log.some((m) => /no Tversion within 0.3 s/.test(m))).toBe(true);
    // Before Tversion at most a Tversion's worth of a frame is held: a stranger cannot make the server hold 1 MiB.
    const bigFrame = await t.raw();
    bigFrame.send(
      encode({ type: Type.Twrite, tag: 2, fid: 0, offset: 0, data: new Uint8Array(MiB) }).subarray(0, 16384),
    );
    expect(await bigFrame.waitClosed(200)).toBe(true);
    expect(log.some((m) => /16384 bytes of a frame before Tversion/.test(m))).toBe(true);
  });

  it('refuses connections beyond maxConnections, logging it', async () => {
    const { listen } = await import('../../src/ninep/node.js');
    const { Server } = await import('../../src/ninep/index.js');
    const dir = mkdtempSync(join(tmpdir(), 'ninep-bounds-'));
    const refusals: string[] = [];
    const l = await listen(
      new Server({ fs: ns() }),
      { kind: 'unix', path: join(dir, 's.sock') },
      { maxConnections: 2, onRefused: (m) => refusals.push(m) },
    );
    const connect = (): Promise<{ sock: net.Socket; closed: Promise<void> }> =>
      new Promise((resolve) => {
        const sock = net.connect(join(dir, 's.sock'), () =>
          resolve({ sock, closed: new Promise((r) => sock.once('close', () => r())) }),
        );
        sock.on('error', () => undefined);
      });
    const a = await connect();
    const b = await connect();
    const c = await connect();
    await c.closed;
    expect(refusals[0]).toMatch(/limit 2/);
    a.sock.destroy();
    await a.closed;
    await sleep(50);
    const d = await connect();
    const stillOpen = await Promise.race([d.closed.then(() => false), sleep(200).then(() => true)]);
    expect(stillOpen).toBe(true);
    for (const s of [b, d]) s.sock.destroy();
    await l.close();
    rmSync(dir, { recursive: true, force: true });
  });
});
