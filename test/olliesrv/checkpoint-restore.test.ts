/**
 * The restore step on its own: a directory swapped for a link between the walk and the write (a background
 * process of the agent's could do that) is refused, not written through; `.git` paths are refused outright.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { applyChanges } from '../../src/olliesrv/checkpoint/restore.js';
import { sha256 } from '../../src/olliesrv/checkpoint/store.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('applyChanges', () => {
  it('refuses to write through a directory swapped for a link after the walk', () => {
    dir = mkdtempSync(join(tmpdir(), 'ollie-restore-'));
    const root = join(dir, 'ws');
    const outside = join(dir, 'outside');
    mkdirSync(root);
    mkdirSync(outside);
    // The walk saw ws/sub as a directory; it is a link to outside by the time the rewind writes.
    symlinkSync(outside, join(root, 'sub'));
    const data = Buffer.from('restored\n');
    const h = sha256(data);
    const r = applyChanges(
      root,
      [{ rel: 'sub/f', entry: { t: 'f', mode: 0o644, size: data.length, mtime: 0, ctime: 0, ino: 0, h } }],
      { sub: { t: 'd', mode: 0o755 } },
      () => data,
    );
    expect(r.written).toEqual([]);
    expect(r.failed[0]).toContain('sub/f: refused: sub is not a directory');
    expect(existsSync(join(outside, 'f'))).toBe(false);
  });

  it('replaces a hard-linked or linked file instead of writing through it', () => {
    dir = mkdtempSync(join(tmpdir(), 'ollie-restore-'));
    const root = join(dir, 'ws');
    mkdirSync(root);
    writeFileSync(join(dir, 'target'), 'outside\n');
    symlinkSync(join(dir, 'target'), join(root, 'a.txt'));
    const data = Buffer.from('mine\n');
    const r = applyChanges(
      root,
      [
        {
          rel: 'a.txt',
          entry: { t: 'f', mode: 0o644, size: data.length, mtime: 0, ctime: 0, ino: 0, h: sha256(data) },
        },
      ],
      { 'a.txt': { t: 'l', target: join(dir, 'target') } },
      () => data,
    );
    expect(r.written).toEqual(['a.txt']);
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('mine\n');
    expect(readFileSync(join(dir, 'target'), 'utf8')).toBe('outside\n');
  });

  it('never writes into .git', () => {
    dir = mkdtempSync(join(tmpdir(), 'ollie-restore-'));
    expect(() =>
      applyChanges(dir!, [{ rel: '.git/hooks/x', entry: { t: 'l', target: '/bin/sh' } }], {}, () => Buffer.alloc(0)),
    ).toThrow(/refused/);
    expect(existsSync(join(dir, '.git'))).toBe(false);
  });
});
