/**
 * Attacks on the rewind of a directory tracked as a whole (checkpoint.whole), from inside the sandbox the way a
 * model would make them: scripted shell calls of a real agent against a real olliesrv, toolsrv, sandbox helper and
 * mock LLM. The owner's rewind rebuilds the directory and swaps it into place; the agent tries to make it write
 * outside the roots or into .git through links it planted (in place of the directory, inside it, racing the
 * rewind), to make the old directory's removal follow a link, and to forge lines of `diff` with a file's name.
 */
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { harness, type Harness } from '../olliesrv/agent-harness.js';
import { ATTACKER, closeRun, script, sh } from './scripted-calls.js';

let h: Harness | undefined;
let ws: string | undefined;
afterEach(async () => {
  await closeRun(h, ws);
  [h, ws] = [undefined, undefined];
});

/** Every entry under `dir` with its content hash or link target. */
function tree(dir: string, rel = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const r = rel ? `${rel}/${name}` : name;
    const st = lstatSync(join(dir, r));
    if (st.isSymbolicLink()) out[r] = `link ${readlinkSync(join(dir, r))}`;
    else if (st.isDirectory()) {
      out[`${r}/`] = 'dir';
      Object.assign(out, tree(dir, r));
    } else
      out[r] = createHash('sha256')
        .update(readFileSync(join(dir, r)))
        .digest('hex');
  }
  return out;
}

