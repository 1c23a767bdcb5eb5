/**
 * The approval panel against the real daemon (olliesrv, a real toolsrv per session, the mock LLM over HTTP
 * scripting the tool calls) in Debian's Chromium, attacked as a person would be caught out: a request arrives
 * while they type a prompt. What they type keeps going to the prompt box, Enter sends the prompt and does not
 * approve, and the request waits for a click on Approve. The panel shows the whole command and the exact rule
 * "always" would store; Settings lists the rule and revokes it.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { useGui } from './gui-harness.js';
import { screenshot, until } from './helpers.js';

/** Runs in the page (page.evaluate); the test tsconfig has no DOM library. */
declare const document: { activeElement: { getAttribute(n: string): string | null } | null };

describe('approvals in the app (web mode, real daemon)', () => {
  const g = useGui({
    prefix: 'ollie-e2e-approvals-',
    viewport: { width: 1280, height: 800 },
    outside: true,
    daemon: { retryDelay: () => 10 },
  });
  beforeAll(async () => {
    await g.outside.rdwrText('session/new', `name=proj cwd=${g.work}`);
    await g.outside.rdwrText('session/proj/agent/new', 'name=coder agent=e2e backend=mock');
  });

  const block = (role: string, text: string) => g.page.locator(`.block[data-role="${role}"]`, { hasText: text });
  // By its title, whatever its role: the same locator finds the modal dialog this panel replaced, so the test
  // runs (and fails) against that one too.
  const panel = () => g.page.locator('[aria-labelledby="approval-title"]');
  const pending = async (): Promise<string[]> =>
    (await g.outside.readText('session/proj/bypass')).split('\n').filter(Boolean);
  const focused = (): Promise<string | null> =>
    g.page.evaluate(() => document.activeElement?.getAttribute('aria-label') ?? null);

  it('a request that arrives while the person types never takes the keyboard; only a click approves', async () => {
    await g.page.goto(g.ui.url);
    await g.page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    await g.page.locator('[data-agent="coder"] .node').click();
    const box = g.page.getByRole('textbox', { name: 'Prompt', exact: true });

    // A long command whose end matters: all of it must be on screen, nothing cut. The model asks for it only
    // once a first tool call, which waits for a file, ends: the test makes the file while the person types.
    const long = `echo approved-run ${Array.from({ length: 40 }, (_, i) => `--option-${i}`).join(' ')} --the-very-end`;
    g.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'while [ ! -e go ]; do sleep 0.05; done; echo waited' } }] }],
      [{ toolCalls: [{ name: 'shell', args: { command: long, bypass: true } }] }],
      [{ text: 'first done' }],
      [{ text: 'queued prompt answered' }],
    );
    await box.fill('run it');
    await box.press('Enter');
    await g.page.locator('.block[data-role="call"]', { hasText: 'while' }).waitFor({ timeout: 15_000 });
    // The person types the next prompt; the request arrives meanwhile.
    await box.focus();
    await g.page.keyboard.type('apps ');
    expect(await panel().count()).toBe(0);
    writeFileSync(join(g.dir, 'work', 'go'), '');
    await panel().waitFor({ timeout: 15_000 });
    await g.page.keyboard.type('say');
    expect(await pending(), 'typing approved the request').toHaveLength(1);
    expect(await focused()).toBe('Prompt');
    // Every letter the old dialog took as a shortcut (A approve, S session, P always), then Enter and Space.
    await g.page.keyboard.type(' yes please, approve ');
    await g.page.keyboard.press('Enter');
    await g.page.keyboard.type(' ');
    expect(await focused()).toBe('Prompt');
    // Enter sent the prompt (queued while the turn waits), and approved nothing.
    await until(
      async () => (await g.outside.readText('session/proj/agent/coder/queue')).includes('apps say yes please, approve'),
      'the typed prompt to be queued',
    );
    expect(await pending()).toHaveLength(1);
    expect(await box.inputValue()).toBe(' ');
    await box.fill('');

    // The whole command and the exact rule.
    expect(await panel().getByTestId('approval-cmd').textContent()).toBe(`shell ${long}`);
    expect(await panel().getByTestId('approval-rule').textContent()).toContain(long);
    expect(await panel().getByTestId('approval-rule').textContent()).toMatch(/more arguments/);
    await screenshot(g.page, 'approval-while-typing');
    expect(await pending()).toHaveLength(1);

    await panel().getByRole('button', { name: 'Approve once' }).click();
    await block('tool', 'approved-run').waitFor({ timeout: 15_000 });
    await block('assistant', 'queued prompt answered').waitFor({ timeout: 15_000 });
    await panel().waitFor({ state: 'detached' });
    expect(await pending()).toHaveLength(0);
    expect(await g.outside.readText('bypassrules')).toBe('');
  });

  it('shows operators and newlines for what they are, and what can only be approved once; Deny is the default', async () => {
    g.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'npm test; curl x | sh', bypass: true } }] }],
      [{ text: 'ops denied' }],
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo one\necho two', bypass: true } }] }],
      [{ text: 'newline denied' }],
    );
    const box = g.page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill('operators');
    await box.press('Enter');
    await panel().waitFor({ timeout: 15_000 });
    expect(await panel().getByTestId('approval-cmd').textContent()).toBe('shell npm test; curl x | sh');
    expect(await panel().getByTestId('approval-rule').textContent()).toMatch(
      /^exactly npm test; curl x \| sh, for shell, nothing added$/,
    );
    // Deny comes first and looks like the default.
    const buttons = panel().getByRole('button');
    expect(await buttons.first().textContent()).toBe('Deny');
    expect(await buttons.first().getAttribute('class')).toContain('primary');
    await panel().getByRole('button', { name: 'Deny' }).click();
    await block('assistant', 'ops denied').waitFor({ timeout: 15_000 });

    await box.fill('newline');
    await box.press('Enter');
    await panel().waitFor({ timeout: 15_000 });
    // The second line is marked as one, never shown as more arguments of the first.
    expect(await panel().getByTestId('approval-cmd').textContent()).toBe('shell echo one↵\necho two');
    expect(await panel().getByTestId('approval-rule').textContent()).toMatch(/can only be approved once/);
    expect(await panel().getByRole('button', { name: 'Always allow' }).isDisabled()).toBe(true);
    expect(await panel().getByRole('button', { name: 'Allow for this session' }).isDisabled()).toBe(true);
    // Escape inside the panel denies.
    await panel().getByRole('button', { name: 'Deny' }).focus();
    await g.page.keyboard.press('Escape');
    await block('assistant', 'newline denied').waitFor({ timeout: 15_000 });
    expect(await pending()).toHaveLength(0);
  });

  it('"Always allow" stores the rule shown; Settings lists it and revokes it, and the same request asks again', async () => {
    g.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo always-me', bypass: true } }] }],
      [{ text: 'stored' }],
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo always-me again', bypass: true } }] }],
      [{ text: 'covered' }],
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo always-me', bypass: true } }] }],
      [{ text: 'asked again' }],
    );
    const box = g.page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill('always');
    await box.press('Enter');
    await panel().waitFor({ timeout: 15_000 });
    expect(await panel().getByTestId('approval-rule').textContent()).toMatch(
      /^echo always-me and the same command with more arguments \(options only after --\), for shell;/,
    );
    await panel().getByRole('button', { name: 'Always allow' }).click();
    await block('assistant', 'stored').waitFor({ timeout: 15_000 });
    expect((await g.outside.readText('bypassrules')).split('\t').slice(1, 5)).toEqual([
      'shell',
      'prefix',
      'echo always-me',
      'global',
    ]);

    await box.fill('covered');
    await box.press('Enter');
    await block('assistant', 'covered').waitFor({ timeout: 15_000 });
    await block('tool', 'always-me again').waitFor();

    await g.page.getByRole('tab', { name: 'Settings' }).click();
    const table = g.page.getByRole('table', { name: 'Remembered approvals' });
    await table.getByRole('row').filter({ hasText: 'echo always-me' }).waitFor();
    await screenshot(g.page, 'approval-rules-settings');
    await table.getByRole('button', { name: 'Revoke echo always-me' }).click();
    await g.page.getByRole('region', { name: 'Settings' }).getByText('None.').waitFor();
    expect(await g.outside.readText('bypassrules')).toBe('');

    await g.page.locator('[data-agent="coder"] .node').click();
    await box.fill('again');
    await box.press('Enter');
    await panel().waitFor({ timeout: 15_000 });
    expect(await pending()).toHaveLength(1);
    await panel().getByRole('button', { name: 'Approve once' }).click();
    await block('assistant', 'asked again').waitFor({ timeout: 15_000 });
  });

  it('a request resolved by another client (ollie-9p) leaves the panel by itself', async () => {
    g.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo elsewhere', bypass: true } }] }],
      [{ text: 'denied elsewhere' }],
    );
    const box = g.page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill('elsewhere');
    await box.press('Enter');
    await panel().waitFor({ timeout: 15_000 });
    const [id] = (await pending())[0]!.split('\t');
    await g.outside.write('session/proj/bypass', `${id} deny\n`);
    await panel().waitFor({ state: 'detached' });
    await block('assistant', 'denied elsewhere').waitFor({ timeout: 15_000 });
  });
});
