/**
 * "Connect to…" in the app (web mode, Debian's Chromium, real daemons, a real sshd on loopback from
 * src/devtools/sshd.ts): the GUI, served by this machine's daemon, switches its 9P channel to a second daemon
 * reached over ssh at the remote user's default socket — its sessions are shown, a session made in the GUI lands
 * there — says which daemon it is on (status bar, title), says why an unreachable or malformed address fails, and
 * switches back to this machine.
 */
import { existsSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { sshdAvailable, useSshHost } from '../test/helpers/sshd.js';
import { useGui } from './gui-harness.js';
import { screenshot } from './helpers.js';

describe.skipIf(!sshdAvailable())('Connect to… (web mode, two real daemons, real sshd)', () => {
  // The web UI's server runs in this process: its ssh uses the test's config, never ~/.ssh.
  const there = useSshHost({ host: 'otherbox', env: true });
  /** This machine's daemon (no agent profile, no tools), the web UI it serves, and the page. */
  const g = useGui({
    prefix: 'ollie-e2e-connect-to-',
    viewport: { width: 1280, height: 800 },
    autoLoad: null,
    daemon: { toolsrv: false, skills: false, toolCacheFile: false },
    port: 0,
  });

  beforeAll(() => {
    g.daemon.sessions.create({ name: 'near' });
    there.daemon.sessions.create({ name: 'far-away' });
  });

  const session = (name: string) => g.page.locator(`[data-session="${name}"] > .node`);
  const connected = () => g.page.getByTestId('conn').filter({ hasText: 'connected' });
  const openDialog = async () => {
    await g.page.getByTestId('daemon').click();
    const d = g.page.getByRole('dialog', { name: 'Connect to' });
    await d.waitFor();
    return d;
  };
  /** After a switch: the page lists `shown` and not the other daemon's `hidden`, and names the daemon it is on. */
  const showsDaemon = async (name: string, title: string, s: { shown: string; hidden: string }) => {
    await session(s.shown).waitFor({ timeout: 30_000 });
    await connected().waitFor();
    expect(await session(s.hidden).count()).toBe(0);
    expect(await g.page.getByTestId('daemon').textContent()).toBe(`on ${name}`);
    expect(await g.page.title()).toBe(title);
  };

  it('attaches to the second daemon over ssh, shows its sessions, works there, and switches back', async () => {
    await g.page.goto(g.ui.url);
    await connected().waitFor();
    await session('near').waitFor();
    expect(await g.page.getByTestId('daemon').textContent()).toBe('on this machine');

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

    await showsDaemon('otherbox', 'Ollie — ssh!otherbox', { shown: 'far-away', hidden: 'near' });
    await screenshot(g.page, 'connect-to-remote');
    // A reload stays there.
    await g.page.reload();
    await session('far-away').waitFor({ timeout: 30_000 });
    expect(await g.page.getByTestId('daemon').textContent()).toBe('on otherbox');

    // What the GUI does now happens there.
    await g.page.keyboard.press('Control+n');
    const create = g.page.getByRole('dialog', { name: 'New session' });
    await create.getByLabel('Name').fill('made-there');
    await create.getByRole('button', { name: 'Create' }).click();
    await session('made-there').waitFor();
    expect(there.daemon.sessions.has('made-there')).toBe(true);
    expect(g.daemon.sessions.has('made-there')).toBe(false);

    dialog = await openDialog();
    expect(await dialog.getByTestId('connected-daemon').textContent()).toBe('otherbox');
    await dialog.getByRole('button', { name: 'This machine' }).click();
    await showsDaemon('this machine', 'Ollie', { shown: 'near', hidden: 'far-away' });
  }, 120_000);

  it('says why a daemon cannot be reached, or an address is refused, and can still go back', async () => {
    let dialog = await openDialog();
    await dialog.getByLabel(/^Host/).fill('otherbox!/nonexistent/ollie.sock');
    await dialog.getByRole('button', { name: 'Connect' }).click();
    await g.page
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
    await g.page
      .getByTestId('conn')
      .filter({ hasText: /daemon unreachable \(bad ssh address/ })
      .waitFor({ timeout: 15_000 });
    expect(existsSync('/tmp/ollie-pwned')).toBe(false);

    dialog = await openDialog();
    await dialog.getByRole('button', { name: 'This machine' }).click();
    await session('near').waitFor({ timeout: 30_000 });
  }, 90_000);
});
