/**
 * Directories tracked as a whole (checkpoint.whole) against a real daemon, toolsrv, sandbox and mock LLM: a build
 * step that rewrites files in node_modules is one entry of the checkpoint (one line of `files`, a summary in
 * `diff`), rewound and undone byte for byte; an unchanged whole directory costs no new tree; a directory the user
 * changed since is a conflict as a whole. Then the engine on its own (real files, real inotify): a whole directory
 * nothing under it changed is not walked again, and the watched result equals a full walk; and the rule's parsing.
 */
import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkpointIndex as idx, checkpointRun, type CheckpointRun } from './checkpoint-run.js';
import { watchedRounds } from './random-tree.js';
import { script as rounds, sh } from '../security/scripted-calls.js';
import { fileTree } from '../helpers/file-tree.js';
import { testDir } from '../helpers/temp-dir.js';
import { applyChanges } from '../../src/olliesrv/checkpoint/restore.js';
import { rescan, sameEntry, scan } from '../../src/olliesrv/checkpoint/scan.js';
import { CheckpointStore, type Entry, type Manifest, type Tree } from '../../src/olliesrv/checkpoint/store.js';
import { DirWatch } from '../../src/olliesrv/checkpoint/watch.js';
import { parsePolicyFile } from '../../src/toolsrv/sandbox/policy.js';
import { narrowCheckpointRules, baseCheckpointRules } from '../../src/toolsrv/sandbox/checkpoint-rules.js';

/** Every file, link and directory under `dir` with its mode and content hash or target: "byte for byte". */
const tree = (dir: string): Record<string, string> => fileTree(dir, { modes: true });

function setup(whole = 'node_modules'): Promise<CheckpointRun> {
  return checkpointRun({
    prefix: 'ollie-cp-whole-',
    whole,
    files: (dir) => {
      writeFileSync(join(dir, 'a.txt'), 'alpha\n');
      mkdirSync(join(dir, 'node_modules', 'dep', 'lib'), { recursive: true });
      mkdirSync(join(dir, 'node_modules', '.bin'));
      mkdirSync(join(dir, 'node_modules', '.cache'));
      writeFileSync(join(dir, 'node_modules', 'dep', 'index.js'), 'module.exports = 1;\n');
      writeFileSync(join(dir, 'node_modules', 'dep', 'package.json'), '{"name":"dep"}\n');
      writeFileSync(join(dir, 'node_modules', 'dep', 'lib', 'util.js'), 'exports.u = 1;\n', { mode: 0o755 });
      symlinkSync('../dep/index.js', join(dir, 'node_modules', '.bin', 'dep'));
      // Skipped inside the whole directory (.cache is in the default skip list): kept as it is by a rewind.
      writeFileSync(join(dir, 'node_modules', '.cache', 'c'), 'cache\n');
    },
  });
}

