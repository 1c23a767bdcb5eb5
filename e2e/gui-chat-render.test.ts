/**
 * How the chat reads, against the real daemon (mock LLM over HTTP, real toolsrv running the tools): tool calls by
 * tool (a shell command, a file's path, an edit's diff), retries and errors as one expandable line, long arguments
 * wrapped, Copy buttons clear of one-line code, Markdown tables and safe links; light and dark themes (the system's,
 * and the Settings switch, kept across a reload), each screenshotted and checked for layout overflow.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { retryDelay } from '../src/olliesrv/backend/retry.js';
import { createInGui, useGui } from './gui-harness.js';
import { overflows, screenshot } from './helpers.js';

/** Runs in the page (page.evaluate); the test tsconfig has no DOM library. */
declare const document: {
  querySelectorAll: (s: string) => ArrayLike<DomEl>;
  createRange: () => { selectNodeContents: (n: unknown) => void; getBoundingClientRect: () => Rect };
};
declare const getComputedStyle: (e: unknown) => {
  overflowX: string;
  position: string;
  display: string;
  backgroundColor: string;
};
interface Rect {
  left: number;
  right: number;
  top: number;
  bottom: number;
  width: number;
  height: number;
}
interface DomEl {
  parentElement: DomEl | null;
  className: unknown;
  tagName: string;
  getBoundingClientRect: () => Rect;
  closest: (s: string) => DomEl | null;
  firstChild: unknown;
  textContent: string | null;
}

const LONG = `echo ${'x'.repeat(60)}/${'very-long-path-segment-'.repeat(12)}end`;

