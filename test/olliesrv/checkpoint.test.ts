/**
 * Checkpoints and rewind against a real daemon, toolsrv, sandbox and mock LLM: the agent changes files with
 * shell commands (sed -i, a build step) the daemon never sees named; the owner rewinds, undoes the rewind,
 * meets conflicts; in a plain directory and in a git repository whose .git must stay untouched.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkpointIndex as idx, checkpointRun, type CheckpointRun } from './checkpoint-run.js';
import { script as rounds, sh } from '../security/scripted-calls.js';
import { fileTree } from '../helpers/file-tree.js';

/** Every file and link under `dir` (but .git) with its mode and content hash or target: what "byte for byte" compares. */
const tree = (dir: string): Record<string, string> => fileTree(dir, { modes: true, skip: ['.git'] });

function setup(init?: (dir: string) => void): Promise<CheckpointRun> {
  return checkpointRun({
    prefix: 'ollie-cp-ws-',
    files: (dir) => {
      writeFileSync(join(dir, 'a.txt'), 'alpha\nbeta\ngamma\n');
      mkdirSync(join(dir, 'src'));
      writeFileSync(join(dir, 'src', 'one.c'), 'int one(void) { return 1; }\n');
      writeFileSync(join(dir, 'src', 'two.c'), 'int two(void) { return 2; }\n');
      init?.(dir);
    },
  });
}

