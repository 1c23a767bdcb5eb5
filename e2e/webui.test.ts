/**
 * Headless web mode against the real daemon: the token gate, and the session tree kept live by the event
 * stream while another client changes sessions over the Unix socket. Chromium is Debian's, driven by
 * playwright-core.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import type { Client } from '../src/ninep/index.js';
import { dial } from '../src/ninep/node.js';
import { startDaemon, type Daemon } from '../src/olliesrv/daemon.js';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { buildRenderer, launch, rmrf, root, screenshot, socketPath, tempDir, until } from './helpers.js';
import { get, tryWebSocket } from '../test/http-helpers.js';

describe('web mode', () => {
  let rendererDir: string;
  let browser: Browser;
  let dir: string;
  let daemon: Daemon;
  let ui: WebUi;
  let outside: Client;
  let page: Page;

  beforeAll(async () => {
    rendererDir = await buildRenderer();
    browser = await launch();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    rmrf(rendererDir);
  });

  beforeEach(async () => {
    dir = tempDir('ollie-e2e-web-');
    const sock = socketPath(dir);
    daemon = await startDaemon({
      socket: sock,
      dataDir: `${dir}/data`,
      configDir: `${dir}/config`,
      log: () => undefined,
    });
    ui = await startWebUi({ server: daemon.server, rendererDir });
    outside = await dial(`unix!${sock}`, { uname: 'tester' });
  });
  afterEach(async () => {
    await page?.close().catch(() => undefined);
    outside?.close();
    await ui?.close();
    await daemon?.close();
    rmrf(dir);
  });

  /** Requests the page made that failed (404 and the like), as "STATUS URL". */
  let failed: string[] = [];
  let icon = 0;
  const open = async (): Promise<Page> => {
    page = await browser.newPage();
    failed = [];
    icon = 0;
    page.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
      if (/favicon/.test(r.url())) icon = r.status();
    });
    await page.goto(ui.url);
    await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    return page;
  };

  it('refuses the page, its assets and the WebSocket without the per-start token', async () => {
    const base = `http://127.0.0.1:${ui.port}`;
    expect(ui.url).toBe(`${base}/?token=${ui.token}`);
    expect(ui.token).toMatch(/^[0-9a-f]{64}$/);
    // One front door for the web UI and the gateway: a missing or wrong token is 401 on both.
    expect((await get(`${base}/`)).status).toBe(401);
    expect((await get(`${base}/?token=wrong`)).status).toBe(401);
    expect((await get(`${base}/index.html?token=${ui.token.slice(0, -1)}x`)).status).toBe(401);
    // A DNS-rebound name reaching our port is refused even with the token.
    expect((await get(`${base}/?token=${ui.token}`, { host: 'evil.example:80' })).status).toBe(403);

    const page200 = await get(ui.url);
    expect(page200.status).toBe(200);
    expect(page200.body).toContain('<div id="root">');
    expect(String(page200.headers['content-security-policy'])).toContain("default-src 'self'");
    const cookie = String(page200.headers['set-cookie']).split(';')[0]!;
    // Not the token: browsers send it to every port of 127.0.0.1 (test/security/door-review-cookie.test.ts).
    expect(cookie).toMatch(/^ollie_token=[0-9a-f]{64}$/);
    expect(cookie).not.toContain(ui.token);
    // The page's assets load with the cookie the page set, and not without it.
    const asset = /src="([^"]+\.js)"/.exec(page200.body)![1]!;
    expect((await get(`${base}${asset}`)).status).toBe(401);
    expect((await get(`${base}${asset}`, { cookie })).status).toBe(200);
    // Paths cannot climb out of the renderer directory.
    expect((await get(`${base}/..%2f..%2fpackage.json`, { cookie })).status).toBe(403);

    const ws = `ws://127.0.0.1:${ui.port}/9p`;
    expect(await tryWebSocket(ws)).toMatch(/401/);
    expect(await tryWebSocket(`${ws}?token=nope`)).toMatch(/401/);
    expect(await tryWebSocket(`${ws}?token=${ui.token}`, { origin: 'http://evil.example' })).toMatch(/403/);
    expect(await tryWebSocket(`${ws}?token=${ui.token}`, { origin: `http://127.0.0.1:${ui.port}` })).toBe('open');

    // A browser sent to the URL without the token gets the refusal, not the app.
    const p = await browser.newPage();
    const res = await p.goto(base);
    expect(res?.status()).toBe(401);
    expect(await p.textContent('body')).toContain('token');
    await p.close();
  });

  it('shows sessions created, renamed, paused and killed by another client live, without polling', async () => {
    await outside.rdwrText('session/new', 'name=before\n');
    const p = await open();
    await p.locator('[data-session="before"]').waitFor();
    // The page's icon is served (it was a 404 on every load), and nothing else failed.
    await expect.poll(() => icon).toBe(200);
    expect(failed).toEqual([]);
    const consoleBefore = await p.evaluate(() => performance.getEntriesByType('resource').length);

    await outside.rdwrText('session/new', `name=alpha\ncwd=${dir}\n`);
    await p.locator('[data-session="alpha"]').waitFor({ timeout: 3000 });
    await outside.write('session/alpha/name', 'beta\n');
    await p.locator('[data-session="beta"]').waitFor({ timeout: 3000 });
    expect(await p.locator('[data-session="alpha"]').count()).toBe(0);
    await outside.rdwrText('session/beta/ctl', 'pause\n');
    await p.locator('[data-session="beta"] .tag', { hasText: 'paused' }).waitFor({ timeout: 3000 });
    await outside.rdwrText('session/beta/ctl', 'kill\n');
    await p.locator('[data-session="beta"]').waitFor({ state: 'detached', timeout: 3000 });
    // Nothing was fetched over HTTP meanwhile: it all came over the one WebSocket.
    expect(await p.evaluate(() => performance.getEntriesByType('resource').length)).toBe(consoleBefore);
    await screenshot(p, 'web-sessions');
  });

  it('creates, renames and pauses a session from the UI, and shows each as an ollie-9p command', async () => {
    const p = await open();
    await p.getByRole('button', { name: 'New session' }).click();
    const dialog = p.getByRole('dialog', { name: 'New session' });
    await dialog.getByLabel('Name').fill('fromui');
    await dialog.getByLabel('Working directory').fill(dir);
    await dialog.getByRole('button', { name: 'Create' }).click();
    await p.locator('[data-session="fromui"]').waitFor();
    expect(await outside.readText('session/fromui/cwd')).toBe(`${dir}\n`);

    // Rename by double-click.
    await p.locator('[data-session="fromui"] .label').dblclick();
    await p.getByLabel('New name').fill('renamed');
    await p.getByLabel('New name').press('Enter');
    await p.locator('[data-session="renamed"]').waitFor();
    expect(await outside.readText('session/renamed/name')).toBe('renamed\n');

    // Pause from the context menu.
    await p.locator('[data-session="renamed"] .label').click({ button: 'right' });
    await p.getByRole('menuitem', { name: 'Pause' }).click();
    await until(async () => (await outside.readText('session/idx')).split('\t')[2] === '1', 'the session to be paused');

    // An error from the daemon is shown, not swallowed.
    await p.getByRole('button', { name: 'New session' }).click();
    await p.getByRole('dialog').getByLabel('Working directory').fill('relative/path');
    await p.getByRole('dialog').getByRole('button', { name: 'Create' }).click();
    await p.getByRole('alert').filter({ hasText: 'not an absolute path' }).waitFor();
    await p.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();

    await p.keyboard.press('Control+`');
    const console = p.getByRole('region', { name: '9P console' });
    await console.waitFor();
    const text = await console.textContent();
    expect(text).toContain(`ollie-9p rdwr session/new`);
    expect(text).toContain(`echo renamed | ollie-9p write session/fromui/name`);
    expect(text).toContain(`echo pause | ollie-9p rdwr session/renamed/ctl`);
    expect(text).toContain(`ollie-9p rdwrs event`);
    await screenshot(p, 'web-console');
  });

  it('says the daemon is unreachable and reconnects with backoff when it comes back', async () => {
    const p = await open();
    await outside.rdwrText('session/new', 'name=kept\n');
    await p.locator('[data-session="kept"]').waitFor();
    const { port, token } = ui;
    await ui.close();
    await p.getByTestId('conn').filter({ hasText: 'unreachable' }).waitFor({ timeout: 5000 });
    await outside.rdwrText('session/new', 'name=whiledown\n');
    ui = await startWebUi({ server: daemon.server, rendererDir, port, token });
    await p.getByTestId('conn').filter({ hasText: 'connected' }).waitFor({ timeout: 15_000 });
    // Reconnecting re-reads the index: what happened while down is there.
    await p.locator('[data-session="whiledown"]').waitFor();
    await p.locator('[data-session="kept"]').waitFor();
  });
});

