import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { protectedPaths } from '../../src/toolsrv/sandbox/protected.js';
import { testDir } from '../helpers/temp-dir.js';

const GIT_ONLY = { gitHooks: true, startupFiles: false };

describe('protectedPaths', () => {
  it("takes a relative core.hooksPath of the user's ~/.gitconfig as relative to each repository", () => {
    const dir = testDir('ollie-protected-');
    const home = join(dir, 'home');
    const ws = join(dir, 'ws');
    mkdirSync(home);
    mkdirSync(join(ws, '.git'), { recursive: true });
    writeFileSync(join(home, '.gitconfig'), '[core]\n\thooksPath = .githooks\n');
    const p = protectedPaths([ws], home, GIT_ONLY);
    expect(p.protect).toContain(join(ws, '.githooks'));
    expect(existsSync(join(ws, '.githooks'))).toBe(true);
  });

  it('pins the directories down to what a configuration names, and to a hook link target', () => {
    const dir = testDir('ollie-protected-');
    const ws = join(dir, 'ws');
    mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
    mkdirSync(join(ws, 'a', 'b'), { recursive: true });
    mkdirSync(join(ws, 'scripts', 'git'), { recursive: true });
    writeFileSync(join(ws, 'a', 'b', 'inc'), '');
    writeFileSync(join(ws, 'scripts', 'git', 'pre-commit'), '');
    symlinkSync('../../scripts/git/pre-commit', join(ws, '.git', 'hooks', 'pre-commit'));
    writeFileSync(join(ws, '.git', 'config'), '[include]\n\tpath = ../a/b/inc\n');
    const p = protectedPaths([ws], join(dir, 'nohome'), GIT_ONLY);
    expect(p.protect).toEqual(
      expect.arrayContaining([join(ws, 'a', 'b', 'inc'), join(ws, '.git', 'hooks', 'pre-commit')]),
    );
    expect(p.pin).toEqual(
      expect.arrayContaining([join(ws, 'a', 'b'), join(ws, 'a'), join(ws, 'scripts', 'git'), join(ws, 'scripts')]),
    );
    expect(p.pin).not.toContain(ws);
  });
});
