/**
 * The owner's side of "Connect to…" (src/platform/daemon-choice.ts) as the Electron main process uses it: a 9P
 * channel over a MessagePort (the window's) bridged to a daemon reached through a real sshd on loopback; the GUI's
 * client, speaking 9P on its end, sees that daemon's namespace. Failures come back in ssh's words; addresses other
 * than ssh's are refused before anything runs.
 */
import { userInfo } from 'node:os';
import { MessageChannel } from 'node:worker_threads';
import { beforeAll, describe, expect, it } from 'vitest';
import { Client, messagePortChannel, type MessagePortLike } from '../../src/ninep/index.js';
import { bridgeToDaemon, closeReason, parseDaemonChoice } from '../../src/platform/daemon-choice.js';
import { sshdAvailable, useSshHost } from '../helpers/sshd.js';

describe('parseDaemonChoice', () => {
  it('takes this machine (nothing) or an ssh address, and refuses the rest naming it', () => {
    expect(parseDaemonChoice('')).toBeUndefined();
    expect(parseDaemonChoice(null)).toBeUndefined();
    expect(parseDaemonChoice('ssh!me@box:2222!/run/o.sock')).toEqual({
      dest: 'me@box',
      port: 2222,
      socket: '/run/o.sock',
    });
    expect(() => parseDaemonChoice('unix!/run/ollie.sock')).toThrow(/bad daemon "unix!\/run\/ollie\.sock"/);
    expect(() => parseDaemonChoice('ssh!-oProxyCommand=x')).toThrow(/bad ssh address/);
  });

  it('cuts a close reason to the 123 bytes a WebSocket carries', () => {
    expect(closeReason('short\n reason')).toBe('short reason');
    const long = closeReason('é'.repeat(200));
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(123);
    expect(long.endsWith('…')).toBe(true);
  });
});

describe.skipIf(!sshdAvailable())('bridgeToDaemon over a real sshd', () => {
  const there = useSshHost({ env: true });

  beforeAll(() => {
    there.daemon.sessions.create({ name: 'over-there' });
  });

  const bridged = (addr: string, fail: (why: string) => void): MessagePortLike => {
    const { port1, port2 } = new MessageChannel();
    bridgeToDaemon(messagePortChannel(port1 as unknown as MessagePortLike), parseDaemonChoice(addr)!, fail);
    return port2 as unknown as MessagePortLike;
  };

  it("carries the window's 9P to the daemon there, as its owner", async () => {
    const failures: string[] = [];
    const c = await Client.connect(
      messagePortChannel(bridged(`ssh!${there.sshd.host}!${there.socket}`, (w) => failures.push(w))),
      { uname: userInfo().username },
    );
    try {
      expect(await c.readText('session/idx')).toMatch(/\tover-there\t/);
      expect((await c.rdwrText('session/new', 'name=from-the-window')).trim()).toBe('from-the-window');
      expect(there.daemon.sessions.has('from-the-window')).toBe(true);
    } finally {
      c.close();
    }
    expect(failures).toEqual([]);
  }, 30_000);

  it("says in ssh's words why a daemon cannot be reached", async () => {
    const why = await new Promise<string>((resolve) => {
      const port = bridged(`ssh!${there.sshd.host}!/nonexistent/ollie.sock`, resolve);
      // The client's first message (Tversion) goes out while ssh connects, as the window's does.
      void Client.connect(messagePortChannel(port), { uname: userInfo().username }).then(
        (c) => c.close(),
        () => undefined,
      );
    });
    expect(why).toMatch(
      new RegExp(`^ssh!${there.sshd.host}!/nonexistent/ollie\\.sock: .*(open failed|connect failed|No such file)`, 'i'),
    );
  }, 30_000);
});
