/**
 * Shared e2e fixtures: the renderer built once per test file into a private directory (files run in parallel
 * forks, so they must not share out/), Debian's Chromium driven by playwright-core, and temporary daemons.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import react from '@vitejs/plugin-react';
import { chromium, type Browser, type Page } from 'playwright-core';
import { build } from 'vite';

export const root = resolve(import.meta.dirname, '..');
export const CHROMIUM = process.env.OLLIE_CHROMIUM ?? '/usr/bin/chromium';

/** Fails with the fix in the message: these tests need Debian's chromium (`.ci/run` installs it). */
export function requireChromium(): void {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium), or set OLLIE_CHROMIUM`,
    );
  }
}

/** Builds src/renderer (same settings as electron.vite.config.ts's renderer) into a fresh directory. */
export async function buildRenderer(): Promise<string> {
  const out = mkdtempSync(join(tmpdir(), 'ollie-renderer-'));
  // vitest sets NODE_ENV=test, which would give React's development build (and JSX dev transform): test what ships.
  const env = process.env.NODE_ENV;
  process.env.NODE_ENV = 'production';
  try {
    await build({
      configFile: false,
      mode: 'production',
      root: join(root, 'src/renderer'),
      plugins: [react()],
      logLevel: 'error',
      build: { outDir: out, emptyOutDir: true, reportCompressedSize: false },
    });
  } finally {
    if (env === undefined) delete process.env.NODE_ENV;
    else process.env.NODE_ENV = env;
  }
  return out;
}

export async function launch(): Promise<Browser> {
  requireChromium();
  // Running as root (CI) needs --no-sandbox; the page is our own renderer on loopback.
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A private runtime directory for a Unix socket (prepareUnixSocket wants 0700). */
export function socketPath(dir: string): string {
  const d = join(dir, 'run');
  mkdirSync(d, { recursive: true, mode: 0o700 });
  return join(d, 'ollie.sock');
}

export const screenshotsDir = join(root, 'e2e', 'screenshots');

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(screenshotsDir, { recursive: true });
  await page.screenshot({ path: join(screenshotsDir, `${name}.png`) });
}

export function rmrf(...dirs: (string | undefined)[]): void {
  for (const d of dirs) if (d) rmSync(d, { recursive: true, force: true });
}

/** Waits until `fn` returns a truthy value (for state outside the page). */
export { until } from '../test/wait.js';

/** DOM shapes for page.evaluate (the test tsconfig has no DOM library). */
interface OvRect {
  right: number;
  width: number;
}
interface OvEl {
  parentElement: OvEl | null;
  className: unknown;
  tagName: string;
  textContent: string | null;
  getBoundingClientRect: () => OvRect;
  closest: (s: string) => OvEl | null;
}
declare const document: { querySelectorAll: (s: string) => ArrayLike<OvEl> };
declare const getComputedStyle: (e: unknown) => { overflowX: string; position: string; display: string };

/**
 * Every element of the main area and the tree that reaches past its parent's right edge — what would run off the
 * screen or out of its block — outside the panes meant to scroll sideways (code, output, tables) and inside
 * parents that clip on purpose (an ellipsized label). Empty when the layout holds.
 */
export function overflows(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const bad: string[] = [];
    const all = document.querySelectorAll('.main *, .side *');
    for (let i = 0; i < all.length; i++) {
      const e = all[i]!;
      const p = e.parentElement;
      if (!p) continue;
      const st = getComputedStyle(e);
      if (st.position === 'fixed' || st.display === 'none' || st.display === 'contents') continue;
      if (p.closest('pre, .table-wrap')) continue;
      const px = getComputedStyle(p).overflowX;
      if (px === 'hidden' || px === 'clip') continue;
      const r = e.getBoundingClientRect();
      const pr = p.getBoundingClientRect();
      if (r.width > 0 && r.right > pr.right + 1) {
        bad.push(
          `${e.tagName.toLowerCase()}.${String(e.className)} ${Math.round(r.right - pr.right)}px past ${p.tagName.toLowerCase()}.${String(p.className)}: ${(e.textContent ?? '').slice(0, 40)}`,
        );
      }
    }
    return bad;
  });
}

/** backends.conf with the mock LLM (at `url`) as the default, OpenAI-protocol backend `mock`. */
export function mockBackends(url: string): string {
  return `[default]\nbackend = mock\n\n[mock]\ntype = openai\nurl = ${url}/v1\nkey = test-key\nmodel = gpt-4o\ncontext = 100000\n`;
}
