/**
 * The whole product in web mode: the real olliesrv (sessions, agents, the loop), the mock LLM speaking
 * OpenAI's SSE over real HTTP, a real toolsrv per session, and the built renderer in Debian's Chromium.
 * One flow, as a user would go through it: create a session and an agent, prompt, watch the streamed answer,
 * a tool runs, one approval approved and one denied, a sub-agent comes and goes, rename, restart the daemon
 * and find everything restored, kill.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startMockLlm, type MockLlm } from '../src/devtools/mock-llm/server.js';
import type { Client } from '../src/ninep/index.js';
import { dial } from '../src/ninep/node.js';
import { retryDelay } from '../src/olliesrv/backend/retry.js';
import { startDaemon, type Daemon } from '../src/olliesrv/daemon.js';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import {
  buildRenderer,
  launch,
  mockBackends,
  overflows,
  rmrf,
  screenshot,
  socketPath,
  tempDir,
  until,
} from './helpers.js';

/** Runs in the page (page.evaluate); the test tsconfig has no DOM library. */
declare const getComputedStyle: (e: unknown) => { paddingLeft: string; borderLeftColor: string };

describe('the app with real agents (web mode)', () => {
  let rendererDir: string;
  let browser: Browser;
  let dir: string;
  let sock: string;
  let mock: MockLlm;
  let daemon: Daemon;
  let ui: WebUi;
  let outside: Client;
  let page: Page;

  const start = async (port = 0, token?: string): Promise<void> => {
    daemon = await startDaemon({
      socket: sock,
      dataDir: join(dir, 'data'),
      configDir: join(dir, 'config'),
      log: () => undefined,
      // The real policy (an auth error is not retried), without its waits.
      retryDelay: (e, n) => (retryDelay(e, n) === null ? null : 10),
    });
    ui = await startWebUi({ server: daemon.server, rendererDir, port, token });
    outside = await dial(`unix!${sock}`, { uname: userInfo().username });
  };
  const stop = async (): Promise<void> => {
    outside?.close();
    await ui?.close();
    await daemon?.close();
  };

  beforeAll(async () => {
    [rendererDir, browser, mock] = await Promise.all([buildRenderer(), launch(), startMockLlm()]);
    dir = tempDir('ollie-e2e-gui-');
    sock = socketPath(dir);
    mkdirSync(join(dir, 'config', 'agents'), { recursive: true });
    mkdirSync(join(dir, 'work'));
    writeFileSync(join(dir, 'config', 'backends.conf'), mockBackends(mock.url));
    writeFileSync(
      join(dir, 'config', 'agents', 'e2e.json'),
      JSON.stringify({ description: 'e2e agent', prompt: 'You are a test agent.', autoLoad: ['shell'], maxSteps: 20 }),
    );
    await start();
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  }, 60_000);
  afterAll(async () => {
    await page?.close();
    await browser?.close();
    await stop();
    await mock?.close();
    rmrf(rendererDir, dir);
  });

  const block = (role: string, text: string) => page.locator(`.block[data-role="${role}"]`, { hasText: text });
  const agentNode = (name: string) => page.locator(`[data-agent="${name}"]`);

  it('runs the whole flow against the real daemon', async () => {
    await page.goto(ui.url);
    await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();

    // A session and an agent, from the dialogs.
    await page.getByRole('button', { name: 'New session' }).click();
    await page.getByRole('dialog').getByLabel('Name').fill('proj');
    await page.getByRole('dialog').getByLabel('Working directory').fill(join(dir, 'work'));
    await page.getByRole('dialog').getByRole('button', { name: 'Create' }).click();
    await page.locator('[data-session="proj"]').waitFor();
    await page.getByRole('button', { name: 'New agent in proj' }).click();
    const d = page.getByRole('dialog', { name: 'New agent in proj' });
    await d.getByLabel('Name').fill('coder');
    await d.getByLabel('Backend').selectOption('mock');
    await d.getByLabel('Profile').selectOption('e2e');
    await d.getByRole('button', { name: 'Create' }).click();
    await agentNode('coder').waitFor();
    expect(await outside.readText('session/proj/agent/coder/cfg')).toContain('profile=e2e');
    await page.getByTestId('chat').waitFor();

    // A prompt; the answer streams in (a slow stream: several chunks, reasoning first).
    mock.script([
      { delayMs: 60 },
      { reasoning: 'The user greets me.' },
      { text: 'Hello, ' },
      { text: 'I am **coder**' },
      { text: ' and ready.' },
      { usage: { input: 120, output: 12 } },
    ]);
    const box = page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill('hi there');
    await box.press('Enter');
    await block('user', 'hi there').waitFor();
    await page.locator('.block.partial[data-role="assistant"]').waitFor({ timeout: 5000 });
    await block('assistant', 'Hello, I am coder and ready.').waitFor();
    await until(async () => (await page.locator('.block.partial').count()) === 0, 'every block to be final');
    expect(await block('assistant', 'ready').locator('strong').textContent()).toBe('coder');
    await page
      .locator('.block[data-role="reasoning"]')
      .getByRole('button', { name: /show reasoning/ })
      .waitFor();
    await page.locator('[data-agent="coder"][data-state="idle"]').waitFor();
    await page.getByRole('status').filter({ hasText: 'mock / gpt-4o' }).waitFor();
    await screenshot(page, 'gui-streamed');

    // A tool call runs through toolsrv; its call and result show.
    mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo hello-from-tool' } }] }],
      [{ text: 'The tool said hello.' }],
    );
    await box.fill('run the tool');
    await box.press('Enter');
    await block('assistant', 'The tool said hello.').waitFor({ timeout: 15_000 });
    await page.locator('.block[data-role="call"]').filter({ hasText: 'echo hello-from-tool' }).waitFor();
    await block('tool', 'hello-from-tool').waitFor();

    // Two requests to run outside the sandbox: the first approved, the second denied (clicks: no key approves).
    mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo approved-run', bypass: true } }] }],
      [{ text: 'first done' }],
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo denied-run', bypass: true } }] }],
      [{ text: 'second done' }],
    );
    await box.fill('needs approval');
    await box.press('Enter');
    const dialog = page.getByRole('dialog', { name: /Approval needed/ });
    await dialog.filter({ hasText: 'echo approved-run' }).waitFor({ timeout: 15_000 });
    await agentNode('coder').locator('.warn').waitFor();
    expect(await dialog.textContent()).toContain('proj');
    await screenshot(page, 'gui-approval');
    await dialog.getByRole('button', { name: 'Approve once' }).click();
    await block('assistant', 'first done').waitFor({ timeout: 15_000 });
    await block('tool', 'approved-run').waitFor();
    await agentNode('coder').locator('.warn').waitFor({ state: 'detached' });

    await box.fill('needs approval again');
    await box.press('Enter');
    await dialog.filter({ hasText: 'echo denied-run' }).waitFor({ timeout: 15_000 });
    await dialog.getByRole('button', { name: 'Deny' }).click();
    await block('assistant', 'second done').waitFor({ timeout: 15_000 });
    // The denied command never ran: no result block carries its output line.
    const results = await page.locator('.block[data-role="tool"]').allTextContents();
    expect(results.some((t) => /^denied-run$/m.test(t.replace(/^Result\S*/, '')))).toBe(false);
    const dot = (name: string) => agentNode(name).locator('.dot');
    expect(await dot('coder').getAttribute('class')).toContain('state-idle');

    // A turn that ends in an error: the agent is idle again, but its dot is red, not green (agent/idx's last
    // column and the turn event say so), until a turn succeeds.
    mock.script([{ status: 401, message: 'invalid api key' }]);
    await box.fill('this one fails');
    await box.press('Enter');
    await block('error', 'invalid api key').waitFor({ timeout: 15_000 });
    await page.locator('[data-agent="coder"][data-state="idle"][data-last="error"]').waitFor();
    expect(await dot('coder').getAttribute('class')).toContain('state-error');
    expect(await dot('coder').getAttribute('title')).toBe('idle, last turn failed');
    expect((await outside.readText('session/proj/agent/idx')).trim().split('\t')[6]).toBe('error');
    expect(await overflows(page)).toEqual([]);
    await screenshot(page, 'gui-turn-error');

    // A sub-agent, started by another client: it appears under its parent while it works, then goes.
    const aid = (await outside.readText('session/proj/agent/coder/id')).trim();
    mock.script([{ delayMs: 300 }, { text: 'sub ' }, { text: 'agent ' }, { text: 'reply' }]);
    const reply = outside.rdwrText('session/proj/agent/new', `name=helper parent=${aid} agent=e2e prompt=help me`);
    await agentNode('helper').waitFor({ timeout: 10_000 });
    const indent = (name: string): Promise<number> =>
      agentNode(name)
        .locator('.node')
        .evaluate((e) => parseFloat(getComputedStyle(e).paddingLeft));
    expect(await indent('helper')).toBeGreaterThan(await indent('coder'));
    await screenshot(page, 'gui-subagent');
    expect(await reply).toContain('sub agent reply');
    // Done, it stays in the tree, marked finished, and its history opens read-only (from session/S/ended/ID).
    await page.locator('[data-agent="helper"][data-ended="finished"]').waitFor({ timeout: 10_000 });
    expect(await indent('helper')).toBeGreaterThan(await indent('coder'));
    await agentNode('helper').locator('.node').click();
    await block('assistant', 'sub agent reply').waitFor();
    await page.getByText('This agent finished; its history is read-only.').waitFor();
    expect(await page.getByRole('textbox', { name: 'Prompt', exact: true }).count()).toBe(0);
    // One row like any other (its tag inside it), nothing out of its block.
    const rowHeight = (name: string) =>
      agentNode(name)
        .locator('.node')
        .evaluate(
          (e) => (e as unknown as { getBoundingClientRect: () => { height: number } }).getBoundingClientRect().height,
        );
    expect(await rowHeight('helper')).toBeLessThanOrEqual((await rowHeight('coder')) + 1);
    expect(await overflows(page)).toEqual([]);
    await screenshot(page, 'gui-subagent-finished');
    await agentNode('coder').locator('.node').click();
    await block('assistant', 'second done').waitFor();

    // Rename by double-click.
    await agentNode('coder').locator('.label').dblclick();
    await page.getByLabel('New name').fill('builder');
    await page.getByLabel('New name').press('Enter');
    await agentNode('builder').waitFor();
    expect((await outside.readText('session/proj/agent/builder/name')).trim()).toBe('builder');

    // Settings of the agent: its cfg, edited as key=value lines.
    await agentNode('builder').locator('.label').click({ button: 'right' });
    await page.getByRole('menuitem', { name: 'Settings…' }).click();
    const cfg = page.getByRole('dialog', { name: 'Settings of builder' }).getByLabel('cfg');
    await until(async () => (await cfg.inputValue()).includes('profile=e2e'), 'the cfg to load');
    await cfg.fill(`${await cfg.inputValue()}temperature=0.25\n`);
    await page.getByRole('dialog').getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    expect(await outside.readText('session/proj/agent/builder/cfg')).toContain('temperature=0.25');

    // Restart the daemon: the page reconnects by itself and finds the session, the agent and its history.
    const { port, token } = ui;
    await stop();
    await page.getByTestId('conn').filter({ hasText: 'unreachable' }).waitFor({ timeout: 5000 });
    await start(port, token);
    await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor({ timeout: 15_000 });
    await agentNode('builder').waitFor();
    // The finished sub-agent is still there after the restart.
    await page.locator('[data-agent="helper"][data-ended="finished"]').waitFor();
    // Its menu offers what a record allows: reading it, not running or renaming it.
    await agentNode('helper').locator('.label').click({ button: 'right' });
    expect(await page.getByRole('menuitem').allTextContents()).toEqual(['Open', 'Copy 9P path']);
    await page.keyboard.press('Escape');
    await page.getByRole('menu').waitFor({ state: 'detached' });
    await agentNode('builder').locator('.node').click();
    await block('assistant', 'Hello, I am coder and ready.').waitFor();
    await block('assistant', 'second done').waitFor();
    // The failed last turn is read back from the log: still red after the restart.
    expect(await dot('builder').getAttribute('class')).toContain('state-error');
    mock.script([{ text: 'all well again' }]);
    await page.getByRole('textbox', { name: 'Prompt', exact: true }).fill('try again');
    await page.getByRole('textbox', { name: 'Prompt', exact: true }).press('Enter');
    await block('assistant', 'all well again').waitFor({ timeout: 15_000 });
    await page.locator('[data-agent="builder"][data-state="idle"][data-last="ok"]').waitFor();
    expect(await dot('builder').getAttribute('class')).toContain('state-idle');

    // Kill from the context menu: it asks first, and Enter alone (Cancel has the focus) kills nothing.
    await agentNode('builder').locator('.label').click({ button: 'right' });
    await page.getByRole('menuitem', { name: 'Kill agent…' }).click();
    const confirm = page.getByRole('alertdialog', { name: 'Kill agent builder?' });
    await confirm.waitFor();
    await page.keyboard.press('Enter');
    await confirm.waitFor({ state: 'detached' });
    expect(await outside.readText('session/proj/agent/idx')).toContain('builder');
    await agentNode('builder').locator('.label').click({ button: 'right' });
    await page.getByRole('menuitem', { name: 'Kill agent…' }).click();
    await confirm.getByRole('button', { name: 'Kill' }).click();
    await agentNode('builder').waitFor({ state: 'detached' });
    await until(
      async () => !(await outside.readText('session/proj/agent/idx')).includes('builder'),
      'the agent to be gone',
    );

    // The killed agent's history and the finished sub-agent's are still found by Search, and open read-only.
    await page.getByRole('tab', { name: 'Search', exact: true }).click();
    const words = page.getByRole('searchbox', { name: 'Search words' });
    await words.fill('well again');
    await words.press('Enter');
    const killed = page.locator('.hit-agent[data-agent="builder"][data-ended="killed"]');
    await killed.waitFor();
    await killed.locator('.hit').first().click();
    await block('assistant', 'all well again').waitFor();
    await page.getByText('This agent was killed; its history is read-only.').waitFor();
    await page.getByRole('tab', { name: 'Search', exact: true }).click();
    await words.fill('sub agent reply');
    await words.press('Enter');
    await page.locator('.hit-agent[data-agent="helper"][data-ended="finished"]').locator('.hit').first().click();
    await block('assistant', 'sub agent reply').waitFor();
  }, 120_000);
});
