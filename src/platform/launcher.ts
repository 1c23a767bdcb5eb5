/**
 * The project's one way to start a process that acts for an agent: tool calls (toolsrv), workflows and profile
 * prompt commands (olliesrv). A sandboxed launch is first wrapped by the sandbox module (sandboxCommand in
 * src/toolsrv/sandbox, through toolsrv's Confinement.wrap for tools), which is the one code path that applies a
 * policy; the launcher then starts what it was given, in a session and process group of its own.
 *
 * It starts processes through the native spawner (native/ollie-spawner.c, client in spawner.ts) whenever it is
 * built. Node's child_process.spawn is the fallback, used where native/build/ollie-spawner is not built (a
 * checkout without a C compiler), or with `native: false`.
 *
 * An interactive launch (launchInteractive: resident tool hosts, stdio MCP servers, which read requests on a
 * stdin that stays open and answer on stdout) goes through the spawner's 'T' frame: contained like a tool call
 * (what it double-forks or setsid's dies with it), with the processes, memory, file size and open files limits
 * of `limits`. Not the CPU-seconds limit: it is an rlimit on each process's total CPU time, so it would kill a
 * server that has simply served long enough, however idle it is between requests; its memory and process
 * count are what stop a runaway one.
 *
 * A tty launch (launchTty: tty tools) goes through the spawner's 'Y' frame: the process gets a pseudo-terminal of its
 * own as its controlling terminal and its stdin, stdout and stderr; it is contained and limited as any call is,
 * CPU seconds included. There is no fallback: without the spawner it is refused (NO_SPAWNER_TTY).
 *
 * What the fallback loses: containment beyond the process group (a process that calls setsid, or double-forks
 * out of the group, outlives the launch; the spawner's subreapers catch those), the per-launch process and
 * memory limits and the per-process rlimits (`limits` is ignored), and Node's event loop is blocked for each
 * fork (~2 ms). toolsrv refuses sandboxed tool calls, hosted ones included, and sandboxed MCP servers without the
 * spawner (NO_SPAWNER) for the first two reasons; olliesrv's launches (workflows, prompt commands) accept the
 * fallback, as before.
 *
 * A launch that wants its stderr apart from its stdout (`stderr: 'separate'`: prompt commands and hooks, whose
 * stderr becomes a warning and not prompt text) goes through the spawner too, though its one output pipe
 * carries stdout only: /bin/sh points the process's stderr at a file in a private directory before it execs
 * it, and the file is read once the process has exited. These commands run what an agent can write (a trusted
 * `npm test` runs the workspace's scripts), so they must not run where a process can leave the launch.
 *
 * Either way the process group goes with its leader: when the launched process exits, whatever it left in its
 * group is killed before `exited` is heard.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, closeSync, constants, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import {
  SPAWNER,
  Spawner,
  type CallLimits,
  type SpawnedHandlers,
  type SpawnedInteractive,
  type SpawnRequest,
  type Spawned,
  type TermSize,
} from './spawner.js';

export type { CallLimitKind, CallLimits, TermSize } from './spawner.js';
export { THREADS_PER_PROCESS, limitWords } from './spawner.js';

/** Why a sandboxed launch is refused where the spawner is not built (toolsrv's calls, hosts and MCP servers). */
export const NO_SPAWNER = `the process spawner ${SPAWNER} is missing, and without it the processes of a call can be neither contained nor limited: run \`node scripts/build-native.mjs\` (it needs a C compiler)`;

/** Why a tty launch is refused where the spawner is not built, whatever the sandbox (the terminal is the spawner's). */
export const NO_SPAWNER_TTY = `a tty tool's terminal comes from the process spawner: ${NO_SPAWNER}`;

export interface LaunchRequest extends SpawnRequest {
  /** `merged` (the default): stdout and stderr come to `output` in the order written. */
  stderr?: 'merged' | 'separate';
}

export interface LaunchHandlers extends SpawnedHandlers {
  /** What the process wrote to stderr, for a launch with `stderr: 'separate'`. */
  errorOutput?(bytes: Uint8Array): void;
}

/** A started process: its pid (also its process group's id), and how to stop reading its output. */
export type Launched = Spawned;

