/**
 * TCP Fast Open around Landlock's port rules (review of the kernel branch). sendto(2)/sendmsg(2) with
 * MSG_FASTOPEN on an unconnected TCP socket connects it inside the send, without the connect hook Landlock's
 * LANDLOCK_ACCESS_NET_CONNECT_TCP rule is enforced in (measured on Linux 6.18, Landlock ABI 7): with the network
 * off, or limited to ports, a tool reached any TCP port — loopback daemons, the LAN, a cloud's metadata service —
 * and sent its data in the SYN. The filter lets TCP sockets through only because Landlock governs their
 * connect and bind, so it must refuse MSG_FASTOPEN wherever it does. Tried with the built helper, as a model
 * would write it (python's socket module), outside the sandbox first so that the test can fail.
 */
import net from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { loadPolicy, type SandboxExtra, type SandboxPolicy } from '../../src/toolsrv/sandbox/index.js';
import {
  buildNative,
  makeWorld,
  runSandboxed,
  shippedPolicyText,
  writePolicy,
  type World,
} from '../toolsrv/sandbox-helpers.js';

let w: World;
let server: net.Server;
let port: number;
let got = '';

beforeAll(async () => {
  buildNative();
  server = net.createServer((s) =>
    s
      .setEncoding('utf8')
      .on('data', (d: string) => (got += d))
      .on('error', () => undefined),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as net.AddressInfo).port;
});
afterAll(() => server.close());
beforeEach(() => {
  w = makeWorld();
  got = '';
});
afterEach(() => w.cleanup());

function policy(network?: string): SandboxPolicy {
  let text = shippedPolicyText();
  if (network) text = text.replace(/^network:\n(?: {2}.*\n)+/m, `network:\n${network}`);
  writePolicy(w, text);
  return loadPolicy(w);
}

const MSG_FASTOPEN = 0x20000000;
/** Connects by sending (TCP Fast Open), then by connect(2) with TCP_FASTOPEN_CONNECT; one line each. */
const client = (tag: string) => `import socket
for how in ("sendto", "sendmsg"):
    s = socket.socket()
    try:
        if how == "sendto": s.sendto(b"${tag}-" + how.encode() + b"\\n", ${MSG_FASTOPEN}, ("127.0.0.1", ${port}))
        else: s.sendmsg([b"${tag}-" + how.encode() + b"\\n"], [], ${MSG_FASTOPEN}, ("127.0.0.1", ${port}))
        print(how, "ok")
    except OSError as e:
        print(how, "refused", e.errno)
    s.close()`;

const send = (p: SandboxPolicy | null, tag: string, extra?: SandboxExtra) =>
  runSandboxed(p, ['/usr/bin/python3', '-c', client(tag)], {
    cwd: w.cwd,
    env: { ...process.env, HOME: w.home },
    extra,
  });

async function settle(): Promise<void> {
  await new Promise((ok) => setTimeout(ok, 200));
}

describe('TCP Fast Open', () => {
  test('sendto/sendmsg with MSG_FASTOPEN reach no port that Landlock refuses: network off, or a port rule', async () => {
    // Outside the sandbox it connects and delivers (the attack is real here).
    expect((await send(null, 'free')).out).toBe('sendto ok\nsendmsg ok\n');
    await settle();
    expect(got).toContain('free-sendto');

    // The network off (the shipped policy), and a tool with a port rule for another port (web_fetch's 80/443).
    expect((await send(policy(), 'off')).out).toBe('sendto refused 1\nsendmsg refused 1\n');
    expect((await send(policy(), 'ports', { network: { connectTcp: [port === 443 ? 80 : 443] } })).out).toBe(
      'sendto refused 1\nsendmsg refused 1\n',
    );
    await settle();
    expect(got).not.toContain('off-');
    expect(got).not.toContain('ports-');
  });

  test('with the network open (no port rules) nothing changes', async () => {
    expect((await send(policy('  enabled: true\n'), 'open')).out).toBe('sendto ok\nsendmsg ok\n');
    await settle();
    expect(got).toContain('open-sendto');
  });
});
