/**
 * Profile prompt commands, run on an agent's behalf in its working directory. That directory is the agent's to
 * write (its shell can plant `.git/config`, scripts, attributes), so what runs there is treated like a tool:
 *
 * - under the sandbox helper with the tools' policy made read-only and offline (sandbox/index.ts readOnlyPolicy):
 *   a prompt command reads what the agent's tools could read, plus Ollie's prompt files, and writes nothing but a
 *   private tmp removed afterwards; no network, no Unix sockets;
 * - with a small environment of the daemon's own values (PATH, HOME, locale, OLLIE_DATA, OLLIE_CONFIG): nothing
 *   from the session environment, so no variable can point a command elsewhere;
 * - with git hardened against repository configuration (gitEnv), so a `git status` in a prompt runs nothing the
 *   repository names;
 * - with a timeout and an output cap, the whole process group killed at either.
 *
 * When the sandbox cannot run (no Landlock, a broken policy file) the commands do not run: a note says why,
 * unless the daemon runs with --yolo, which runs them unsandboxed (still with the small, hardened environment).
 */
import { lstatSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { loadPolicy, PACKAGE_ROOT, readOnlyPolicy, sandboxCommand, type SandboxPolicy } from '../../toolsrv/public.js';
import { confinedLauncher } from '../auth/confined.js';

export interface PromptCommandOptions {
  configDir: string;
  dataDir: string;
  /** Ollie's runtime dir (its sockets): always denied. */
  runtimeDir: string;
  /** The daemon's environment: PATH, HOME and the locale are taken from it, nothing else. */
  env: Record<string, string>;
  /** --yolo: run prompt commands without the sandbox. */
  yolo?: boolean;
  /** Overrides for tests. */
  timeoutMs?: number;
  maxOutput?: number;
}

export interface ResolvedPrompt {
  text: string;
  /** Commands that failed, with their stderr: shown to the user, not sent to the model. */
  warnings: string[];
}

export const PROMPT_TIMEOUT_MS = 10_000;
/** Per command: more than this is no system prompt. */
export const PROMPT_MAX_OUTPUT = 1 << 20;

/** The variables of the daemon's environment a prompt command gets. */
const FROM_DAEMON = ['PATH', 'HOME', 'USER', 'LOGNAME', 'LANG', 'LANGUAGE', 'TZ'];

/**
 * Configuration given to every git a prompt command starts, as GIT_CONFIG_COUNT/KEY/VALUE: the command-line
 * scope, which wins over the repository's `.git/config` and whatever it includes. Each names a program git
 * would otherwise take from the repository (fsmonitor, hooks, pager, editors, ssh, askpass, gpg, credential
 * helpers, remote helpers) or a repository git should not discover on its own (an embedded bare one,
 * CVE-2022-24765's cousin). `safe.directory` is left alone: git's own check of the repository's owner stays.
 */
export const GIT_HARDENING: ReadonlyArray<readonly [string, string]> = [
  ['core.fsmonitor', 'false'],
  ['core.hooksPath', '/dev/null'],
  ['core.pager', 'cat'],
  ['core.editor', '/bin/false'],
  ['sequence.editor', '/bin/false'],
  ['core.sshCommand', '/bin/false'],
  ['core.askPass', '/bin/false'],
  ['credential.helper', ''],
  ['protocol.allow', 'never'],
  ['protocol.ext.allow', 'never'],
  ['gpg.program', '/bin/false'],
  ['gpg.ssh.program', '/bin/false'],
  ['gpg.x509.program', '/bin/false'],
  ['log.showSignature', 'false'],
  ['status.submoduleSummary', 'false'],
  ['safe.bareRepository', 'explicit'],
];

/**
 * Keys of a repository's own configuration that name programs under names of its choosing (drivers selected
 * by `.gitattributes`, aliases, per-URL credential helpers, per-command pagers): they cannot be listed ahead,
 * so the repository's are read first (configKeysToDisarm) and each is overridden with a value that runs nothing.
 */
const DRIVER_KEYS =
  /^(filter\..+\.(clean|smudge|process)|diff\..+\.(command|textconv)|merge\..+\.driver|credential\..+\.helper|alias\..+|diff\.external|pager\..+)$/i;

/** The override that disarms one repository key (empty runs nothing; a pager setting becomes "no pager"). */
export function disarmed(key: string): string {
  return /^pager\./i.test(key) ? 'false' : '';
}

/** The repository-scope keys in `git config --show-scope -z --name-only --get-regexp` output that name programs. */
export function configKeysToDisarm(output: string): string[] {
  const parts = output.split('\0');
  const keys: string[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const scope = parts[i]!;
    const key = parts[i + 1]!;
    if ((scope === 'local' || scope === 'worktree') && DRIVER_KEYS.test(key)) keys.push(key);
  }
  return [...new Set(keys)];
}

/**
 * The environment that makes git ignore what a repository names to run: the hardening, plus overrides for
 * `extra` keys (found in the repository). No system config, no optional locks (git status writes no index), no
 * pager, no prompts for credentials.
 */
export function gitEnv(extra: readonly string[] = []): Record<string, string> {
  const pairs: Array<readonly [string, string]> = [...GIT_HARDENING, ...extra.map((k) => [k, disarmed(k)] as const)];
  const env: Record<string, string> = {
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_OPTIONAL_LOCKS: '0',
    GIT_PAGER: 'cat',
    PAGER: 'cat',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    GIT_CONFIG_COUNT: String(pairs.length),
  };
  pairs.forEach(([k, v], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = k;
    env[`GIT_CONFIG_VALUE_${i}`] = v;
  });
  return env;
}

/** The environment a prompt command gets: the daemon's few, Ollie's, the agent's identity, hardened git. */
export function promptEnv(
  daemonEnv: Record<string, string>,
  ollie: Record<string, string>,
  cwd: string,
  tmp: string,
  gitExtra: readonly string[] = [],
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(daemonEnv)) if (FROM_DAEMON.includes(k) || k.startsWith('LC_')) env[k] = v;
  env.PATH ??= '/usr/local/bin:/usr/bin:/bin';
  return { ...env, ...ollie, ...gitEnv(gitExtra), PWD: cwd, TMPDIR: tmp };
}

