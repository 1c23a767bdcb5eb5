/**
 * A linked worktree's own configuration. With `extensions.worktreeConfig` on, git run in a linked worktree reads
 * `.git/worktrees/NAME/config.worktree` as configuration — inside the repository's `.git`, which the agent writes
 * wherever it is not kept read-only. Missing there (git makes it only when something is set in it), the agent
 * creates it with a `core.fsmonitor`, and the owner's next `git status` in that worktree runs it; present, what it
 * includes in the workspace is read as configuration too. Real olliesrv, toolsrv and sandbox helper; the mock LLM
 * scripts the calls; the owner's git runs outside the sandbox.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { testHarness } from '../olliesrv/agent-harness.js';
import { git, plant, repo, sandboxReady } from './git-workspace.js';

/**
 * A repository with worktreeConfig on and a linked worktree whose config.worktree includes `.gitconfig-linked`, a
 * file of the workspace.
 */
async function linkedIncluding() {
  const h = await testHarness();
  const linked = join(h.dir, 'linked');
  const ws = repo(h.dir, 'ws', (at) => {
    git(at, 'config', 'extensions.worktreeConfig', 'true');
    git(at, '-c', 'user.name=o', '-c', 'user.email=o@x', 'commit', '-q', '--allow-empty', '-m', 'init');
    git(at, 'worktree', 'add', '-q', linked);
    writeFileSync(join(at, '.gitconfig-linked'), '# the linked worktree\n');
    writeFileSync(
      join(at, '.git', 'worktrees', 'linked', 'config.worktree'),
      '[include]\n\tpath = ../../../.gitconfig-linked\n',
    );
  });
  return { h, linked, ws };
}

describe.skipIf(!sandboxReady)('a linked worktree of a repository with extensions.worktreeConfig on', () => {
  it('cannot be given a config.worktree by the agent', async () => {
    const h = await testHarness();
    const linked = join(h.dir, 'linked');
    const ws = repo(h.dir, 'ws', (at) => {
      git(at, 'config', 'extensions.worktreeConfig', 'true');
      git(at, '-c', 'user.name=o', '-c', 'user.email=o@x', 'commit', '-q', '--allow-empty', '-m', 'init');
      git(at, 'worktree', 'add', '-q', linked);
    });
    const pwned = join(h.dir, 'pwned');
    const r = await plant(
      h,
      ws,
      `printf "[core]\\n\\tfsmonitor = \\"touch ${pwned}; false\\"\\n" > .git/worktrees/linked/config.worktree && echo wrote`,
    );
    expect(r[0]).not.toMatch(/wrote/);
    git(linked, 'status');
    expect(existsSync(pwned)).toBe(false);
  }, 90_000);

  it('keeps what its config.worktree includes in the workspace read-only', async () => {
    const { h, linked, ws } = await linkedIncluding();
    const pwned = join(h.dir, 'pwned');
    const r = await plant(
      h,
      ws,
      `printf "[core]\\n\\tfsmonitor = \\"touch ${pwned}; false\\"\\n" >> .gitconfig-linked && echo wrote`,
    );
    expect(r[0]).not.toMatch(/wrote/);
    expect(readFileSync(join(ws, '.gitconfig-linked'), 'utf8')).toBe('# the linked worktree\n');
    git(linked, 'status');
    expect(existsSync(pwned)).toBe(false);
  }, 90_000);

  it('refuses the call rather than leave those includes unread once .git/worktrees is too full to look at', async () => {
    const { h, linked, ws } = await linkedIncluding();
    const pwned = join(h.dir, 'pwned');
    const r = await plant(
      h,
      ws,
      'for i in $(seq 1 120); do mkdir .git/worktrees/x$i; done; echo filled',
      `printf "[core]\\n\\tfsmonitor = \\"touch ${pwned}; false\\"\\n" >> .gitconfig-linked && echo wrote`,
    );
    expect(r[0]).toMatch(/filled/);
    expect(r[1]).not.toMatch(/wrote/);
    expect(readFileSync(join(ws, '.gitconfig-linked'), 'utf8')).toBe('# the linked worktree\n');
    git(linked, 'status');
    expect(existsSync(pwned)).toBe(false);
  }, 90_000);
});
