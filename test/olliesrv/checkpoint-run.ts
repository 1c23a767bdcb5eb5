/**
 * A real daemon, toolsrv and agent over a workspace of the test's own, for the checkpoint and rewind tests: the
 * workspace's files, the checkpoint.whole rule and the agent's profile are the test's; both are removed when the
 * test ends.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { testHarness, type Block, type Harness } from './agent-harness.js';
import { script, sh } from '../security/scripted-calls.js';
import { testDir } from '../helpers/temp-dir.js';

export interface CheckpointRun {
  h: Harness;
  /** The session's working directory. */
  ws: string;
  /** The agent's 9P path. */
  path: string;
  /** Writes a command to the agent's ctl file and returns the reply. */
  ctl(cmd: string): Promise<string>;
  /** Runs one turn (`prompt`) in which the model makes these shell calls, one a round; returns the log's blocks. */
  shell(prompt: string, ...commands: string[]): Promise<Block[]>;
}

export interface CheckpointRunOptions {
  /** Prefix of the workspace's temporary directory. */
  prefix: string;
  /** Fills the workspace before the daemon starts. */
  files(ws: string): void;
  /** Added to the shipped sandbox.yaml as `checkpoint.whole: [whole]`. */
  whole?: string;
  /** The agent's profile, by name, instead of the harness's test profile. */
  profile?: { name: string; profile: unknown };
}

/** Starts a checkpoint test's daemon and agent; call it inside the test. */
export async function checkpointRun(opts: CheckpointRunOptions): Promise<CheckpointRun> {
  // Test hooks run last registered first: the daemon is closed before the workspace goes.
  const ws = testDir(opts.prefix);
  opts.files(ws);
  const h = await testHarness(opts.profile && { profiles: { [opts.profile.name]: opts.profile.profile } });
  if (opts.whole)
    writeFileSync(
      join(h.configDir, 'sandbox.yaml'),
      `${readFileSync(join(process.cwd(), 'data', 'sandbox.yaml'), 'utf8')}\ncheckpoint:\n  whole: [${opts.whole}]\n`,
    );
  const session = (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim();
  const a = await h.agent({ session, ...(opts.profile && { profile: opts.profile.name }) });
  return {
    h,
    ws,
    path: a.path,
    ctl: (cmd) => h.c.rdwrText(`${a.path}/ctl`, cmd),
    shell: (prompt, ...commands) => {
      h.mock.script(...script(...commands.map(sh)));
      return h.turn(a.path, prompt);
    },
  };
}

/** The rows of a checkpoint `idx` file, split into their tab-separated fields. */
export const checkpointIndex = (text: string): string[][] =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split('\t'));
