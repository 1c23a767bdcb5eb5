/**
 * Attack on the web UI's static file server (src/webui/server.ts, mounted at `/` of the front door): a symbolic
 * link inside the renderer build directory (planted by whatever can write there: a build step, a workspace that
 * is an Ollie checkout) must not make the door serve a file from outside it, to anyone, token or not. Escapes by
 * `..`, encoded or not, are refused as well.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebUi, type WebUi } from '../../src/webui/server.js';
import { harness, type Harness } from '../olliesrv/agent-harness.js';
import { get } from '../http-helpers.js';

describe('the web UI serves files of the renderer build only', () => {
  let h: Harness;
  let ui: WebUi;
  let base: string;
  const TOKEN = 'b'.repeat(64);
  const SECRET = 'the-owner-secret-4242';

  beforeAll(async () => {
    h = await harness({ tools: false });
    base = realpathSync(mkdtempSync(join(tmpdir(), 'ollie-door-static-')));
    const outside = join(base, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'secret.txt'), SECRET);
    const dir = join(base, 'renderer');
    mkdirSync(join(dir, 'assets'), { recursive: true });
    writeFileSync(join(dir, 'index.html'), '<div id="root">the app</div>');
    writeFileSync(join(dir, 'assets', 'app.js'), 'console.log(1)');
    symlinkSync(join(outside, 'secret.txt'), join(dir, 'assets', 'leak.js'));
    symlinkSync(outside, join(dir, 'linked'));
    ui = await startWebUi({ server: h.daemon.server, rendererDir: dir, token: TOKEN });
  });
  afterAll(async () => {
    await ui.close();
    await h.close();
    rmSync(base, { recursive: true, force: true });
  });

  const fetchWithToken = (path: string) =>
    get(`http://127.0.0.1:${ui.port}${path}`, { host: `127.0.0.1:${ui.port}`, authorization: `Bearer ${TOKEN}` });

  it('serves its own files (the control)', async () => {
    const r = await fetchWithToken('/assets/app.js');
    expect(r.status).toBe(200);
    expect(r.body).toBe('console.log(1)');
  });

  it('refuses a symbolic link to a file outside, and one to a directory outside', async () => {
    for (const path of ['/assets/leak.js', '/linked/secret.txt']) {
      const r = await fetchWithToken(path);
      expect(r.status, path).toBe(404);
      expect(r.body, path).not.toContain(SECRET);
    }
  });

  it('refuses .. however it is spelled', async () => {
    for (const path of [
      '/../outside/secret.txt',
      '/%2e%2e/outside/secret.txt',
      '/assets%2f..%2f..%2foutside%2fsecret.txt',
      '/assets/%2e%2e%2f%2e%2e%2foutside/secret.txt',
    ]) {
      const r = await fetchWithToken(path);
      expect([403, 404], path).toContain(r.status);
      expect(r.body, path).not.toContain(SECRET);
    }
  });
});
