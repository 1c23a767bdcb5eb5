/**
 * Review attacks on the checkpoint walk (the daemon reads the agent's writable roots with the owner's rights: a
 * confused deputy). A tool's background process keeps running after its round, so it can change the tree while
 * the daemon walks it; these tests make that change at the worst moment, deterministically:
 * - a directory swapped for a link to a directory the sandbox cannot read (a secret dir), after the daemon
 *   learned that the directory changed and before it reads it, must not bring the secret's bytes into the store
 *   (from where the agent's own checkpoint/ID/diff would show them);
 * - a tree moved below another until its paths pass PATH_MAX must not stop every later checkpoint of the
 *   workspace (which would leave the agent's later rounds without a record to review or rewind).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { rescan, scan } from '../../src/olliesrv/checkpoint/scan.js';
import { CheckpointStore, sha256, type Manifest } from '../../src/olliesrv/checkpoint/store.js';
import { DirWatch } from '../../src/olliesrv/checkpoint/watch.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const SECRET = 'PRIVATE KEY of the owner\n';

function setup(): { root: string; secret: string; store: CheckpointStore } {
  dir = mkdtempSync(join(tmpdir(), 'ollie-cp-review-'));
  const root = join(dir, 'ws');
  mkdirSync(join(root, 'd'), { recursive: true });
  writeFileSync(join(root, 'd', 'id_rsa'), 'decoy\n');
  // Outside the roots: a directory no tool may read (~/.ssh).
  const secret = join(dir, 'ssh');
  mkdirSync(secret);
  writeFileSync(join(secret, 'id_rsa'), SECRET);
  return { root, secret, store: new CheckpointStore(join(dir, 'data')) };
}

const hashes = (m: Manifest): string[] =>
  Object.values(m.roots).flatMap((r) => Object.values(r).flatMap((e) => (e.t === 'f' && e.h ? [e.h] : [])));

describe('the checkpoint walk against a tool racing it', () => {
  it('does not read through a directory swapped for a link after its change was noticed', async () => {
    const { root, secret, store } = setup();
    const rules = { skip: [], maxFile: 1 << 20 };
    const watch = new DirWatch();
    const first = (await scan([root], rules, store, undefined, watch)).manifest;
    // A background process writes into d (so the daemon will re-read d), then, once the daemon has taken the
    // events, swaps d for a link to the secret dir.
    writeFileSync(join(root, 'd', 'x'), 'x\n');
    const changed = await watch.take();
    expect(changed.has(join(root, 'd'))).toBe(true);
    renameSync(join(root, 'd'), join(root, 'd.real'));
    symlinkSync(secret, join(root, 'd'));
    const r = await rescan(first, rules, store, changed, watch);
    watch.close();
    expect(hashes(r.manifest)).not.toContain(sha256(Buffer.from(SECRET)));
    expect(store.has(sha256(Buffer.from(SECRET)))).toBe(false);
  });

  it('does not read through a directory swapped for a link in the middle of its walk', async () => {
    const { root, secret, store } = setup();
    // Enough files before id_rsa that the walk gives the event loop a turn inside d (every 20 ms).
    for (let i = 0; i < 400; i++)
      writeFileSync(join(root, 'd', `a${String(i).padStart(4, '0')}`), Buffer.alloc(64 * 1024, i));
    const rules = { skip: [], maxFile: 1 << 20 };
    let swapped = false;
    const swap = (): void => {
      if (swapped) return;
      swapped = true;
      renameSync(join(root, 'd'), join(root, 'd.real'));
      symlinkSync(secret, join(root, 'd'));
    };
    // The swap happens at the walk's first yield (a background process needs no more than that).
    const timer = setImmediate(swap);
    const r = await scan([root], rules, store, undefined);
    clearImmediate(timer);
    expect(swapped).toBe(true);
    expect(hashes(r.manifest)).not.toContain(sha256(Buffer.from(SECRET)));
    expect(store.has(sha256(Buffer.from(SECRET)))).toBe(false);
  });

  it('still checkpoints a workspace in which a tool made a directory deeper than a path may be long', async () => {
    const { root, store } = setup();
    writeFileSync(join(root, 'a.txt'), 'one\n');
    // Two chains of 30 directories of 100 characters, one moved to the bottom of the other: no path given to the
    // kernel is longer than PATH_MAX, the result is.
    const chain = Array(30).fill('x'.repeat(100)).join('/');
    mkdirSync(join(root, 'p', chain), { recursive: true });
    mkdirSync(join(root, 'q', chain), { recursive: true });
    writeFileSync(join(root, 'q', chain, 'f'), 'deep\n');
    execFileSync('mv', [join(root, 'q'), join(root, 'p', chain)]);
    const rules = { skip: [], maxFile: 1 << 20 };
    const r = await scan([root], rules, store, undefined);
    expect(r.manifest.roots[root]!['a.txt']).toMatchObject({ t: 'f' });
    writeFileSync(join(root, 'a.txt'), 'two\n');
    const again = await scan([root], rules, store, r.manifest);
    expect(again.manifest.roots[root]!['a.txt']).toMatchObject({ t: 'f', h: sha256(Buffer.from('two\n')) });
    execFileSync('rm', ['-rf', join(root, 'p')]);
  });
});
