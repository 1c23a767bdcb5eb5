/**
 * The processes panel, search and settings against the whole product in web mode: the real olliesrv, the mock
 * LLM over HTTP, a real toolsrv running the background processes, the built renderer in Debian's Chromium.
 * A background process shows in a terminal (xterm.js) with its live, coloured output and a `\r` progress line, and
 * ends; a long one is killed and dismissed; a tty tool's process takes what is typed in its terminal and is sized
 * to it;
 * search finds a past message and opens it in its chat; a bad backends.conf is refused (error shown, file
 * unchanged) and a good one adds a backend the new-agent dialog offers; what the sandbox applies shows above
 * its policy; the default profile applies to the next agent. Every step's file operations show in the 9P console.
 */
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCoder, useGui } from './gui-harness.js';
import { screenshot, until } from './helpers.js';

/** The page's, in evaluate callbacks (this project's tsconfig for tests has no DOM types). */
declare const getComputedStyle: (e: unknown) => { color: string };

describe('processes, search and settings with real agents (web mode)', () => {
  const g = useGui({
    prefix: 'ollie-e2e-panels-',
    viewport: { width: 1280, height: 800 },
    outside: true,
    autoLoad: ['shell', 'asker'],
    prepare: (d) => {
      // A tty tool: it runs in a pty, asks for a name, answers with it and with its terminal's size.
      const tools = join(d, 'tools');
      mkdirSync(tools);
      writeFileSync(
        join(tools, 'asker'),
        '#!/bin/sh\nprintf "\\033[33mname?\\033[0m "\nread line\necho "hello, $line; size $(stty size)"\n',
      );
      chmodSync(join(tools, 'asker'), 0o755);
      writeFileSync(
        join(tools, 'asker.meta'),
        JSON.stringify({
          description: 'asks for a name in a terminal',
          tty: true,
          args: { type: 'object', properties: {} },
        }),
      );
    },
    daemon: (d) => ({ toolsrv: { toolDirs: [join(d, 'tools')] }, retryDelay: () => 10 }),
  });

  const block = (role: string, text: string) => g.page.locator(`.block[data-role="${role}"]`, { hasText: text });
  const proc = (pid: string) => g.page.locator(`.proc-list li[data-pid="${pid}"]`);
  /** What the terminal shows, row by row (xterm's DOM renderer; trailing blanks dropped). */
  const termRows = async (): Promise<string[]> =>
    (await g.page.getByRole('complementary', { name: 'Processes' }).locator('.xterm-rows > div').allTextContents()).map(
      (r) => r.replace(/\u00a0/g, ' ').trimEnd(),
    );
  const termText = async (): Promise<string> => (await termRows()).join('\n');
  const consoleText = () => g.page.getByRole('region', { name: '9P console' }).textContent();
  const prompt = async (text: string): Promise<void> => {
    const box = g.page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill(text);
    await box.press('Enter');
  };
  /** The pid of the newest background process, as olliesrv lists it. */
  const newestPid = async (): Promise<string> =>
    until(
      async () =>
        (await g.outside.readText('session/proj/agent/coder/proc/idx')).trim().split('\n').at(-1)?.split('\t')[0] ?? '',
      'a background process',
    );

  it('shows background processes live, kills one, finds a past message, and edits the configuration', async () => {
    await openCoder(g);

    // The panel, before anything runs: it says how a process comes to be.
    await g.page.keyboard.press('Control+Shift+P');
    const panel = g.page.getByRole('complementary', { name: 'Processes' });
    await panel.getByText('No background processes').waitFor();

    // A background process that prints in colour, waits for a file the test creates, then prints again and exits:
    // the first line must be on screen while it still runs (live), the second only once the test lets it go.
    const go = join(g.work, 'go');
    g.mock.script(
      [
        {
          toolCalls: [
            {
              name: 'shell',
              args: {
                command: `printf '\\033[31mred-line\\033[0m plain\\n'; printf 'progress 10%%\\rprogress 50%%\\rprogress 100%% ok\\n'; while [ ! -e ${go} ]; do sleep 0.05; done; printf '\\033[1;32mgreen-done\\033[0m\\n'`,
                background: true,
              },
            },
          ],
        },
      ],
      [{ text: 'started it in the background' }],
      [{ text: 'the zebraquux process ended' }],
    );
    await prompt('start the zebraquux process');
    await block('assistant', 'started it in the background').waitFor({ timeout: 15_000 });
    const pid1 = await newestPid();
    await proc(pid1).and(g.page.locator('[data-status="running"]')).waitFor();
    const out = panel.getByTestId('proc-out');
    await until(async () => (await termText()).includes('progress 100% ok'), 'the first output in the terminal');
    expect(await termText()).not.toContain('green-done');
    // A terminal: xterm.js, its text coloured by SGR 31 (a class of its DOM renderer), the escape codes gone, and the
    // `\r` progress line overwritten in place, as a terminal shows it: one row, its last state.
    expect(await out.locator('.xterm').count()).toBe(1);
    const red = out.locator('.xterm-rows span.xterm-fg-1', { hasText: 'red-line' });
    expect(await red.count()).toBe(1);
    expect(await red.evaluate((e) => getComputedStyle(e).color)).not.toBe('rgb(211, 215, 207)');
    const rows = await termRows();
    expect(rows.slice(0, 2)).toEqual(['red-line plain', 'progress 100% ok']);
    const shown = rows.join('\n');
    expect(
      shown.includes('\u001b') ||
        shown.includes('[31m') ||
        shown.includes('progress 10%') ||
        shown.includes('progress 50%'),
    ).toBe(false);
    await panel.getByText('● live').waitFor();
    // A shell command has no pty: its terminal takes no input and says so.
    await panel.getByTestId('proc-input').filter({ hasText: 'read-only: not a terminal' }).waitFor();
    expect(await g.page.locator(`.proc-view[data-pid="${pid1}"]`).getAttribute('data-tty')).toBe('0');
    await screenshot(g.page, 'gui-procs-live');
    writeFileSync(go, '');
    await until(async () => (await termText()).includes('green-done'), 'the second line', 10_000);
    expect(await out.locator('.xterm-rows span.xterm-bold', { hasText: 'green-done' }).count()).toBe(1);
    expect((await termRows()).slice(0, 3)).toEqual(['red-line plain', 'progress 100% ok', 'green-done']);
    // The exit: status and code in the list (from proc/idx, re-read on the agent's events), and the notice as a turn.
    await panel.locator('.proc-foot', { hasText: /^exited, exit code 0 · ran .* · \d+ bytes of output$/ }).waitFor();
    await proc(pid1).and(g.page.locator('[data-status="exited"]')).waitFor({ timeout: 10_000 });
    expect(await proc(pid1).textContent()).toContain('exited 0');
    // The exit notice in the chat: what ended and how, its output in colour, a way to the panel.
    const notice = g.page.locator('.block[data-role="user"] .proc-ended', { hasText: 'green-done' });
    await notice.waitFor();
    expect(await notice.textContent()).toContain(`exited 0 #${pid1} shell printf`);
    expect(
      await notice
        .locator('span', { hasText: 'green-done' })
        .evaluate((e) => (e as unknown as { style: { fontWeight: string } }).style.fontWeight),
    ).toBe('700');
    await block('assistant', 'the zebraquux process ended').waitFor({ timeout: 15_000 });
    await g.page.locator('[data-agent="coder"][data-state="idle"]').waitFor();
    expect(existsSync(go)).toBe(true);

    // A long one: it shows as the newest, Kill ends it, Dismiss removes it.
    g.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo long-start; sleep 300', background: true } }] }],
      [{ text: 'the long one runs' }],
      [{ text: 'noted the kill' }],
    );
    await prompt('start the long one');
    await block('assistant', 'the long one runs').waitFor({ timeout: 15_000 });
    const pid2 = await until(async () => {
      const p = await newestPid();
      return p !== pid1 ? p : '';
    }, 'the second process');
    await proc(pid2).and(g.page.locator('[aria-selected="true"][data-status="running"]')).waitFor();
    await until(async () => (await termText()).includes('long-start'), 'long-start');
    await panel.getByRole('button', { name: 'Kill' }).click();
    await proc(pid2).and(g.page.locator('[data-status="killed"]')).waitFor({ timeout: 10_000 });
    expect(
      (await g.outside.readText('session/proj/agent/coder/proc/idx'))
        .split('\n')
        .find((l) => l.startsWith(`${pid2}\t`)),
    ).toMatch(/\tkilled\t/);
    // How it ended, from its stat: killed by a signal.
    await panel.locator('.proc-foot', { hasText: /^killed.*signal \S+ · ran / }).waitFor();
    await block('assistant', 'noted the kill').waitFor({ timeout: 15_000 });
    await screenshot(g.page, 'gui-procs-killed');
    await g.page.locator('.block[data-role="user"] .proc-ended', { hasText: `killed #${pid2}` }).waitFor();
    // The first notice's link picks that process in the panel again.
    await notice.getByRole('button', { name: 'show in Processes' }).click();
    await proc(pid1).and(g.page.locator('[aria-selected="true"]')).waitFor();
    await proc(pid2).click();
    await panel.getByRole('button', { name: 'Dismiss' }).click();
    await proc(pid2).waitFor({ state: 'detached' });
    expect(await g.outside.readText('session/proj/agent/coder/proc/idx')).not.toMatch(new RegExp(`^${pid2}\\t`, 'm'));
    await proc(pid1).waitFor();

    await g.page.keyboard.press('Control+`');
    const ops = await consoleText();
    expect(ops).toContain('ollie-9p read session/proj/agent/coder/proc/idx');
    expect(ops).toContain(`ollie-9p read session/proj/agent/coder/proc/${pid2}/out`);
    expect(ops).toContain(`echo kill | ollie-9p write session/proj/agent/coder/proc/${pid2}/ctl`);
    expect(ops).toContain(`echo dismiss | ollie-9p write session/proj/agent/coder/proc/${pid2}/ctl`);
    await g.page.keyboard.press('Control+`');

    // A tty tool: its terminal takes keystrokes (written to proc/{pid}/in) and the pty has the view's size.
    g.mock.script(
      [{ toolCalls: [{ name: 'asker', args: { background: true } }] }],
      [{ text: 'the asker waits for a name' }],
      [{ text: 'the asker is done' }],
    );
    await prompt('run the asker');
    // (The chat is scrolled up since the notice's link was followed: its log says how far the agent got.)
    const logHas = (text: string) =>
      until(async () => (await g.outside.readText('session/proj/agent/coder/log')).includes(text), text, 15_000);
    await logHas('the asker waits for a name');
    const pid3 = await until(async () => {
      const p = await newestPid();
      return p !== pid1 ? p : '';
    }, 'the tty process');
    await proc(pid3).and(g.page.locator('[aria-selected="true"][data-status="running"]')).waitFor();
    await g.page.locator(`.proc-view[data-pid="${pid3}"][data-tty="1"]`).waitFor();
    await panel.getByTestId('proc-input').filter({ hasText: 'click it and type' }).waitFor();
    await until(async () => (await termText()).includes('name?'), 'the prompt of the tty tool');
    expect(await out.locator('.xterm-rows span.xterm-fg-3', { hasText: 'name?' }).count()).toBe(1);
    // The app's shortcuts are not keystrokes for the process, the focus in its terminal or not; reopened, the
    // panel shows the same process, its output again from the start.
    await out.locator('.xterm').click();
    await g.page.keyboard.press('Control+Shift+P');
    await panel.waitFor({ state: 'detached' });
    await g.page.keyboard.press('Control+Shift+P');
    await g.page.locator(`.proc-view[data-pid="${pid3}"][data-tty="1"]`).waitFor();
    await until(async () => (await termText()).includes('name?'), 'the prompt again');
    const viewRows = await out.locator('.xterm-rows > div').count();
    await out.locator('.xterm').click();
    await g.page.keyboard.type('world');
    await g.page.keyboard.press('Enter');
    await until(async () => (await termText()).includes('hello, world'), 'the answer to typed input', 10_000);
    // The pty echoed the keystrokes, the tool read them; it saw the terminal's size (rows as shown, columns fitted
    // to the panel, not the 120 × 40 it started with).
    const answer = (await termRows()).find((r) => r.startsWith('hello, world'))!;
    const [, sRows, sCols] = /size (\d+) (\d+)$/.exec(answer) ?? [];
    expect(Number(sRows)).toBe(viewRows);
    expect(Number(sCols)).toBeGreaterThan(20);
    expect(Number(sCols)).toBeLessThan(120);
    expect(await termText()).toMatch(/name\? world/);
    await proc(pid3).and(g.page.locator('[data-status="exited"]')).waitFor({ timeout: 10_000 });
    await screenshot(g.page, 'gui-procs-tty');
    await logHas('the asker is done');
    await g.page.keyboard.press('Control+`');
    const ops3 = await consoleText();
    expect(ops3).toContain(`| ollie-9p write session/proj/agent/coder/proc/${pid3}/in`);
    expect(ops3).toMatch(
      new RegExp(`echo 'resize \\d+ \\d+' \\| ollie-9p write session/proj/agent/coder/proc/${pid3}/ctl`),
    );
    await g.page.keyboard.press('Control+`');

    // Search: a word of the first prompt, now far up the chat; the hit opens the chat at that block.
    await g.page.keyboard.press('Control+Shift+F');
    const search = g.page.getByRole('region', { name: 'Search' });
    await search.getByLabel('Search words').fill('zebraquux');
    await search.getByLabel('Search words').press('Enter');
    const results = search.getByTestId('search-results');
    await results.locator('.hit-session[data-session="proj"] .hit-agent[data-agent="coder"] .hit').first().waitFor();
    expect(await results.locator('.hit').count()).toBe(2);
    expect(await results.locator('.hit mark').first().textContent()).toBe('zebraquux');
    await screenshot(g.page, 'gui-search');
    const userHit = results.locator('.hit', { hasText: 'start the' });
    const id = await userHit.getAttribute('data-block');
    await userHit.click();
    const target = g.page.locator('.row.highlight .block[data-role="user"]', {
      hasText: 'start the zebraquux process',
    });
    await target.waitFor();
    expect(await target.getAttribute('data-id')).toBe(id);
    // In view: inside the chat's visible area, though the chat is longer than the window.
    await until(async () => {
      const [box, chat] = await Promise.all([target.boundingBox(), g.page.getByTestId('chat').boundingBox()]);
      return box && chat && box.y >= chat.y - 1 && box.y + Math.min(box.height, 40) <= chat.y + chat.height + 1;
    }, 'the hit to be scrolled into view');
    const chatBox = g.page.getByTestId('chat');
    expect(
      await chatBox.evaluate(
        (e) =>
          (e as unknown as { scrollHeight: number; clientHeight: number }).scrollHeight >
          (e as unknown as { clientHeight: number }).clientHeight,
      ),
    ).toBe(true);
    await screenshot(g.page, 'gui-search-opened');

    // Settings: a bad backends.conf is refused with the parser's file:line, and the file stays as it was.
    await g.page.keyboard.press('Control+,');
    const settings = g.page.getByRole('region', { name: 'Settings' });
    const conf = settings.getByRole('textbox', { name: 'backends.conf' });
    await until(async () => (await conf.inputValue()).includes('[mock]'), 'backends.conf to load');
    const before = await g.outside.readText('config/backends.conf');
    // The key shows masked; the rest as written.
    expect(await conf.inputValue()).toBe(before.replace('key = test-key', 'key = ••••••••'));
    await conf.fill(`${before}\n[broken]\ntype = nonsense\n`);
    await settings.locator('[data-file="backends.conf"]').getByRole('button', { name: 'Save' }).click();
    const err = settings.locator('[data-file="backends.conf"] .field-error');
    await err.waitFor();
    const brokenLine = before.split('\n').length + 2;
    expect(await err.textContent()).toMatch(new RegExp(`backends\\.conf:${brokenLine}: .*nonsense`));
    await err.getByRole('button', { name: `Go to line ${brokenLine}` }).waitFor();
    expect(await conf.getAttribute('aria-invalid')).toBe('true');
    expect(await g.outside.readText('config/backends.conf')).toBe(before);
    await screenshot(g.page, 'gui-settings-refused');
    // Esc goes to the chat and the unsaved text waits for the way back.
    await g.page.keyboard.press('Escape');
    await g.page.getByTestId('chat').waitFor();
    await g.page.keyboard.press('Control+,');
    await until(async () => (await conf.inputValue()).includes('[broken]'), 'the unsaved text to come back');

    // A good one: saved, reloaded at once, and the new-agent dialog offers the new backend.
    await conf.fill(`${before}\n[second]\ntype = openai\nurl = ${g.mock.url}/v1\nkey = k2\nmodel = m2\n`);
    await settings.locator('[data-file="backends.conf"]').getByRole('button', { name: 'Save' }).click();
    await settings.getByText('Saved and reloaded.').waitFor();
    await err.waitFor({ state: 'detached' });
    expect(await g.outside.readText('config/backends.conf')).toContain('[second]');
    expect(await g.outside.readText('backends')).toMatch(/^second\topenai/m);

    // sandbox.yaml the same way: there is none in the config directory yet, so the shipped default is what shows
    // (and applies); a bad one changes nothing.
    const sandbox = settings.locator('[data-file="sandbox.yaml"]');
    const shipped = await g.outside.readText('config/sandbox.yaml');
    expect(shipped).toContain('filesystem:');
    const box = sandbox.getByRole('textbox', { name: 'sandbox.yaml' });
    await until(async () => (await box.inputValue()) === shipped, 'the shipped default policy to show');
    await box.fill('network:\n  enabled: false\n  ports: [443]\n');
    await sandbox.getByRole('button', { name: 'Save' }).click();
    expect(await sandbox.locator('.field-error').textContent()).toMatch(
      /sandbox\.yaml:3: network\.ports: unknown setting/,
    );
    expect(await g.outside.readText('config/sandbox.yaml')).toBe(shipped);
    // Above it, what the sandbox applies on this machine, from the daemon's `sandbox` file (the helper's probe).
    const applied = settings.locator('[data-file="sandbox"]');
    const report = JSON.parse(await g.outside.readText('sandbox')) as {
      summary: string;
      filter?: { refuses?: string[] };
    };
    await applied.getByRole('status').getByText(report.summary).waitFor();
    expect(report.summary).toMatch(/^sandbox: Landlock ABI \d+/);
    expect(await applied.locator('dd').nth(1).textContent()).toContain('io_uring_setup');
    await screenshot(g.page, 'gui-settings-sandbox');

    // The default profile: picked here, written to config/profile, and the next agent made without one gets it.
    const picker = settings.getByRole('combobox', { name: 'Default profile' });
    await until(async () => (await picker.inputValue()) === 'default', 'the default profile to load');
    await picker.selectOption('e2e');
    await until(
      async () => (await g.outside.readText('config/profile')).trim() === 'e2e',
      'config/profile to be written',
    );

    await g.page.keyboard.press('Control+Shift+N');
    const dialog = g.page.getByRole('dialog', { name: 'New agent in proj' });
    expect(await dialog.getByLabel('Backend').locator('option').allTextContents()).toContain('second (openai, m2)');
    await dialog.getByLabel('Name').fill('next');
    await dialog.getByLabel('Backend').selectOption('second');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await g.page.locator('[data-agent="next"]').waitFor();
    const cfg = await g.outside.readText('session/proj/agent/next/cfg');
    expect(cfg).toContain('profile=e2e');
    expect(cfg).toContain('backend=second');
    // Selecting the new agent went back to its chat.
    await g.page.getByTestId('chat').waitFor();

    await g.page.keyboard.press('Control+`');
    const ops2 = await consoleText();
    expect(ops2).toContain('echo zebraquux | ollie-9p rdwr search');
    expect(ops2).toContain(`echo ${id} | ollie-9p rdwr session/proj/agent/coder/block`);
    expect(ops2).toContain('ollie-9p read config/backends.conf');
    expect(ops2).toMatch(/\| ollie-9p write config\/backends\.conf/);
    expect(ops2).toContain('echo e2e | ollie-9p write config/profile');
  }, 120_000);
});