/** What an interactive launch starts: the command, cwd, environment and (spawner only) limits. */
export type InteractiveRequest = Omit<LaunchRequest, 'stdin' | 'stderr'>;

export interface InteractiveLaunchHandlers extends LaunchHandlers {
  /** It runs, with this pid (also its process group's id); heard before its output and exit. */
  running?(pid: number): void;
  /** Its stdin was closed because it left 16 MiB unread (spawner only: see native/ollie-spawner.c, 'I'). */
  inputDropped?(): void;
}

/** A process started on a pseudo-terminal of its own. */
export interface LaunchedTty extends Launched {
  /** Types into its terminal (nothing once it is gone). */
  write(data: string | Uint8Array): void;
  /** Sets its terminal's size; it gets SIGWINCH. */
  resize(size: TermSize): void;
}

export interface TtyLaunchHandlers extends SpawnedHandlers {
  /** The spawner stopped typing into its terminal: more than it buffers (16 MiB) waited to be read. */
  inputDropped?(): void;
}

/**
 * A process started with its stdin open: `pid` is 0 until it runs, and stays 0 when it could not start (then
 * `lost` says why).
 */
export interface Interactive {
  readonly pid: number;
  /** Writes to its stdin (nothing once it is gone); what is written before it runs is sent when it does. */
  write(data: string | Uint8Array): void;
  /** Closes its stdin once what was written has been. */
  endInput(): void;
}

export interface LauncherOptions {
  /** false: never use the spawner, even where it is built (tests of the fallback). */
  native?: boolean;
  /** Told of every process the launcher itself starts (the spawner, or a fallback's process): olliesrv confines them. */
  adopt?: (child: ChildProcess) => void;
}

export class Launcher {
  private constructor(
    private readonly spawner: Spawner | undefined,
    private readonly adopt: ((child: ChildProcess) => void) | undefined,
  ) {}

  static create(o: LauncherOptions = {}): Launcher {
    return new Launcher(o.native === false ? undefined : Spawner.find(SPAWNER, o.adopt), o.adopt);
  }

  /** Whether launches go through the spawner (and so are contained and limited). */
  get native(): boolean {
    return this.spawner !== undefined;
  }

  /** The spawner's own pid while it runs. */
  get spawnerPid(): number | undefined {
    return this.spawner?.pid;
  }

  /**
   * Starts `req`; resolves with its pid once it runs, or rejects saying what stopped it (a missing program or
   * cwd). The handlers then hear its output, then its exit and the end of its output (in either order).
   */
  launch(req: LaunchRequest, handlers: LaunchHandlers): Promise<Launched> {
    if (!this.spawner) return launchWithNode(req, handlers, this.adopt);
    if (req.stderr !== 'separate') return this.spawner.spawn(req, handlers);
    return spawnWithStderrFile(this.spawner, req, handlers);
  }

  /**
   * Starts `req` with its stdin left open for write(); its stdout comes to `output`, its stderr to `errorOutput`.
   * Through the spawner when there is one (contained, with `limits` less the CPU seconds: see above), else Node's
   * spawn (no containment beyond the process group, no limits). A start failure is reported through `lost`.
   */
  launchInteractive(req: InteractiveRequest, handlers: InteractiveLaunchHandlers): Interactive {
    if (this.spawner) return spawnInteractive(this.spawner, req, handlers);
    let child: ChildProcess;
    try {
      child = spawnInGroup(req);
    } catch (e) {
      queueMicrotask(() => handlers.lost(`could not start: ${(e as Error).message}`));
      return { pid: 0, write: () => undefined, endInput: () => undefined };
    }
    child.once('error', (e) => {
      if (child.pid === undefined) handlers.lost(`could not start: ${e.message}`);
    });
    if (child.pid !== undefined) {
      this.adopt?.(child);
      const pid = child.pid;
      queueMicrotask(() => handlers.running?.(pid));
      wire(child, pid, 'separate', handlers);
    }
    let gone = child.pid === undefined;
    child.once('exit', () => (gone = true));
    child.stdin!.on('error', () => undefined);
    return {
      pid: child.pid ?? 0,
      write: (data) => {
        if (!gone) child.stdin!.write(data);
      },
      endInput: () => child.stdin!.end(),
    };
  }

