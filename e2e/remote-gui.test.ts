/**
 * Remote sessions in the app (web mode, Debian's Chromium, the real daemon, a real sshd on loopback from
 * test/helpers/sshd.ts): the new-session dialog offers the Host aliases of the ssh config and creates a session
 * whose tools run there; the session tree's dot says truthfully whether its tools' host is reachable — lit once
 * a tool ran there, dark while the host is gone, lit again once the session reconnected.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSshd, sshdAvailable, type Sshd } from '../test/helpers/sshd.js';
import { useGui } from './gui-harness.js';
import { screenshot, until } from './helpers.js';

describe.skipIf(!sshdAvailable())('remote sessions in the app (web mode, real daemon, real sshd)', () => {
  let sshd: Sshd;
  beforeAll(async () => {
    sshd = await startSshd({ host: 'buildbox' });
  }, 60_000);
  afterAll(async () => {
    await sshd?.stop();
  });
  const g = useGui(() => ({
    prefix: 'ollie-e2e-remote-gui-',
    viewport: { width: 1280, height: 800 },
    port: 0,
    outside: true,
    prepare: () => mkdirSync(join(sshd.remoteHome, 'app')),
    daemon: {
      skills: false,
      toolCacheFile: false,
      env: { ...process.env, OLLIE_SSH_CONFIG: sshd.sshConfig },
      retryDelay: () => 10,
    },
  }));

  const node = () => g.page.locator('[data-session="srv"] > .node');
  const dot = () => node().getByTestId('conn-dot');

  it('creates a session on an ssh host from the dialog and shows its connection', async () => {
    await g.page.goto(g.ui.url);
    await g.page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    await g.page.keyboard.press('Control+n');
    const dialog = g.page.getByRole('dialog', { name: 'New session' });
    await dialog.waitFor();
    // The ssh config's Host aliases are offered.
    await until(
      async () =>
        (
          await dialog
            .locator('#ssh-hosts option')
            .evaluateAll((os) => os.map((o) => (o as unknown as { value: string }).value))
        ).includes('buildbox'),
      'the host list',
    );
    await dialog.getByLabel('Name').fill('srv');
    await dialog.getByLabel('Working directory').fill(join(sshd.remoteHome, 'app'));
    await dialog.getByLabel('Run tools on (an ssh host)').fill('buildbox');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await node().waitFor();
    expect(
      (await g.outside.readText('session/idx'))
        .split('\n')
        .find((l) => l.includes('\tsrv\t'))!
        .split('\t')[4],
    ).toBe('buildbox');
    // No tool has run there yet: not connected.
    expect(await dot().getAttribute('class')).not.toMatch(/\bup\b/);

    await g.outside.rdwrText('session/srv/agent/new', 'name=coder agent=e2e backend=mock');
    g.mock.script([{ toolCalls: [{ name: 'shell', args: { command: 'echo on-the-box' } }] }], [{ text: 'ran' }]);
    const aid = (await g.outside.readText('session/srv/agent/coder/id')).trim();
    const done = g.daemon.agents
      .all()
      .find((a) => a.id === aid)!
      .nextTurn();
    await g.outside.write('session/srv/agent/coder/prompt', 'go');
    await done;
    await g.page.locator('[data-session="srv"] > .node .conn-dot.up').waitFor({ timeout: 15_000 });
    expect(await node().getAttribute('aria-label')).toContain('on buildbox');
    await screenshot(g.page, 'remote-session-connected');

    // The host goes away: the dot goes dark and says so; it lights again once the session reconnected.
    sshd.pause();
    expect(sshd.cutConnections()).toBeGreaterThan(0);
    await g.page.locator('[data-session="srv"] > .node .conn-dot:not(.up)').waitFor({ timeout: 15_000 });
    expect(await node().getAttribute('aria-label')).toContain('not connected');
    sshd.resume();
    await g.page.locator('[data-session="srv"] > .node .conn-dot.up').waitFor({ timeout: 30_000 });
  }, 120_000);
});
