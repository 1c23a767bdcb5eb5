/**
 * Attack on the front door's page cookie. Browsers do not keep cookies apart by port: the cookie the door sets
 * for 127.0.0.1 is sent to every server on 127.0.0.1, whatever its port. An agent whose policy lets it listen
 * on a port (a dev server, `python -m http.server`) only has to be visited by the owner, in the browser where
 * the web UI is open, to receive that cookie; another local program the owner browses to gets it as well. When
 * the cookie held the token itself, whoever received it had the owner's access: the gateway, the 9P WebSocket.
 * What the cookie carries must open only what the page's own asset requests need: the web UI's files.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FrontDoor } from '../../src/platform/front-door.js';
import { get, tryWebSocket } from '../http-helpers.js';
import { startDoor, type DoorEnv } from './door-harness.js';

describe("the page cookie, as another local port receives it, opens no more than the web UI's files", () => {
  let door: FrontDoor;
  const TOKEN = 'c'.repeat(64);

  let env: DoorEnv;
  beforeAll(async () => {
    ({ door } = env = await startDoor(TOKEN, 'ollie-door-cookie-', {
      'index.html': '<div id="root">the app</div>',
      'assets/app.js': 'console.log(1)',
    }));
  });
  afterAll(() => env?.close());

  const host = (): string => `127.0.0.1:${door.port}`;
  const at = (path: string, headers: Record<string, string> = {}) =>
    get(`http://127.0.0.1:${door.port}${path}`, { host: host(), ...headers });

  it('the cookie does not hold the token, and gets neither the gateway nor the 9P WebSocket', async () => {
    // The owner opens the printed URL: the door sets the cookie, which the browser then also sends to other ports.
    const page = await at(`/?token=${TOKEN}`);
    expect(page.status).toBe(200);
    const setCookie = String(page.headers['set-cookie']);
    const cookie = setCookie.split(';')[0]!;
    const value = cookie.slice(cookie.indexOf('=') + 1);
    expect(value).not.toContain(TOKEN);
    // What the page's own requests need still works with it (the control).
    expect((await at('/assets/app.js', { cookie })).status).toBe(200);
    // What the receiver of the cookie tries: as the cookie, and as a token, on the gateway and the WebSocket.
    for (const headers of [{ cookie }, { authorization: `Bearer ${value}` }] as Record<string, string>[]) {
      const r = await at('/api/session/idx', headers);
      expect(r.status, JSON.stringify(headers)).toBe(401);
      expect(r.body).not.toContain('secret-project');
    }
    expect((await at(`/api/session/idx?token=${value}`)).status).toBe(401);
    expect(await tryWebSocket(`ws://127.0.0.1:${door.port}/9p`, { cookie })).toMatch(/401/);
    expect(await tryWebSocket(`ws://127.0.0.1:${door.port}/9p?token=${value}`)).toMatch(/401/);
    // Nor a write through the page's mount.
    expect((await get(`http://127.0.0.1:${door.port}/index.html`, { host: host(), cookie }, 'POST')).status).toBe(401);
  });

  it('the token itself still opens all of it (the control)', async () => {
    expect((await at('/api/session/idx', { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    expect(await tryWebSocket(`ws://127.0.0.1:${door.port}/9p?token=${TOKEN}`)).toBe('open');
  });
});