describe('the chat as it reads (web mode, real daemon)', () => {
  const g = useGui({
    prefix: 'ollie-e2e-render-',
    viewport: { width: 1100, height: 800 },
    autoLoad: ['shell', 'file_read', 'file_edit'],
    prepare: (d) => writeFileSync(join(d, 'work', 'notes.txt'), 'alpha\nbeta\ngamma\n'),
    // The real policy (a 500 is retried, an auth error is not), without its waits.
    daemon: { retryDelay: (e, n) => (retryDelay(e, n) === null ? null : 10) },
  });

  const block = (role: string, text: string) => g.page.locator(`.block[data-role="${role}"]`, { hasText: text });
  const bg = (): Promise<string> =>
    g.page.evaluate(() => getComputedStyle(document.querySelectorAll('body')[0]).backgroundColor);

  it('renders tool calls by tool, compacts retries and errors, tables and links; both themes without overflow', async () => {
    await g.page.emulateMedia({ colorScheme: 'dark' });
    const box = await createInGui(g, 'look', 'reader');

    // One turn: a failed request retried, then three tool calls (shell with a very long command, file_read,
    // file_edit), then a reply with a table and links.
    g.mock.script(
      [{ status: 500, message: 'upstream hiccup' }],
      [
        {
          toolCalls: [
            { name: 'shell', args: { command: LONG } },
            { name: 'file_read', args: { path: 'notes.txt' } },
          ],
        },
      ],
      [{ toolCalls: [{ name: 'file_edit', args: { path: 'notes.txt', old_string: 'beta', new_string: 'BETA' } }] }],
      [
        {
          text:
            'Done. Summary:\n\n| file | change | lines |\n|:---|:---:|---:|\n| notes.txt | beta → BETA | 1 |\n\n' +
            'See [the docs](https://example.com/docs) and https://example.org/x, not [this](javascript:alert(1)).\n\n`one-line code`\n\n```\nls -la\n```',
        },
      ],
    );
    await box.fill('look at notes');
    await box.press('Enter');
    await block('assistant', 'Done. Summary').waitFor({ timeout: 20_000 });

    // The retry is one line, opened on demand.
    const retry = g.page.locator('.block[data-role="retry"]');
    await retry.waitFor();
    expect((await retry.boundingBox())!.height).toBeLessThan(30);
    expect(await retry.locator('pre').count()).toBe(0);
    await retry.getByRole('button').click();
    await retry.locator('pre', { hasText: 'upstream hiccup' }).waitFor();
    expect(await retry.getByRole('button').first().getAttribute('aria-expanded')).toBe('true');

    // Tool calls by tool: the command, the path, the edit as a diff; no raw JSON.
    const shell = g.page.locator('.block[data-role="call"] [data-view="shell"]');
    expect((await shell.locator('pre.cmd').textContent())!.replace(/^\$ /, '')).toBe(LONG);
    const shellBox = (await shell.locator('pre.cmd').boundingBox())!;
    const chatBox = (await g.page.getByTestId('chat').boundingBox())!;
    expect(shellBox.x + shellBox.width).toBeLessThanOrEqual(chatBox.x + chatBox.width);
    expect(shellBox.height).toBeGreaterThan(30); // wrapped over several lines, not run off the edge
    expect(await g.page.locator('.block[data-role="call"] [data-view="path"] code.path').textContent()).toBe(
      'notes.txt',
    );
    const edit = g.page.locator('.block[data-role="call"] [data-view="edit"]');
    expect(await edit.locator('.del').allTextContents()).toEqual(['-beta']);
    expect(await edit.locator('.add').allTextContents()).toEqual(['+BETA']);
    expect(await g.page.locator('.block[data-role="call"]').filter({ hasText: '"command"' }).count()).toBe(0);

    // Markdown: a real table, aligned as the rule says; links only for http(s), opening outside.
    const table = block('assistant', 'Summary').locator('table');
    expect(await table.locator('th').allTextContents()).toEqual(['file', 'change', 'lines']);
    expect(await table.locator('td').allTextContents()).toEqual(['notes.txt', 'beta → BETA', '1']);
    expect(
      await table
        .locator('td')
        .nth(2)
        .evaluate((e) => (e as unknown as { style: { textAlign: string } }).style.textAlign),
    ).toBe('right');
    const links = block('assistant', 'Summary').locator('a');
    expect(
      await links.evaluateAll((as) =>
        as.map((a) => [
          (a as unknown as { href: string }).href,
          (a as unknown as { rel: string }).rel,
          (a as unknown as { target: string }).target,
        ]),
      ),
    ).toEqual([
      ['https://example.com/docs', 'noopener noreferrer', '_blank'],
      ['https://example.org/x', 'noopener noreferrer', '_blank'],
    ]);
    expect(await block('assistant', 'Summary').locator('.link-text', { hasText: 'this' }).count()).toBe(1);

    // Copy buttons never cover text: one-line code, and a one-line result longer than the pane (wrapped).
    const clear = await g.page.locator('.chat .code').evaluateAll((codes) =>
      codes.map((c) => {
        const el = c as unknown as DomEl & { querySelector: (s: string) => DomEl };
        const range = document.createRange();
        range.selectNodeContents(el.querySelector('pre'));
        // Each line box of the text (a wrapped line is several) against the button.
        const btn = el.querySelector('.copy').getBoundingClientRect();
        const boxes = (range as unknown as { getClientRects: () => ArrayLike<Rect> }).getClientRects();
        for (let i = 0; i < boxes.length; i++) {
          const t = boxes[i]!;
          if (t.width > 0 && t.right > btn.left && t.left < btn.right && t.bottom > btn.top && t.top < btn.bottom)
            return false;
        }
        return true;
      }),
    );
    expect(clear.length).toBeGreaterThanOrEqual(4);
    expect(clear.every(Boolean)).toBe(true);

    // Back at the latest block (opening the retry scrolled away), where the table is.
    await g.page.getByRole('button', { name: '↓ Latest' }).click();
    await g.page.getByRole('button', { name: '↓ Latest' }).waitFor({ state: 'detached' });
    await table.scrollIntoViewIfNeeded();

    // Dark, as the system says: no overflow; then light.
    expect(await bg()).toBe('rgb(22, 24, 29)');
    expect(await overflows(g.page)).toEqual([]);
    await screenshot(g.page, 'chat-dark');
    await g.page.emulateMedia({ colorScheme: 'light' });
    expect(await bg()).toBe('rgb(255, 255, 255)');
    expect(await overflows(g.page)).toEqual([]);
    await screenshot(g.page, 'chat-light');

    // The 9P console: a turn's many re-reads of the same files show once each, with their count; writes each.
    await g.page.keyboard.press('Control+`');
    const consoleLines = g.page.locator('.console-lines > div');
    await consoleLines.first().waitFor();
    const commands = await consoleLines.locator('code').allTextContents();
    const reads = commands.filter((c) => c.startsWith('$ ollie-9p read '));
    expect(new Set(reads).size).toBe(reads.length);
    const stats = consoleLines.filter({ hasText: 'ollie-9p read session/look/agent/reader/stats' });
    expect(await stats.count()).toBe(1);
    expect(Number((await stats.locator('.count').textContent())!.replace('×', ''))).toBeGreaterThan(1);
    expect(commands.filter((c) => c.includes('ollie-9p write session/look/agent/reader/prompt'))).toHaveLength(1);

    // The switch in Settings wins over the system's choice, and is kept across a reload.
    await g.page.getByRole('tab', { name: 'Settings' }).click();
    await g.page.getByLabel('Theme').selectOption('dark');
    expect(await bg()).toBe('rgb(22, 24, 29)');
    await screenshot(g.page, 'settings-dark-pinned');
    await g.page.reload();
    await g.page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    expect(await bg()).toBe('rgb(22, 24, 29)');
    // The console came back open, with the lines from before the reload (and the reconnect's after them).
    await consoleLines.first().waitFor();
    const after = await consoleLines.locator('code').allTextContents();
    expect(after.length).toBeGreaterThanOrEqual(commands.length);
    expect(after.filter((c) => c.includes('ollie-9p write session/look/agent/reader/prompt'))).toHaveLength(1);
    await g.page.getByRole('tab', { name: 'Settings' }).click();
    await g.page.getByLabel('Theme').selectOption('system');
    expect(await bg()).toBe('rgb(255, 255, 255)');
  }, 120_000);
});