describe('a directory tracked as a whole', () => {
  it('is one line of files, a summary in diff, and a build step in it is rewound and undone byte for byte', async () => {
    const { h, ws, path, ctl, shell } = await setup();
    const before = tree(ws);
    await shell(
      'build',
      "sed -i 's/1/2/' node_modules/dep/index.js && echo new > node_modules/dep/new.js && rm node_modules/dep/package.json && " +
        'chmod 600 node_modules/dep/lib/util.js && ln -sfn ../dep/new.js node_modules/.bin/dep && echo beta > a.txt',
      'true',
    );
    const after = tree(ws);
    const list = idx(await h.c.readText(`${path}/checkpoint/idx`));
    // a.txt and the five changes under node_modules (its directories are not counted).
    expect(list.map((l) => l[3])).toEqual(['6', '0']);
    // The unchanged round stored nothing: no new tree, no new manifest.
    expect(list[1]![4]).toBe('0');
    const files = await h.c.readText(`${path}/checkpoint/1/files`);
    const bytes = 'module.exports = 2;\n'.length + 'new\n'.length + '{"name":"dep"}\n'.length + 15 + 0;
    expect(files).toBe(`M\ta.txt\nM\tnode_modules/ (whole: 5 files changed, ${bytes} bytes)\n`);
    const diff = await h.c.readText(`${path}/checkpoint/1/diff`);
    expect(diff).toContain(
      `--- a/node_modules/\n+++ b/node_modules/\nWhole directory node_modules/: 5 files changed (1 added, 3 modified, 1 deleted, 0 type changed), ${bytes} bytes\n`,
    );
    for (const l of [
      '  M .bin/dep',
      '  M dep/index.js',
      '  M dep/lib/util.js',
      '  A dep/new.js',
      '  D dep/package.json',
    ])
      expect(diff).toContain(`${l}\n`);
    // No hunk of any file under it.
    expect(diff).not.toContain('module.exports');
    expect(diff).toContain('+beta');

    // Rewind: the whole directory comes back as it was, by a swap (no temporary name left behind).
    const reply = await ctl('rewind 1');
    expect(reply).toContain('restored\tnode_modules/\n');
    expect(tree(ws)).toEqual(before);
    expect(readdirSync(ws).filter((n) => n.startsWith('.ollie-rewind-'))).toEqual([]);
    const rid = /as checkpoint (\d+)/.exec(reply)![1]!;
    // The rewind is itself checkpointed: undoing it brings the build's state back byte for byte.
    await ctl(`rewind ${rid}`);
    expect(tree(ws)).toEqual(after);
    // A kept tree's blobs survive gc: rewinding again after a collection still restores every file.
    await ctl('checkpoint gc');
    await ctl('rewind 1');
    expect(tree(ws)).toEqual(before);
  });

  it('stores a changed tree as a delta of the one before; gc keeps the trees and blobs kept checkpoints need', async () => {
    const { h, ws, path, ctl, shell } = await setup();
    writeFileSync(
      join(h.configDir, 'sandbox.yaml'),
      `${readFileSync(join(process.cwd(), 'data', 'sandbox.yaml'), 'utf8')}\ncheckpoint:\n  whole: [node_modules]\n  keep:\n    count: 2\n`,
    );
    await shell(
      'four rounds',
      'echo v1 > node_modules/dep/index.js',
      'echo v2 > node_modules/dep/index.js',
      'echo v3 > node_modules/dep/index.js',
      'echo v4 > node_modules/dep/index.js',
    );
    const ids = idx(await h.c.readText(`${path}/checkpoint/idx`)).map((l) => l[0]);
    expect(ids).toEqual(['3', '4']);
    // Later trees are deltas (a base and the entries that differ), not the whole tree again.
    const store = new CheckpointStore(h.dataDir);
    const deltas = [...store.allObjects()].filter((o) => {
      try {
        const t = JSON.parse(readFileSync(store.objectPath(o.hash), 'utf8')) as Record<string, unknown>;
        return 'base' in t && 'set' in t && Array.isArray(t.del);
      } catch {
        return false; // a file's contents
      }
    });
    expect(deltas.length).toBeGreaterThan(0);
    const gc = await ctl('checkpoint gc');
    expect(Number(/objects removed (\d+)/.exec(gc)?.[1])).toBeGreaterThan(0);
    // The oldest kept checkpoint's tree is a delta whose bases belonged to dropped checkpoints: still whole.
    await ctl('rewind 3');
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('v2\n');
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'lib', 'util.js'), 'utf8')).toBe('exports.u = 1;\n');
  });

  it('an unchanged whole directory costs no new tree, while files beside it still checkpoint', async () => {
    const { h, path } = await setup();
    h.mock.script(...rounds(sh('echo beta > a.txt'), sh('echo gamma > a.txt')));
    const trees = (): number =>
      [...new CheckpointStore(h.dataDir).allObjects()].filter((o) => {
        try {
          const t = JSON.parse(readFileSync(new CheckpointStore(h.dataDir).objectPath(o.hash), 'utf8')) as Tree;
          return typeof t.entries === 'object' && !('roots' in t);
        } catch {
          return false;
        }
      }).length;
    await h.turn(path, 'edit');
    expect(trees()).toBe(1);
    const list = idx(await h.c.readText(`${path}/checkpoint/idx`));
    expect(list.map((l) => l[3])).toEqual(['1', '1']);
    expect(await h.c.readText(`${path}/checkpoint/2/files`)).toBe('M\ta.txt\n');
  });

  it('a whole directory the user changed since is one conflict, never overwritten; keep and force decide', async () => {
    const { ws, ctl, shell } = await setup();
    await shell('build', 'echo agent > node_modules/dep/index.js && echo beta > a.txt');
    // The user reinstalls a package after the round.
    writeFileSync(join(ws, 'node_modules', 'dep', 'package.json'), '{"name":"dep","version":"2"}\n');
    await expect(ctl('rewind 1')).rejects.toThrow(/conflict\tnode_modules\/\n/);
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('agent\n');
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('beta\n');
    const kept = await ctl('rewind 1 keep');
    expect(kept).toContain('conflict\tnode_modules/\tkept\n');
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('alpha\n');
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'package.json'), 'utf8')).toBe(
      '{"name":"dep","version":"2"}\n',
    );
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('agent\n');
    const forced = await ctl('rewind 1 force');
    expect(forced).toContain('conflict\tnode_modules/\toverwritten\n');
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'index.js'), 'utf8')).toBe('module.exports = 1;\n');
    expect(readFileSync(join(ws, 'node_modules', 'dep', 'package.json'), 'utf8')).toBe('{"name":"dep"}\n');
  });

  it('a rewind to before the directory existed removes it; one to before its removal brings it back whole', async () => {
    const { h, ws, path, ctl, shell } = await setup('vendor');
    await shell(
      'vendor',
      'mkdir -p vendor/x && echo v > vendor/x/v.txt && ln -s ../../a.txt vendor/x/l',
      'rm -rf vendor',
    );
    expect(await h.c.readText(`${path}/checkpoint/1/files`)).toBe('A\tvendor/ (whole: 2 files changed, 2 bytes)\n');
    expect(await h.c.readText(`${path}/checkpoint/2/files`)).toBe('D\tvendor/ (whole: 2 files changed, 2 bytes)\n');
    await ctl('rewind 2');
    expect(readFileSync(join(ws, 'vendor', 'x', 'v.txt'), 'utf8')).toBe('v\n');
    expect(readlinkSync(join(ws, 'vendor', 'x', 'l'))).toBe('../../a.txt');
    expect(await ctl('rewind 1')).toContain('removed\tvendor/\n');
    expect(() => lstatSync(join(ws, 'vendor'))).toThrow();
  });
});

