/**
 * GUI figures (issue 5 §4) in Chromium: a chat of 1,000, 10,000 (≈5 MB) and 100,000 blocks — time to first
 * paint of the chat (selecting the agent until its last block shows), JS heap after load, and p95 frame time
 * while a reply streams at 200 chunks/s. Targets: ≤ 1 s and ≤ 150 MB at 10k, p95 ≤ 16.7 ms, and 100k costing at
 * most 1.5× of 1k (the history must not make streaming slower). It prints the figures.
 * Frame time is the time between animation frames at Chromium's normal 60 Hz: a frame whose work overruns the
 * 16.7 ms budget shows as a 33 ms interval, so p95 within budget means at most 5% of frames dropped. The
 * comparison allows 5% for timer jitter around 16.7 ms.
 *
 * Timings on a loaded machine (CI runs every test file in parallel on 2 cores) are noise, not figures: by
 * default this runs 1k and 10k and holds them to bounds that only a real regression breaks. With
 * OLLIE_GUI_BENCH=1 (run it alone: `OLLIE_GUI_BENCH=1 npx vitest run e2e/gui-perf.test.ts`) it runs all three
 * sizes against the targets.
 */
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { FakeOlliesrv } from './fake-olliesrv.js';
import { buildRenderer, CHROMIUM, requireChromium, rmrf } from './helpers.js';

interface Figures {
  blocks: number;
  megabytes: number;
  firstPaintMs: number;
  heapMB: number;
  p95FrameMs: number;
  frames: number;
}

const LOREM = 'The build runs vite for the renderer and tsc for the daemons; tests use vitest and Chromium. ';

/** A realistic mix: prompts, markdown replies, tool calls and (long, collapsed) results; ≈500 bytes a block. */
function fill(fake: FakeOlliesrv, agent: string, n: number): number {
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const kind = i % 4;
    const b =
      kind === 0 ? { role: 'user', content: `Question ${i}: ${LOREM.repeat(4)}` }
      : kind === 1 ? { role: 'assistant', content: `Answer ${i}: **bold** and \`code\`.\n\n- ${LOREM.repeat(2)}\n- ${LOREM.repeat(2)}\n` }
      : kind === 2 ? { role: 'call', name: 'shell', content: JSON.stringify({ command: `grep -rn item${i} src/ | head -50 # ${LOREM}` }) }
      : { role: 'tool', name: 'shell', format: 'text', content: Array.from({ length: 14 }, (_, j) => `src/file${j}.ts:${i}: const item${i} = ${j};`).join('\n') };
    fake.block('perf', agent, b);
  }
  for (const l of fake.agent('perf', agent).log) bytes += Buffer.byteLength(l);
  return bytes;
}

