/**
 * A new user's first run, only through the GUI: the real olliesrv started on an EMPTY config directory (no
 * backends.conf, no profiles of our own), the mock LLM as an OpenAI-compatible server, the built renderer in Debian's
 * Chromium. The page opens on the onboarding; the provider is checked live and saved; then a session, an agent, a
 * prompt and a streamed reply. The key is typed once and never shown again: not in the page, not in the 9P console.
 */
import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startMockLlm, type MockLlm } from '../src/devtools/mock-llm/server.js';
import { startDaemon, type Daemon } from '../src/olliesrv/daemon.js';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { buildRenderer, launch, rmrf, screenshot, socketPath, tempDir, until } from './helpers.js';

const KEY = 'sk-firstrun-secret-0123456789';

describe('first run from an empty config directory (web mode, real daemon)', () => {
  let rendererDir: string;
  let browser: Browser;
  let dir: string;
  let mock: MockLlm;
  let daemon: Daemon;
  let ui: WebUi;
  let page: Page;
  const configDir = (): string => join(dir, 'config');

  beforeAll(async () => {
    [rendererDir, browser, mock] = await Promise.all([
      buildRenderer(),
      launch(),
      startMockLlm({ models: ['mock-coder', 'mock-small'] }),
    ]);
    dir = tempDir('ollie-e2e-firstrun-');
    mkdirSync(configDir());
    mkdirSync(join(dir, 'work'));
    daemon = await startDaemon({
      socket: socketPath(dir),
      dataDir: join(dir, 'data'),
      configDir: configDir(),
      log: () => undefined,
      retryDelay: () => 10,
    });
    ui = await startWebUi({ server: daemon.server, rendererDir, port: 0 });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  }, 60_000);
  afterAll(async () => {
    await page?.close();
    await browser?.close();
    await ui?.close();
    await daemon?.close();
    await mock?.close();
    rmrf(rendererDir, dir);
  });

  it('goes from nothing to a streamed reply through the onboarding', async () => {
    expect(readdirSync(configDir())).toEqual([]);
    await page.goto(ui.url);
    await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();

    // Nothing configured: the banner shows, and the page opened on the onboarding.
    await page.getByRole('note').filter({ hasText: 'No LLM backend is configured' }).waitFor();
    const setup = page.getByRole('region', { name: 'Set up an LLM backend' });
    await setup.waitFor();
    await screenshot(page, 'firstrun-onboarding');

    // An OpenAI-compatible server: URL and key; the key field is masked.
    await setup.getByRole('radio', { name: /OpenAI-compatible server/ }).check();
    await setup.getByLabel('URL').fill(`${mock.url}/v1`);
    const key = setup.getByLabel('API key', { exact: true });
    expect(await key.getAttribute('type')).toBe('password');
    await key.fill(KEY);
    await setup.getByLabel('Name in backends.conf').fill('mock');
    // Save waits for a successful check.
    expect(await setup.getByRole('button', { name: 'Save' }).isDisabled()).toBe(true);

    // A wrong URL first: the check fails and says where.
    await setup.getByLabel('URL').fill('http://127.0.0.1:9/v1');
    await setup.getByRole('button', { name: 'Check' }).click();
    await setup
      .getByRole('alert')
      .filter({ hasText: /Check failed.*127\.0\.0\.1:9/ })
      .waitFor({ timeout: 20_000 });
    expect(readdirSync(configDir())).toEqual([]);

    // The right one: its models, listed live.
    await setup.getByLabel('URL').fill(`${mock.url}/v1`);
    await setup.getByRole('button', { name: 'Check' }).click();
    await setup.getByRole('status').filter({ hasText: 'Reachable: 2 models.' }).waitFor();
    expect(await setup.getByLabel('Model').inputValue()).toBe('mock-coder');
    expect(mock.requests.filter((r) => r.path === '/v1/models').length).toBeGreaterThan(0);
    await screenshot(page, 'firstrun-checked');
    await setup.getByRole('button', { name: 'Save' }).click();
    await setup
      .getByRole('status')
      .filter({ hasText: /Saved \[mock\] in .*backends\.conf \(the default backend\)/ })
      .waitFor();
    await page.getByRole('note').filter({ hasText: 'No LLM backend is configured' }).waitFor({ state: 'detached' });

    // The file: 0600, commented, readable, with the key (the one place it is kept).
    const file = join(configDir(), 'backends.conf');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const text = readFileSync(file, 'utf8');
    expect(text).toMatch(/^# LLM backends of Ollie/);
    expect(text).toContain('[default]\nbackend = mock\n');
    expect(text).toContain(`[mock]\ntype = openai\nurl = ${mock.url}/v1\nkey = ${KEY}\nmodel = mock-coder\n`);

    // A session and an agent, from the dialogs, with every default.
    await setup.getByRole('button', { name: 'New session' }).click();
    await page.getByRole('dialog').getByLabel('Name').fill('first');
    await page.getByRole('dialog').getByLabel('Working directory').fill(join(dir, 'work'));
    await page.getByRole('dialog').getByRole('button', { name: 'Create' }).click();
    await page.locator('[data-session="first"]').waitFor();
    await page.getByRole('button', { name: 'New agent in first' }).click();
    const d = page.getByRole('dialog', { name: 'New agent in first' });
    await d.getByRole('button', { name: 'Create' }).click();
    await page.getByTestId('chat').waitFor({ timeout: 10_000 });

    // A prompt: the reply streams in.
    mock.script([
      { delayMs: 50 },
      { text: 'Hello ' },
      { text: 'from your ' },
      { text: 'first backend.' },
      { usage: { input: 100, output: 8 } },
    ]);
    const box = page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill('hello');
    await box.press('Enter');
    await page.locator('.block[data-role="user"]', { hasText: 'hello' }).waitFor();
    await page.locator('.block.partial[data-role="assistant"]').waitFor({ timeout: 15_000 });
    await page
      .locator('.block[data-role="assistant"]:not(.partial)', { hasText: 'Hello from your first backend.' })
      .waitFor({ timeout: 15_000 });
    const chat = mock.requests.find((r) => r.path === '/v1/chat/completions');
    expect((chat?.body as { model: string }).model).toBe('mock-coder');
    expect(chat?.headers.authorization).toBe('[redacted]');
    await page.getByRole('status').filter({ hasText: 'mock / mock-coder' }).waitFor();
    await screenshot(page, 'firstrun-reply');

    // The key is nowhere on the page: not in the 9P console (masked there), not in Settings' backends.conf.
    await page.keyboard.press('Control+`');
    const console = page.getByRole('region', { name: '9P console' });
    await console.getByText('ollie-9p rdwr config/backend').first().waitFor();
    expect(await console.textContent()).toContain('key=••••••••');
    await page.keyboard.press('Control+,');
    const editor = page.locator('section[data-file="backends.conf"]');
    const conf = editor.getByRole('textbox', { name: 'backends.conf' });
    await until(async () => (await conf.inputValue()).includes('[mock]'), 'backends.conf in Settings');
    expect(await conf.inputValue()).toContain('key = ••••••••');
    expect(await page.content()).not.toContain(KEY);
    const fields = page.locator('input, textarea');
    for (let i = 0; i < (await fields.count()); i++) expect(await fields.nth(i).inputValue()).not.toContain(KEY);

    // Editing another line keeps the key: the masked line stands for it.
    await conf.fill((await conf.inputValue()).replace('model = mock-coder', 'model = mock-small'));
    await editor.getByRole('button', { name: 'Save' }).click();
    await editor.getByRole('status').filter({ hasText: 'Saved and reloaded.' }).waitFor();
    expect(readFileSync(file, 'utf8')).toContain(`key = ${KEY}\nmodel = mock-small\n`);
  }, 90_000);
});
