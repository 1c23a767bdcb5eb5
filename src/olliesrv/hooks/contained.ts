/**
 * Runs a sandboxed hook through the launcher's process spawner (native/ollie-spawner), as toolsrv runs a tool: the hook's
 * process is a subreaper, so whatever it starts — detached with setsid, nohup, a double fork — ends when the
 * hook ends, and the policy's limits (processes and memory for the whole hook, rlimits for each process) hold.
 * Started by Node's spawn, a hook could leave a process running for as long as the machine does, and fork
 * without limit: more than the agent's own tools may, and hooks run code the agent can write.
 *
 * The spawner gives one output stream; hooks need stdout (their JSON) apart from stderr (an exit 2's reason). So
 * the command's stderr goes to a file in the hook's private tmp dir, read back with no link followed: the hook
 * may replace that file, and must not make the daemon read anything else for it.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import {
  LaunchEnd,
  THREADS_PER_PROCESS,
  type CallLimitKind,
  type CallLimits,
  type Launcher,
} from '../../platform/launcher.js';
import type { Run } from '../agent/promptcmd.js';

/** stderr kept of a hook (as promptcmd.ts's run keeps). */
const MAX_STDERR = 64 << 10;

export interface ContainedSpec {
  /** The sandbox helper and its arguments, ending in the shell command as `sh -c COMMAND`. */
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  input: string;
  limits?: CallLimits;
  /** The hook's private tmp dir, where its stderr is kept. */
  tmp: string;
}

/** The shell command that sends its own stderr to `file` before running `command` (in the same shell). */
export function withStderrTo(file: string, command: string): string {
  return `exec 2>'${file.replace(/'/g, `'\\''`)}'\n${command}`;
}

export const stderrFile = (tmp: string): string => join(tmp, '.hook-stderr');

/** Up to MAX_STDERR bytes of the regular file `file`; '' when it is gone, a link or anything else. */
function readStderr(file: string): string {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return '';
  }
  try {
    if (!fstatSync(fd).isFile()) return '';
    const buf = Buffer.alloc(MAX_STDERR);
    const n = readSync(fd, buf, 0, MAX_STDERR, 0);
    return buf.subarray(0, n).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

function describe(kind: CallLimitKind, l: CallLimits | undefined): string {
  if (kind === 'processes') return `its process limit (${l?.processes ?? '?'}) was passed`;
  if (kind === 'threads')
    return `its thread limit (${l?.processes ? l.processes * THREADS_PER_PROCESS : '?'}) was passed`;
  return `its memory limit (${l?.memory ? `${Math.round(l.memory / (1 << 20))} MiB` : '?'}) was passed`;
}

/** Runs `spec` through `launcher` (one whose spawner runs); kills the whole hook at the timeout or the output cap. */
export async function runContained(
  launcher: Launcher,
  spec: ContainedSpec,
  timeoutMs: number,
  maxOutput: number,
): Promise<Run> {
  const out: Buffer[] = [];
  let outBytes = 0;
  let cut: string | undefined;
  let pid: number | undefined;
  let pendingKill = false;
  const kill = (why: string): void => {
    cut ??= why;
    if (pid === undefined) return void (pendingKill = true);
    try {
      // The group; the spawner then ends whatever left it.
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  };
  return new Promise<Run>((resolve) => {
    let done = false;
    const end = new LaunchEnd<{ code: number | null }>(() => settle());
    const timer = setTimeout(() => kill(`timed out after ${timeoutMs} ms`), timeoutMs);
    const settle = (err?: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      end.stop();
      if (err !== undefined) return resolve({ out: '', err, code: null });
      resolve({
        out: Buffer.concat(out).toString('utf8'),
        err: readStderr(stderrFile(spec.tmp)),
        code: end.exit!.code,
        ...(cut && { cut }),
      });
    };
    launcher
      .launch(
        {
          file: spec.file,
          args: spec.args,
          cwd: spec.cwd,
          env: spec.env,
          stdin: spec.input,
          ...(spec.limits && { limits: spec.limits }),
        },
        {
          output: (b) => {
            if (outBytes >= maxOutput) return;
            out.push(Buffer.from(b.subarray(0, maxOutput - outBytes)));
            outBytes += b.length;
            if (outBytes >= maxOutput) kill(`its output passed ${maxOutput} bytes`);
          },
          exited: (code, _signal, limit) => {
            if (limit) cut ??= describe(limit, spec.limits);
            end.exited({ code });
          },
          closed: () => end.outputClosed(),
          lost: (reason) => {
            end.stop();
            // Its exit was heard already: that is how it ended.
            if (end.exit) return end.outputClosed();
            if (pid !== undefined) kill(reason);
            settle(reason);
          },
        },
      )
      .then(
        (s) => {
          pid = s.pid;
          end.abandon = s.abandonOutput;
          if (pendingKill) kill(cut!);
        },
        (e: Error) => settle(e.message),
      );
  });
}
