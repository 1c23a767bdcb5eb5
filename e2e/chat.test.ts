/**
 * The renderer's agent views: streamed chat blocks, tool calls, the virtualized list, renaming and killing against the
 * real daemon (its agent's chat log written as turns write it), the prompt box (queue, stop, `/` completion) and a
 * daemon without backends too; the states (thinking, calling, compacting, paused), sub-agents and the status bar's
 * figures against the real daemon too, the mock LLM holding replies and reporting the usage. Approvals are tested in
 * approvals.test.ts and gui-flow.test.ts.
 * The gateway is the real web mode (startWebUi); the browser is Debian's Chromium.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { harness, type Harness } from '../test/olliesrv/agent-harness.js';
import { useBrowser, type BrowserEnv } from './gui-harness.js';
import { screenshot, until } from './helpers.js';

/** Runs in the page (page.evaluate); the test tsconfig has no DOM library. */
declare const getComputedStyle: (e: unknown) => { paddingLeft: string; borderLeftColor: string };

/** A daemon with session `work` and agent `main` (profile test), and a page of the web UI showing main's chat. */
async function openMain(b: BrowserEnv, opts: { tools?: boolean }): Promise<{ h: Harness; ui: WebUi; page: Page }> {
  const h = await harness(opts);
  await h.c.rdwrText('session/new', `name=work cwd=${h.dir}`);
  await h.c.rdwrText('session/work/agent/new', 'name=main agent=test');
  const ui = await startWebUi({ server: h.daemon.server, rendererDir: b.rendererDir });
  const page = await b.browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(ui.url);
  await page.locator('[data-agent="main"] .node').click();
  await page.getByTestId('chat').waitFor();
  return { h, ui, page };
}

/** For a describe block: a browser, and for each test a fresh daemon and page showing main's chat (closed after it). */
function useMain(opts: { tools?: boolean }): { h: Harness; ui: WebUi; page: Page } {
  const b = useBrowser();
  const m = {} as { h: Harness; ui: WebUi; page: Page };
  beforeEach(async () => void Object.assign(m, await openMain(b, opts)));
  afterEach(async () => {
    await m.page?.close();
    await m.ui?.close();
    await m.h?.close();
  });
  return m;
}