describe('GUI figures', () => {
  let rendererDir: string;
  let browser: Browser;
  let fake: FakeOlliesrv;
  let ui: WebUi;
  const results: Figures[] = [];

  beforeAll(async () => {
    requireChromium();
    rendererDir = await buildRenderer();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-dev-shm-usage'],
    });
    fake = new FakeOlliesrv();
    fake.addSession('perf');
    ui = await startWebUi({ server: fake.server, rendererDir });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await ui?.close();
    fake?.server.close();
    rmrf(rendererDir);
    if (results.length) {
      process.stdout.write('\nGUI figures (Chromium, web mode)\n  blocks     MB   first paint   JS heap   p95 frame (200 chunks/s)\n');
      for (const r of results) {
        process.stdout.write(`  ${String(r.blocks).padStart(6)} ${r.megabytes.toFixed(1).padStart(6)}   ${r.firstPaintMs.toFixed(0).padStart(8)} ms  ${r.heapMB.toFixed(1).padStart(6)} MB   ${r.p95FrameMs.toFixed(2).padStart(6)} ms (${r.frames} frames)\n`);
      }
    }
  });

  async function measure(n: number): Promise<Figures> {
    const name = `a${n}`;
    fake.addAgent('perf', name);
    const bytes = fill(fake, name, n);
    const lastId = fake.agent('perf', name).log.at(-1)!.match(/"id":"([^"]+)"/)![1]!;
    const page: Page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    try {
      await page.goto(ui.url);
      await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
      const t0 = Date.now();
      await page.locator(`[data-agent="${name}"] .node`).click();
      await page.locator(`.block[data-id="${lastId}"]`).waitFor({ timeout: 60_000 });
      const firstPaintMs = Date.now() - t0;

      const cdp = await page.context().newCDPSession(page);
      await cdp.send('HeapProfiler.collectGarbage');
      const metrics = (await cdp.send('Performance.enable').then(() => cdp.send('Performance.getMetrics'))) as { metrics: { name: string; value: number }[] };
      const heapMB = (metrics.metrics.find((m) => m.name === 'JSHeapUsedSize')?.value ?? 0) / 1e6;

      // Stream a reply at 200 chunks/s for 2 s while the page records the time between frames.
      await page.evaluate(() => {
        const w = globalThis as unknown as { __frames: number[]; __stop: boolean; requestAnimationFrame(cb: (t: number) => void): void };
        w.__frames = [];
        w.__stop = false;
        let last = 0;
        const tick = (t: number): void => {
          if (last) w.__frames.push(t - last);
          last = t;
          if (!w.__stop) w.requestAnimationFrame(tick);
        };
        w.requestAnimationFrame(tick);
      });
      const id = fake.block('perf', name, { role: 'assistant', partial: true, content: 'Streaming: ' });
      await new Promise<void>((resolve) => {
        let i = 0;
        const timer = setInterval(() => {
          fake.block('perf', name, { id, role: 'assistant', partial: true, content: `word${i} ` });
          if (++i >= 400) {
            clearInterval(timer);
            resolve();
          }
        }, 5);
      });
      await page.locator(`.block[data-id="${id}"]`, { hasText: 'word399' }).waitFor({ timeout: 10_000 });
      const frames = await page.evaluate(() => {
        const w = globalThis as unknown as { __frames: number[]; __stop: boolean };
        w.__stop = true;
        return w.__frames;
      });
      const sorted = [...frames].sort((a, b) => a - b);
      const p95FrameMs = sorted[Math.floor(sorted.length * 0.95)] ?? 0;
      const f = { blocks: n, megabytes: bytes / 1e6, firstPaintMs, heapMB, p95FrameMs, frames: frames.length };
      results.push(f);
      return f;
    } finally {
      await page.close();
      fake.killAgent('perf', name);
    }
  }

  const bench = process.env.OLLIE_GUI_BENCH === '1';

  it(bench ? 'meets the targets for 1k, 10k and 100k blocks' : 'loads 1k and 10k blocks and streams over them within regression bounds', async () => {
    const k1 = await measure(1_000);
    const k10 = await measure(10_000);
    expect(k10.megabytes).toBeGreaterThan(4);
    if (!bench) {
      expect(k10.firstPaintMs).toBeLessThanOrEqual(5000);
      expect(k10.heapMB).toBeLessThanOrEqual(150);
      // Gross stalls only (six frames in a row lost), which a busy CI machine does not cause by itself.
      for (const f of [k1, k10]) expect(f.p95FrameMs).toBeLessThanOrEqual(100);
      return;
    }
    const k100 = await measure(100_000);
    expect(k10.firstPaintMs).toBeLessThanOrEqual(1000);
    expect(k10.heapMB).toBeLessThanOrEqual(150);
    for (const f of [k1, k10, k100]) expect(f.p95FrameMs).toBeLessThanOrEqual(16.7 * 1.05);
    // Streaming cost does not grow with the history, nor does loading (per block).
    expect(k100.p95FrameMs).toBeLessThanOrEqual(1.5 * k1.p95FrameMs);
    expect(k100.heapMB / 100_000).toBeLessThanOrEqual((1.5 * k1.heapMB) / 1_000);
  }, 180_000);
});