async function setup(): Promise<{ path: string; outside: string; ctl: (cmd: string) => Promise<string> }> {
  ws = mkdtempSync(join(tmpdir(), 'ollie-cp-whole-attack-'));
  writeFileSync(join(ws, 'a.txt'), 'one\n');
  mkdirSync(join(ws, 'node_modules', 'dep'), { recursive: true });
  writeFileSync(join(ws, 'node_modules', 'dep', 'index.js'), 'original\n');
  mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
  writeFileSync(join(ws, '.git', 'config'), '[core]\n');
  h = await harness({ profiles: { attacker: ATTACKER } });
  writeFileSync(
    join(h.configDir, 'sandbox.yaml'),
    `${readFileSync(join(process.cwd(), 'data', 'sandbox.yaml'), 'utf8')}\ncheckpoint:\n  whole: [node_modules]\n`,
  );
  // Outside the workspace, where the sandbox lets no tool write.
  const outside = join(h.dir, 'outside');
  mkdirSync(outside);
  writeFileSync(join(outside, 'f'), 'outside\n');
  const session = (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim();
  const a = await h.agent({ session, profile: 'attacker' });
  return { path: a.path, outside, ctl: (cmd) => h!.c.rdwrText(`${a.path}/ctl`, cmd) };
}

describe('an agent attacking the rewind of a whole directory', () => {
  it('swaps the directory for a link outside the roots: the rewind rebuilds it in the workspace, outside untouched', async () => {
    const { path, outside, ctl } = await setup();
    const outsideBefore = tree(outside);
    h!.mock.script(
      ...script(
        sh('echo agent > node_modules/dep/index.js'),
        sh(`rm -rf node_modules && ln -s ${outside} node_modules`),
      ),
    );
    await h!.turn(path, 'plant');
    expect(lstatSync(join(ws!, 'node_modules')).isSymbolicLink()).toBe(true);
    expect(await h!.c.readText(`${path}/checkpoint/2/files`)).toBe(
      'T\tnode_modules/ (whole: 1 files changed, 6 bytes)\n',
    );
    expect(await h!.c.readText(`${path}/checkpoint/2/diff`)).toContain(`Now: a link to ${outside}\n`);
    await ctl('rewind 2');
    expect(lstatSync(join(ws!, 'node_modules')).isDirectory()).toBe(true);
    expect(readFileSync(join(ws!, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('agent\n');
    expect(tree(outside)).toEqual(outsideBefore);
  });

  it('swaps the directory, or a directory in it, for a link to .git: the rewind never writes into .git', async () => {
    const { path, ctl } = await setup();
    const gitBefore = tree(join(ws!, '.git'));
    h!.mock.script(
      ...script(
        sh('echo agent > node_modules/dep/index.js'),
        sh('rm -rf node_modules/dep && ln -s ../.git node_modules/dep'),
        sh('rm -rf node_modules && ln -s .git node_modules'),
      ),
    );
    await h!.turn(path, 'plant');
    await ctl('rewind 2');
    expect(lstatSync(join(ws!, 'node_modules', 'dep')).isDirectory()).toBe(true);
    expect(readFileSync(join(ws!, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('agent\n');
    expect(tree(join(ws!, '.git'))).toEqual(gitBefore);
    await ctl('rewind 3');
    expect(tree(join(ws!, '.git'))).toEqual(gitBefore);
    // Back to before everything: the links to .git go (as links), .git stays as it was.
    await ctl('rewind 1');
    expect(readFileSync(join(ws!, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('original\n');
    expect(tree(join(ws!, '.git'))).toEqual(gitBefore);
  });

  it('plants a link inside the directory pointing out: restored as a directory, nothing written through it', async () => {
    const { path, outside, ctl } = await setup();
    const outsideBefore = tree(outside);
    h!.mock.script(
      ...script(
        sh('echo agent > node_modules/dep/index.js && echo more > node_modules/dep/more.js'),
        sh(`rm -rf node_modules/dep && ln -s ${outside} node_modules/dep && ln -s ${outside} node_modules/evil`),
      ),
    );
    await h!.turn(path, 'plant');
    // The walk recorded the links as links: nothing of the outside dir is in the checkpoint.
    const diff = await h!.c.readText(`${path}/checkpoint/2/diff`);
    expect(diff).not.toContain('outside\n');
    await ctl('rewind 2');
    expect(lstatSync(join(ws!, 'node_modules', 'dep')).isDirectory()).toBe(true);
    expect(readFileSync(join(ws!, 'node_modules', 'dep', 'more.js'), 'utf8')).toBe('more\n');
    expect(existsSync(join(ws!, 'node_modules', 'evil'))).toBe(false);
    expect(tree(outside)).toEqual(outsideBefore);
  });

  it('links a directory of the old tree outside: removing the replaced directory deletes the link, not what it points at', async () => {
    const { path, outside, ctl } = await setup();
    mkdirSync(join(outside, 'keep'));
    writeFileSync(join(outside, 'keep', 'precious'), 'precious\n');
    const outsideBefore = tree(outside);
    h!.mock.script(
      ...script(
        sh(
          `mkdir node_modules/x && ln -s ${join(outside, 'keep')} node_modules/x/sub && ln -s ${outside} node_modules/top`,
        ),
      ),
    );
    await h!.turn(path, 'plant');
    expect(await ctl('rewind 1')).toContain('restored\tnode_modules/\n');
    expect(existsSync(join(ws!, 'node_modules', 'x'))).toBe(false);
    expect(tree(outside)).toEqual(outsideBefore);
  });

  it('races the rewind, swapping the directory for links outside and into .git from a background process', async () => {
    const { path, outside, ctl } = await setup();
    const outsideBefore = tree(outside);
    const gitBefore = tree(join(ws!, '.git'));
    h!.mock.script(
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
    await h!.turn(path, 'race');
    let rewinds = 0;
    // The loop says it is done in .cache (skipped: no rewind removes it); bounded, in case it never says so.
    while (!existsSync(join(ws!, '.cache', 'race-done')) && rewinds < 2000) {
      // Whatever the rewind meets, it reports; it never writes through the agent's links.
      await ctl('rewind 1 force').catch(() => undefined);
      rewinds++;
      expect(tree(outside)).toEqual(outsideBefore);
      expect(tree(join(ws!, '.git'))).toEqual(gitBefore);
    }
    expect(rewinds).toBeGreaterThan(0);
    expect(existsSync(join(ws!, '.cache', 'race-done'))).toBe(true);
    // Once the race is over, the rewind restores the directory.
    await ctl('rewind 1 force');
    expect(readFileSync(join(ws!, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('original\n');
    expect(tree(outside)).toEqual(outsideBefore);
    expect(tree(join(ws!, '.git'))).toEqual(gitBefore);
  }, 120_000);

  it("names a file to forge lines of the diff's summary: the name is quoted", async () => {
    const { path } = await setup();
    h!.mock.script(...script(sh(`printf x > node_modules/"$(printf 'n\\n+++ bforged\\n@@ -0,0 +1 @@')"`)));
    await h!.turn(path, 'forge');
    const diff = await h!.c.readText(`${path}/checkpoint/1/diff`);
    expect(diff).toContain('  A "n\\n+++ bforged\\n@@ -0,0 +1 @@"\n');
    expect(diff.split('\n').some((l) => l.startsWith('+++ bforged') || l.startsWith('@@'))).toBe(false);
  });

  it('names a file in a directory walked file by file to pass for a whole directory in files: the name is quoted', async () => {
    const { path } = await setup();
    h!.mock.script(...script(sh(`mkdir vendor && printf x > "vendor/ (whole: 0 files changed, 0 bytes)"`)));
    await h!.turn(path, 'forge');
    expect(await h!.c.readText(`${path}/checkpoint/1/files`)).toBe('A\t"vendor/ (whole: 0 files changed, 0 bytes)"\n');
  });
});
