/**
 * The watched walk must see what a full walk sees: after random changes (files written, appended, removed,
 * chmodded; directories made, removed, swapped for files or links; files swapped for directories), the manifest
 * brought up to date from the changed directories equals a fresh full walk, entry for entry.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { watchedRounds } from './random-tree.js';
import { testDir } from '../helpers/temp-dir.js';
import { sameEntry, scan } from '../../src/olliesrv/checkpoint/scan.js';
import { CheckpointStore, type Manifest } from '../../src/olliesrv/checkpoint/store.js';

function same(a: Manifest, b: Manifest): string[] {
  const diffs: string[] = [];
  for (const root of new Set([...Object.keys(a.roots), ...Object.keys(b.roots)])) {
    const x = a.roots[root] ?? {};
    const y = b.roots[root] ?? {};
    for (const k of new Set([...Object.keys(x), ...Object.keys(y)]))
      if (!sameEntry(x[k], y[k])) diffs.push(`${k}: ${JSON.stringify(x[k])} vs ${JSON.stringify(y[k])}`);
  }
  return diffs;
}

describe('the watched walk', () => {
  it.each([20, 3, 77, 1234])('equals a full walk after random changes, round after round (seed %i)', async (seed) => {
    const rules = { skip: ['node_modules'], maxFile: 1 << 20 };
    let prevHash: string | undefined;
    const opts = {
      prefix: 'ollie-scan-',
      seed,
      dirs: ['', 'a', 'a/b', 'c', 'node_modules'],
      rules,
      rounds: 25,
      most: 6,
    };
    await watchedRounds(opts, async ({ round, dir, root, store, prev, rescanned }) => {
      prevHash ??= store.putManifest(prev).hash;
      const full = (await scan([root], rules, store, undefined)).manifest;
      expect(same(rescanned.manifest, full), `round ${round}`).toEqual([]);
      // Stored as the delta the rescan found, it reads back as the same manifest from a fresh store.
      prevHash = store.putManifest(rescanned.manifest, { hash: prevHash, manifest: prev }, rescanned.delta).hash;
      expect(same(new CheckpointStore(join(dir, 'data')).manifest(prevHash), full), `round ${round} stored`).toEqual(
        [],
      );
    });
  });
});

describe('manifests stored as deltas', () => {
  it('read back whole from a fresh store, down a chain longer than the limit, and small when little changed', async () => {
    const dir = testDir('ollie-manifest-');
    const root = join(dir, 'ws');
    mkdirSync(root);
    for (let i = 0; i < 200; i++) writeFileSync(join(root, `f${i}`), `file ${i}\n`);
    const store = new CheckpointStore(join(dir, 'data'));
    const rules = { skip: [], maxFile: 1 << 20 };
    let prev: { hash: string; manifest: Manifest } | undefined;
    const saved: Array<{ hash: string; manifest: Manifest; bytes: number }> = [];
    for (let round = 0; round < 40; round++) {
      writeFileSync(join(root, `f${round}`), `changed in round ${round}\n`);
      if (round % 7 === 3) rmSync(join(root, `f${round + 100}`));
      const m = (await scan([root], rules, store, prev?.manifest)).manifest;
      const put = store.putManifest(m, prev);
      saved.push({ ...put, manifest: m });
      prev = { hash: put.hash, manifest: m };
    }
    // A whole manifest of 200 entries is kilobytes; one round's delta, a few hundred bytes.
    expect(saved[0]!.bytes).toBeGreaterThan(10_000);
    expect(saved[5]!.bytes).toBeLessThan(1000);
    const fresh = new CheckpointStore(join(dir, 'data'));
    for (const s of saved) expect(same(fresh.manifest(s.hash), s.manifest)).toEqual([]);
    expect(fresh.chain(saved[39]!.hash).length).toBeLessThanOrEqual(33);
  });
});
