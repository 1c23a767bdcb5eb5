/**
 * A directory tree changed at random, seeded so a failure can be replayed: what the watched-walk tests compare
 * against a full walk, round after round.
 */
import { appendFileSync, chmodSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { rescan, scan, type ScanResult, type ScanRules } from '../../src/olliesrv/checkpoint/scan.js';
import { CheckpointStore, type Manifest } from '../../src/olliesrv/checkpoint/store.js';
import { DirWatch } from '../../src/olliesrv/checkpoint/watch.js';
import { testDir } from '../helpers/temp-dir.js';

/** A small deterministic PRNG (mulberry32). */
export function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class RandomTree {
  private readonly rand: () => number;
  /** The directories made so far ('' is the root), some of which a change may since have removed. */
  private readonly dirs: string[];
  private n = 0;

  /** Makes `dirs` under `root` and spreads `files` files over them. */
  constructor(
    readonly root: string,
    seed: number,
    dirs: string[],
    files = 40,
  ) {
    this.rand = rng(seed);
    this.dirs = [...dirs];
    for (const d of this.dirs) mkdirSync(join(root, d), { recursive: true });
    for (; this.n < files; this.n++) writeFileSync(join(root, this.pick(this.dirs), `f${this.n}`), `file ${this.n}\n`);
  }

  private pick<T>(xs: T[]): T {
    return xs[Math.floor(this.rand() * xs.length)]!;
  }

  /**
   * One to `most` changes: files written, appended, removed, chmodded, swapped for links or directories;
   * directories made (two deep), removed, swapped for files or made again empty.
   */
  change(most: number, round: number): void {
    const root = this.root;
    for (let k = 0; k < 1 + Math.floor(this.rand() * most); k++) {
      const d = this.pick(this.dirs);
      const p = join(root, d, `f${Math.floor(this.rand() * this.n)}`);
      try {
        switch (Math.floor(this.rand() * 9)) {
          case 0:
            writeFileSync(join(root, d, `f${this.n++}`), `new ${this.n}\n`);
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
            const nd = `${d ? `${d}/` : ''}d${this.n++}`;
            mkdirSync(join(root, nd));
            writeFileSync(join(root, nd, 'inner'), 'x');
            mkdirSync(join(root, nd, 'deep'));
            writeFileSync(join(root, nd, 'deep', 'y'), 'y');
            this.dirs.push(nd);
            break;
          }
          case 5: {
            const victim = this.pick(this.dirs.filter((x) => x !== ''));
            rmSync(join(root, victim), { recursive: true, force: true });
            if (this.rand() < 0.5) writeFileSync(join(root, victim), 'now a file');
            else mkdirSync(join(root, victim), { recursive: true });
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
  }
}

/** One round of `watchedRounds`: the manifest before it and what the watched rescan made of the changes. */
export interface WatchedRound {
  round: number;
  /** The test's directory; the tree is `root` (its `ws`), the store's data is its `data`. */
  dir: string;
  root: string;
  store: CheckpointStore;
  prev: Manifest;
  rescanned: ScanResult;
}

export interface WatchedRoundsOptions {
  prefix: string;
  seed: number;
  /** The directories the tree starts with ('' is its root). */
  dirs: string[];
  rules: ScanRules;
  rounds: number;
  /** The most changes in one round. */
  most: number;
}

/**
 * Makes a random tree and walks it watched; then, round after round, changes it at random and brings the manifest
 * up to date from the directories the watch reports; `check` judges each round. The watch never breaks.
 */
export async function watchedRounds(
  opts: WatchedRoundsOptions,
  check: (r: WatchedRound) => void | Promise<void>,
): Promise<void> {
  const dir = testDir(opts.prefix);
  const root = join(dir, 'ws');
  const store = new CheckpointStore(join(dir, 'data'));
  const changes = new RandomTree(root, opts.seed, opts.dirs);
  const watch = new DirWatch();
  let prev = (await scan([root], opts.rules, store, undefined, watch)).manifest;
  for (let round = 0; round < opts.rounds; round++) {
    changes.change(opts.most, round);
    const rescanned = await rescan(prev, opts.rules, store, await watch.take(), watch);
    await check({ round, dir, root, store, prev, rescanned });
    prev = rescanned.manifest;
  }
  expect(watch.broken).toBe(false);
  watch.close();
}
