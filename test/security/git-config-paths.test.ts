/**
 * What a protected `.git/config` names outside `.git`. `.git/config` is read-only to tools, but a project may keep
 * part of its configuration in the workspace (`[include] path = ../.gitconfig-project`) or its hooks there
 * (`core.hooksPath = githooks`): the agent writes a `core.fsmonitor` into the included file, or a `pre-commit`
 * into the hooks directory, and the owner's next `git status` or `git commit` runs it. Real olliesrv, toolsrv and
 * sandbox helper; the mock LLM scripts the calls; the owner's git runs outside the sandbox.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { testHarness } from '../olliesrv/agent-harness.js';
import { git, plant, repo, sandboxReady } from './git-workspace.js';

describe.skipIf(!sandboxReady)('a repository whose .git/config names files in the workspace', () => {
  it('keeps an included config file and the core.hooksPath directory read-only; the agent still commits', async () => {
    const h = await testHarness();
    const ws = repo(h.dir, 'ws', (at) => {
      mkdirSync(join(at, 'githooks'));
      mkdirSync(join(at, 'conf'));
      writeFileSync(join(at, '.gitconfig-project'), '[diff]\n\trenames = true\n');
      writeFileSync(join(at, 'conf', 'more'), '# more\n');
      writeFileSync(
        join(at, '.git', 'config'),
        readFileSync(join(at, '.git', 'config'), 'utf8') +
          '[include]\n\tpath = ../.gitconfig-project\n' +
          `[includeIf "gitdir:${at}/"]\n\tpath = "${join(at, 'conf', 'more')}"\n` +
          '[core]\n\thooksPath = githooks\n',
      );
    });
    const pwned = join(h.dir, 'pwned');
    const r = await plant(
      h,
      ws,
      `printf "[core]\\n\\tfsmonitor = \\"touch ${pwned}; false\\"\\n" >> .gitconfig-project && echo wrote`,
      `printf "[core]\\n\\tfsmonitor = \\"touch ${pwned}; false\\"\\n" >> conf/more && echo wrote`,
      `printf "#!/bin/sh\\ntouch ${pwned}\\n" > githooks/pre-commit && chmod +x githooks/pre-commit && echo wrote`,
      'mv githooks githooks-old && mkdir githooks && echo moved',
      // The directory that holds an included file, renamed away and made again with a file of the agent's.
      `mv conf conf-old && mkdir conf && printf "[core]\\n\\tfsmonitor = \\"touch ${pwned}; false\\"\\n" > conf/more && echo moved`,
      'echo x > f && git add f && git -c user.name=a -c user.email=a@x commit -qm work && echo committed',
    );
    for (const i of [0, 1, 2]) expect(r[i], r[i]).toMatch(/Read-only file system/);
    for (const i of [3, 4]) expect(r[i], r[i]).toMatch(/Device or resource busy/);
    expect(r[5]).toContain('committed');
    // The owner's git, outside the sandbox, runs nothing of the agent's.
    git(ws, 'status');
    git(ws, 'commit', '-q', '--allow-empty', '-m', 'owner');
    expect(existsSync(pwned)).toBe(false);
  }, 90_000);

  it("keeps config.worktree (sparse checkout) and a linked worktree's commondir read-only", async () => {
    const h = await testHarness();
    const ws = repo(h.dir, 'ws');
    // The owner's sparse checkout turns extensions.worktreeConfig on; config.worktree is read as configuration.
    git(ws, 'sparse-checkout', 'init', '--cone');
    // And a linked worktree outside the workspace, whose git reads .git/worktrees/other/commondir.
    const other = join(h.dir, 'other');
    git(ws, 'worktree', 'add', '-q', other);
    const pwned = join(h.dir, 'pwned');
    const fsmonitor = `[core]\\n\\tfsmonitor = \\"touch ${pwned}; false\\"\\n`;
    const r = await plant(
      h,
      ws,
      `printf "${fsmonitor}" >> .git/config.worktree && echo wrote`,
      `git init -q --bare evil && printf "${fsmonitor}" >> evil/config && echo ../../../evil > .git/worktrees/other/commondir && echo wrote`,
      'mv .git/worktrees/other .git/worktrees/gone && echo moved',
      `mv .git/worktrees .git/wt-old && mkdir -p .git/worktrees/other && cp -r .git/wt-old/other/. .git/worktrees/other/ && echo ../../../evil > .git/worktrees/other/commondir && echo moved`,
    );
    for (const i of [0, 1]) expect(r[i], r[i]).toMatch(/Read-only file system/);
    for (const i of [2, 3]) expect(r[i], r[i]).toMatch(/Device or resource busy/);
    git(ws, 'status');
    git(other, 'status');
    expect(existsSync(pwned)).toBe(false);
  }, 90_000);

  it('makes a missing config.worktree that the configuration reads, so that the agent cannot create it', async () => {
    const h = await testHarness();
    const ws = repo(h.dir, 'ws', (at) => git(at, 'config', 'extensions.worktreeConfig', 'true'));
    const pwned = join(h.dir, 'pwned');
    const r = await plant(
      h,
      ws,
      `printf "[core]\\n\\tfsmonitor = \\"touch ${pwned}; false\\"\\n" > .git/config.worktree && echo wrote`,
    );
    expect(r[0]).toMatch(/Read-only file system/);
    expect(readFileSync(join(ws, '.git', 'config.worktree'), 'utf8')).toBe('');
    git(ws, 'status');
    expect(existsSync(pwned)).toBe(false);
  }, 90_000);
});
