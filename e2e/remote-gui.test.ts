/**
 * Remote sessions in the app (web mode, Debian's Chromium, the real daemon, a real sshd on loopback from
 * test/helpers/sshd.ts): the new-session dialog offers the Host aliases of the ssh config and creates a session
 * whose tools run there; the session tree's dot says truthfully whether its tools' host is reachable — lit once
 * a tool ran there, dark while the host is gone, lit again once the session reconnected.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startMockLlm, type MockLlm } from '../src/devtools/mock-llm/server.js';
import type { Client } from '../src/ninep/index.js';
import { dial } from '../src/ninep/node.js';
import { startDaemon, type Daemon } from '../src/olliesrv/daemon.js';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { startSshd, sshdAvailable, type Sshd } from '../test/helpers/sshd.js';
import { buildRenderer, launch, mockBackends, rmrf, screenshot, socketPath, tempDir, until } from './helpers.js';

describe.skipIf(!sshdAvailable())('remote sessions in the app (web mode, real daemon, real sshd)', () => {
  let rendererDir: string;
  let browser: Browser;
  let sshd: Sshd;
  let mock: MockLlm;
  let dir: string;
  let daemon: Daemon;
  let ui: WebUi;
  let c: Client;
  let page: Page;

  beforeAll(async () => {
    [rendererDir, browser, mock, sshd] = await Promise.all([buildRenderer(), launch(), startMockLlm(), startSshd({ host: 'buildbox' })]);
    dir = tempDir('ollie-e2e-remote-gui-');
    mkdirSync(join(sshd.remoteHome, 'app'));
    mkdirSync(join(dir, 'config', 'agents'), { recursive: true });
    writeFileSync(join(dir, 'config', 'backends.conf'), mockBackends(mock.url));
    writeFileSync(join(dir, 'config', 'agents', 'e2e.json'), JSON.stringify({ description: 'e2e agent', prompt: 'You are a test agent.', autoLoad: ['shell'], maxSteps: 20 }));
    const sock = socketPath(dir);
    daemon = await startDaemon({
      socket: sock, dataDir: join(dir, 'data'), configDir: join(dir, 'config'), skills: false, toolCacheFile: false,
      env: { ...process.env, OLLIE_SSH_CONFIG: sshd.sshConfig }, log: () => undefined, retryDelay: () => 10,
    });
    ui = await startWebUi({ server: daemon.server, rendererDir, port: 0 });
    c = await dial(`unix!${sock}`, { uname: userInfo().username });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  }, 120_000);
  afterAll(async () => {
    await page?.close();
    await browser?.close();
    c?.close();
    await ui?.close();
    await daemon?.close();
    await mock?.close();
    await sshd?.stop();
    rmrf(rendererDir, dir);
  });

  const node = () => page.locator('[data-session="srv"] > .node');
  const dot = () => node().getByTestId('conn-dot');

  it('creates a session on an ssh host from the dialog and shows its connection', async () => {
    await page.goto(ui.url);
    await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    await page.keyboard.press('Control+n');
    const dialog = page.getByRole('dialog', { name: 'New session' });
    await dialog.waitFor();
    // The ssh config's Host aliases are offered.
    await until(async () => (await dialog.locator('#ssh-hosts option').evaluateAll((os) => os.map((o) => (o as unknown as { value: string }).value))).includes('buildbox'), 'the host list');
    await dialog.getByLabel('Name').fill('srv');
    await dialog.getByLabel('Working directory').fill(join(sshd.remoteHome, 'app'));
    await dialog.getByLabel('Run tools on (an ssh host)').fill('buildbox');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await node().waitFor();
    expect((await c.readText('session/idx')).split('\n').find((l) => l.includes('\tsrv\t'))!.split('\t')[4]).toBe('buildbox');
    // No tool has run there yet: not connected.
    expect(await dot().getAttribute('class')).not.toMatch(/\bup\b/);

    await c.rdwrText('session/srv/agent/new', 'name=coder agent=e2e backend=mock');
    mock.script([{ toolCalls: [{ name: 'shell', args: { command: 'echo on-the-box' } }] }], [{ text: 'ran' }]);
    const aid = (await c.readText('session/srv/agent/coder/id')).trim();
    const done = daemon.agents.all().find((a) => a.id === aid)!.nextTurn();
    await c.write('session/srv/agent/coder/prompt', 'go');
    await done;
    await page.locator('[data-session="srv"] > .node .conn-dot.up').waitFor({ timeout: 15_000 });
    expect(await node().getAttribute('aria-label')).toContain('on buildbox');
    await screenshot(page, 'remote-session-connected');

    // The host goes away: the dot goes dark and says so; it lights again once the session reconnected.
    sshd.pause();
    expect(sshd.cutConnections()).toBeGreaterThan(0);
    await page.locator('[data-session="srv"] > .node .conn-dot:not(.up)').waitFor({ timeout: 15_000 });
    expect(await node().getAttribute('aria-label')).toContain('not connected');
    sshd.resume();
    await page.locator('[data-session="srv"] > .node .conn-dot.up').waitFor({ timeout: 30_000 });
  }, 120_000);
});