  /**
   * Starts `req` on a new pseudo-terminal of `size` (see the header); `req.stdin` is typed into it once it runs.
   * Resolves with its pid once it runs; rejects saying what stopped it, or with NO_SPAWNER_TTY without the spawner.
   * The handlers then hear what its terminal prints, then its exit and the end of its output (in either order).
   */
  launchTty(req: SpawnRequest, size: TermSize, handlers: TtyLaunchHandlers): Promise<LaunchedTty> {
    if (!this.spawner) return Promise.reject(new Error(NO_SPAWNER_TTY));
    return this.spawner.spawnTty(req, size, {
      output: (b) => handlers.output(b),
      errorOutput: (b) => handlers.output(b),
      exited: (code, signal, limit) => handlers.exited(code, signal, limit),
      closed: () => handlers.closed(),
      lost: (why) => handlers.lost(why),
      inputDropped: () => handlers.inputDropped?.(),
    });
  }

  /** Ends the spawner, which kills the process groups it started. */
  close(): void {
    this.spawner?.close();
  }
}

/**
 * The limits a long-lived process is started with: a call's, less the CPU seconds (see the header) and the
 * output, which toolsrv bounds per call and a server's stream has no end of.
 */
export function longLivedLimits(l: CallLimits | undefined): CallLimits | undefined {
  if (!l) return undefined;
  return {
    ...(l.processes && { processes: l.processes }),
    ...(l.memory && { memory: l.memory }),
    ...(l.fileSize && { fileSize: l.fileSize }),
    ...(l.openFiles && { openFiles: l.openFiles }),
  };
}

/** An interactive launch through the spawner; what is written before it runs waits here. */
function spawnInteractive(spawner: Spawner, req: InteractiveRequest, h: InteractiveLaunchHandlers): Interactive {
  let pid = 0;
  let started: SpawnedInteractive | undefined;
  let failed = false;
  let ended = false;
  const queued: (string | Uint8Array)[] = [];
  const limits = longLivedLimits(req.limits);
  spawner
    .spawnInteractive(
      { file: req.file, args: req.args, cwd: req.cwd, env: req.env, stdin: '', ...(limits && { limits }) },
      {
        running: (p) => {
          pid = p;
          h.running?.(p);
        },
        output: (b) => h.output(b),
        errorOutput: (b) => (h.errorOutput ?? h.output)(b),
        exited: (code, signal, limit) => h.exited(code, signal, limit),
        closed: () => h.closed(),
        lost: (why) => h.lost(why),
        inputDropped: () => h.inputDropped?.(),
      },
    )
    .then(
      (s) => {
        started = s;
        for (const d of queued.splice(0)) s.write(d);
        if (ended) s.endInput();
      },
      (e: Error) => {
        failed = true;
        queued.length = 0;
        h.lost(e.message);
      },
    );
  return {
    get pid() {
      return pid;
    },
    write: (data) => {
      if (started) started.write(data);
      else if (!failed && !ended) queued.push(data);
    },
    endInput: () => {
      ended = true;
      started?.endInput();
    },
  };
}

/** How long to wait for a launch's output once its process is dead (a process that left the group may hold the pipe). */
export const DRAIN_MS = 2000;

/**
 * Pairs a launch's `exited` with the end of its output: `onEnd` runs once, when both have been heard. The
 * launcher has killed the rest of the group at the exit, but a process that left it may hold the pipe: DRAIN_MS
 * after the exit the output is abandoned and taken as ended.
 */
export class LaunchEnd<E> {
  exit: E | undefined;
  private closed = false;
  private ended = false;
  private drain: NodeJS.Timeout | undefined;
  /** The launch's abandonOutput, once it has started. */
  abandon: () => void = () => undefined;

  constructor(private readonly onEnd: (exit: E) => void) {}

  /** Its process has exited. */
  exited(exit: E): void {
    this.exit = exit;
    if (!this.closed) {
      this.drain = setTimeout(() => {
        this.abandon();
        this.outputClosed();
      }, DRAIN_MS);
      this.drain.unref();
    }
    this.settle();
  }

  /** Its output has ended. */
  outputClosed(): void {
    clearTimeout(this.drain);
    this.closed = true;
    this.settle();
  }