describe('agent states, sub-agents and the status bar, against the real daemon', () => {
  // With a tool server: `calling` is a real tool call, held until the test lets it end.
  const m = useMain({});

  const shown = (state: string) =>
    m.page.locator(`[data-agent="main"][data-state="${state}"] .dot.state-${state}`).waitFor({ timeout: 15_000 });

  it('shows states and sub-agents live from the event stream', async () => {
    const main = m.page.locator('[data-agent="main"]');
    expect(await main.getAttribute('data-state')).toBe('idle');
    const ctl = (line: string) => m.h.c.rdwrText('session/work/agent/main/ctl', `${line}\n`);
    // thinking: the mock holds the reply (a minute a chunk) until the turn is stopped.
    m.h.mock.script([{ text: 'held' }, { delayMs: 60_000 }]);
    await m.h.c.write('session/work/agent/main/prompt', 'think');
    await shown('thinking');
    await ctl('stop');
    await shown('idle');
    // calling: a shell call that waits for a file; then the reply, with the usage the status bar must show.
    m.h.mock.script(
      [
        { toolCalls: [{ name: 'shell', args: { command: 'while [ ! -e go ]; do sleep 0.05; done; echo went' } }] },
        { usage: { input: 10_000, output: 40, cost: 0.0005 } },
      ],
      [{ text: 'done' }, { usage: { input: 12_000, output: 60, cost: 0.0007 } }],
    );
    await m.h.c.write('session/work/agent/main/prompt', 'call');
    await shown('calling');
    writeFileSync(join(m.h.dir, 'go'), '');
    await shown('idle');
    await m.page.locator('.block[data-role="assistant"]', { hasText: 'done' }).waitFor();

    // Status bar from stats and cfg: the mock's usage figures, and the daemon's token account of the next request.
    const stats = Object.fromEntries(
      (await m.h.c.readText('session/work/agent/main/stats'))
        .split('\n')
        .filter((l) => /^[a-z_]+=/.test(l))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    ) as Record<string, string>;
    expect(Number(stats.cost_last_turn)).toBeCloseTo(0.0012, 6);
    const status = m.page.getByRole('status').first();
    await status.filter({ hasText: 'mock / gpt-4o' }).waitFor();
    await status.filter({ hasText: `context ${stats.context_percent}%` }).waitFor();
    expect(await status.textContent()).toContain('$0.0012 turn');
    expect(await status.textContent()).toContain(`tokens ${Number(stats.input_tokens).toLocaleString('en-US')} in`);
    expect(Number(stats.input_tokens)).toBeGreaterThanOrEqual(22_000);
    const k = (key: string) => Number(stats[key]).toLocaleString('en-US');
    expect(await m.page.getByTestId('context').getAttribute('title')).toContain(
      `next request ~${k('context_estimate')} tokens of a 100,000-token window:\nsystem prompt ${k('context_system')}\ntool schemas ${k('context_tools')}\nhistory ${k('context_history')}\nskills and hints ${k('context_skills')}\nattachments ${k('context_attachments')}`,
    );

    // compacting: `compact` on ctl while the mock holds the summary request a moment.
    m.h.mock.script([{ text: 'the summary' }, { delayMs: 500 }]);
    const compacted = ctl('compact');
    await shown('compacting');
    await status.filter({ hasText: 'compacting…' }).waitFor();
    expect(await compacted).toMatch(/ompact/);
    await shown('idle');
    // paused: the session's ctl.
    await m.h.c.rdwrText('session/work/ctl', 'pause\n');
    await shown('paused');
    await m.h.c.rdwrText('session/work/ctl', 'resume\n');
    await shown('idle');

    await m.h.c.rdwrText('session/work/agent/new', 'name=helper agent=test parent=main');
    await m.h.c.rdwrText('session/work/agent/new', 'name=deeper agent=test parent=helper');
    await m.page.locator('[data-agent="deeper"]').waitFor();
    const indent = async (n: string): Promise<number> =>
      parseFloat(await m.page.locator(`[data-agent="${n}"] .node`).evaluate((e) => getComputedStyle(e).paddingLeft));
    expect(await indent('helper')).toBeGreaterThan(await indent('main'));
    expect(await indent('deeper')).toBeGreaterThan(await indent('helper'));
    // Collapsing the parent hides its sub-agents.
    await m.page.locator('[data-agent="main"]').getByRole('button', { name: 'Toggle sub-agents' }).click();
    expect(await m.page.locator('[data-agent="helper"]').count()).toBe(0);
    await m.page.locator('[data-agent="main"]').getByRole('button', { name: 'Toggle sub-agents' }).click();
    await m.page.locator('[data-agent="helper"]').waitFor();
    await screenshot(m.page, 'tree-subagents');
    // Keyboard: arrows move between rows, Enter opens, Left collapses.
    await m.page.locator('[data-session="work"] > .node').focus();
    await m.page.keyboard.press('ArrowDown');
    await m.page.keyboard.press('ArrowDown');
    await m.page.keyboard.press('Enter');
    await m.page.locator('[data-agent="helper"] .node.selected').waitFor();
    await m.page.keyboard.press('ArrowUp');
    await m.page.keyboard.press('ArrowLeft');
    expect(await m.page.locator('[data-agent="helper"]').count()).toBe(0);
    await m.page.keyboard.press('ArrowRight');
    await m.page.locator('[data-agent="helper"]').waitFor();
    await m.page.locator('[data-agent="main"] .node').click();
    await m.h.c.remove('session/work/agent/deeper');
    await m.h.c.remove('session/work/agent/helper');
    // The daemon keeps a killed agent's record (ended/): the tree shows it ended, no longer live
    await m.page.locator('[data-agent="helper"][data-state="ended"][data-ended="killed"]').waitFor();
    // (its sub-agent's record sits under it, folded away): no live row of either is left.
    await m.page.locator('[data-agent="deeper"]:not([data-state="ended"])').waitFor({ state: 'detached' });
    expect(
      await m.page
        .locator('[data-agent]:not([data-state="ended"])')
        .evaluateAll((es) => es.map((e) => e.getAttribute('data-agent'))),
    ).toEqual(['main']);
    expect(m.h.daemon.agents.list('work').map((a) => a.name)).toEqual(['main']);
  }, 60_000);
});

