/**
 * Git repositories as an agent's workspace, for the attacks on what the owner's git runs later outside any sandbox:
 * the repository, the owner's git, and an agent of the test profile that makes scripted shell calls in it.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { TOOLSRV_ENTRY } from '../../src/olliesrv/toolclient/spawn.js';
import { landlockStatus } from '../../src/toolsrv/sandbox/index.js';
import type { Harness } from '../olliesrv/agent-harness.js';
import { results, script, sh } from './scripted-calls.js';

/** Landlock ABI 6 and a built toolsrv: what an agent's sandboxed tool calls need. */
export const sandboxReady = landlockStatus().abi >= 6 && existsSync(TOOLSRV_ENTRY);

/** The owner's git, outside the sandbox, with an identity for commits; returns what it printed. */
export const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', ['-c', 'user.name=o', '-c', 'user.email=o@x', ...args], { cwd, encoding: 'utf8' });

/**
 * A repository at `dir/name` (`git init` with `initArgs`); `prepare` runs between the init and the first, empty,
 * commit. Returns its path.
 */
export function repo(dir: string, name: string, prepare?: (at: string) => void, initArgs: string[] = []): string {
  const at = join(dir, name);
  mkdirSync(at, { recursive: true });
  git(at, 'init', '-q', ...initArgs);
  prepare?.(at);
  git(at, 'commit', '-q', '--allow-empty', '-m', 'init');
  return at;
}

/**
 * An agent in a new session whose working directory is `cwd` runs `commands`, one shell call a round, in one turn;
 * returns what each call returned to it.
 */
export async function plant(h: Harness, cwd: string, ...commands: string[]): Promise<string[]> {
  const a = await h.agent({ session: (await h.c.rdwrText('session/new', `cwd=${cwd}`)).trim() });
  h.mock.script(...script(...commands.map(sh)));
  return results(await h.turn(a.path, 'plant', 60_000));
}
