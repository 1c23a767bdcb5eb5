/**
 * Hooks in the chat (web mode, real daemon, real toolsrv and sandbox, mock LLM over HTTP): a hook that ran is one
 * compact line (event, command, tool, exit, duration) that opens to its output.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { oneHook, writeHooks } from '../test/helpers/hooks.js';
import { createInGui, useGui } from './gui-harness.js';
import { screenshot } from './helpers.js';

describe('hooks in the chat (web mode, real daemon)', () => {
  const g = useGui({
    prefix: 'ollie-e2e-hooks-',
    viewport: { width: 1100, height: 800 },
    prepare: (d) =>
      writeHooks(
        join(d, 'config'),
        oneHook(
          'PreToolUse',
          'grep -q "rm -rf" && { echo "rm -rf is not allowed here" >&2; exit 2; }; exit 0',
          'shell',
        ),
      ),
  });

  it('shows a hook that blocked a call as one line that opens to its output', async () => {
    const box = await createInGui(g, 'hooked', 'worker');
    g.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'rm -rf build' } }] }],
      [{ text: 'The hook refused it.' }],
    );
    await box.fill('clean the build');
    await box.press('Enter');
    await g.page
      .locator('.block[data-role="assistant"]', { hasText: 'The hook refused it.' })
      .waitFor({ timeout: 20_000 });

    const hook = g.page.locator('.block.compact[data-role="info"]', { hasText: 'PreToolUse hook' });
    await hook.waitFor();
    expect(await hook.locator('.who').textContent()).toBe('Hook');
    expect(await hook.locator('.first').textContent()).toMatch(
      /^PreToolUse hook \(shell\): exit 2, \d+ ms: `grep -q "rm -rf".*`$/,
    );
    expect((await hook.boundingBox())!.height).toBeLessThan(30);
    await hook.getByRole('button').first().click();
    await hook.locator('pre', { hasText: 'rm -rf is not allowed here' }).waitFor();
    // The model was told why, in the call's result.
    await g.page
      .locator('.block[data-role="tool"]', { hasText: 'blocked by a PreToolUse hook: rm -rf is not allowed here' })
      .waitFor();
    await screenshot(g.page, 'hook-block');
  });

  it('shows a hook\'s "ask" as an approval of a sandboxed call, approved once', async () => {
    writeHooks(
      join(g.dir, 'config'),
      oneHook(
        'PreToolUse',
        `printf '%s' '{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "this deploys to staging"}}'`,
        'shell',
      ),
    );
    g.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo deployed > deployed.txt' } }] }],
      [{ text: 'Deployed.' }],
    );
    const box = g.page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill('deploy');
    await box.press('Enter');
    const panel = g.page.getByRole('dialog', { name: /Approval needed/ });
    await panel.waitFor({ timeout: 20_000 });
    await panel.getByText('A hook asks you to approve this call before it runs (inside the sandbox).').waitFor();
    await panel.getByText(/this deploys to staging/).waitFor();
    expect(await panel.getByTestId('approval-rule').textContent()).toBe(
      'none: what a hook asks is approved once at a time',
    );
    expect(await panel.getByRole('button', { name: 'Always allow' }).isDisabled()).toBe(true);
    await screenshot(g.page, 'hook-ask');
    const once = panel.getByRole('button', { name: 'Approve once' });
    await expect.poll(() => once.isEnabled()).toBe(true);
    await once.click();
    await g.page.locator('.block[data-role="assistant"]', { hasText: 'Deployed.' }).waitFor({ timeout: 20_000 });
    expect(readFileSync(join(g.dir, 'work', 'deployed.txt'), 'utf8')).toBe('deployed\n');
  });
});