  /** Stops waiting for the output (the launch ended some other way). */
  stop(): void {
    clearTimeout(this.drain);
  }

  private settle(): void {
    if (this.ended || this.exit === undefined || !this.closed) return;
    this.ended = true;
    this.onEnd(this.exit);
  }
}

/** How much of a separate stderr is kept (prompt commands and hooks keep 64 KiB of it). */
const STDERR_KEPT = 1 << 20;

/** A launch through the spawner whose stderr goes to a private file, handed to `errorOutput` at its exit. */
async function spawnWithStderrFile(spawner: Spawner, req: LaunchRequest, h: LaunchHandlers): Promise<Launched> {
  // /bin/sh starts the program, so a missing one must be refused here, as the spawner would have.
  if (isAbsolute(req.file)) {
    try {
      accessSync(req.file, constants.X_OK);
    } catch (e) {
      throw new Error(`cannot start ${req.file.replace(/\0/g, '\\0')}: ${(e as Error).message}`);
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'ollie-stderr-'));
  const file = join(dir, 'stderr');
  const cleanUp = (): void => rmSync(dir, { recursive: true, force: true });
  const stderrOut = (): void => {
    let fd: number | undefined;
    try {
      fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
      const buf = Buffer.alloc(STDERR_KEPT);
      const n = readSync(fd, buf, 0, STDERR_KEPT, 0);
      if (n > 0) (h.errorOutput ?? h.output)(buf.subarray(0, n));
    } catch {
      // Nothing was written to it.
    } finally {
      if (fd !== undefined) closeSync(fd);
      cleanUp();
    }
  };
  const wrapped: LaunchRequest = {
    ...req,
    file: '/bin/sh',
    args: ['-c', 'exec "$@" 2>"$0"', file, req.file, ...req.args],
  };
  try {
    return await spawner.spawn(wrapped, {
      output: (b) => h.output(b),
      exited: (code, signal, limit) => {
        stderrOut();
        h.exited(code, signal, limit);
      },
      closed: () => h.closed(),
      lost: (why) => {
        cleanUp();
        h.lost(why);
      },
    });
  } catch (e) {
    cleanUp();
    throw e;
  }
}

/** Node's spawn of `req` as the leader of a process group of its own (a kill of the group ends all of it). */
function spawnInGroup(req: Pick<LaunchRequest, 'file' | 'args' | 'cwd' | 'env'>): ChildProcess {
  return spawn(req.file, req.args, { cwd: req.cwd, env: req.env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
}

function launchWithNode(
  req: LaunchRequest,
  h: LaunchHandlers,
  adopt?: (child: ChildProcess) => void,
): Promise<Launched> {
  return new Promise((resolve, reject) => {
    const cannot = (e: Error): Error => new Error(`cannot start ${req.file.replace(/\0/g, '\\0')}: ${e.message}`);
    let child: ChildProcess;
    try {
      child = spawnInGroup(req);
    } catch (e) {
      return reject(cannot(e as Error));
    }
    // Spawn failures (a missing program or cwd) come as an error event, without a pid.
    if (child.pid === undefined) return void child.once('error', (e) => reject(cannot(e)));
    child.on('error', () => undefined);
    const pid = child.pid;
    adopt?.(child);
    child.stdin!.on('error', () => undefined); // a process that never reads its input closes the pipe early
    child.stdin!.end(req.stdin);
    resolve({ pid, abandonOutput: wire(child, pid, req.stderr ?? 'merged', h) });
  });
}

/** Passes a started child's output, exit and end of output to `h`; returns how to abandon its output. */
function wire(child: ChildProcess, pid: number, stderr: 'merged' | 'separate', h: LaunchHandlers): () => void {
  child.stdout!.on('data', (b: Buffer) => h.output(b));
  child.stderr!.on('data', (b: Buffer) => (stderr === 'separate' && h.errorOutput ? h.errorOutput(b) : h.output(b)));
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    h.closed();
  };
  child.once('exit', (code, signal) => {
    killGroup(pid);
    h.exited(code, signal);
  });
  // 'close' comes after 'exit', once stdout and stderr are both at end of file.
  child.once('close', close);
  return () => {
    child.stdout!.destroy();
    child.stderr!.destroy();
    close();
  };
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Nothing left in it.
  }
}
