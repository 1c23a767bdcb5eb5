/**
 * "Connect to…" in the app (web mode, Debian's Chromium, real daemons, a real sshd on loopback from
 * test/helpers/sshd.ts): the GUI, served by this machine's daemon, switches its 9P channel to a second daemon
 * reached over ssh at the remote user's default socket — its sessions are shown, a session made in the GUI lands
 * there — says which daemon it is on (status bar, title), says why an unreachable or malformed address fails, and
 * switches back to this machine.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startDaemon, type Daemon } from '../src/olliesrv/daemon.js';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { startSshd, sshdAvailable, type Sshd } from '../test/helpers/sshd.js';
import { buildRenderer, launch, rmrf, screenshot, socketPath, tempDir } from './helpers.js';

const BACKENDS =
  '[default]\nbackend = none\n\n[none]\ntype = openai\nurl = http://127.0.0.1:9/v1\nkey = x\nmodel = m\n';

describe.skipIf(!sshdAvailable())('Connect to… (web mode, two real daemons, real sshd)', () => {
  let rendererDir: string;
  let browser: Browser;
  let sshd: Sshd;
  let dir: string;
  let here: Daemon;
  let there: Daemon;
  let ui: WebUi;
  let page: Page;
  const savedConfig = process.env.OLLIE_SSH_CONFIG;

  async function daemon(base: string, socket: string): Promise<Daemon> {
    mkdirSync(join(base, 'config'), { recursive: true });
    writeFileSync(join(base, 'config', 'backends.conf'), BACKENDS);
    return startDaemon({
      socket,
      dataDir: join(base, 'data'),
      configDir: join(base, 'config'),
      toolsrv: false,
      skills: false,
      toolCacheFile: false,
      env: { ...process.env, OLLIE_SSH_CONFIG: sshd.sshConfig },
      log: () => undefined,
    });
  }

  beforeAll(async () => {
    [rendererDir, browser, sshd] = await Promise.all([buildRenderer(), launch(), startSshd({ host: 'otherbox' })]);
    // The web UI's server runs in this process: its ssh uses the test's config, never ~/.ssh.
    process.env.OLLIE_SSH_CONFIG = sshd.sshConfig;
    dir = tempDir('ollie-e2e-connect-to-');
    here = await daemon(join(dir, 'here'), socketPath(dir));
    // "Another machine": the remote user's default socket (sshd gives its sessions XDG_RUNTIME_DIR=remoteHome/run).
    there = await daemon(join(sshd.dir, 'there'), join(sshd.remoteHome, 'run', 'ollie', 'ollie.sock'));
    here.sessions.create({ name: 'near' });
    there.sessions.create({ name: 'far-away' });
    ui = await startWebUi({ server: here.server, rendererDir, port: 0 });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  }, 120_000);
  afterAll(async () => {
    await page?.close();
    await browser?.close();
    await ui?.close();
    await here?.close();
    await there?.close();
    await sshd?.stop();
    if (savedConfig === undefined) delete process.env.OLLIE_SSH_CONFIG;
    else process.env.OLLIE_SSH_CONFIG = savedConfig;
    rmrf(rendererDir, dir);
  });

  const session = (name: string) => page.locator(`[data-session="${name}"] > .node`);
  const connected = () => page.getByTestId('conn').filter({ hasText: 'connected' });
  const openDialog = async () => {
    await page.getByTestId('daemon').click();
    const d = page.getByRole('dialog', { name: 'Connect to' });
    await d.waitFor();
    return d;
  };

  it('attaches to the second daemon over ssh, shows its sessions, works there, and switches back', async () => {
    await page.goto(ui.url);
    await connected().waitFor();
    await session('near').waitFor();
    expect(await page.getByTestId('daemon').textContent()).toBe('on this machine');

    let dialog = await openDialog();
    expect(await dialog.getByTestId('connected-daemon').textContent()).toBe('this machine');
    // This machine's ssh Host aliases are offered.
    expect(
      await dialog
        .locator('#connect-hosts option')
        .evaluateAll((os) => os.map((o) => (o as unknown as { value: string }).value)),
    ).toContain('otherbox');
    await dialog.getByLabel(/^Host/).fill('otherbox');
    await dialog.getByRole('button', { name: 'Connect' }).click();

    await session('far-away').waitFor({ timeout: 30_000 });
    await connected().waitFor();
    expect(await session('near').count()).toBe(0);
    expect(await page.getByTestId('daemon').textContent()).toBe('on otherbox');
    expect(await page.title()).toBe('Ollie — ssh!otherbox');
    await screenshot(page, 'connect-to-remote');
    // A reload stays there.
    await page.reload();
    await session('far-away').waitFor({ timeout: 30_000 });
    expect(await page.getByTestId('daemon').textContent()).toBe('on otherbox');

    // What the GUI does now happens there.
    await page.keyboard.press('Control+n');
    const create = page.getByRole('dialog', { name: 'New session' });
    await create.getByLabel('Name').fill('made-there');
    await create.getByRole('button', { name: 'Create' }).click();
    await session('made-there').waitFor();
    expect(there.sessions.has('made-there')).toBe(true);
    expect(here.sessions.has('made-there')).toBe(false);

    dialog = await openDialog();
    expect(await dialog.getByTestId('connected-daemon').textContent()).toBe('otherbox');
    await dialog.getByRole('button', { name: 'This machine' }).click();
    await session('near').waitFor({ timeout: 30_000 });
    await connected().waitFor();
    expect(await session('far-away').count()).toBe(0);
    expect(await page.getByTestId('daemon').textContent()).toBe('on this machine');
    expect(await page.title()).toBe('Ollie');
  }, 120_000);

  it('says why a daemon cannot be reached, or an address is refused, and can still go back', async () => {
    let dialog = await openDialog();
    await dialog.getByLabel(/^Host/).fill('otherbox!/nonexistent/ollie.sock');
    await dialog.getByRole('button', { name: 'Connect' }).click();
    await page
      .getByTestId('conn')
      .filter({
        hasText:
          /daemon unreachable \(ssh!otherbox!\/nonexistent\/ollie\.sock: .*(open failed|connect failed|No such file)/i,
      })
      .waitFor({ timeout: 30_000 });
    expect(await session('near').count()).toBe(0);

    dialog = await openDialog();
    await dialog.getByLabel(/^Host/).fill('-oProxyCommand=touch /tmp/ollie-pwned');
    await dialog.getByRole('button', { name: 'Connect' }).click();
    await page
      .getByTestId('conn')
      .filter({ hasText: /daemon unreachable \(bad ssh address/ })
      .waitFor({ timeout: 15_000 });
    expect(existsSync('/tmp/ollie-pwned')).toBe(false);

    dialog = await openDialog();
    await dialog.getByRole('button', { name: 'This machine' }).click();
    await session('near').waitFor({ timeout: 30_000 });
  }, 90_000);
});
