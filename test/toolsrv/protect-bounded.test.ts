/**
 * The bounds on what protectedPaths looks at (src/toolsrv/sandbox/protected.ts, git-config-paths.ts): it runs at
 * every command in toolsrv's one thread, over files an agent writes. Past a real repository's counts it refuses
 * (what it would leave out could not be kept read-only) or keeps the whole directory read-only.
 */
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_NAMED } from '../../src/toolsrv/sandbox/git-config-paths.js';
import { MAX_ENTRIES, protectedPaths } from '../../src/toolsrv/sandbox/protected.js';

const O = { gitHooks: true, startupFiles: false };

function workspace(): { ws: string; home: string } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'ollie-protect-bounded-')));
  const ws = join(dir, 'ws');
  mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
  writeFileSync(join(ws, '.git', 'config'), '[core]\n\tbare = false\n');
  mkdirSync(join(dir, 'home'));
  return { ws, home: join(dir, 'home') };
}

describe('protectedPaths on a repository filled by an agent', () => {
  it('refuses a .git/config that names more included files than it looks at', () => {
    const { ws, home } = workspace();
    writeFileSync(
      join(ws, '.git', 'config'),
      Array.from({ length: MAX_NAMED + 1 }, (_, i) => `[include]\n\tpath = ../inc${i}\n`).join(''),
    );
    expect(() => protectedPaths([ws], home, O)).toThrow(new RegExp(`names more than ${MAX_NAMED} included files`));
    writeFileSync(join(ws, '.git', 'config'), '[include]\n\tpath = ../inc\n'.repeat(MAX_NAMED + 1));
    expect(() => protectedPaths([ws], home, O)).toThrow(new RegExp(`names more than ${MAX_NAMED}`));
  });

  it('refuses a hooks directory with more entries than it looks at (each link may lead into the workspace)', () => {
    const { ws, home } = workspace();
    writeFileSync(join(ws, 'script'), '#!/bin/sh\n');
    for (let i = 0; i <= MAX_ENTRIES; i++) symlinkSync('../../script', join(ws, '.git', 'hooks', `h${i}`));
    expect(() => protectedPaths([ws], home, O)).toThrow(new RegExp(`hooks holds more than ${MAX_ENTRIES} entries`));
  });

  it('keeps .git/worktrees read-only as a whole past a repository count of entries', () => {
    const { ws, home } = workspace();
    for (let i = 0; i < 3; i++) {
      mkdirSync(join(ws, '.git', 'worktrees', `w${i}`), { recursive: true });
      writeFileSync(join(ws, '.git', 'worktrees', `w${i}`, 'commondir'), '../..\n');
    }
    const few = protectedPaths([ws], home, O);
    expect(few.protect).toContain(join(ws, '.git', 'worktrees', 'w0', 'commondir'));
    expect(few.protect).not.toContain(join(ws, '.git', 'worktrees'));
    for (let i = 3; i <= MAX_ENTRIES; i++) writeFileSync(join(ws, '.git', 'worktrees', `f${i}`), '');
    const many = protectedPaths([ws], home, O);
    expect(many.protect).toContain(join(ws, '.git', 'worktrees'));
    expect(many.protect.length + many.pin.length).toBeLessThan(10);
  });
});
