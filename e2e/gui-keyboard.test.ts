/**
 * The GUI from the keyboard, and what a screen reader is told, against the real daemon (mock LLM over HTTP):
 * focus after a dialog creates something or closes, dialogs that keep Tab inside and Esc wherever the focus is,
 * the tree as one tab stop with arrow keys and role=tree / aria-level, the context menu from Shift+F10 and the
 * Menu key, and a reply announced in a polite live region (not the history read when a chat opens).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useGui } from './gui-harness.js';

/** Runs in the page (page.evaluate); the test tsconfig has no DOM library. */
interface El {
  id: string;
  tagName: string;
  textContent: string | null;
  getAttribute: (n: string) => string | null;
  closest: (s: string) => El | null;
}
declare const document: { activeElement: El | null; querySelectorAll: (s: string) => ArrayLike<El> };

describe('keyboard and screen readers (web mode, real daemon)', () => {
  const g = useGui({
    prefix: 'ollie-e2e-keys-',
    viewport: { width: 1100, height: 760 },
    autoLoad: null,
    daemon: { retryDelay: () => 10 },
  });

  /** What has the focus: `session:NAME`, `agent:NAME`, `prompt`, `menuitem:LABEL`, or the element's tag and text. */
  const focused = (): Promise<string> =>
    g.page.evaluate(() => {
      const e = document.activeElement;
      if (!e) return 'none';
      if (e.id === 'prompt-input') return 'prompt';
      if (e.getAttribute('role') === 'menuitem') return `menuitem:${e.textContent ?? ''}`;
      const agent = e.closest('[data-agent]');
      if (agent && e.getAttribute('role') === 'treeitem') return `agent:${agent.getAttribute('data-agent') ?? ''}`;
      const session = e.closest('[data-session]');
      if (session && e.getAttribute('role') === 'treeitem')
        return `session:${session.getAttribute('data-session') ?? ''}`;
      return `${e.tagName.toLowerCase()}:${(e.getAttribute('aria-label') ?? e.textContent ?? '').slice(0, 30)}`;
    });
  const inDialog = (): Promise<boolean> =>
    g.page.evaluate(() => !!document.activeElement?.closest('[role="dialog"], [role="alertdialog"]'));
  const waitFocus = async (want: string): Promise<void> => {
    await g.page.waitForFunction((w) => {
      const e = document.activeElement;
      if (!e) return false;
      if (w === 'prompt') return e.id === 'prompt-input';
      const [kind, name] = w.split(':');
      return (
        e.getAttribute('role') === 'treeitem' && e.closest(`[data-${kind}]`)?.getAttribute(`data-${kind}`) === name
      );
    }, want);
  };

  it('works from the keyboard alone, and announces replies', async () => {
    await g.page.goto(g.ui.url);
    await g.page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();

    // A session from its dialog (Ctrl+N): Enter creates it, and the focus lands on its row, not on the g.page.
    await g.page.keyboard.press('Control+n');
    await g.page.getByRole('dialog', { name: 'New session' }).waitFor();
    await g.page.keyboard.type('keys');
    await g.page.keyboard.press('Tab');
    await g.page.keyboard.type(join(g.dir, 'work'));
    await g.page.keyboard.press('Enter');
    await waitFocus('session:keys');

    // The tree: role=tree, rows are treeitems with levels, one tab stop in all.
    expect(await g.page.locator('.tree [role="tree"]').count()).toBe(1);
    expect(await g.page.locator('[data-session="keys"] > [role="treeitem"]').getAttribute('aria-level')).toBe('1');

    // Its menu from the keyboard (Shift+F10): the first item has the focus; ↓ moves; Enter runs "New agent…".
    await g.page.keyboard.press('Shift+F10');
    await g.page.getByRole('menu').waitFor();
    expect(await focused()).toBe('menuitem:New agent…');
    await g.page.keyboard.press('ArrowDown');
    expect(await focused()).toBe('menuitem:Rename');
    await g.page.keyboard.press('ArrowUp');
    await g.page.keyboard.press('Enter');
    const d = g.page.getByRole('dialog', { name: 'New agent in keys' });
    await d.waitFor();
    expect(await g.page.getByRole('menu').count()).toBe(0);

    // The dialog keeps Tab inside, both ways, however often it is pressed.
    for (let i = 0; i < 12; i++) {
      await g.page.keyboard.press('Tab');
      expect(await inDialog()).toBe(true);
    }
    for (let i = 0; i < 12; i++) {
      await g.page.keyboard.press('Shift+Tab');
      expect(await inDialog()).toBe(true);
    }
    // Esc closes it (from wherever in it the focus is) and the focus goes back to the row it was opened from.
    await g.page.keyboard.press('Escape');
    await d.waitFor({ state: 'detached' });
    await waitFocus('session:keys');

    // Again, and this time it creates the agent: the focus goes to its prompt box.
    await g.page.keyboard.press('ContextMenu');
    await g.page.getByRole('menu').waitFor();
    expect(await focused()).toBe('menuitem:New agent…');
    await g.page.keyboard.press('Enter');
    await d.waitFor();
    await g.page.keyboard.type('talker');
    await g.page.keyboard.press('Enter');
    await d.waitFor({ state: 'detached' });
    await waitFocus('prompt');
    const row = g.page.locator('[data-agent="talker"] > [role="treeitem"]');
    expect(await row.getAttribute('aria-level')).toBe('2');
    expect(await row.getAttribute('aria-selected')).toBe('true');
    expect(await g.page.locator('.tree [tabindex="0"]').count()).toBe(1);
    expect(await g.page.locator('.tree button:not([tabindex="-1"])').count()).toBe(0);

    // A reply is announced once it is complete.
    g.mock.script([{ delayMs: 30 }, { text: 'First ' }, { text: 'answer, ' }, { text: 'streamed.' }]);
    await g.page.keyboard.type('hello');
    await g.page.keyboard.press('Enter');
    await g.page
      .getByTestId('announce')
      .filter({ hasText: 'Reply: First answer, streamed.' })
      .waitFor({ timeout: 15_000 });
    expect(await g.page.getByTestId('announce').getAttribute('aria-live')).toBe('polite');

    // The tree by arrows: ↑ goes to the session, ↓ back; Tab leaves the tree at once (no second stop on the
    // row's buttons).
    await row.focus();
    await g.page.keyboard.press('ArrowUp');
    await waitFocus('session:keys');
    await g.page.keyboard.press('ArrowDown');
    await waitFocus('agent:talker');
    await g.page.keyboard.press('Tab');
    expect(await g.page.evaluate(() => !!document.activeElement?.closest('.tree'))).toBe(false);

    // The agent's menu by keyboard; Esc closes it and gives the focus back to the row.
    await row.focus();
    await g.page.keyboard.press('Shift+F10');
    await g.page.getByRole('menu').waitFor();
    expect(await focused()).toBe('menuitem:Open');
    await g.page.keyboard.press('Escape');
    await g.page.getByRole('menu').waitFor({ state: 'detached' });
    await waitFocus('agent:talker');

    // Opening the chat again reads the history: nothing is announced for it.
    await g.page.locator('[data-session="keys"] > [role="treeitem"]').click();
    await row.click();
    await g.page.locator('.block[data-role="assistant"]', { hasText: 'First answer, streamed.' }).waitFor();
    expect(await g.page.getByTestId('announce').textContent()).toBe('');
  }, 90_000);
});
