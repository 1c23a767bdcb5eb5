/**
 * A large chat in Chromium: a 10,000-block log (≈4.4 MB) opens from its tail, only the rows in view exist in the DOM,
 * the heap stays far below 150 MB (bench/gui.mjs's target), and a reply streamed at 200 chunks/s over that history
 * arrives whole, in one block. Nothing here is timed — timings on a loaded CI machine are noise; the figures (first
 * paint, heap, p95 frame time for 1k/10k/100k blocks against the targets) are `node bench/gui.mjs`.
 */
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { FakeOlliesrv } from './fake-olliesrv.js';
import { buildRenderer, CHROMIUM, requireChromium, rmrf } from './helpers.js';

describe('a large chat', () => {
  let rendererDir: string;
  let browser: Browser;
  let fake: FakeOlliesrv;
  let ui: WebUi;

  beforeAll(async () => {
    requireChromium();
    rendererDir = await buildRenderer();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    fake = new FakeOlliesrv();
    fake.addSession('perf');
    ui = await startWebUi({ server: fake.server, rendererDir });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await ui?.close();
    fake?.server.close();
    rmrf(rendererDir);
  });

  it('loads 10,000 blocks virtualized, in little memory, and streams a reply over them in one block', async () => {
    fake.addAgent('perf', 'big');
    expect(fake.fillSynthetic('perf', 'big', 10_000)).toBeGreaterThan(4e6);
    const lastId = /"id":"([^"]+)"/.exec(fake.agent('perf', 'big').log.at(-1)!)![1]!;
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    try {
      await page.goto(ui.url);
      await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
      await page.locator('[data-agent="big"] .node').click();
      await page.locator(`.block[data-id="${lastId}"]`).waitFor({ timeout: 60_000 });
      // Virtualized: the rows in view plus the overscan, not 10,000.
      expect(await page.locator('.row').count()).toBeLessThan(60);

      const cdp = await page.context().newCDPSession(page);
      await cdp.send('HeapProfiler.collectGarbage');
      await cdp.send('Performance.enable');
      const { metrics } = (await cdp.send('Performance.getMetrics')) as { metrics: { name: string; value: number }[] };
      expect((metrics.find((m) => m.name === 'JSHeapUsedSize')?.value ?? Infinity) / 1e6).toBeLessThan(150);

      const id = fake.block('perf', 'big', { role: 'assistant', partial: true, content: 'Streaming: ' });
      await new Promise<void>((resolve) => {
        let i = 0;
        const timer = setInterval(() => {
          fake.block('perf', 'big', { id, role: 'assistant', partial: true, content: `word${i} ` });
          if (++i >= 400) {
            clearInterval(timer);
            resolve();
          }
        }, 5);
      });
      const streamed = page.locator(`.block[data-id="${id}"]`);
      await streamed.filter({ hasText: 'word399' }).waitFor({ timeout: 20_000 });
      expect(await streamed.textContent()).toContain(Array.from({ length: 400 }, (_, i) => `word${i}`).join(' '));
      // Stuck to the bottom while it streamed: the newest block is the one on screen.
      expect(await streamed.isVisible()).toBe(true);
    } finally {
      await page.close();
    }
  }, 90_000);
});
