/**
 * Files beneath a writable root that stay read-only for tools, because the user runs them later outside any
 * sandbox: a hook planted in a repository's `.git/hooks` (or a `core.fsmonitor`, `core.hooksPath`, alias or
 * filter written into `.git/config`) runs as the user at their next `git commit` or `git status`; a line added to
 * `~/.bashrc` runs in their next terminal. Landlock only adds rights, so the helper keeps these read-only with a
 * read-only bind mount in the tool's own mount namespace (`--protect`), and makes their parent directory a mount
 * point (`--pin`) so that it cannot be renamed away and replaced by a copy (native/ollie-sandbox.c).
 *
 * Only what exists can be bound: a repository's missing `hooks` directory is created (empty, as `git init` would
 * have made it) so that it can be protected; a startup file that does not exist is not protected, and creating
 * it stays possible where the home is writable.
 */
import { lstatSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Startup files of a home: run by shells, the desktop session, systemd and git, as the user, outside Ollie. */
export const STARTUP_FILES = [
  '.bashrc',
  '.bash_profile',
  '.bash_login',
  '.bash_logout',
  '.profile',
  '.zshrc',
  '.zshenv',
  '.zprofile',
  '.zlogin',
  '.zlogout',
  '.config/fish',
  '.config/autostart',
  '.config/systemd',
  '.config/environment.d',
  '.config/git',
  '.gitconfig',
  '.local/bin',
  '.xprofile',
  '.xsessionrc',
  '.pam_environment',
];

export interface Protected {
  /** Kept read-only. */
  protect: string[];
  /** Made mount points (their parents, inside a writable root), so they cannot be renamed or removed. */
  pin: string[];
}

const within = (p: string, dir: string): boolean => dir === '/' || p === dir || p.startsWith(`${dir}/`);

function kind(p: string): 'dir' | 'file' | 'link' | undefined {
  try {
    const st = lstatSync(p);
    return st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'link' : 'file';
  } catch {
    return undefined;
  }
}

/**
 * What to protect for tools that may write `writable` (canonical paths), in a home `home` (canonical). A
 * repository counts where its `.git` is at a writable root; one whose `.git` lies above the roots is not writable
 * anyway, and nested repositories deeper down are not looked for (it would take a walk of the workspace).
 */
export function protectedPaths(
  writable: string[],
  home: string,
  o: { gitHooks: boolean; startupFiles: boolean },
): Protected {
  const protect: string[] = [];
  const pin: string[] = [];
  if (o.gitHooks) {
    for (const root of new Set(writable)) {
      const git = join(root, '.git');
      const k = kind(git);
      if (k === 'file' || k === 'link') {
        // A worktree's or submodule's `.git` file names the repository git uses: rewritten, it would name one
        // the agent made, hooks included.
        protect.push(git);
      } else if (k === 'dir') {
        const hooks = join(git, 'hooks');
        if (kind(hooks) === undefined) {
          try {
            mkdirSync(hooks, { mode: 0o755 });
          } catch {
            // Not ours to make (a read-only repository): nothing there for a tool to plant into either.
          }
        }
        pin.push(git);
        protect.push(hooks, join(git, 'config'));
      }
    }
  }
  if (o.startupFiles && writable.some((w) => within(home, w))) {
    for (const f of STARTUP_FILES) {
      const p = join(home, f);
      if (kind(p) === undefined) continue;
      protect.push(p);
      const parent = dirname(p);
      if (parent !== home) pin.push(parent);
    }
  }
  return { protect: [...new Set(protect)], pin: [...new Set(pin)] };
}