describe('the whole-directory walk', () => {
  it('does not walk a whole directory nothing under it changed, and the watched result equals a full walk', async () => {
    const dir = testDir('ollie-whole-scan-');
    const root = join(dir, 'ws');
    mkdirSync(join(root, 'node_modules', 'p', 'q'), { recursive: true });
    for (let i = 0; i < 50; i++) writeFileSync(join(root, 'node_modules', 'p', `f${i}`), `f${i}\n`);
    writeFileSync(join(root, 'node_modules', 'p', 'q', 'deep'), 'deep\n');
    writeFileSync(join(root, 'top'), 'top\n');
    let treesRead = 0;
    class Counting extends CheckpointStore {
      override tree(hash: string): Tree {
        treesRead++;
        return super.tree(hash);
      }
    }
    const store = new Counting(join(dir, 'data'));
    const rules = { skip: [], whole: ['node_modules'], maxFile: 1 << 20 };
    const watch = new DirWatch();
    const first = await scan([root], rules, store, undefined, watch);
    const nm = first.manifest.roots[root]!['node_modules']!;
    expect(nm.t).toBe('w');
    expect(Object.keys(first.manifest.roots[root]!).sort()).toEqual(['node_modules', 'top']);
    // A change beside it: the root is read again, the whole directory is not (its tree is not even loaded).
    writeFileSync(join(root, 'top'), 'top 2\n');
    writeFileSync(join(root, 'new'), 'new\n');
    const r1 = await rescan(first.manifest, rules, store, await watch.take(), watch);
    expect(r1.manifest.roots[root]!['node_modules']).toBe(nm);
    expect(treesRead).toBe(0);
    // A change deep under it: read again, one new tree, equal to what a full walk finds.
    writeFileSync(join(root, 'node_modules', 'p', 'q', 'deep'), 'deeper\n');
    const r2 = await rescan(r1.manifest, rules, store, await watch.take(), watch);
    const full = await scan([root], rules, new CheckpointStore(join(dir, 'data2')), undefined);
    const w2 = r2.manifest.roots[root]!['node_modules']!;
    expect(w2).not.toBe(nm);
    expect(sameEntry(w2, full.manifest.roots[root]!['node_modules'])).toBe(true);
    expect(sameEntry(w2, nm)).toBe(false);
    expect(r2.bytes).toBeGreaterThan(0);
    // Nothing changed: nothing read, nothing stored.
    const r3 = await rescan(r2.manifest, rules, store, await watch.take(), watch);
    expect(r3.dirty).toBe(false);
    expect(r3.bytes).toBe(0);
    // Without a watch, every checkpoint re-reads its metadata, but an unchanged one stores nothing again and
    // keeps the same entry.
    const unwatched: Manifest = r2.manifest;
    const r4 = await scan([root], rules, store, unwatched);
    expect(r4.bytes).toBe(0);
    expect(r4.manifest.roots[root]!['node_modules']).toEqual(w2);
    watch.close();
  });
});

