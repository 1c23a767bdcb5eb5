/**
 * Attacks on the rewind of a directory tracked as a whole (checkpoint.whole), from inside the sandbox the way a
 * model would make them: scripted shell calls of a real agent against a real olliesrv, toolsrv, sandbox helper and
 * mock LLM. The owner's rewind rebuilds the directory and swaps it into place; the agent tries to make it write
 * outside the roots or into .git through links it planted (in place of the directory, inside it, racing the
 * rewind), to make the old directory's removal follow a link, and to forge lines of `diff` with a file's name.
 */
import { existsSync, lstatSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkpointRun, type CheckpointRun } from '../olliesrv/checkpoint-run.js';
import { ATTACKER, script, sh } from './scripted-calls.js';
import { fileTree } from '../helpers/file-tree.js';

/** Every entry under `dir` with its content hash or link target. */
const tree = (dir: string): Record<string, string> => fileTree(dir);
/** The same with permission bits: a rewind's fchmod of a directory it was made to hold is a write too. */
const treeModes = (dir: string): Record<string, string> => fileTree(dir, { modes: true });

async function setup(): Promise<CheckpointRun & { outside: string }> {
  const run = await checkpointRun({
    prefix: 'ollie-cp-whole-attack-',
    whole: 'node_modules',
    profile: { name: 'attacker', profile: ATTACKER },
    files: (dir) => {
      writeFileSync(join(dir, 'a.txt'), 'one\n');
      mkdirSync(join(dir, 'node_modules', 'dep'), { recursive: true });
      writeFileSync(join(dir, 'node_modules', 'dep', 'index.js'), 'original\n');
      mkdirSync(join(dir, '.git', 'hooks'), { recursive: true });
      writeFileSync(join(dir, '.git', 'config'), '[core]\n');
    },
  });
  // Outside the workspace, where the sandbox lets no tool write.
  const outside = join(run.h.dir, 'outside');
  mkdirSync(outside);
  writeFileSync(join(outside, 'f'), 'outside\n');
  return { ...run, outside };
}

/**
 * Starts the attacker, notes what lies outside the workspace and in .git, and runs its shell commands as one turn
 * ("plant"): what the rewind then meets.
 */
async function plant(
  commands: (outside: string) => string[],
): Promise<
  CheckpointRun & { outside: string; outsideBefore: Record<string, string>; gitBefore: Record<string, string> }
> {
  const run = await setup();
  const outsideBefore = tree(run.outside);
  const gitBefore = tree(join(run.ws, '.git'));
  run.h.mock.script(...script(...commands(run.outside).map(sh)));
  await run.h.turn(run.path, 'plant');
  return { ...run, outsideBefore, gitBefore };
}

/**
 * `.git` as the racing loop may leave it: everything it held, unchanged (modes included), and nothing the rewind
 * writes. The agent may write `.git` itself (only its hooks and config are kept from it), and its own `mkdir -p
 * node_modules/dep` and `ln -s … node_modules/dep/out` land there when they run while `node_modules` is its link to
 * `.git` (which a rewind puts back where it found it when its swap fails: the agent took the name once the old one
 * was moved aside). So a `dep/` directory and an `out` link may appear; a file (the rewind's `index.js`, or one of
 * its temporary `.ollie-rewind-` names) may not.
 */
function expectNoRewindWrites(now: Record<string, string>, before: Record<string, string>): void {
  for (const [k, v] of Object.entries(before)) expect(now[k], `.git/${k}`).toBe(v);
  const added = Object.entries(now).filter(([k]) => !(k in before));
  for (const [k, v] of added)
    expect([k, v], `.git/${k}`).toSatisfy(
      ([k, v]: string[]) => (k === 'dep/' && v!.startsWith('dir ')) || (k === 'dep/out' && v!.startsWith('link ')),
    );
}

