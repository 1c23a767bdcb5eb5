/**
 * Attacks on the loopback front door (src/platform/front-door.ts), through both of its mounts: the web UI at `/`
 * (its page and its /9p WebSocket) and the gateway at `/api`. A DNS-rebound Host, a foreign Origin, a missing,
 * wrong or truncated token are refused before either mount runs; a token carried in a URL reaches no log and no
 * other site; and an agent's tools, inside the sandbox, can neither read the remembered token nor get past the
 * door without it.
 */
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { mountHttpGateway } from '../../src/gateway/http.js';
import { startRememberedFrontDoor, type FrontDoor } from '../../src/platform/front-door.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { spawnServe } from '../helpers/serve.js';
import { get, tryWebSocket, type Answer } from '../http-helpers.js';
import { startDoor, type DoorEnv } from './door-harness.js';
import { attackerProfile, results } from './scripted-calls.js';

/** A request to the door at `port`, with exactly the headers given (Host included). */
const raw = (port: number, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> =>
  get(`http://127.0.0.1:${port}${path}`, headers, method);
const upgrade = tryWebSocket;

describe('the front door, for both mounts', () => {
  let door: FrontDoor;
  const TOKEN = 'a'.repeat(64);

  let env: DoorEnv;
  beforeAll(async () => {
    ({ door } = env = await startDoor(TOKEN, 'ollie-door-ui-', { 'index.html': '<div id="root">the app</div>' }));
  });
  afterAll(() => env?.close());

  const host = (): string => `127.0.0.1:${door.port}`;
  const mounts = [
    { name: 'web UI', path: '/index.html', leak: 'the app' },
    { name: 'gateway', path: '/api/session/idx', leak: 'secret-project' },
  ];

  for (const m of mounts) {
    it(`${m.name}: the control passes with the token; a DNS-rebound Host is refused even with it`, async () => {
      const ok = await raw(door.port, m.path, { host: host(), authorization: `Bearer ${TOKEN}` });
      expect(ok.status).toBe(200);
      expect(ok.body).toContain(m.leak);
      for (const evil of [
        'evil.example',
        `evil.example:${door.port}`,
        `127.0.0.1.evil.example:${door.port}`,
        `127.0.0.1:${door.port + 1}`,
      ]) {
        const r = await raw(door.port, `${m.path}?token=${TOKEN}`, {
          host: evil,
          authorization: `Bearer ${TOKEN}`,
          cookie: `ollie_token=${TOKEN}`,
        });
        expect(r.status, evil).toBe(403);
        expect(r.body).not.toContain(m.leak);
        expect(r.headers['set-cookie']).toBeUndefined();
      }
    });

    it(`${m.name}: a foreign Origin is refused even with the token and the cookie`, async () => {
      for (const origin of [
        'http://evil.example',
        `http://evil.example:${door.port}`,
        'null',
        `https://127.0.0.1:${door.port}`,
        `http://127.0.0.1:${door.port + 1}`,
      ]) {
        const r = await raw(door.port, m.path, {
          host: host(),
          origin,
          authorization: `Bearer ${TOKEN}`,
          cookie: `ollie_token=${TOKEN}`,
        });
        expect(r.status, origin).toBe(403);
        expect(r.body).not.toContain(m.leak);
      }
      // A request the browser marks as another origin's, without an Origin header (an <img> or <script> of a page
      // on another local port, which is "same-site" and so carries the cookie), is refused too.
      for (const site of ['same-site', 'cross-site']) {
        const r = await raw(door.port, m.path, {
          host: host(),
          'sec-fetch-site': site,
          cookie: `ollie_token=${TOKEN}`,
        });
        expect(r.status, site).toBe(403);
        expect(r.body).not.toContain(m.leak);
      }
      for (const site of ['same-origin', 'none'])
        expect(
          (await raw(door.port, m.path, { host: host(), 'sec-fetch-site': site, authorization: `Bearer ${TOKEN}` }))
            .status,
          site,
        ).toBe(200);
      // The door's own origin is the page's: allowed.
      expect(
        (await raw(door.port, m.path, { host: host(), origin: `http://${host()}`, authorization: `Bearer ${TOKEN}` }))
          .status,
      ).toBe(200);
    });

    it(`${m.name}: a missing, wrong, truncated or padded token is 401, in every place a token may be carried`, async () => {
      const bad = ['', 'b'.repeat(64), TOKEN.slice(0, -1), `${TOKEN}a`, TOKEN.toUpperCase(), `${TOKEN}\t${TOKEN}`];
      expect((await raw(door.port, m.path, { host: host() })).status).toBe(401);
      for (const t of bad) {
        for (const carry of [{ authorization: `Bearer ${t}` }, { cookie: `ollie_token=${t}` }] as Record<
          string,
          string
        >[]) {
          const r = await raw(door.port, m.path, { host: host(), ...carry });
          expect(r.status, JSON.stringify(carry)).toBe(401);
          expect(r.body).not.toContain(m.leak);
          expect(r.headers['www-authenticate']).toBe('Bearer');
        }
        const q = await raw(door.port, `${m.path}?token=${encodeURIComponent(t)}`, { host: host() });
        expect(q.status).toBe(401);
        expect(q.body).not.toContain(m.leak);
      }
      // Another method does not skip the check.
      for (const method of ['POST', 'DELETE', 'PATCH', 'PUT', 'OPTIONS'])
        expect((await raw(door.port, m.path, { host: host() }, method)).status, method).toBe(401);
    });

    it(`${m.name}: a token carried in the URL is echoed nowhere and is not passed on to other sites`, async () => {
      const attempts = [
        `${m.path}?token=${TOKEN}`,
        `${m.path.replace(/[^/]+$/, 'no-such-file')}?token=${TOKEN}`,
        `${m.path}/..%2f..%2f..%2fetc%2fpasswd?token=${TOKEN}`,
        `${m.path}%E0%A4%A?token=${TOKEN}`,
      ];
      for (const path of attempts) {
        for (const method of ['GET', 'DELETE']) {
          const r = await raw(door.port, path, { host: host() }, method);
          expect(r.body, `${method} ${path}`).not.toContain(TOKEN);
          const { 'set-cookie': cookie, ...rest } = r.headers;
          expect(JSON.stringify(rest)).not.toContain(TOKEN);
          // Only the page's HttpOnly, same-site cookie carries it, and only on a GET that succeeded in its check.
          if (cookie) expect(String(cookie)).toMatch(/HttpOnly; SameSite=Strict/);
          expect(r.headers['referrer-policy']).toBe('no-referrer');
          expect(r.headers['cache-control']).toBe('no-store');
          expect(r.headers['x-content-type-options']).toBe('nosniff');
        }
      }
      // Refusals carry the same headers.
      const refused = await raw(door.port, `${m.path}?token=wrong`, { host: host() });
      expect(refused.headers['referrer-policy']).toBe('no-referrer');
      expect(refused.headers['x-frame-options']).toBe('DENY');
    });
  }

  it('web UI: the 9P WebSocket is refused for a foreign Origin, a rebound Host or without the token, before any 9P flows', async () => {
    const ws = `ws://${host()}/9p`;
    expect(await upgrade(ws)).toMatch(/401/);
    expect(await upgrade(`${ws}?token=${TOKEN.slice(1)}b`)).toMatch(/401/);
    expect(await upgrade(`${ws}?token=${TOKEN}`, { origin: 'http://evil.example' })).toMatch(/403/);
    expect(await upgrade(`${ws}?token=${TOKEN}`, { host: `evil.example:${door.port}` })).toMatch(/403/);
    // The gateway mount has no WebSocket: an upgrade there is not found even with the token.
    expect(await upgrade(`ws://${host()}/api/session/idx?token=${TOKEN}`)).toMatch(/404/);
    expect(await upgrade(`${ws}?token=${TOKEN}`, { origin: `http://${host()}` })).toBe('open');
  });
});

describe('ollie serve --ui --http', () => {
  it('prints the token once, in its start lines, and never again whatever the requests that carry it in their URL', async () => {
    const { p } = spawnServe('ollie-door-serve-', ['--ui', '--http']);
    let out = '';
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const [, origin, token] = await new Promise<RegExpExecArray>((resolve, reject) => {
      const look = (): void => {
        const gw = /HTTP gateway at (http:\/\/127\.0\.0\.1:\d+)\/api\/ \(token ([0-9a-f]{64});/.exec(out);
        if (gw && out.includes('web UI at')) resolve(gw);
      };
      p.stdout!.on('data', look);
      p.once('exit', (c) => reject(new Error(`ollie serve exited ${c}: ${out}`)));
    });
    // One door: the web UI's URL carries the same token, on the same port.
    expect(out).toContain(`web UI at ${origin}/?token=${token}`);
    const startLines = out;
    const port = Number(new URL(origin!).port);
    const h = `127.0.0.1:${port}`;
    for (const path of [
      '/',
      '/api/session/idx',
      '/api/no/such',
      '/api/session/idx/..%2f',
      '/no-such-asset.js',
      '/api/openapi.json',
    ]) {
      for (const method of ['GET', 'POST', 'DELETE']) {
        await raw(port, `${path}?token=${token}`, { host: h }, method);
        await raw(port, `${path}?token=${token}x`, { host: h }, method);
        await raw(port, `${path}?token=${token}`, { host: `evil.example:${port}` }, method);
        await raw(port, `${path}?token=${token}`, { host: h, origin: 'http://evil.example' }, method);
      }
    }
    expect(await upgrade(`ws://${h}/9p?token=${token}`, { origin: 'http://evil.example' })).toMatch(/403/);
    p.kill('SIGTERM');
    expect(await new Promise((r) => p.once('exit', r))).toBe(0);
    expect(out.slice(startLines.length)).not.toContain(token);
    expect(out.split(token!).length - 1).toBe(3); // the web UI's URL, and the gateway's line (twice: the token, the curl example)
  });
});

describe('an agent attacking the front door from inside the sandbox', () => {
  it('can neither read the remembered token nor get past the door without it', async () => {
    const h = await testHarness({ profiles: { attacker: attackerProfile(['shell'], 10) } });
    // Where `ollie serve` keeps it: beside the socket, in the private runtime directory.
    const stateFile = join(dirname(h.socket), 'webui.json');
    const door = await startRememberedFrontDoor({ stateFile });
    onTestFinished(() => door.close());
    await mountHttpGateway(door, { server: h.daemon.server });
    const a = await h.agent({ profile: 'attacker' });
    const shell = (command: string) => ({ toolCalls: [{ name: 'shell', args: { command } }] });
    const fetchJs = (headers: string) =>
      `node -e 'fetch("${door.origin}/api/session/idx", { headers: ${headers} }).then(async (r) => console.log("STATUS", r.status, await r.text()), (e) => console.log("NOCONNECT", e.cause?.code ?? e.message))'`;
    h.mock.script(
      [shell(`cat ${stateFile}; echo EXIT $?`)],
      [shell(`ls -la ${dirname(stateFile)}; echo EXIT $?`)],
      [shell(fetchJs('{}'))],
      [shell(fetchJs(`{ host: "evil.example:${door.port}", authorization: "Bearer ${'0'.repeat(64)}" }`))],
      [{ text: 'done' }],
    );
    const out = results(await h.turn(a.path, 'attack'));
    expect(out).toHaveLength(4);
    // The runtime directory is the daemon's: the sandbox denies it, file and listing alike.
    expect(out[0]).not.toContain(door.token);
    expect(out[0]).toMatch(/Permission denied|No such file/);
    expect(out[1]).not.toContain('webui.json');
    // Over TCP: either the sandbox stops the connection, or the door refuses the request; never the namespace.
    for (const o of out.slice(2)) {
      expect(o).toMatch(/NOCONNECT|STATUS 40[13]/);
      expect(o).not.toContain(a.session);
      expect(o).not.toContain(door.token);
    }
  });
});
