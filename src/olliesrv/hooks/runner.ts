/**
 * Runs one hook command the way the agent's tools run: under the sandbox helper, with the policy the agent's
 * tools get in that directory (the user's sandbox.yaml narrowed by a trusted project file), so a hook can do
 * what a tool of the agent could (a formatter rewrites a file in the workspace) and nothing more — whoever wrote
 * the hook. It gets the daemon's small environment (promptcmd.ts promptEnv: nothing from the session's, git
 * hardened), the event as JSON on stdin, a private tmp removed afterwards, and its timeout, after which its
 * whole process group is killed. olliesrv itself never runs a hook unsandboxed; only `--yolo` (no sandbox for
 * anything) does, as it does for tools and prompt commands.
 */
import { rmSync } from 'node:fs';
import { HELPER_EXITS, privateTmpDir, promptEnv, run, type PromptCommandOptions } from '../agent/promptcmd.js';
import { loadPolicy, sandboxCommand } from '../../toolsrv/public.js';
import type { CallLimits, Launcher } from '../../platform/launcher.js';
import { runContained, stderrFile, withStderrTo } from './contained.js';

/** What a hook may print: more is cut (and the hook killed). */
export const HOOK_MAX_OUTPUT = 256 << 10;

export interface HookRun {
  /** Exit status; null when it did not run or was killed. */
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** Why it was stopped: its timeout, its output cap. */
  cut?: string;
  /** Why it never ran (no sandbox, the helper refused the policy). */
  notRun?: string;
}

export interface HookRunSpec {
  command: string;
  timeoutSec: number;
  /** Where it runs: the agent's working directory. */
  cwd: string;
  /** The directory whose sandbox policy applies (the agent's sandbox root, else cwd). */
  policyRoot: string;
  /** The event, as the hook reads it on stdin. */
  input: string;
  /** Variables telling the hook where and for whom it runs (OLLIE_SESSION_ID, CLAUDE_PROJECT_DIR…). */
  vars: Record<string, string>;
}

/** Why a sandboxed hook cannot run without the spawner (as toolsrv refuses a sandboxed call without it). */
export const NO_SPAWNER = 'no process spawner (native/build/ollie-spawner is not built): a hook would not be contained';

export async function runHook(spec: HookRunSpec, o: PromptCommandOptions, launcher?: Launcher): Promise<HookRun> {
  const started = Date.now();
  const done = (r: Omit<HookRun, 'ms'>): HookRun => ({ ...r, ms: Date.now() - started });
  let tmp: string;
  try {
    tmp = privateTmpDir('hook-');
  } catch (e) {
    return done({ code: null, stdout: '', stderr: '', notRun: `no private tmp dir for it: ${(e as Error).message}` });
  }
  try {
    const env = promptEnv(o.env, spec.vars, spec.cwd, tmp);
    if (o.yolo) {
      const r = await run(
        '/bin/sh',
        ['-c', spec.command],
        spec.cwd,
        env,
        spec.timeoutSec * 1000,
        HOOK_MAX_OUTPUT,
        spec.input,
      );
      return done({ code: r.code, stdout: r.out, stderr: r.err, ...(r.cut && { cut: r.cut }) });
    }
    if (!launcher) return done({ code: null, stdout: '', stderr: '', notRun: NO_SPAWNER });
    let wrapped;
    try {
      const home = o.env.HOME ?? '/';
      const policy = loadPolicy({
        configDir: o.configDir,
        dataDir: o.dataDir,
        cwd: spec.policyRoot,
        home,
        runtimeDir: o.runtimeDir,
        tmpDir: tmp,
      });
      const cmd = sandboxCommand(policy, ['/bin/sh', '-c', withStderrTo(stderrFile(tmp), spec.command)], {
        env: Object.keys(env),
      });
      wrapped = {
        file: cmd.file,
        args: cmd.args,
        env: cmd.env(env),
        limits: (policy as { limits?: CallLimits }).limits,
      };
    } catch (e) {
      return done({
        code: null,
        stdout: '',
        stderr: '',
        notRun: `the sandbox is unavailable: ${(e as Error).message}`,
      });
    }
    const r = await runContained(
      launcher,
      { ...wrapped, cwd: spec.cwd, input: spec.input, tmp },
      spec.timeoutSec * 1000,
      HOOK_MAX_OUTPUT,
    );
    // The helper speaks before the command's stderr is redirected: its refusal comes on the output.
    const helper = [r.out, r.err].find((t) => t.startsWith('ollie-sandbox:'));
    if (r.code !== null && HELPER_EXITS.has(r.code) && helper !== undefined) {
      return done({ code: null, stdout: '', stderr: helper, notRun: helper.trim() });
    }
    return done({ code: r.code, stdout: r.out, stderr: r.err, ...(r.cut && { cut: r.cut }) });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