describe('checkpoints of shell side effects', () => {
  it("rewinds a sed -i and a build step's outputs, and undoing the rewind restores the later state byte for byte (no git)", async () => {
    const { h, ws, path, ctl, shell } = await setup();
    const before = tree(ws);
    await shell(
      'edit and build',
      "sed -i 's/beta/BETA/' a.txt",
      'mkdir -p out && cat src/*.c > out/app.o && printf built > out/stamp && rm src/two.c',
    );
    const after = tree(ws);
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('alpha\nBETA\ngamma\n');
    expect(existsSync(join(ws, 'out', 'app.o'))).toBe(true);

    const list = idx(await h.c.readText(`${path}/checkpoint/idx`));
    expect(list.map((l) => l.length)).toEqual([5, 5]);
    expect(list.map((l) => [l[0], l[1]])).toEqual([
      ['1', '1'],
      ['2', '1'],
    ]);
    expect(list[0]![3]).toBe('1'); // a.txt
    expect(Number(list[1]![3])).toBeGreaterThanOrEqual(3); // out/app.o, out/stamp, src/two.c (and out/)
    expect(await h.c.readText(`${path}/checkpoint/1/files`)).toBe('M\ta.txt\n');
    expect(await h.c.readText(`${path}/checkpoint/2/files`)).toBe('A\tout/app.o\nA\tout/stamp\nD\tsrc/two.c\n');
    const diff = await h.c.readText(`${path}/checkpoint/1/diff`);
    expect(diff).toContain('--- a/a.txt\n+++ b/a.txt\n');
    expect(diff).toContain('-beta\n+BETA\n');

    // Rewind the files to before the first round: the sed and the build are gone, the deleted source is back.
    const out = await ctl('rewind 1');
    expect(out).toContain('rewound to checkpoint 1 as checkpoint 3');
    expect(tree(ws)).toEqual(before);
    // The rewind is listed last; rewinding to it undoes it.
    const list2 = idx(await h.c.readText(`${path}/checkpoint/idx`));
    expect(list2.map((l) => l[0])).toEqual(['1', '2', '3']);
    expect(await h.c.readText(`${path}/checkpoint/3/info`)).toContain('kind=rewind');
    await ctl('rewind 3');
    expect(tree(ws)).toEqual(after);
    // The conversation was not touched by a files-only rewind.
    expect((await ctl('context')).match(/^epoch=(\d+)/m)?.[1]).toBe('0');
    // The store is the owner's alone: directories 0700, files 0600.
    const modes = execFileSync('find', [join(h.dataDir, 'checkpoints'), '-printf', '%y %m\n'], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
    expect(modes.length).toBeGreaterThan(5);
    expect(new Set(modes)).toEqual(new Set(['d 700', 'f 600']));
  });

  it("checkpoints the user's own !cmd like a model's round, and rewinds it", async () => {
    const { h, ws, path, ctl } = await setup();
    const before = tree(ws);
    await h.turn(path, "!sed -i 's/alpha/ALPHA/' a.txt && echo made > mine.txt");
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('ALPHA\nbeta\ngamma\n');
    expect(await h.c.readText(`${path}/checkpoint/1/files`)).toBe('M\ta.txt\nA\tmine.txt\n');
    await ctl('rewind 1');
    expect(tree(ws)).toEqual(before);
  });

  it('lists a file the user edited after the checkpoint as a conflict and does not overwrite it; force and keep decide', async () => {
    const { h, ws, path, ctl, shell } = await setup();
    await shell('edit', "sed -i 's/alpha/ALPHA/' a.txt && echo new > b.txt");
    // The user edits the file the agent changed, and adds one of their own.
    writeFileSync(join(ws, 'a.txt'), 'ALPHA\nbeta\ngamma\nmy own line\n');
    writeFileSync(join(ws, 'notes.md'), 'mine\n');
    let err = '';
    await ctl('rewind 1').catch((e: Error) => (err = e.message));
    expect(err).toContain('not rewound');
    expect(err).toContain('conflict\ta.txt');
    expect(err).toContain('conflict\tnotes.md');
    expect(err).not.toContain('b.txt');
    // Nothing changed, nothing recorded.
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('ALPHA\nbeta\ngamma\nmy own line\n');
    expect(existsSync(join(ws, 'b.txt'))).toBe(true);
    expect(idx(await h.c.readText(`${path}/checkpoint/idx`))).toHaveLength(1);
    // keep: the agent's own change goes, the user's stay.
    const kept = await ctl('rewind 1 keep');
    expect(kept).toContain('conflict\ta.txt\tkept');
    expect(existsSync(join(ws, 'b.txt'))).toBe(false);
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('ALPHA\nbeta\ngamma\nmy own line\n');
    expect(readFileSync(join(ws, 'notes.md'), 'utf8')).toBe('mine\n');
    // force: overwritten, asked for by name.
    const forced = await ctl('rewind 1 force');
    expect(forced).toContain('conflict\ta.txt\toverwritten');
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('alpha\nbeta\ngamma\n');
    expect(existsSync(join(ws, 'notes.md'))).toBe(false);
  });

  it('rewinds the conversation too with "all", keeping the later history as an epoch; undo brings both back', async () => {
    const { h, ws, path, ctl, shell } = await setup();
    await shell('first', "sed -i 's/gamma/GAMMA/' a.txt");
    const agent = h.daemon.agents.all().find((x) => path.endsWith(x.name))!;
    const full = agent.history.messages.map((m) => m.content);
    expect(full[0]).toBe('first');
    const out = await ctl('rewind 1 all');
    expect(out).toContain('conversation: 1 messages');
    expect(agent.history.messages.map((m) => m.content)).toEqual(['first']);
    expect(agent.history.epoch).toBe(1);
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('alpha\nbeta\ngamma\n');
    await ctl('rewind 2 all');
    expect(agent.history.messages.map((m) => m.content)).toEqual(full);
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('alpha\nbeta\nGAMMA\n');
  });

  it('refuses to rewind while a tool round runs', async () => {
    const { h, ws, path, ctl } = await setup();
    h.mock.script(...rounds(sh('echo x > x.txt')), ...rounds(sh('sleep 30')));
    await h.turn(path, 'one');
    await h.c.write(`${path}/prompt`, 'two');
    await h.waitState(path, 'calling');
    let err = '';
    await ctl('rewind 1').catch((e: Error) => (err = e.message));
    expect(err).toContain('running');
    expect(existsSync(join(ws, 'x.txt'))).toBe(true);
    await ctl('stop');
    await h.waitState(path, 'idle');
  });

  it('works in a git repository without touching .git: status, stash list and the index stay as they were', async () => {
    const git = (dir: string, ...args: string[]): string =>
      execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { encoding: 'utf8' });
    const { h, ws, path, ctl, shell } = await setup((dir) => {
      git(dir, 'init', '-q');
      git(dir, 'add', '.');
      git(dir, 'commit', '-qm', 'init');
      writeFileSync(join(dir, 'a.txt'), 'alpha\nbeta\ngamma\nstashed\n');
      git(dir, 'stash', '-q');
      writeFileSync(join(dir, 'untracked.txt'), 'u\n');
    });
    const status = git(ws, 'status', '--porcelain');
    const stashes = git(ws, 'stash', 'list');
    expect(stashes).toMatch(/stash@\{0\}/);
    const indexMtime = statSync(join(ws, '.git', 'index')).mtimeMs;
    const gitTree = (): string =>
      execFileSync('sh', ['-c', `cd ${ws}/.git && find . -type f | sort | xargs sha256sum`], { encoding: 'utf8' });
    const gitBefore = gitTree();
    const before = tree(ws);
    await shell('edit', "sed -i 's/beta/BETA/' a.txt && echo built > build.out");
    expect(await h.c.readText(`${path}/checkpoint/1/files`)).toBe('M\ta.txt\nA\tbuild.out\n');
    await ctl('rewind 1');
    expect(tree(ws)).toEqual(before);
    // Nothing under .git was read into a checkpoint, written, or had its mtime changed, before git itself looks.
    expect(statSync(join(ws, '.git', 'index')).mtimeMs).toBe(indexMtime);
    expect(gitTree()).toBe(gitBefore);
    expect(git(ws, 'status', '--porcelain')).toBe(status);
    expect(git(ws, 'stash', 'list')).toBe(stashes);
  });

  it('skips what the policy says and costs nothing for an unchanged tree', async () => {
    const { h, path, shell } = await setup((dir) => {
      mkdirSync(join(dir, 'node_modules', 'dep'), { recursive: true });
      writeFileSync(join(dir, 'node_modules', 'dep', 'index.js'), 'x');
    });
    await shell('go', 'echo changed > node_modules/dep/index.js', 'true');
    const list = idx(await h.c.readText(`${path}/checkpoint/idx`));
    expect(list.map((l) => l[3])).toEqual(['0', '0']);
    // The second round's checkpoint added nothing: the first one's manifest stands.
    expect(list[1]![4]).toBe('0');
  });
});