describe('ollie serve --ui (the built CLI)', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
  });
  it('prints the URL with its token, serves the UI on the asked port, exits cleanly, and keeps token and port across a restart', async () => {
    const dir = tempDir('ollie-e2e-cli-');
    // A free port, to pass as --ui-port.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const start = async (extra: string[]): Promise<{ proc: ReturnType<typeof spawn>; url: string; out: string }> => {
      const args = [
        join(root, 'dist/cli/ollie.js'),
        'serve',
        '--ui',
        ...extra,
        '--socket',
        socketPath(dir),
        '--config',
        join(dir, 'c'),
        '--data',
        join(dir, 'd'),
        '--no-tools',
      ];
      const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env } });
      let out = '';
      let err = '';
      proc.stderr!.on('data', (d) => (err += d));
      const url = await new Promise<string>((resolve, reject) => {
        proc.stdout!.on('data', (d) => {
          out += d;
          const m = /web UI at (http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{64})\n/.exec(out);
          if (m) resolve(m[1]!);
        });
        proc.once('exit', (code) => reject(new Error(`ollie serve --ui exited ${code}: ${err}`)));
      });
      return { proc, url, out };
    };
    const stop = async (proc: ReturnType<typeof spawn>): Promise<void> => {
      proc.kill('SIGTERM');
      expect(await new Promise((r) => proc.once('exit', r))).toBe(0);
    };
    const first = await start(['--ui-port', String(port)]);
    expect(first.url.startsWith(`http://127.0.0.1:${port}/?token=`)).toBe(true);
    expect(first.out).toContain('serving 9P on unix!');
    const res = await get(first.url);
    // It serves the checkout's out/renderer: 200 once `npm run build:app` has run, else 503 saying to run it;
    // never the app without the token.
    expect([200, 503]).toContain(res.status);
    expect((await get(first.url.replace(/\?token=.*/, ''))).status).toBe(401);
    const p = await browser.newPage();
    await p.bringToFront();
    await p.goto(first.url);
    await p.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    await stop(first.proc);
    // Restarted without --ui-port: the same port and token (kept 0600 in the runtime directory). A page left open
    // thus reconnects by itself (its backoff reconnect is the in-process test above), and a reload of it is
    // served: both used to be refused for ever, with a new token per start.
    const second = await start([]);
    expect(second.url).toBe(first.url);
    await p.reload();
    await p.getByTestId('conn').filter({ hasText: 'connected' }).waitFor({ timeout: 30_000 });
    expect(statSync(join(dirname(socketPath(dir)), 'webui.json')).mode & 0o777).toBe(0o600);
    await p.close();
    await stop(second.proc);
    rmrf(dir);
  }, 90_000);
});
