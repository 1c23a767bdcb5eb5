import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gitConfigPaths } from '../../src/toolsrv/sandbox/git-config-paths.js';
import { testDir } from '../helpers/temp-dir.js';

describe('gitConfigPaths', () => {
  it("reads includes and core.hooksPath in git's syntax, nested includes relative to their file", () => {
    const dir = testDir('ollie-git-config-');
    writeFileSync(
      join(dir, 'config'),
      [
        '[Include]',
        '  PATH = "a b/inc" ; a comment',
        '[includeIf "gitdir:~/work/"] path = ~/extra',
        '[core] hooksPath = "hooks\\\\dir" # comment',
        '[core "x"]',
        '  hookspath = another section',
        '[alias]',
        '  path = not/an/include',
      ].join('\n'),
    );
    writeFileSync(join(dir, 'nested'), '');
    mkdirSync(join(dir, 'a b'));
    writeFileSync(join(dir, 'a b', 'inc'), '[include]\n\tpath = ../nested\n[core]\n\thooksPath=~/h\n');
    const r = gitConfigPaths(join(dir, 'config'), '/home/u');
    expect(r.includes).toEqual([join(dir, 'a b', 'inc'), join(dir, 'nested'), '/home/u/extra']);
    expect(r.hooksPaths).toEqual(['/home/u/h', 'hooks\\dir']);
  });

  it('stops at a cycle of includes and names nothing for a missing file', () => {
    const dir = testDir('ollie-git-config-');
    writeFileSync(join(dir, 'a'), '[include]\n\tpath = b\n');
    writeFileSync(join(dir, 'b'), '[include]\n\tpath = a\n');
    expect(gitConfigPaths(join(dir, 'a'), '/h').includes).toEqual([join(dir, 'b'), join(dir, 'a')]);
    expect(gitConfigPaths(join(dir, 'missing'), '/h')).toEqual({ includes: [], hooksPaths: [], worktreeConfig: false });
  });

  it('reads extensions.worktreeConfig, a key alone being true', () => {
    const dir = testDir('ollie-git-config-');
    writeFileSync(join(dir, 'a'), '[extensions]\n\tworktreeConfig\n');
    writeFileSync(join(dir, 'b'), '[Extensions]\n\tWorktreeConfig = false\n');
    expect(gitConfigPaths(join(dir, 'a'), '/h').worktreeConfig).toBe(true);
    expect(gitConfigPaths(join(dir, 'b'), '/h').worktreeConfig).toBe(false);
  });
});
