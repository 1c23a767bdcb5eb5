/**
 * A large chat in Chromium: a 10,000-block log (≈4.4 MB) opens from its tail, only the rows in view exist in the DOM,
 * the heap stays far below 150 MB (bench/gui.mjs's target), and a reply streamed at 200 chunks/s over that history arrives
 * whole, in one block. Against the real daemon (the mock LLM behind it): the blocks go through the agent's chat log
 * into SQLite and out through log.from, as an agent's turns write them. Nothing here is timed — timings on a loaded CI machine are noise; the figures (first
 * paint, heap, p95 frame time for 1k/10k/100k blocks against the targets) are `node bench/gui.mjs`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { harness, type Harness } from '../test/olliesrv/agent-harness.js';
import { syntheticBlock } from './synthetic.js';
import { useBrowser } from './gui-harness.js';

describe('a large chat', () => {
  const b = useBrowser();
  let h: Harness;
  let ui: WebUi;

  beforeAll(async () => {
    h = await harness({ tools: false });
    await h.c.rdwrText('session/new', `name=perf cwd=${h.dir}`);
    ui = await startWebUi({ server: h.daemon.server, rendererDir: b.rendererDir });
  }, 60_000);
  afterAll(async () => {
    await ui?.close();
    await h?.close();
  });

  it('loads 10,000 blocks virtualized, in little memory, and streams a reply over them in one block', async () => {
    await h.c.rdwrText('session/perf/agent/new', 'name=big agent=test');
    const log = h.daemon.agents.get('perf', 'big').log;
    let bytes = 0;
    let lastId = '';
    for (let i = 0; i < 10_000; i++) {
      const b = syntheticBlock(i);
      const added = log.add(b.role, b.content, {
        ...(b.name ? { name: b.name } : {}),
        ...(b.format ? { format: b.format } : {}),
      });
      bytes += Buffer.byteLength(JSON.stringify(added)) + 1;
      lastId = added.id;
    }
    expect(bytes).toBeGreaterThan(4e6);
    const page = await b.browser.newPage({ viewport: { width: 1280, height: 800 } });
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

      const id = log.begin('assistant');
      log.delta(id, 'Streaming: ');
      await new Promise<void>((resolve) => {
        let i = 0;
        const timer = setInterval(() => {
          log.delta(id, `word${i} `);
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