describe('retention', () => {
  it('keeps keep.count checkpoints per agent, and gc removes what no checkpoint needs; what is kept still rewinds', async () => {
    const { h, ws, path, ctl, shell } = await setup();
    writeFileSync(
      join(h.configDir, 'sandbox.yaml'),
      `${readFileSync(join(process.cwd(), 'data', 'sandbox.yaml'), 'utf8')}\ncheckpoint:\n  keep:\n    count: 2\n`,
    );
    await shell('four rounds', 'echo v1 > a.txt', 'echo v2 > a.txt', 'echo v3 > a.txt', 'echo v4 > a.txt');
    const ids = idx(await h.c.readText(`${path}/checkpoint/idx`)).map((l) => l[0]);
    expect(ids).toEqual(['3', '4']);
    const gc = await ctl('checkpoint gc');
    expect(Number(/objects removed (\d+)/.exec(gc)?.[1])).toBeGreaterThan(0);
    // The oldest kept checkpoint's state (v2) comes back whole after the collection.
    await ctl('rewind 3');
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('v2\n');
    // A deleted session's checkpoints go with it.
    const sid = (await h.c.readText(`${path.split('/agent/')[0]}/id`)).trim();
    expect(existsSync(join(h.dataDir, 'checkpoints', 'agents', sid))).toBe(true);
    await h.c.remove(path.split('/agent/')[0]!);
    expect(existsSync(join(h.dataDir, 'checkpoints', 'agents', sid))).toBe(false);
  });
});

describe('limits', () => {
  it('does not copy a workspace larger than checkpoint.max_total, and says so in the chat; the round still runs', async () => {
    const { h, ws, path, shell } = await setup((dir) => writeFileSync(join(dir, 'big.bin'), Buffer.alloc(8192, 1)));
    writeFileSync(
      join(h.configDir, 'sandbox.yaml'),
      `${readFileSync(join(process.cwd(), 'data', 'sandbox.yaml'), 'utf8')}\ncheckpoint:\n  max_total: 4 KiB\n`,
    );
    const blocks = await shell('go', 'echo ran > ran.txt');
    expect(readFileSync(join(ws, 'ran.txt'), 'utf8')).toBe('ran\n');
    expect(await h.c.readText(`${path}/checkpoint/idx`)).toBe('');
    expect(
      blocks.some(
        (b) =>
          b.name === 'checkpoint' &&
          b.content.includes('not checkpointed (name its large directories in checkpoint.skip'),
      ),
    ).toBe(true);
  });
});
