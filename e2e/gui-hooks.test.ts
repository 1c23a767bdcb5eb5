/**
 * Hooks in the chat (web mode, real daemon, real toolsrv and sandbox, mock LLM over HTTP): a hook that ran is one
 * compact line (event, command, tool, exit, duration) that opens to its output.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startMockLlm, type MockLlm } from '../src/devtools/mock-llm/server.js';
import { startDaemon, type Daemon } from '../src/olliesrv/daemon.js';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { buildRenderer, launch, mockBackends, rmrf, screenshot, socketPath, tempDir } from './helpers.js';

describe('hooks in the chat (web mode, real daemon)', () => {
  let rendererDir: string;
  let browser: Browser;
  let dir: string;
  let mock: MockLlm;
  let daemon: Daemon;
  let ui: WebUi;
  let page: Page;

  beforeAll(async () => {
    [rendererDir, browser, mock] = await Promise.all([buildRenderer(), launch(), startMockLlm()]);
    dir = tempDir('ollie-e2e-hooks-');
    mkdirSync(join(dir, 'config', 'agents'), { recursive: true });
    mkdirSync(join(dir, 'work'));
    writeFileSync(join(dir, 'config', 'backends.conf'), mockBackends(mock.url));
    writeFileSync(join(dir, 'config', 'agents', 'e2e.json'), JSON.stringify({ description: 'e2e agent', prompt: 'You are a test agent.', autoLoad: ['shell'], maxSteps: 20 }));
    writeFileSync(join(dir, 'config', 'hooks.json'), JSON.stringify({
      hooks: { PreToolUse: [{ matcher: 'shell', hooks: [{ type: 'command', command: 'grep -q "rm -rf" && { echo "rm -rf is not allowed here" >&2; exit 2; }; exit 0' }] }] },
    }));
    daemon = await startDaemon({ socket: socketPath(dir), dataDir: join(dir, 'data'), configDir: join(dir, 'config'), log: () => undefined });
    ui = await startWebUi({ server: daemon.server, rendererDir, port: 0 });
    page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  }, 60_000);
  afterAll(async () => {
    await page?.close();
    await browser?.close();
    await ui?.close();
    await daemon?.close();
    await mock?.close();
    rmrf(rendererDir, dir);
  });

  it('shows a hook that blocked a call as one line that opens to its output', async () => {
    await page.goto(ui.url);
    await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    await page.getByRole('button', { name: 'New session' }).click();
    await page.getByRole('dialog').getByLabel('Name').fill('hooked');
    await page.getByRole('dialog').getByLabel('Working directory').fill(join(dir, 'work'));
    await page.getByRole('dialog').getByRole('button', { name: 'Create' }).click();
    await page.getByRole('button', { name: 'New agent in hooked' }).click();
    const d = page.getByRole('dialog', { name: 'New agent in hooked' });
    await d.getByLabel('Name').fill('worker');
    await d.getByLabel('Profile').selectOption('e2e');
    await d.getByRole('button', { name: 'Create' }).click();
    const box = page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.waitFor();
    mock.script([{ toolCalls: [{ name: 'shell', args: { command: 'rm -rf build' } }] }], [{ text: 'The hook refused it.' }]);
    await box.fill('clean the build');
    await box.press('Enter');
    await page.locator('.block[data-role="assistant"]', { hasText: 'The hook refused it.' }).waitFor({ timeout: 20_000 });

    const hook = page.locator('.block.compact[data-role="info"]', { hasText: 'PreToolUse hook' });
    await hook.waitFor();
    expect(await hook.locator('.who').textContent()).toBe('Hook');
    expect(await hook.locator('.first').textContent()).toMatch(/^PreToolUse hook \(shell\): exit 2, \d+ ms: `grep -q "rm -rf".*`$/);
    expect((await hook.boundingBox())!.height).toBeLessThan(30);
    await hook.getByRole('button').first().click();
    await hook.locator('pre', { hasText: 'rm -rf is not allowed here' }).waitFor();
    // The model was told why, in the call's result.
    await page.locator('.block[data-role="tool"]', { hasText: 'blocked by a PreToolUse hook: rm -rf is not allowed here' }).waitFor();
    await screenshot(page, 'hook-block');
  });

  it('shows a hook\'s "ask" as an approval of a sandboxed call, approved once', async () => {
    writeFileSync(join(dir, 'config', 'hooks.json'), JSON.stringify({
      hooks: { PreToolUse: [{ matcher: 'shell', hooks: [{ type: 'command', command: `printf '%s' '{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "this deploys to staging"}}'` }] }] },
    }));
    mock.script([{ toolCalls: [{ name: 'shell', args: { command: 'echo deployed > deployed.txt' } }] }], [{ text: 'Deployed.' }]);
    const box = page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill('deploy');
    await box.press('Enter');
    const panel = page.getByRole('dialog', { name: /Approval needed/ });
    await panel.waitFor({ timeout: 20_000 });
    await panel.getByText('A hook asks you to approve this call before it runs (inside the sandbox).').waitFor();
    await panel.getByText(/this deploys to staging/).waitFor();
    expect(await panel.getByTestId('approval-rule').textContent()).toBe('none: what a hook asks is approved once at a time');
    expect(await panel.getByRole('button', { name: 'Always allow' }).isDisabled()).toBe(true);
    await screenshot(page, 'hook-ask');
    const once = panel.getByRole('button', { name: 'Approve once' });
    await expect.poll(() => once.isEnabled()).toBe(true);
    await once.click();
    await page.locator('.block[data-role="assistant"]', { hasText: 'Deployed.' }).waitFor({ timeout: 20_000 });
    expect(readFileSync(join(dir, 'work', 'deployed.txt'), 'utf8')).toBe('deployed\n');
  });
});
