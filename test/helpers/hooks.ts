/**
 * Lifecycle hooks as tests configure them: the owner's `hooks.json`, a project's trusted `.ollie-hooks.json`, and
 * an agent working in `work/` — the test's dir itself holds the config and data dirs, which the sandbox denies, so
 * an agent's tools (and the hooks, which run under the same policy) may not write there.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { testHarness, type Harness } from '../olliesrv/agent-harness.js';

export type Hooks = Record<string, unknown>;

/** A command hook (`timeout` in seconds, the default when not given). */
export const cmd = (command: string, timeout?: number) => ({
  type: 'command',
  command,
  ...(timeout !== undefined && { timeout }),
});

/** One command hook on `event`, for the calls of the tool `matcher` names (for every call without one). */
export const oneHook = (event: string, command: string, matcher?: string): Hooks => ({
  [event]: [{ ...(matcher !== undefined && { matcher }), hooks: [cmd(command)] }],
});

/** Writes the owner's `hooks.json` in `configDir`; `hooks` maps each event to its matcher groups. */
export function writeHooks(configDir: string, hooks: Hooks): void {
  writeFileSync(join(configDir, 'hooks.json'), JSON.stringify({ hooks }));
}

/** Writes the project hooks file in `work` and trusts it as the owner does; returns its path. */
export async function trustProjectHooks(hh: Harness, work: string, hooks: Hooks): Promise<string> {
  const file = join(work, '.ollie-hooks.json');
  writeFileSync(file, JSON.stringify({ hooks }));
  await hh.c.write('config/trust', `trust ${file}\n`);
  return file;
}

/**
 * Trusts a project hooks file whose PostToolUse hook on shell runs ./fmt.sh (for now `exit 0`): the project's own
 * script, which the agent can rewrite. Returns the hooks file's path.
 */
export async function trustFmtHook(hh: Harness, work: string): Promise<string> {
  writeFileSync(join(work, 'fmt.sh'), 'exit 0\n');
  return trustProjectHooks(hh, work, oneHook('PostToolUse', 'sh ./fmt.sh', 'shell'));
}

/** An agent of `profile` in a new session whose cwd is `work/` under the test's dir. */
export async function agentInWork(
  hh: Harness,
  profile: string,
): Promise<Awaited<ReturnType<Harness['agent']>> & { work: string }> {
  const work = join(hh.dir, 'work');
  mkdirSync(work, { recursive: true });
  const session = (await hh.c.rdwrText('session/new', `cwd=${work}`)).trim();
  return { ...(await hh.agent({ profile, session })), work };
}

/**
 * The running test's harness with an agent of `profile` (named `attacker`) working in `work/`; the owner's `hooks`,
 * when given, are in place before the agent is made.
 */
export async function attackerInWork(
  profile: Record<string, unknown>,
  hooks?: Hooks,
): Promise<{ h: Harness; a: Awaited<ReturnType<typeof agentInWork>> }> {
  const h = await testHarness({ profiles: { attacker: profile } });
  if (hooks) writeHooks(h.configDir, hooks);
  return { h, a: await agentInWork(h, 'attacker') };
}
