#!/usr/bin/env node
/**
 * Renders resources/icon.svg to resources/icon.png (512×512, transparent corners) with the installed Chromium
 * through playwright-core — no image library needed. electron-builder takes the PNG (linux.icon) for the
 * AppImage and the .deb. Run it after changing the SVG, and commit the PNG:
 *
 *   node scripts/render-icon.mjs
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const SIZE = 512;
const svgPath = new URL('../resources/icon.svg', import.meta.url);
const pngPath = new URL('../resources/icon.png', import.meta.url);
const svg = readFileSync(svgPath, 'utf8');

const browser = await chromium.launch({
  executablePath: process.env.OLLIE_CHROMIUM ?? '/usr/bin/chromium',
  // As root (CI, containers) Chromium needs --no-sandbox; the page is our own SVG.
  args: ['--no-sandbox', '--disable-gpu'],
});
try {
  const page = await browser.newPage({ viewport: { width: SIZE, height: SIZE }, deviceScaleFactor: 1 });
  // The SVG as an <img> from a data: URL: drawn at exactly SIZE×SIZE whatever its own width/height say.
  const src = `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`;
  await page.setContent(
    `<!doctype html><html><body style="margin:0;background:transparent"><img src="${src}" width="${SIZE}" height="${SIZE}" style="display:block"></body></html>`,
  );
  await page.locator('img').evaluate((img) => img.decode());
  const png = await page.screenshot({ clip: { x: 0, y: 0, width: SIZE, height: SIZE }, omitBackground: true });
  writeFileSync(pngPath, png);
  process.stdout.write(`wrote ${pngPath.pathname} (${SIZE}×${SIZE}, ${png.length} bytes)\n`);
} finally {
  await browser.close();
}
