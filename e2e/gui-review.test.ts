/**
 * The review panel against the whole product in web mode: the real olliesrv and toolsrv, the mock LLM over
 * HTTP, the built renderer in Debian's Chromium. An agent's shell rounds change files; the panel shows each
 * round's files and hunks under its turn; a file marked reviewed stays marked after a later turn; Rewind puts
 * the files back, Undo brings the later state back; a file the user edited meanwhile is shown as a conflict
 * and kept when the user says so.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { until } from '../test/wait.js';
import { openCoder, useGui } from './gui-harness.js';
import { screenshot } from './helpers.js';

describe('the review panel (web mode)', () => {
  const g = useGui({
    prefix: 'ollie-e2e-review-',
    viewport: { width: 1280, height: 800 },
    outside: true,
    prepare: (d) => {
      writeFileSync(join(d, 'work', 'app.js'), 'const a = 1;\nconst b = 2;\nconsole.log(a + b);\n');
      writeFileSync(join(d, 'work', 'README'), 'hello\n');
    },
    daemon: { toolsrv: {}, retryDelay: () => 10 },
  });

  const prompt = async (text: string): Promise<void> => {
    const box = g.page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill(text);
    await box.press('Enter');
  };
  const sh = (command: string) => [{ toolCalls: [{ name: 'shell', args: { command } }] }];

  it("shows each round's files and hunks, keeps reviewed marks across turns, rewinds, undoes and lists conflicts", async () => {
    await openCoder(g);
    await g.page.getByRole('button', { name: 'Review', exact: true }).click();
    const panel = g.page.getByRole('complementary', { name: 'Review' });
    await panel.getByText('No checkpoints yet').waitFor();

    // Turn 1: a sed -i and a "build" (files the model never named).
    g.mock.script(
      sh("sed -i 's/const b = 2;/const b = 40;/' app.js"),
      sh('mkdir -p dist && cat app.js > dist/bundle.js'),
      [{ text: 'edited and built' }],
    );
    await prompt('edit and build');
    await g.page.locator('.block[data-role="assistant"]', { hasText: 'edited and built' }).waitFor({ timeout: 15_000 });
    await g.page.locator('[data-agent="coder"][data-state="idle"]').waitFor();
    const turn1 = panel.getByRole('region', { name: 'Turn 1' });
    const round1 = turn1.locator('.review-round[data-checkpoint="1"]');
    const app = round1.locator('.review-file[data-path="app.js"]');
    await app.waitFor();
    expect(await app.locator('.review-hunks .del').allTextContents()).toEqual(['-const b = 2;']);
    expect(await app.locator('.review-hunks .add').allTextContents()).toEqual(['+const b = 40;']);
    await turn1.locator('.review-round[data-checkpoint="2"] .review-file[data-path="dist/bundle.js"]').waitFor();
    await screenshot(g.page, 'gui-review');

    // Mark app.js reviewed: its hunks fold away, and the mark is the daemon's (checkpoint/1/reviewed).
    await app.getByRole('checkbox', { name: 'Reviewed app.js' }).check();
    await app.and(g.page.locator('.reviewed')).waitFor();
    // The mark shows at once; the daemon's copy follows its write.
    await until(
      async () => (await g.outside.readText('session/proj/agent/coder/checkpoint/1/reviewed')) === 'app.js\n',
      'the daemon to keep the mark',
    );

    // Turn 2: another change; the mark of turn 1 survives it (and a reload of the g.page).
    g.mock.script(sh('echo more >> README'), [{ text: 'second turn done' }]);
    await prompt('one more');
    await g.page.locator('.block[data-role="assistant"]', { hasText: 'second turn done' }).waitFor({ timeout: 15_000 });
    await panel.getByRole('region', { name: 'Turn 2' }).locator('.review-file[data-path="README"]').waitFor();
    await g.page.reload();
    await g.page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    await g.page.locator('[data-agent="coder"] .node').click();
    await g.page.getByRole('button', { name: 'Review', exact: true }).click();
    await panel.locator('.review-round[data-checkpoint="1"] .review-file.reviewed[data-path="app.js"]').waitFor();
    expect(await panel.locator('.review-round[data-checkpoint="1"] input[type="checkbox"]').first().isChecked()).toBe(
      true,
    );

    // Rewind to before round 1: the sed and the build are undone; the rewind shows last, with Undo.
    const later = readFileSync(join(g.work, 'app.js'), 'utf8');
    await panel.locator('.review-round[data-checkpoint="1"]').getByRole('button', { name: 'Rewind' }).click();
    await panel.getByRole('status').filter({ hasText: 'rewound to checkpoint 1 as checkpoint 4' }).waitFor();
    expect(readFileSync(join(g.work, 'app.js'), 'utf8')).toContain('const b = 2;');
    expect(existsSync(join(g.work, 'dist', 'bundle.js'))).toBe(false);
    const undo = panel.locator('.review-round[data-checkpoint="4"][data-kind="rewind"]');
    await undo.waitFor();
    await undo.getByRole('button', { name: 'Undo' }).click();
    await panel.getByRole('status').filter({ hasText: 'rewound to checkpoint 4 as checkpoint 5' }).waitFor();
    expect(readFileSync(join(g.work, 'app.js'), 'utf8')).toBe(later);
    expect(readFileSync(join(g.work, 'dist', 'bundle.js'), 'utf8')).toBe(later);

    // The user edits a file the agent changed; a rewind lists it as a conflict, and "keep" leaves it as it is.
    writeFileSync(join(g.work, 'README'), 'hello\nmore\nthe user was here\n');
    await panel.locator('.review-round[data-checkpoint="3"]').getByRole('button', { name: 'Rewind' }).click();
    const alert = panel.getByRole('alert');
    await alert.filter({ hasText: 'conflict\tREADME' }).waitFor();
    expect(readFileSync(join(g.work, 'README'), 'utf8')).toBe('hello\nmore\nthe user was here\n');
    await alert.getByRole('button', { name: 'Keep mine, rewind the rest' }).click();
    await panel.getByRole('status').filter({ hasText: 'conflict\tREADME\tkept' }).waitFor();
    expect(readFileSync(join(g.work, 'README'), 'utf8')).toBe('hello\nmore\nthe user was here\n');
  });
});
