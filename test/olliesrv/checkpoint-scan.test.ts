/**
 * The watched walk must see what a full walk sees: after random changes (files written, appended, removed,
 * chmodded; directories made, removed, swapped for files or links; files swapped for directories), the manifest
 * brought up to date from the changed directories equals a fresh full walk, entry for entry.
 */
import { appendFileSync, chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { rescan, sameEntry, scan } from '../../src/olliesrv/checkpoint/scan.js';
import { CheckpointStore, type Manifest } from '../../src/olliesrv/checkpoint/store.js';
import { DirWatch } from '../../src/olliesrv/checkpoint/watch.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** A small deterministic PRNG (mulberry32), so a failure can be replayed. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
    rmSync(dir ?? '/nonexistent', { recursive: true, force: true });
    dir = mkdtempSync(join(tmpdir(), 'ollie-scan-'));
    const root = join(dir, 'ws');
    mkdirSync(root);
    const store = new CheckpointStore(join(dir, 'data'));
    const rules = { skip: ['node_modules'], maxFile: 1 << 20 };
    const rand = rng(seed);
    const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const dirs = ['', 'a', 'a/b', 'c', 'node_modules'];
    for (const d of dirs) mkdirSync(join(root, d), { recursive: true });
    for (let i = 0; i < 40; i++) writeFileSync(join(root, pick(dirs), `f${i}`), `file ${i}\n`);
    const watch = new DirWatch();
    let prev = (await scan([root], rules, store, undefined, watch)).manifest;
    let prevHash = store.putManifest(prev).hash;
    let n = 40;
    for (let round = 0; round < 25; round++) {
      for (let k = 0; k < 1 + Math.floor(rand() * 6); k++) {
        const d = pick(dirs);
        const p = join(root, d, `f${Math.floor(rand() * n)}`);
        try {
          switch (Math.floor(rand() * 9)) {
            case 0:
              writeFileSync(join(root, d, `f${n++}`), `new ${n}\n`);
              break;
            case 1:
              appendFileSync(p, 'more\n');
              break;
            case 2:
              rmSync(p, { recursive: true, force: true });
              break;
            case 3:
              chmodSync(p, 0o600);
              break;
            case 4: {
              const nd = `${d ? `${d}/` : ''}d${n++}`;
              mkdirSync(join(root, nd));
              writeFileSync(join(root, nd, 'inner'), 'x');
              mkdirSync(join(root, nd, 'deep'));
              writeFileSync(join(root, nd, 'deep', 'y'), 'y');
              dirs.push(nd);
              break;
            }
            case 5: {
              const victim = pick(dirs.filter((x) => x !== ''));
              rmSync(join(root, victim), { recursive: true, force: true });
              writeFileSync(join(root, victim), 'now a file');
              break;
            }
            case 6:
              rmSync(p, { recursive: true, force: true });
              symlinkSync('/etc', p);
              break;
            case 7:
              rmSync(p, { recursive: true, force: true });
              mkdirSync(p);
              writeFileSync(join(p, 'z'), 'z');
              break;
            default:
              writeFileSync(p, `rewritten ${round}\n`);
          }
        } catch {
          // the path chosen is not there (or a parent is a file now): the change simply does not happen
        }
      }
      const changed = await watch.take();
      const r = await rescan(prev, rules, store, changed, watch);
      const next = r.manifest;
      const full = (await scan([root], rules, store, undefined)).manifest;
      expect(same(next, full), `round ${round}`).toEqual([]);
      // Stored as the delta the rescan found, it reads back as the same manifest from a fresh store.
      prevHash = store.putManifest(next, { hash: prevHash, manifest: prev }, r.delta).hash;
      expect(same(new CheckpointStore(join(dir, 'data')).manifest(prevHash), full), `round ${round} stored`).toEqual(
        [],
      );
      prev = next;
    }
    expect(watch.broken).toBe(false);
    watch.close();
  });
});

describe('manifests stored as deltas', () => {
  it('read back whole from a fresh store, down a chain longer than the limit, and small when little changed', async () => {
    dir = mkdtempSync(join(tmpdir(), 'ollie-manifest-'));
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
