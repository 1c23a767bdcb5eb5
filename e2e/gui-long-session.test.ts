/**
 * A long session in the web UI against the real olliesrv: the chat opens from the log's tail (log.from, never the
 * whole log.raw), scrolling up brings older blocks in order with no gap or duplicate while the rows on screen
 * stay put as a page is put in front of them, a reply streamed meanwhile still arrives whole, and a search hit
 * far behind the tail opens scrolled to its block. Nothing here is
 * timed; first paint at 1k/10k/100k blocks is `node bench/gui.mjs`.
 */
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import type { Client } from '../src/ninep/index.js';
import { dial } from '../src/ninep/node.js';
import { startDaemon, type Daemon } from '../src/olliesrv/daemon.js';
import type { ChatLog } from '../src/olliesrv/agent/chatlog.js';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { buildRenderer, launch, rmrf, socketPath, tempDir, until } from './helpers.js';

const N = 3000;

describe('a long session (web mode, real olliesrv)', () => {
  let rendererDir: string;
  let browser: Browser;
  let dir: string;
  let daemon: Daemon;
  let ui: WebUi;
  let outside: Client;
  let page: Page;
  let log: ChatLog;

  beforeAll(async () => {
    [rendererDir, browser] = await Promise.all([buildRenderer(), launch()]);
    dir = tempDir('ollie-e2e-long-');
    const sock = socketPath(dir);
    // No LLM and no tools: the log is filled directly, as a long day of work would have left it.
    daemon = await startDaemon({
      socket: sock,
      dataDir: join(dir, 'data'),
      configDir: join(dir, 'config'),
      toolsrv: false,
      skills: false,
      log: () => undefined,
    });
    ui = await startWebUi({ server: daemon.server, rendererDir });
    outside = await dial(`unix!${sock}`, { uname: userInfo().username });
    await outside.rdwrText('session/new', `name=long cwd=${dir}\n`);
    await outside.rdwrText('session/long/agent/new', 'name=old\n');
    log = daemon.agents.get('long', 'old').log;
    // Every fourth block is context (hidden in the chat), so pages and rows do not line up one to one.
    for (let i = 0; i < N; i++) {
      if (i % 4 === 3) log.add('context', `context ${i}`);
      else log.add(i % 2 ? 'assistant' : 'user', `block ${i}${i === 10 ? ' zebrafish' : ''}`);
    }
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  }, 60_000);
  afterAll(async () => {
    await page?.close();
    await browser?.close();
    outside?.close();
    await ui?.close();
    await daemon?.close();
    rmrf(rendererDir, dir);
  });

  const chat = () => page.getByTestId('chat');
  /** The rows in the DOM: their virtual index and the number in their text. */
  const rows = () =>
    page.locator('.row').evaluateAll((els) =>
      els.map((e) => ({
        index: Number(e.getAttribute('data-index')),
        n: Number(/block (\d+)/.exec(e.textContent ?? '')?.[1] ?? -1),
      })),
    );
  /** The row at the top of the chat's view. */
  const topRow = () =>
    chat().evaluate((el) => {
      const edge = el.getBoundingClientRect().top + 1;
      const r = [...el.querySelectorAll('.row')]
        .filter((e) => e.getBoundingClientRect().bottom > edge)
        .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)[0];
      return r
        ? { index: Number(r.getAttribute('data-index')), n: Number(/block (\d+)/.exec(r.textContent ?? '')?.[1] ?? -1) }
        : undefined;
    });
  /** The shown blocks in log order, context left out: row i of the chat must show shown[i]. */
  const shown = Array.from({ length: N }, (_, i) => i).filter((i) => i % 4 !== 3);

  it('opens at the tail, pages older blocks in order without moving the view, and keeps streaming', async () => {
    await page.goto(ui.url);
    await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    // The 9P console, open below the chat, shows what the renderer reads.
    await page.keyboard.press('Control+`');
    const consoleText = () => page.getByRole('region', { name: '9P console' }).textContent();
    await page.locator('[data-agent="old"] .node').click();
    await page.locator('.block', { hasText: `block ${N - 2}` }).waitFor();
    // Read from the tail: log.from's tail, not log.raw from the start.
    expect(await consoleText()).toMatch(/'tail \d+' \| ollie-9p rdwrs session\/long\/agent\/old\/log\.from/);
    expect(await consoleText()).not.toContain('log.raw');

    // Scrolled to the very top once: a page arrives in front, and the row that was at the top (the tail's
    // oldest shown block) is still the one at the top of the view, not the page's first row.
    const tail = Number(/'tail (\d+)'/.exec((await consoleText()) ?? '')![1]);
    const oldestInTail = shown.find((i) => i >= N - tail)!;
    await chat().evaluate((el) => (el.scrollTop = 0));
    await until(
      async () =>
        /'before \w+ \d+' \| ollie-9p rdwrs session\/long\/agent\/old\/log\.from/.test((await consoleText()) ?? ''),
      'a page of older blocks asked for',
    );
    await until(async () => {
      const top = await topRow();
      return top && top.index > 0 && top.n === oldestInTail;
    }, `block ${oldestInTail} still at the top of the view once the page went in front`);

    // All the way up, page by page: the first block of the log comes in the end.
    await until(
      async () => {
        await chat().evaluate((el) => (el.scrollTop = 0));
        return (await rows()).some((r) => r.n === 0);
      },
      'the first block after scrolling up',
      60_000,
    );

    // Row i shows the i-th shown block everywhere in the chat: in order, nothing missing, nothing twice.
    const height = await chat().evaluate((el) => el.scrollHeight);
    for (let y = 0; y < height; y += 2000) {
      await chat().evaluate((el, top) => (el.scrollTop = top), y);
      const rs = await rows();
      for (const r of rs) expect(r.n, `row ${r.index}`).toBe(shown[r.index]);
    }
    await chat().evaluate((el) => (el.scrollTop = el.scrollHeight));
    expect(Math.max(...(await rows()).map((r) => r.index))).toBe(shown.length - 1);

    // Live blocks still stream in, after everything that was loaded.
    const id = log.begin('assistant');
    for (let i = 0; i < 50; i++) log.delta(id, `word${i} `);
    log.end(id);
    const streamed = page.locator(`.block[data-id="${id}"]`);
    await streamed.filter({ hasText: 'word49' }).waitFor();
    expect(await streamed.textContent()).toContain(Array.from({ length: 50 }, (_, i) => `word${i}`).join(' '));
    const last = await page.locator('.row').evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-index'))));
    expect(Math.max(...last)).toBe(shown.length);
  }, 120_000);

  it('opens a search hit far behind the tail: older pages load until its block is there, in view', async () => {
    const fresh = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    try {
      await fresh.goto(ui.url);
      await fresh.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
      await fresh.keyboard.press('Control+Shift+F');
      const search = fresh.getByRole('region', { name: 'Search' });
      await search.getByLabel('Search words').fill('zebrafish');
      await search.getByLabel('Search words').press('Enter');
      await search.getByTestId('search-results').locator('.hit').first().click();
      const target = fresh.locator('.row.highlight .block', { hasText: 'block 10 zebrafish' });
      await target.waitFor({ timeout: 20_000 });
      await until(async () => {
        const [box, view] = await Promise.all([target.boundingBox(), fresh.getByTestId('chat').boundingBox()]);
        return box && view && box.y >= view.y - 1 && box.y + Math.min(box.height, 40) <= view.y + view.height + 1;
      }, 'the hit scrolled into view');
    } finally {
      await fresh.close();
    }
  }, 60_000);
});
