/**
 * A PreToolUse guard the agent can make fail. The owner's guard reads a list kept in the workspace and refuses
 * shell commands that name a word on it; the agent deletes the list, the guard exits 1, and under Claude Code's
 * semantics (a failing hook is an error, the call goes on) every call now passes. `"failClosed": true` makes the
 * failure block instead. Real olliesrv, toolsrv and sandbox helper; the mock LLM scripts the calls.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { harness, type Harness } from '../olliesrv/agent-harness.js';
import { results, script, sh as shell } from './scripted-calls.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** The owner's guard: the denied words are in `.guard/words` of the project; exit 2 blocks, any failure exits 1. */
const GUARD = 'words=$(cat .guard/words) || exit 1; grep -qF "$words" && { echo "guard: $words" >&2; exit 2; }; exit 0';

async function guarded(failClosed: boolean | undefined): Promise<string[]> {
  h = await harness();
  const work = join(h.dir, 'work');
  mkdirSync(join(work, '.guard'), { recursive: true });
  writeFileSync(join(work, '.guard', 'words'), 'forbidden');
  writeFileSync(
    join(h.configDir, 'hooks.json'),
    JSON.stringify({
      hooks: {
        PreToolUse: [
          {
            matcher: 'shell',
            hooks: [{ type: 'command', command: GUARD, ...(failClosed !== undefined && { failClosed }) }],
          },
        ],
      },
    }),
  );
  const session = (await h.c.rdwrText('session/new', `cwd=${work}`)).trim();
  const a = await h.agent({ session });
  h.mock.script(
    ...script(shell('echo forbidden'), shell('rm -r .guard && echo removed'), shell('echo forbidden; echo ran')),
  );
  return results(await h.turn(a.path, 'go', 60_000));
}

describe('a PreToolUse guard the agent breaks', () => {
  it('with failClosed, blocks every call once it fails, with the failure as the reason', async () => {
    const r = await guarded(true);
    expect(r[0]).toContain('guard: forbidden');
    expect(r[1]).toContain('removed');
    expect(r[2]).not.toContain('ran');
    expect(r[2]).toMatch(/PreToolUse hook .* failed \(exit 1\) and fails closed/);
  }, 60_000);

  it('without it (Claude Code semantics, the default), lets the call through: what failClosed is for', async () => {
    const r = await guarded(undefined);
    expect(r[0]).toContain('guard: forbidden');
    expect(r[1]).toContain('removed');
    expect(r[2]).toContain('ran');
  }, 60_000);

  it('refuses a failClosed that is not a boolean, naming the field', async () => {
    h = await harness();
    await expect(
      h.c.write(
        'config/hooks.json',
        JSON.stringify({
          hooks: { PreToolUse: [{ hooks: [{ type: 'command', command: 'true', failClosed: 'yes' }] }] },
        }),
      ),
    ).rejects.toThrow(/hooks\.PreToolUse\[0\]\.hooks\[0\]\.failClosed: must be true or false/);
  });
});