describe('agents in the renderer, against the real daemon', () => {
  const m = useMain({ tools: false });

  const block = (id: string) => m.page.locator(`.block[data-id="${id}"]`);
  /** The agent's chat log, written as its turns write it (blocks, and streamed ones through begin/delta/end). */
  const mainLog = () => m.h.daemon.agents.get('work', 'main').log;

  it('streams blocks: partial chunks update one block in place, roles look distinct, context is hidden', async () => {
    const log = mainLog();
    log.add('user', 'Explain the build');
    log.add('context', 'SECRET-CONTEXT injected for the model');
    const r1 = log.add('reasoning', 'Let me think about vite').id;
    const a1 = log.begin('assistant');
    log.delta(a1, 'The build ');
    await block(a1).waitFor();
    expect(await block(a1).getAttribute('class')).toContain('partial');
    // Each partial chunk carries the new text only (olliesrv's chatlog.ts); the final block the whole text.
    log.delta(a1, 'uses **vite**');
    await block(a1).filter({ hasText: 'The build uses vite' }).waitFor();
    log.delta(a1, ' and `tsc`.');
    await block(a1).locator('code', { hasText: 'tsc' }).waitFor();
    log.end(a1, { content: 'The build uses **vite** and `tsc`.\n\n- one\n- two' });
    await block(a1).locator('li', { hasText: 'two' }).waitFor();
    expect(await block(a1).getAttribute('class')).not.toContain('partial');
    expect(await m.page.locator(`.block[data-id="${a1}"]`).count()).toBe(1);
    expect(await block(a1).locator('strong').textContent()).toBe('vite');

    // Context blocks never show; reasoning is collapsed until asked for.
    expect(await m.page.getByTestId('chat').textContent()).not.toContain('SECRET-CONTEXT');
    expect(await block(r1).textContent()).not.toContain('think about vite');
    await block(r1)
      .getByRole('button', { name: /show reasoning/ })
      .click();
    await block(r1).filter({ hasText: 'think about vite' }).waitFor();

    const roles = await m.page
      .locator('.block')
      .evaluateAll((els) => els.map((e) => [e.getAttribute('data-role'), getComputedStyle(e).borderLeftColor]));
    expect(roles.map((r) => r[0])).toEqual(['user', 'reasoning', 'assistant']);
    expect(new Set(roles.map((r) => r[1])).size).toBe(3);
    await screenshot(m.page, 'chat-streamed');
  });

  it('shows tool calls with arguments, collapses long results and highlights them, renders diffs, errors and retries', async () => {
    const log = mainLog();
    const c1 = log.add('call', '{"cmd":"ls -la","timeout":5}', { name: 'shell' }).id;
    const long = Array.from({ length: 60 }, (_, i) => `export const v${i} = ${i};`).join('\n');
    const t1 = log.add('tool', long, { name: 'file_read', format: 'typescript' }).id;
    const t2 = log.add('tool', '--- a/x.ts\n+++ b/x.ts\n@@ -1,2 +1,2 @@\n-const a = 1;\n+const a = 2;\n unchanged', {
      name: 'file_edit',
    }).id;
    const rt = log.add('retry', 'rate limited (429), retrying in 2s (attempt 1/5)').id;
    const e1 = log.add('error', 'backend error: context overflow').id;

    await block(c1).locator('.tool-name', { hasText: 'shell' }).waitFor();
    // Arguments as key=value, not raw JSON (a shell call without `command` has no command line to show).
    expect(await block(c1).locator('.call-rest').textContent()).toContain('cmd=ls -la');

    // Long result: collapsed to a preview, with a toggle that says how much there is.
    const toggle = block(t1).getByRole('button', { name: /show all 60 lines/ });
    await toggle.waitFor();
    expect(await block(t1).textContent()).not.toContain('v59 = 59');
    await toggle.click();
    await block(t1).filter({ hasText: 'v59 = 59' }).waitFor();
    // Highlighted lazily by shiki: coloured token spans replace the plain text.
    await block(t1).locator('pre .line span[style*="color"]').first().waitFor({ timeout: 10_000 });

    await block(t2).locator('.add', { hasText: '+const a = 2;' }).waitFor();
    expect(await block(t2).locator('.del').textContent()).toBe('-const a = 1;');
    // Each line is laid out inside the diff, one under the other: added lines used to land off to the right.
    const pre = (await block(t2).locator('pre').boundingBox())!;
    const del = (await block(t2).locator('.del').boundingBox())!;
    const add = (await block(t2).locator('.add').boundingBox())!;
    expect(add.x).toBeGreaterThanOrEqual(pre.x);
    expect(add.x + add.width).toBeLessThanOrEqual(pre.x + pre.width + 1);
    expect(add.y).toBeGreaterThanOrEqual(del.y + del.height - 1);

    expect(await block(rt).getAttribute('data-role')).toBe('retry');
    expect(await block(rt).textContent()).toContain('retrying in 2s');
    expect(await block(e1).locator('.who').textContent()).toBe('Error');
    await screenshot(m.page, 'chat-tools');
  });

  it('is virtualized from the first block, sticks to the bottom while streaming, and stays put when scrolled up', async () => {
    const log = mainLog();
    let last = '';
    for (let i = 0; i < 3000; i++) last = log.add(i % 2 ? 'assistant' : 'user', `message ${i}\nsecond line of ${i}`).id;
    await block(last).waitFor();
    const rows = await m.page.locator('.chat .row').count();
    expect(rows).toBeGreaterThan(0);
    expect(rows).toBeLessThan(60);

    // Streaming at the bottom: each new chunk stays in view.
    const live = log.begin('assistant');
    log.delta(live, 'streaming\n');
    for (let i = 0; i < 20; i++) log.delta(live, ` chunk${i}\n`);
    await block(live).filter({ hasText: 'chunk19' }).waitFor();
    await until(() => block(live).isVisible(), 'the streaming block to be in view');
    const atBottom = await m.page
      .getByTestId('chat')
      .evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight < 40);
    expect(atBottom).toBe(true);

    // Scrolled up: new blocks do not pull the view down; "Latest" brings it back.
    await m.page.getByTestId('chat').evaluate((el) => el.scrollTo({ top: 1000 }));
    await m.page.getByRole('button', { name: '↓ Latest' }).waitFor();
    const top = await m.page.getByTestId('chat').evaluate((el) => el.scrollTop);
    const after = log.add('assistant', 'arrived while scrolled up').id;
    await m.page.waitForTimeout(200);
    expect(await m.page.getByTestId('chat').evaluate((el) => el.scrollTop)).toBe(top);
    expect(await block(after).count()).toBe(0);
    await m.page.getByRole('button', { name: '↓ Latest' }).click();
    await block(after).waitFor();
  });

  it('renames an agent by double-click and kills it from the context menu', async () => {
    await m.page.locator('[data-agent="main"] .label').dblclick();
    await m.page.getByLabel('New name').fill('lead');
    await m.page.getByLabel('New name').press('Enter');
    await m.page.locator('[data-agent="lead"]').waitFor();
    expect(m.h.daemon.agents.has('work', 'lead')).toBe(true);
    await m.page.locator('[data-agent="lead"] .label').click({ button: 'right' });
    await m.page.getByRole('menuitem', { name: 'Kill agent…' }).click();
    await m.page.getByRole('alertdialog', { name: 'Kill agent lead?' }).getByRole('button', { name: 'Kill' }).click();
    await m.page.locator('[data-agent="lead"]').waitFor({ state: 'detached' });
    expect(m.h.daemon.agents.list('work')).toHaveLength(0);
  });

  it('says when no LLM backend is configured', async () => {
    expect(await m.page.getByRole('note').count()).toBe(0);
    // The owner removes backends.conf and has the daemon re-read it: a first run's state.
    rmSync(join(m.h.configDir, 'backends.conf'));
    await m.h.c.rdwrText('ctl', 'reload');
    expect(await m.h.c.readText('backends')).toBe('');
    await m.page.reload();
    await m.page.getByRole('note').filter({ hasText: 'No LLM backend is configured' }).waitFor();
  });

  it('sends with Enter, queues while the agent works, completes / commands, stops', async () => {
    // The first turn streams slowly (a minute a chunk): the agent works until it is stopped.
    m.h.mock.script(
      [{ text: 'a slow answer' }, { delayMs: 60_000 }],
      [{ text: 'first queued, answered' }],
      [{ text: 'second queued, answered' }],
    );
    const userBlocks = () =>
      mainLog()
        .blocks()
        .filter((b) => b.role === 'user')
        .map((b) => b.content);
    const box = m.page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill('first line');
    await box.press('Shift+Enter');
    await box.pressSequentially('second line');
    await box.press('Enter');
    await m.page.locator('.block[data-role="user"]', { hasText: 'second line' }).waitFor();
    expect(userBlocks()).toEqual(['first line\nsecond line']);

    // Prompts written while the turn runs wait in olliesrv's queue, shown in the prompt box and editable before they go.
    await m.page.locator('[data-agent="main"][data-state="thinking"]').waitFor();
    await m.page.getByRole('button', { name: 'Queue' }).waitFor();
    await box.fill('queued one');
    await box.press('Enter');
    await box.fill('queued two');
    await box.press('Enter');
    const queue = m.page.getByRole('list', { name: 'Queued prompts' });
    await queue.getByText('queued two').waitFor();
    await queue.getByText('queued one').click();
    await m.page.getByLabel('Edit queued prompt').fill('queued one, edited');
    await m.page.getByLabel('Edit queued prompt').press('Enter');
    await queue.getByText('queued one, edited').waitFor();
    await until(
      async () =>
        (JSON.parse(await m.h.c.readText('session/work/agent/main/queue')) as string[])[0] === 'queued one, edited',
      'the edit to reach the queue file',
    );
    expect(userBlocks()).toHaveLength(1);

    // Stop is `stop` on ctl; the turn ending starts the next queued prompt, one per turn.
    await m.page.getByRole('button', { name: 'Stop' }).click();
    await until(() => userBlocks().length === 3, 'both queued prompts to run', 15_000);
    expect(userBlocks()).toEqual(['first line\nsecond line', 'queued one, edited', 'queued two']);
    expect(
      mainLog()
        .blocks()
        .some((b) => b.role === 'info' && b.name === 'stopped'),
    ).toBe(true);
    await queue.waitFor({ state: 'detached' });
    await m.page.locator('[data-agent="main"][data-state="idle"]').waitFor();

    // `/` completes from the daemon's command table; `/usage` is `usage` on ctl and its reply is shown.
    await box.fill('/us');
    const list = m.page.getByRole('listbox', { name: 'Commands' });
    await list.getByRole('option', { name: /usage/ }).waitFor();
    await box.press('Tab');
    expect(await box.inputValue()).toBe('/usage ');
    await box.press('Enter');
    // The reply stays above the prompt, whole, until closed.
    const reply = m.page.getByRole('region', { name: 'Reply to /usage' });
    await reply.getByText(/input_tokens=\d+/).waitFor();
    await reply.getByRole('button', { name: 'Close the reply' }).click();
    await reply.waitFor({ state: 'detached' });
    expect(await box.evaluate((e) => e === e.ownerDocument.activeElement)).toBe(true);

    // `!cmd` goes to the agent as a prompt (the daemon runs it through toolsrv, none here): the agent takes it.
    const before = mainLog().blocks().length;
    await box.fill('!ls');
    await box.press('Enter');
    await until(() => mainLog().blocks().length > before, '!ls to reach the agent');
  });
});