describe('an agent attacking the rewind of a whole directory', () => {
  it('swaps the directory for a link outside the roots: the rewind rebuilds it in the workspace, outside untouched', async () => {
    const { h, ws, path, outside, ctl, outsideBefore } = await plant((outside) => [
      'echo agent > node_modules/dep/index.js',
      `rm -rf node_modules && ln -s ${outside} node_modules`,
    ]);
    expect(lstatSync(join(ws, 'node_modules')).isSymbolicLink()).toBe(true);
    expect(await h.c.readText(`${path}/checkpoint/2/files`)).toBe(
      'T\tnode_modules/ (whole: 1 files changed, 6 bytes)\n',
    );
    expect(await h.c.readText(`${path}/checkpoint/2/diff`)).toContain(`Now: a link to ${outside}\n`);
    await ctl('rewind 2');
    expect(lstatSync(join(ws, 'node_modules')).isDirectory()).toBe(true);
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('agent\n');
    expect(tree(outside)).toEqual(outsideBefore);
  });

  it('swaps the directory, or a directory in it, for a link to .git: the rewind never writes into .git', async () => {
    const { ws, ctl, gitBefore } = await plant(() => [
      'echo agent > node_modules/dep/index.js',
      'rm -rf node_modules/dep && ln -s ../.git node_modules/dep',
      'rm -rf node_modules && ln -s .git node_modules',
    ]);
    await ctl('rewind 2');
    expect(lstatSync(join(ws, 'node_modules', 'dep')).isDirectory()).toBe(true);
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('agent\n');
    expect(tree(join(ws, '.git'))).toEqual(gitBefore);
    await ctl('rewind 3');
    expect(tree(join(ws, '.git'))).toEqual(gitBefore);
    // Back to before everything: the links to .git go (as links), .git stays as it was.
    await ctl('rewind 1');
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('original\n');
    expect(tree(join(ws, '.git'))).toEqual(gitBefore);
  });

  it('plants a link inside the directory pointing out: restored as a directory, nothing written through it', async () => {
    const { h, ws, path, ctl, outsideBefore, outside } = await plant((outside) => [
      'echo agent > node_modules/dep/index.js && echo more > node_modules/dep/more.js',
      `rm -rf node_modules/dep && ln -s ${outside} node_modules/dep && ln -s ${outside} node_modules/evil`,
    ]);
    // The walk recorded the links as links: nothing of the outside dir is in the checkpoint.
    const diff = await h.c.readText(`${path}/checkpoint/2/diff`);
    expect(diff).not.toContain('outside\n');
    await ctl('rewind 2');
    expect(lstatSync(join(ws, 'node_modules', 'dep')).isDirectory()).toBe(true);
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'more.js'), 'utf8')).toBe('more\n');
    expect(existsSync(join(ws, 'node_modules', 'evil'))).toBe(false);
    expect(tree(outside)).toEqual(outsideBefore);
  });

  it('links a directory of the old tree outside: removing the replaced directory deletes the link, not what it points at', async () => {
    const { h, ws, path, outside, ctl } = await setup();
    mkdirSync(join(outside, 'keep'));
    writeFileSync(join(outside, 'keep', 'precious'), 'precious\n');
    const outsideBefore = tree(outside);
    h.mock.script(
      ...script(
        sh(
          `mkdir node_modules/x && ln -s ${join(outside, 'keep')} node_modules/x/sub && ln -s ${outside} node_modules/top`,
        ),
      ),
    );
    await h.turn(path, 'plant');
    expect(await ctl('rewind 1')).toContain('restored\tnode_modules/\n');
    expect(existsSync(join(ws, 'node_modules', 'x'))).toBe(false);
    expect(tree(outside)).toEqual(outsideBefore);
  });

  it('races the rewind, swapping the directory for links outside and into .git from a background process', async () => {
    const { h, ws, path, outside, ctl } = await setup();
    const outsideBefore = tree(outside);
    const gitBefore = treeModes(join(ws, '.git'));
    h.mock.script(
      ...script(sh('echo agent > node_modules/dep/index.js'), {
        // A background process of the agent's, still running while the owner rewinds.
        name: 'shell',
        args: {
          background: true,
          command:
            `for i in $(seq 1 150); do rm -rf node_modules; ln -sfn ${outside} node_modules; rm -f node_modules; ` +
            `ln -sfn .git node_modules; rm -f node_modules; mkdir -p node_modules/dep; ` +
            `ln -sfn ${outside} node_modules/dep/out 2>/dev/null; done >/dev/null 2>&1; mkdir -p .cache && touch .cache/race-done`,
        },
      }),
    );
    await h.turn(path, 'race');
    let rewinds = 0;
    // The loop says it is done in .cache (skipped: no rewind removes it); bounded, in case it never says so.
    while (!existsSync(join(ws, '.cache', 'race-done')) && rewinds < 2000) {
      // Whatever the rewind meets, it reports; it never writes through the agent's links.
      await ctl('rewind 1 force').catch(() => undefined);
      rewinds++;
      expect(tree(outside)).toEqual(outsideBefore);
      expectNoRewindWrites(treeModes(join(ws, '.git')), gitBefore);
    }
    expect(rewinds).toBeGreaterThan(0);
    expect(existsSync(join(ws, '.cache', 'race-done'))).toBe(true);
    // Once the race is over, the rewind restores the directory.
    await ctl('rewind 1 force');
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('original\n');
    expect(tree(outside)).toEqual(outsideBefore);
    expectNoRewindWrites(treeModes(join(ws, '.git')), gitBefore);
  }, 120_000);

  it("names a file to forge lines of the diff's summary: the name is quoted", async () => {
    const { h, path } = await setup();
    h.mock.script(...script(sh(`printf x > node_modules/"$(printf 'n\\n+++ bforged\\n@@ -0,0 +1 @@')"`)));
    await h.turn(path, 'forge');
    const diff = await h.c.readText(`${path}/checkpoint/1/diff`);
    expect(diff).toContain('  A "n\\n+++ bforged\\n@@ -0,0 +1 @@"\n');
    expect(diff.split('\n').some((l) => l.startsWith('+++ bforged') || l.startsWith('@@'))).toBe(false);
  });

  it('names a file in a directory walked file by file to pass for a whole directory in files: the name is quoted', async () => {
    const { h, path } = await setup();
    h.mock.script(...script(sh(`mkdir vendor && printf x > "vendor/ (whole: 0 files changed, 0 bytes)"`)));
    await h.turn(path, 'forge');
    expect(await h.c.readText(`${path}/checkpoint/1/files`)).toBe('A\t"vendor/ (whole: 0 files changed, 0 bytes)"\n');
  });
});
