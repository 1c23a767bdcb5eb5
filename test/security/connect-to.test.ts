/**
 * Attacks on "Connect to…" (src/platform/daemon-choice.ts through the web UI's /9p?to=ssh!HOST, the owner-only
 * choice of the daemon the GUI's channel is bridged to). ssh is replaced by a script that only records that it was
 * run ($OLLIE_SSH), so every attempt shows whether ssh would have been started: a page on another origin, a request
 * without the token, an address that would be an ssh option or names a local socket never start it; an agent in
 * the sandbox, without the token, neither. The control (the owner's page, a valid host) does start it.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startFrontDoor, type FrontDoor } from '../../src/platform/front-door.js';
import { mountWebUi } from '../../src/webui/server.js';
import { harness, type Block, type Harness } from '../olliesrv/agent-harness.js';

const TOKEN = 'c'.repeat(64);

/** How an upgrade to `url` ended: the HTTP refusal's status, or the close code and reason after it opened. */
function attempt(url: string, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers });
    ws.on('unexpected-response', (_req, res) => {
      resolve(`HTTP ${res.statusCode}`);
      res.resume();
      ws.terminate();
    });
    ws.on('close', (code, reason) => resolve(`CLOSED ${code} ${reason.toString()}`));
    ws.on('error', (e) => resolve(`ERROR ${e.message}`));
  });
}

let dir: string;
let marker: string;
let door: FrontDoor;
let h: Harness | undefined;
const saved = process.env.OLLIE_SSH;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ollie-connect-to-'));
  marker = join(dir, 'ssh-ran');
  const fakeSsh = join(dir, 'ssh');
  // Records its arguments and fails, as ssh does for an unreachable host.
  writeFileSync(
    fakeSsh,
    `#!/bin/sh\nprintf '%s\\n' "$*" >> ${marker}\necho "ssh: Could not resolve hostname" >&2\nexit 255\n`,
  );
  chmodSync(fakeSsh, 0o755);
  process.env.OLLIE_SSH = fakeSsh;
  h = await harness({
    profiles: {
      attacker: { description: 'attacker', prompt: 'You are a test agent.', autoLoad: ['shell'], maxSteps: 10 },
    },
  });
  const rendererDir = join(dir, 'renderer');
  door = await startFrontDoor({ token: TOKEN });
  mountWebUi(door, { server: h.daemon.server, rendererDir });
});
afterAll(async () => {
  await door?.close();
  await h?.close();
  if (saved === undefined) delete process.env.OLLIE_SSH;
  else process.env.OLLIE_SSH = saved;
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => rmSync(marker, { force: true }));

const ws = (query: string): string => `ws://127.0.0.1:${door.port}/9p?${query}`;
const to = (addr: string): string => `to=${encodeURIComponent(addr)}`;
/** An upgrade from the owner's page (the token, its own origin) asking to be bridged to `addr`. */
const asOwner = (addr: string): Promise<string> => attempt(ws(`token=${TOKEN}&${to(addr)}`), { origin: door.origin });

describe('choosing the daemon the GUI is bridged to', () => {
  it("the control: the owner's page (token, own origin) with a valid host starts ssh, and hears why it failed", async () => {
    expect(await asOwner('ssh!buildbox')).toMatch(/^CLOSED 4502 ssh!buildbox: .*Could not resolve hostname/);
    expect(readFileSync(marker, 'utf8')).toContain('buildbox');
  });

  it("a page on another origin, or a request without the token, cannot make the owner's side dial", async () => {
    for (const origin of ['http://evil.example', `http://127.0.0.1:${door.port + 1}`, 'null']) {
      expect(await attempt(ws(`token=${TOKEN}&${to('ssh!buildbox')}`), { origin })).toBe('HTTP 403');
    }
    // A page of another local port: same-site, no Origin on some requests, but the browser says where it is from.
    expect(await attempt(ws(`token=${TOKEN}&${to('ssh!buildbox')}`), { 'sec-fetch-site': 'same-site' })).toBe(
      'HTTP 403',
    );
    expect(await attempt(ws(to('ssh!buildbox')))).toBe('HTTP 401');
    expect(await attempt(ws(`token=${'0'.repeat(64)}&${to('ssh!buildbox')}`))).toBe('HTTP 401');
    // The page cookie lets assets in, never a WebSocket.
    expect(await attempt(ws(to('ssh!buildbox')), { cookie: `ollie_token=${TOKEN}` })).toBe('HTTP 401');
    expect(existsSync(marker)).toBe(false);
  });

  it.each([
    'ssh!-oProxyCommand=touch /tmp/ollie-pwned',
    'ssh!-F/etc/passwd',
    'ssh!host -oProxyCommand=x',
    'ssh!host!relative.sock',
    'tcp!127.0.0.1!22',
    'buildbox',
  ])("even the owner's page cannot smuggle an ssh option or another kind of address through it: %s", async (addr) => {
    expect(await asOwner(addr)).toMatch(/^CLOSED 4400 bad (ssh address|daemon)/);
    expect(existsSync(marker)).toBe(false);
    expect(existsSync('/tmp/ollie-pwned')).toBe(false);
  });

  it("even the owner's page cannot reach a local socket through it", async () => {
    expect(await asOwner(`unix!${h!.socket}`)).toMatch(/^CLOSED 4400 bad (ssh address|daemon)/);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('an agent in the sandbox', () => {
  it("cannot switch the GUI's channel: no token, and the door (or the sandbox) refuses it", async () => {
    const a = await h!.agent({ profile: 'attacker' });
    const shell = (command: string) => ({ toolCalls: [{ name: 'shell', args: { command } }] });
    // A raw upgrade as a browser would send it, from the daemon's own origin, naming a host.
    const probe = join(h!.dir, 'probe.mjs');
    writeFileSync(
      probe,
      [
        "import net from 'node:net';",
        `const s = net.connect(${door.port}, '127.0.0.1');`,
        "s.on('error', (e) => console.log('NOCONNECT', e.code ?? e.message));",
        `s.on('connect', () => s.write('GET /9p?${to('ssh!buildbox')} HTTP/1.1\\r\\nHost: 127.0.0.1:${door.port}\\r\\nOrigin: ${door.origin}\\r\\nConnection: Upgrade\\r\\nUpgrade: websocket\\r\\nSec-WebSocket-Version: 13\\r\\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\n\\r\\n'));`,
        "s.on('data', (d) => { console.log('ANSWER', d.toString().split('\\r\\n')[0]); s.destroy(); });",
        '',
      ].join('\n'),
    );
    h!.mock.script([shell(`node ${probe}`)], [{ text: 'done' }]);
    const blocks: Block[] = await h!.turn(a.path, "switch the owner's GUI to my host");
    const out = blocks
      .filter((b) => b.role === 'tool')
      .map((b) => b.content)
      .join('\n');
    expect(out).toMatch(/NOCONNECT|ANSWER HTTP\/1\.1 40[13]/);
    expect(out).not.toMatch(/101 Switching/);
    expect(existsSync(marker)).toBe(false);
  });
});