describe('the watched walk with whole directories', () => {
  it.each([5, 42, 999])('equals a full walk after random changes in and beside them (seed %i)', async (seed) => {
    const rules = { skip: ['.cache'], whole: ['node_modules'], maxFile: 1 << 20 };
    const dirs = [
      '',
      'a',
      'node_modules',
      'node_modules/p',
      'node_modules/p/q',
      'a/node_modules',
      'node_modules/.cache',
    ];
    const opts = { prefix: 'ollie-whole-rand-', seed, dirs, rules, rounds: 20, most: 5 };
    await watchedRounds(opts, async ({ round, dir, root, store, rescanned }) => {
      const fullStore = new CheckpointStore(join(dir, `full${round}`));
      const full = (await scan([root], rules, fullStore, undefined)).manifest;
      const x = rescanned.manifest.roots[root]!;
      const y = full.roots[root]!;
      const diffs = [...new Set([...Object.keys(x), ...Object.keys(y)])].filter((k) => !sameEntry(x[k], y[k]));
      const show = (e: Entry | undefined, st: CheckpointStore): unknown =>
        e?.t === 'w' ? { ...e, tree: Object.keys(st.tree(e.tree).entries).sort() } : e;
      expect(
        diffs.map((k) => `${k}: ${JSON.stringify(show(x[k], store))} vs ${JSON.stringify(show(y[k], fullStore))}`),
        `round ${round}`,
      ).toEqual([]);
    });
  });
});

describe('a whole directory with more directories than its share of watches', () => {
  it('is read at every checkpoint, while the rest of the roots stays watched', async () => {
    const dir = testDir('ollie-whole-partial-');
    const root = join(dir, 'ws');
    for (let p = 0; p < 12; p++) mkdirSync(join(root, 'node_modules', `p${p}`), { recursive: true });
    writeFileSync(join(root, 'node_modules', 'p11', 'f'), 'one\n');
    mkdirSync(join(root, 'src'));
    writeFileSync(join(root, 'src', 'a'), 'a\n');
    const store = new CheckpointStore(join(dir, 'data'));
    const rules = { skip: [], whole: ['node_modules'], maxFile: 1 << 20 };
    // 16 watches: the whole directory may take 8, it needs 13.
    const watch = new DirWatch(16);
    const first = await scan([root], rules, store, undefined, watch);
    expect(watch.partial.has(join(root, 'node_modules'))).toBe(true);
    expect(watch.broken).toBe(false);
    // A change under it that no watch reports is still found, since it is read again each time.
    writeFileSync(join(root, 'node_modules', 'p11', 'f'), 'two\n');
    const r = await rescan(first.manifest, rules, store, await watch.take(), watch);
    const full = await scan([root], rules, new CheckpointStore(join(dir, 'data2')), undefined);
    expect(sameEntry(r.manifest.roots[root]!['node_modules'], full.manifest.roots[root]!['node_modules'])).toBe(true);
    expect(sameEntry(r.manifest.roots[root]!['node_modules'], first.manifest.roots[root]!['node_modules'])).toBe(false);
    // The rest stays watched: a change beside it is seen from its event.
    writeFileSync(join(root, 'src', 'a'), 'b\n');
    const changed = await watch.take();
    expect(changed.has(join(root, 'src'))).toBe(true);
    expect(watch.broken).toBe(false);
    watch.close();
  });
});

describe('the whole-directory restore', () => {
  it('rebuilds a directory of hundreds of directories (more than it keeps descriptors open for) and swaps it in', async () => {
    const dir = testDir('ollie-whole-restore-');
    const root = join(dir, 'ws');
    for (let p = 0; p < 150; p++) {
      mkdirSync(join(root, 'node_modules', `p${p}`, 'lib'), { recursive: true });
      writeFileSync(join(root, 'node_modules', `p${p}`, 'lib', 'i.js'), `${p}\n`);
    }
    mkdirSync(join(root, 'node_modules', 'p0', '.git'));
    writeFileSync(join(root, 'node_modules', 'p0', '.git', 'HEAD'), 'ref\n');
    const store = new CheckpointStore(join(dir, 'data'));
    const rules = { skip: [], whole: ['node_modules'], maxFile: 1 << 20 };
    const before = tree(root);
    const a = (await scan([root], rules, store, undefined)).manifest;
    for (let p = 0; p < 150; p += 3) writeFileSync(join(root, 'node_modules', `p${p}`, 'lib', 'i.js'), 'changed\n');
    rmSync(join(root, 'node_modules', 'p7'), { recursive: true });
    mkdirSync(join(root, 'node_modules', 'extra', 'x'), { recursive: true });
    const b = (await scan([root], rules, store, a)).manifest;
    const want = a.roots[root]!;
    const cur = b.roots[root]!;
    expect(sameEntry(want['node_modules'], cur['node_modules'])).toBe(false);
    const r = applyChanges(
      root,
      [{ rel: 'node_modules', entry: want['node_modules'] }],
      cur,
      (h) => store.get(h),
      (h) => store.tree(h),
    );
    expect(r.failed).toEqual([]);
    expect(r.written).toEqual(['node_modules']);
    // Byte for byte, .git inside it moved over as it was, no temporary directory left.
    expect(tree(root)).toEqual(before);
    expect(readdirSync(root)).toEqual(['node_modules']);
  });
});

