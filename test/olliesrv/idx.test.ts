/**
 * Columns of the root files that used to be hard-coded: session/idx's `connected`, and the `models` file's context
 * length where the provider's list has none but backends.conf sets `context =`.
 */
import { describe, expect, it } from 'vitest';
import { testHarness } from './agent-harness.js';

describe('root files', () => {
  it('session/idx says whether a tool server serves the session', async () => {
    const h = await testHarness();
    const s = (await h.c.rdwrText('session/new', `cwd=${h.dir}`)).trim();
    const row = async (): Promise<string[]> =>
      (await h.c.readText('session/idx'))
        .split('\n')
        .find((l) => l.split('\t')[1] === s)!
        .split('\t');
    expect((await row())[3]).toBe('0');
    const a = await h.agent({ session: s });
    h.mock.script([{ toolCalls: [{ name: 'shell', args: { command: 'true' } }] }], [{ text: 'done' }]);
    await h.turn(a.path, 'run something');
    expect((await row())[3]).toBe('1');
    expect((await row())[4]).toBe('-');
  });

  it("models gives backends.conf's context where the provider lists none", async () => {
    const h = await testHarness({ tools: false });
    const lines = (await h.c.readText('models')).split('\n').filter((l) => l.startsWith('mock\t'));
    expect(lines.length).toBeGreaterThan(0);
    // The OpenAI-style model list carries no context length; the harness's backends.conf says 100000.
    for (const l of lines) expect(l.split('\t')[2]).toBe('100000');
  });
});
