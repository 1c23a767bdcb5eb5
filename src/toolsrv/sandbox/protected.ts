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
import { lstatSync, mkdirSync, opendirSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { gitConfigPaths, MAX_NAMED } from './git-config-paths.js';

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

/**
 * The most entries looked at in a hooks directory or in `.git/worktrees`: git runs a few dozen hook names, and a
 * repository has a few linked worktrees. This runs at every command (and every MCP re-check) in toolsrv's one
 * thread, and the agent can fill both (`.git/worktrees` stays writable): each entry costs a lookup and two mounts,
 * and thousands made every call take a second, or its argv too long to start at all.
 */
export const MAX_ENTRIES = 100;

/** At most `max` + 1 entries of `dir` (not following links); undefined when it cannot be read. */
function list(dir: string, max = MAX_ENTRIES): Array<{ name: string; dir: boolean }> | undefined {
  let d;
  try {
    d = opendirSync(dir);
  } catch {
    return undefined;
  }
  const out: Array<{ name: string; dir: boolean }> = [];
  try {
    for (let e = d.readSync(); e && out.length <= max; e = d.readSync())
      out.push({ name: e.name, dir: e.isDirectory() });
  } catch {
    // Unreadable midway: what was read is what there is.
  } finally {
    d.closeSync();
  }
  return out;
}

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
  const writableAt = (p: string): boolean => writable.some((w) => within(p, w));
  // What a protected configuration names inside a writable root: an included file is read as configuration, a
  // hooks directory run; a missing hooks directory is made (empty) so that it can be kept read-only, as .git/hooks.
  // Each directory between it and its writable root is pinned: renamed away, it would be made again with a file of
  // the agent's at the name the configuration gives.
  const pinDown = (p: string): void => {
    const root = writable.filter((w) => within(p, w)).sort((a, b) => b.length - a.length)[0];
    if (root !== undefined) for (let d = dirname(p); d !== root && within(d, root); d = dirname(d)) pin.push(d);
  };
  const keep = (p: string): void => {
    protect.push(p);
    pinDown(p);
  };
  // A hook that is a link to a script the project keeps (`.git/hooks/pre-commit -> ../../scripts/pre-commit`)
  // runs that script: where it lies in a writable root, the link is kept like the hooks directory (below).
  const hookLinks = (dir: string): void => {
    const names = list(dir);
    if (!names) return;
    // Each link may lead into a writable root and must be kept: one too many to look at fails the command.
    if (names.length > MAX_ENTRIES)
      throw new Error(
        `${dir} holds more than ${MAX_ENTRIES} entries (git runs some 30 hook names; git init leaves 14 samples): its links cannot all be kept read-only, so no tool runs here until it holds fewer`,
      );
    for (const { name } of names) {
      const p = join(dir, name);
      if (kind(p) !== 'link') continue;
      try {
        if (writableAt(realpathSync(p))) protect.push(p);
      } catch {
        // A dangling link runs nothing.
      }
    }
  };
  const configNamed = (includes: string[], hooksPaths: string[]): void => {
    for (const inc of includes) if (writableAt(inc) && kind(inc) !== undefined) keep(inc);
    for (const dir of hooksPaths) {
      if (!writableAt(dir)) continue;
      if (kind(dir) === undefined) {
        try {
          mkdirSync(dir, { recursive: true, mode: 0o755 });
        } catch {
          continue;
        }
      }
      keep(dir);
      hookLinks(dir);
    }
  };
  // A repository's own directory: its hooks and configuration, and what its linked worktrees' git reads there.
  const gitDir = (git: string, worktree: string): void => {
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
    hookLinks(hooks);
    const named = gitConfigPaths(join(git, 'config'), home);
    // `git sparse-checkout` turns extensions.worktreeConfig on and keeps settings in config.worktree, which git
    // then reads as configuration; one missing is made empty so that the agent cannot create it.
    const perWorktree = join(git, 'config.worktree');
    if (named.worktreeConfig && kind(perWorktree) === undefined) {
      try {
        writeFileSync(perWorktree, '', { flag: 'wx', mode: 0o644 });
      } catch {
        // As for hooks: not ours to make.
      }
    }
    if (kind(perWorktree) !== undefined) {
      protect.push(perWorktree);
      const more = gitConfigPaths(perWorktree, home);
      named.includes.push(...more.includes);
      named.hooksPaths.push(...more.hooksPaths);
    }
    configNamed(
      named.includes,
      named.hooksPaths.map((h) => (isAbsolute(h) ? h : join(worktree, h))),
    );
    // A linked worktree's `commondir` names the repository its git uses (config and hooks included).
    const listed = list(join(git, 'worktrees')) ?? [];
    // More than a repository has: `.git/worktrees` is kept read-only as a whole (no worktree is added from inside
    // the sandbox meanwhile) rather than looked at entry by entry.
    // With extensions.worktreeConfig on, that would leave unread what each linked worktree's config.worktree names
    // in the workspace (below): the call is refused instead, as for a hooks directory too full to look at.
    if (listed.length > MAX_ENTRIES && named.worktreeConfig)
      throw new Error(
        `${join(git, 'worktrees')} holds more than ${MAX_ENTRIES} entries and extensions.worktreeConfig is on: what each linked worktree's config.worktree names cannot all be kept read-only, so no tool runs here until it holds fewer`,
      );
    if (listed.length > MAX_ENTRIES) return void protect.push(join(git, 'worktrees'));
    const worktrees = listed.filter((e) => e.dir).map((e) => join(git, 'worktrees', e.name));
    if (worktrees.length) pin.push(join(git, 'worktrees'));
    // With extensions.worktreeConfig on, git in a linked worktree reads its own config.worktree here as
    // configuration: one missing is made empty (as the repository's own), or the agent would create it with a
    // core.fsmonitor; what it names is kept as the repository's configuration is, within one bound for them all.
    const linked = { includes: [] as string[], hooksPaths: [] as string[] };
    for (const w of worktrees) {
      pin.push(w);
      const own = join(w, 'config.worktree');
      if (named.worktreeConfig && kind(own) === undefined) {
        try {
          writeFileSync(own, '', { flag: 'wx', mode: 0o644 });
        } catch {
          // As for hooks: not ours to make.
        }
      }
      for (const f of ['commondir', 'config.worktree']) if (kind(join(w, f)) !== undefined) protect.push(join(w, f));
      if (!named.worktreeConfig || kind(own) === undefined) continue;
      const more = gitConfigPaths(own, home);
      linked.includes.push(...more.includes);
      // A relative hooksPath is relative to the linked worktree, which lies where its `gitdir` says (the agent
      // writes that file): it could not be found for sure, so such a configuration is refused like one naming too
      // much.
      for (const h of more.hooksPaths) {
        if (!isAbsolute(h))
          throw new Error(
            `${own} sets a relative core.hooksPath (${h}): the directory it names cannot be kept read-only, so no tool runs here until it is absolute or removed`,
          );
        linked.hooksPaths.push(h);
      }
      if (linked.includes.length + linked.hooksPaths.length > MAX_NAMED)
        throw new Error(
          `the linked worktrees' config.worktree files in ${join(git, 'worktrees')} name more than ${MAX_NAMED} included files and hooks directories`,
        );
    }
    configNamed(linked.includes, linked.hooksPaths);
  };
  if (o.gitHooks) {
    const repos: string[] = [];
    for (const root of new Set(writable)) {
      const git = join(root, '.git');
      const k = kind(git);
      if (k === 'file' || k === 'link') {
        // A worktree's or submodule's `.git` file names the repository git uses: rewritten, it would name one
        // the agent made, hooks included.
        protect.push(git);
      } else if (k === 'dir') {
        gitDir(git, root);
        repos.push(root);
      }
    }
    // The user's own configuration applies in every repository; a relative hooksPath in it is relative to each.
    for (const f of [
      join(home, '.gitconfig'),
      join(process.env.XDG_CONFIG_HOME || join(home, '.config'), 'git', 'config'),
    ]) {
      const named = gitConfigPaths(f, home);
      configNamed(
        named.includes,
        named.hooksPaths.flatMap((h) => (isAbsolute(h) ? [h] : repos.map((r) => join(r, h)))),
      );
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
  // A link is kept with its target (native/ollie-sandbox.c); the directories down to a target in a writable root
  // are pinned too, or renaming one away would leave the link naming whatever the agent makes there next.
  for (const p of new Set(protect)) {
    if (kind(p) !== 'link') continue;
    let target: string;
    try {
      target = realpathSync(p);
    } catch {
      continue;
    }
    pinDown(target);
  }
  return { protect: [...new Set(protect)], pin: [...new Set(pin)] };
}