describe('whole directories and the limits', () => {
  it('count towards max_total; a file over max_file is listed, not stored, and a rewind carries the one there over', async () => {
    const dir = testDir('ollie-whole-limits-');
    const root = join(dir, 'ws');
    mkdirSync(join(root, 'node_modules', 'p'), { recursive: true });
    writeFileSync(join(root, 'node_modules', 'p', 'small.js'), 'small\n');
    writeFileSync(join(root, 'node_modules', 'p', 'big.bin'), Buffer.alloc(4096, 7));
    const store = new CheckpointStore(join(dir, 'data'));
    await expect(
      scan([root], { skip: [], whole: ['node_modules'], maxFile: 1 << 20, maxTotal: 1024 }, store, undefined),
    ).rejects.toThrow(/holds more than 1024 bytes of files: not checkpointed/);
    const rules = { skip: [], whole: ['node_modules'], maxFile: 1024 };
    const a = (await scan([root], rules, store, undefined)).manifest;
    const w = a.roots[root]!['node_modules']!;
    expect(w.t === 'w' && store.tree(w.tree).entries['p/big.bin']).toMatchObject({ t: 'f', big: true, size: 4096 });
    expect(w.t === 'w' && (store.tree(w.tree).entries['p/big.bin'] as { h?: string }).h).toBeUndefined();
    writeFileSync(join(root, 'node_modules', 'p', 'small.js'), 'changed\n');
    writeFileSync(join(root, 'node_modules', 'p', 'big.bin'), Buffer.alloc(5000, 8));
    const b = (await scan([root], rules, store, a)).manifest;
    const r = applyChanges(
      root,
      [{ rel: 'node_modules', entry: w }],
      b.roots[root]!,
      (h) => store.get(h),
      (h) => store.tree(h),
    );
    expect(r.failed).toEqual([]);
    expect(readFileSync(join(root, 'node_modules', 'p', 'small.js'), 'utf8')).toBe('small\n');
    // Never stored, so left as it is now.
    expect(readFileSync(join(root, 'node_modules', 'p', 'big.bin'))).toEqual(Buffer.alloc(5000, 8));
  });
});

describe('checkpoint.whole in the policy', () => {
  const ctx = { configDir: '/c', dataDir: '/d', cwd: '/w', home: '/h', runtimeDir: '/r', tmpDir: '/t' };
  const parse = (yaml: string) => parsePolicyFile('/c/sandbox.yaml', yaml, ctx);

  it('takes names, relative paths and globs, and names the file and line of a bad value', () => {
    expect(parse('checkpoint:\n  whole: [node_modules, vendor/lib, "out/**"]\n').checkpoint?.whole).toEqual([
      'node_modules',
      'vendor/lib',
      'out/**',
    ]);
    expect(() => parse('checkpoint:\n  whole:\n    - node_modules\n    - /abs\n')).toThrow(
      /^\/c\/sandbox\.yaml:4: checkpoint\.whole: "\/abs" is not a name or relative path/,
    );
    expect(() => parse('checkpoint:\n  whole:\n    - a/../b\n')).toThrow(
      /sandbox\.yaml:3: checkpoint\.whole: "a\/\.\.\/b"/,
    );
    expect(() => parse('checkpoint:\n  whole: node_modules\n')).toThrow(
      /sandbox\.yaml:2: checkpoint\.whole: must be a list/,
    );
    expect(() => parse('checkpoint:\n  whole: [ok, .git]\n')).toThrow(
      /sandbox\.yaml:2: checkpoint\.whole: "\.git": \.git is never checkpointed nor rewound/,
    );
    expect(() => parse('checkpoint:\n  whole: [""]\n')).toThrow(/checkpoint\.whole: "" is not a name/);
    expect(() => parse('checkpoint:\n  hole: [x]\n')).toThrow(/unknown setting \(known: skip, whole,/);
  });

  it('a project file adds whole names to the base list, as it adds skip names', () => {
    const base = baseCheckpointRules({ whole: ['vendor'] });
    expect(baseCheckpointRules(undefined).whole).toEqual([]);
    expect(narrowCheckpointRules(base, { whole: ['node_modules', 'vendor'] }, 'p').whole).toEqual([
      'vendor',
      'node_modules',
    ]);
  });
});