export interface Run {
  out: string;
  err: string;
  code: number | null;
  /** Why it was cut short, if it was. */
  cut?: string;
}

/**
 * Runs argv in cwd with env through the project's launcher (src/platform/launcher.ts), in its own process group;
 * kills the group at the timeout or the output cap. Its stderr is kept apart (a warning, not prompt text); the
 * launcher still contains it like any launch. `input` goes to its stdin (none: empty). Also
 * how hooks run (olliesrv/hooks/runner.ts).
 */
export function run(
  file: string,
  args: string[],
  cwd: string,
  env: Record<string, string>,
  timeoutMs: number,
  maxOutput: number,
  input?: string,
): Promise<Run> {
  return new Promise((resolve) => {
    const out: Uint8Array[] = [];
    const err: Uint8Array[] = [];
    let outBytes = 0;
    let errBytes = 0;
    let cut: string | undefined;
    let pid: number | undefined;
    let code: number | null = null;
    let exited = false;
    let closed = false;
    // The group, not the child: a git or a sleep it started would keep the pipes open.
    const kill = (why: string): void => {
      cut ??= why;
      try {
        if (pid) process.kill(-pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => kill(`timed out after ${timeoutMs} ms`), timeoutMs);
    const finish = (): void => {
      if (!exited || !closed) return;
      clearTimeout(timer);
      resolve({
        out: Buffer.concat(out).toString('utf8'),
        err: Buffer.concat(err).toString('utf8'),
        code,
        ...(cut && { cut }),
      });
    };
    confinedLauncher()
      .launch(
        { file, args, cwd, env, stdin: input ?? '', stderr: 'separate' },
        {
          output: (b) => {
            if (outBytes >= maxOutput) return;
            out.push(b.subarray(0, maxOutput - outBytes));
            outBytes += b.length;
            if (outBytes >= maxOutput) kill(`its output passed ${maxOutput} bytes`);
          },
          errorOutput: (b) => {
            if (errBytes < 64 << 10) err.push(b);
            errBytes += b.length;
          },
          exited: (c) => {
            exited = true;
            code = c;
            finish();
          },
          closed: () => {
            closed = true;
            finish();
          },
          lost: (reason) => {
            clearTimeout(timer);
            resolve({ out: '', err: reason, code: null });
          },
        },
      )
      .then(
        (started) => {
          pid = started.pid;
          if (cut) kill(cut);
        },
        (e: Error) => {
          clearTimeout(timer);
          resolve({ out: '', err: e.message, code: null });
        },
      );
  });
}

/** The helper's own exit codes (sandbox/index.ts SANDBOX_EXIT): the command never ran. */
export const HELPER_EXITS = new Set([120, 121, 122]);

/** Runs a profile's prompt commands in `cwd` (side by side, their stdout concatenated in order). */
export async function runPromptCommands(
  commands: string[],
  cwd: string,
  ollie: Record<string, string>,
  o: PromptCommandOptions,
): Promise<ResolvedPrompt> {
  const timeoutMs = o.timeoutMs ?? PROMPT_TIMEOUT_MS;
  const maxOutput = o.maxOutput ?? PROMPT_MAX_OUTPUT;
  let tmp: string;
  try {
    tmp = privateTmpDir('prompt-');
  } catch (e) {
    return notRun(commands, `no private tmp dir for them: ${(e as Error).message}`);
  }
  try {
    let wrap: (
      argv: string[],
      env: Record<string, string>,
    ) => { file: string; args: string[]; env: Record<string, string> };
    if (o.yolo) {
      wrap = ([file, ...args], env) => ({ file: file!, args, env });
    } else {
      let policy: SandboxPolicy;
      try {
        const home = o.env.HOME ?? '/';
        const base = loadPolicy({
          configDir: o.configDir,
          dataDir: o.dataDir,
          cwd,
          home,
          runtimeDir: o.runtimeDir,
          tmpDir: tmp,
        });
        // The shipped fragments and the user's ($OLLIE_CONFIG/prompts, inside the denied config dir: a rule
        // naming it explicitly holds) are what prompt commands are made of. The owner's git configuration:
        // git gives up when it exists but cannot be read, and the policy need not grant HOME.
        policy = readOnlyPolicy(base, {
          rox: [join(PACKAGE_ROOT, 'data', 'prompts'), join(o.configDir, 'prompts')],
          ro: [join(home, '.gitconfig'), join(home, '.config', 'git')],
        });
        // Throws SandboxUnavailableError when this kernel cannot enforce it: checked once for all commands.
        sandboxCommand(policy, ['/bin/true']);
      } catch (e) {
        return notRun(commands, `the sandbox is unavailable: ${(e as Error).message}`);
      }
      wrap = (argv, env) => {
        const cmd = sandboxCommand(policy, argv, { env: Object.keys(env) });
        return { file: cmd.file, args: cmd.args, env: cmd.env(env) };
      };
    }
    // What the repository itself names to run, read (sandboxed, with git already hardened) before anything
    // else starts a git there.
    const probeEnv = promptEnv(o.env, ollie, cwd, tmp);
    const probe = wrap(['git', 'config', '--show-scope', '-z', '--name-only', '--get-regexp', '.'], probeEnv);
    const found = await run(probe.file, probe.args, cwd, probe.env, timeoutMs, maxOutput);
    // Cut short (a configuration padded past the cap, or one that takes too long), it has not listed every
    // program the repository names: running the commands then would leave those armed.
    if (found.cut)
      return notRun(
        commands,
        `the repository's git configuration could not be read to disarm the programs it names (reading it ${found.cut})`,
      );
    const extra = found.code === 0 ? configKeysToDisarm(found.out) : [];
    const env = promptEnv(o.env, ollie, cwd, tmp, extra);
    const outs = await Promise.all(
      commands.map(async (cmd) => {
        const w = wrap(['/bin/sh', '-c', cmd], env);
        const r = await run(w.file, w.args, cwd, w.env, timeoutMs, maxOutput);
        const what = `prompt command ${JSON.stringify(cmd)}`;
        // The helper's own failures, told from a command's exit status by the helper's prefix on stderr.
        if (!o.yolo && r.code !== null && HELPER_EXITS.has(r.code) && r.err.startsWith('ollie-sandbox:')) {
          const why = r.err.trim() || `the sandbox helper exited ${r.code}`;
          return { out: note(`${what} was not run: ${why}`), warn: `${what} was not run: ${why}` };
        }
        if (r.cut) return { out: r.out, warn: `${what} was stopped: ${r.cut}` };
        if (r.code !== 0) return { out: r.out, warn: `${what} failed: ${(r.err || `exit status ${r.code}`).trim()}` };
        return { out: r.out };
      }),
    );
    return { text: outs.map((x) => x.out).join(''), warnings: outs.flatMap((x) => (x.warn ? [x.warn] : [])) };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * A new private (0700) directory for one sandboxed run, in the per-user tmp root, which is refused when it is
 * someone else's or a symlink planted there. The caller removes it.
 */
export function privateTmpDir(prefix: string): string {
  const root = join(tmpdir(), `ollie-${userInfo().uid}`);
  mkdirSync(root, { recursive: true, mode: 0o700 });
  const st = lstatSync(root);
  if (!st.isDirectory() || st.uid !== process.getuid?.()) throw new Error(`${root} is not a directory of this user`);
  return mkdtempSync(join(root, prefix));
}

const note = (text: string): string => `\n[Ollie: ${text}]\n`;

function notRun(commands: string[], why: string): ResolvedPrompt {
  const msg = `the profile's ${commands.length} prompt command${commands.length === 1 ? ' was' : 's were'} not run: ${why}; start the daemon with --yolo to run them without the sandbox`;
  return { text: note(msg), warnings: [msg] };
}
