/**
 * The GUI from the keyboard, and what a screen reader is told, against the real daemon (mock LLM over HTTP):
 * focus after a dialog creates something or closes, dialogs that keep Tab inside and Esc wherever the focus is,
 * the tree as one tab stop with arrow keys and role=tree / aria-level, the context menu from Shift+F10 and the
 * Menu key, and a reply announced in a polite live region (not the history read when a chat opens).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startMockLlm, type MockLlm } from '../src/devtools/mock-llm/server.js';
import { startDaemon, type Daemon } from '../src/olliesrv/daemon.js';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { buildRenderer, launch, mockBackends, rmrf, socketPath, tempDir } from './helpers.js';

/** Runs in the page (page.evaluate); the test tsconfig has no DOM library. */
interface El { id: string; tagName: string; textContent: string | null; getAttribute: (n: string) => string | null; closest: (s: string) => El | null }
declare const document: { activeElement: El | null; querySelectorAll: (s: string) => ArrayLike<El> };

describe('keyboard and screen readers (web mode, real daemon)', () => {
  let rendererDir: string;
  let browser: Browser;
  let dir: string;
  let mock: MockLlm;
  let daemon: Daemon;
  let ui: WebUi;
  let page: Page;

  beforeAll(async () => {
    [rendererDir, browser, mock] = await Promise.all([buildRenderer(), launch(), startMockLlm()]);
    dir = tempDir('ollie-e2e-keys-');
    mkdirSync(join(dir, 'config'), { recursive: true });
    mkdirSync(join(dir, 'work'));
    writeFileSync(
      join(dir, 'config', 'backends.conf'),
      mockBackends(mock.url),
    );
    daemon = await startDaemon({ socket: socketPath(dir), dataDir: join(dir, 'data'), configDir: join(dir, 'config'), log: () => undefined, retryDelay: () => 10 });
    ui = await startWebUi({ server: daemon.server, rendererDir, port: 0 });
    page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
  }, 60_000);
  afterAll(async () => {
    await page?.close();
    await browser?.close();
    await ui?.close();
    await daemon?.close();
    await mock?.close();
    rmrf(rendererDir, dir);
  });

  /** What has the focus: `session:NAME`, `agent:NAME`, `prompt`, `menuitem:LABEL`, or the element's tag and text. */
  const focused = (): Promise<string> =>
    page.evaluate(() => {
      const e = document.activeElement;
      if (!e) return 'none';
      if (e.id === 'prompt-input') return 'prompt';
      if (e.getAttribute('role') === 'menuitem') return `menuitem:${e.textContent ?? ''}`;
      const agent = e.closest('[data-agent]');
      if (agent && e.getAttribute('role') === 'treeitem') return `agent:${agent.getAttribute('data-agent') ?? ''}`;
      const session = e.closest('[data-session]');
      if (session && e.getAttribute('role') === 'treeitem') return `session:${session.getAttribute('data-session') ?? ''}`;
      return `${e.tagName.toLowerCase()}:${(e.getAttribute('aria-label') ?? e.textContent ?? '').slice(0, 30)}`;
    });
  const inDialog = (): Promise<boolean> => page.evaluate(() => !!document.activeElement?.closest('[role="dialog"], [role="alertdialog"]'));
  const waitFocus = async (want: string): Promise<void> => {
    await page.waitForFunction(
      (w) => {
        const e = document.activeElement;
        if (!e) return false;
        if (w === 'prompt') return e.id === 'prompt-input';
        const [kind, name] = w.split(':');
        return e.getAttribute('role') === 'treeitem' && e.closest(`[data-${kind}]`)?.getAttribute(`data-${kind}`) === name;
      },
      want,
    );
  };

  it('works from the keyboard alone, and announces replies', async () => {
    await page.goto(ui.url);
    await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();

    // A session from its dialog (Ctrl+N): Enter creates it, and the focus lands on its row, not on the page.
    await page.keyboard.press('Control+n');
    await page.getByRole('dialog', { name: 'New session' }).waitFor();
    await page.keyboard.type('keys');
    await page.keyboard.press('Tab');
    await page.keyboard.type(join(dir, 'work'));
    await page.keyboard.press('Enter');
    await waitFocus('session:keys');

    // The tree: role=tree, rows are treeitems with levels, one tab stop in all.
    expect(await page.locator('.tree [role="tree"]').count()).toBe(1);
    expect(await page.locator('[data-session="keys"] > [role="treeitem"]').getAttribute('aria-level')).toBe('1');

    // Its menu from the keyboard (Shift+F10): the first item has the focus; ↓ moves; Enter runs "New agent…".
    await page.keyboard.press('Shift+F10');
    await page.getByRole('menu').waitFor();
    expect(await focused()).toBe('menuitem:New agent…');
    await page.keyboard.press('ArrowDown');
    expect(await focused()).toBe('menuitem:Rename');
    await page.keyboard.press('ArrowUp');
    await page.keyboard.press('Enter');
    const d = page.getByRole('dialog', { name: 'New agent in keys' });
    await d.waitFor();
    expect(await page.getByRole('menu').count()).toBe(0);

    // The dialog keeps Tab inside, both ways, however often it is pressed.
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press('Tab');
      expect(await inDialog()).toBe(true);
    }
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press('Shift+Tab');
      expect(await inDialog()).toBe(true);
    }
    // Esc closes it (from wherever in it the focus is) and the focus goes back to the row it was opened from.
    await page.keyboard.press('Escape');
    await d.waitFor({ state: 'detached' });
    await waitFocus('session:keys');

    // Again, and this time it creates the agent: the focus goes to its prompt box.
    await page.keyboard.press('ContextMenu');
    await page.getByRole('menu').waitFor();
    expect(await focused()).toBe('menuitem:New agent…');
    await page.keyboard.press('Enter');
    await d.waitFor();
    await page.keyboard.type('talker');
    await page.keyboard.press('Enter');
    await d.waitFor({ state: 'detached' });
    await waitFocus('prompt');
    const row = page.locator('[data-agent="talker"] > [role="treeitem"]');
    expect(await row.getAttribute('aria-level')).toBe('2');
    expect(await row.getAttribute('aria-selected')).toBe('true');
    expect(await page.locator('.tree [tabindex="0"]').count()).toBe(1);
    expect(await page.locator('.tree button:not([tabindex="-1"])').count()).toBe(0);

    // A reply is announced once it is complete.
    mock.script([{ delayMs: 30 }, { text: 'First ' }, { text: 'answer, ' }, { text: 'streamed.' }]);
    await page.keyboard.type('hello');
    await page.keyboard.press('Enter');
    await page.getByTestId('announce').filter({ hasText: 'Reply: First answer, streamed.' }).waitFor({ timeout: 15_000 });
    expect(await page.getByTestId('announce').getAttribute('aria-live')).toBe('polite');

    // The tree by arrows: ↑ goes to the session, ↓ back; Tab leaves the tree at once (no second stop on the
    // row's buttons).
    await row.focus();
    await page.keyboard.press('ArrowUp');
    await waitFocus('session:keys');
    await page.keyboard.press('ArrowDown');
    await waitFocus('agent:talker');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => !!document.activeElement?.closest('.tree'))).toBe(false);

    // The agent's menu by keyboard; Esc closes it and gives the focus back to the row.
    await row.focus();
    await page.keyboard.press('Shift+F10');
    await page.getByRole('menu').waitFor();
    expect(await focused()).toBe('menuitem:Open');
    await page.keyboard.press('Escape');
    await page.getByRole('menu').waitFor({ state: 'detached' });
    await waitFocus('agent:talker');

    // Opening the chat again reads the history: nothing is announced for it.
    await page.locator('[data-session="keys"] > [role="treeitem"]').click();
    await row.click();
    await page.locator('.block[data-role="assistant"]', { hasText: 'First answer, streamed.' }).waitFor();
    expect(await page.getByTestId('announce').textContent()).toBe('');
  }, 90_000);
});
