/**
 * One tool process: spawned in its own process group (a session, in fact: `detached`), its stdout and
 * stderr collected into one output in the order they arrive, killed as a group. When the group's leader
 * exits, whatever it left running in its group is killed too, so a call's processes end with the call and
 * an inherited pipe cannot keep it open. A tty tool runs on a pseudo-terminal of its own, which the spawner
 * gives it (launchTty), contained and limited as any call.
 */
import { constants as osConstants } from 'node:os';
import { concatBytes } from '../../ninep/index.js';
import { Feed } from '../../platform/queue.js';
import { OUTPUT_CAP, type ProcStatus } from '../protocol.js';
import { describeLimit, type Limits } from '../sandbox/limits.js';
import {
  LaunchEnd,
  Launcher,
  THREADS_PER_PROCESS,
  type CallLimitKind,
  type LaunchHandlers,
  type Launched,
  type LaunchedTty,
} from '../../platform/launcher.js';

export interface SpawnSpec {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** Written to stdin, which is then closed (the JSON arguments). Not used for tty tools. */
  stdin: string;
  tty: boolean;
  /** The policy's limits (sandboxed calls); enforced when the spawner starts the process, output always. */
  limits?: Limits;
}

export interface ProcMeta {
  id: number;
  tool: string;
  agent: string;
  /** The command in words, for stat, bypass requests and interrupts. */
  cmd: string;
  background: boolean;
  bypassed: boolean;
  format?: string;
}

/** Output kept in memory for proc/{pid}/out; beyond it only the count and the tail are kept. */
const RETAIN = 16 * 1024 * 1024;
const TAIL = 4096;
/** A tty tool's terminal when it starts, and what it says it is. */
const TTY_SIZE = { cols: 120, rows: 40 };
const TTY_TERM = 'xterm-256color';

/** How long a group gets between SIGTERM and SIGKILL. */
const KILL_GRACE_MS = 1000;

type Stop = 'timeout' | 'killed';

/** How programs say that an allocation failed (Python, Node/V8, C, C++, Java, Go, Rust). */
const OUT_OF_MEMORY =
  /MemoryError|Cannot allocate memory|out of memory|allocation failed|ENOMEM|bad_alloc|OutOfMemoryError|memory allocation of \d+ bytes failed/i;

/** A call served by a resident tool host (exec/hosts.ts): its output and its end arrive from the host. */
export interface HostedCall {
  output(text: string): void;
  /** The host finished the call: an exit code, or the signal it honoured (a cancel). */
  exit(code: number | null, signal?: NodeJS.Signals | null): void;
  /** The host died or could not start during the call: it ends with `reason`. */
  lost(reason: string): void;
}

let fallback: Launcher | undefined;
/** For a Proc started without a launcher (tests): Node's spawn, as the launcher's documented fallback. */
function defaultLauncher(): Launcher {
  return (fallback ??= Launcher.create({ native: false }));
}

export class Proc {
  readonly started = Date.now();
  ended?: number;
  osPid = 0;
  state: 'running' | 'exited' = 'running';
  status: ProcStatus = 'exited';
  exit: number | null = null;
  signal: string | null = null;
  /** Why it did not run (spawn failure); set with status refused. */
  error?: string;
  lastRead = Date.now();
  outputBytes = 0;
  readonly done: Promise<void>;
  private readonly chunks: Uint8Array[] = [];
  private retained = 0;
  private tailBuf = new Uint8Array(0);
  private readonly feed = new Feed<Uint8Array>();
  private stop?: Stop;
  private timer?: NodeJS.Timeout;
  private finish!: () => void;
  private kill9?: NodeJS.Timeout;
  /** A terminate that came before there was a group to signal (see onStarted). */
  private deferredGrace?: number;
  /** The call's limits, for the words of a result that hit one. */
  private limits?: Limits;
  /** Which limit the call was killed for, in words (`killed: memory limit 2 GiB`). */
  private overLimit?: string;
  /** Whether it runs on a pseudo-terminal (a tty tool). */
  private isTty = false;
  /** The pseudo-terminal of a tty tool once it runs: what proc/{pid}/in writes to and ctl resize sizes. */
  private term?: LaunchedTty;
  /** The spawner stopped typing into its terminal (more than it buffers waited unread): keystrokes are refused. */
  private inputClosed = false;
  /** Set for a hosted call: signals become cancel requests to the host, never signals to its process. */
  private cancelHosted?: (sig: NodeJS.Signals | number) => void;

  constructor(readonly meta: ProcMeta) {
    this.done = new Promise((r) => (this.finish = r));
  }

  get id(): number {
    return this.meta.id;
  }

  /**
   * Starts the process through `launcher` (src/platform/launcher.ts; a tty tool on a pseudo-terminal the
   * spawner gives it, refused without the spawner); `timeoutS` (seconds) kills the group when it runs longer.
   */
  async start(spec: SpawnSpec, timeoutS?: number, launcher: Launcher = defaultLauncher()): Promise<void> {
    this.limits = spec.limits;
    if (timeoutS !== undefined) {
      this.timer = setTimeout(() => this.terminate('timeout'), timeoutS * 1000);
      this.timer.unref();
    }
    this.isTty = spec.tty;
    await this.startLaunched(launcher, spec);
  }

  /**
   * Runs in a resident tool host instead of a process of its own: `osPid` is the host's (for stat), `cancel`
   * asks the host to stop this call. Timeouts and kills work as for a process, through `cancel`.
   */
  startHosted(osPid: number, cancel: (sig: NodeJS.Signals | number) => void, timeoutS?: number): HostedCall {
    if (timeoutS !== undefined) {
      this.timer = setTimeout(() => this.terminate('timeout'), timeoutS * 1000);
      this.timer.unref();
    }
    this.osPid = osPid;
    this.cancelHosted = cancel;
    const enc = new TextEncoder();
    return {
      output: (t) => {
        if (this.state === 'running') this.output(enc.encode(t));
      },
      exit: (code, signal = null) => this.exited(code, signal),
      lost: (reason) => {
        if (this.state === 'exited') return;
        this.error = reason;
        this.status = this.stop ?? 'killed';
        this.end();
      },
    };
  }

  get hosted(): boolean {
    return this.cancelHosted !== undefined;
  }

  private async startLaunched(launcher: Launcher, spec: SpawnSpec): Promise<void> {
    const end = new LaunchEnd<{ code: number | null; signal: NodeJS.Signals | null }>((e) =>
      this.exited(e.code, e.signal),
    );
    const handlers: LaunchHandlers = {
      output: (b) => this.output(b),
      exited: (code, signal, limit) => {
        if (limit) this.hitLimit(limit);
        end.exited({ code, signal });
      },
      closed: () => end.outputClosed(),
      lost: (reason) => {
        end.stop();
        if (this.state === 'exited') return;
        // Its exit was already heard: that is how it ended, whatever became of the spawner since.
        if (end.exit) return this.exited(end.exit.code, end.exit.signal);
        // A spawner that died without ending its groups (killed outright) leaves them to us.
        this.killGroup('SIGKILL');
        this.error = reason;
        this.status = this.stop ?? 'killed';
        this.end();
      },
    };
    try {
      let spawned: Launched;
      if (spec.tty) {
        const env = { ...spec.env, TERM: TTY_TERM };
        const ttyHandlers = { ...handlers, inputDropped: () => (this.inputClosed = true) };
        spawned = this.term = await launcher.launchTty({ ...spec, env, stdin: '' }, TTY_SIZE, ttyHandlers);
      } else spawned = await launcher.launch(spec, handlers);
      end.abandon = spawned.abandonOutput;
      this.onStarted(spawned.pid);
    } catch (e) {
      this.failed((e as Error).message);
    }
  }

  /** The process runs as `pid`: a stop asked for while it was being started reaches its group now. */
  private onStarted(pid: number): void {
    this.osPid = pid;
    const grace = this.deferredGrace;
    this.deferredGrace = undefined;
    if (grace !== undefined && this.state === 'running') this.terminate(this.stop ?? 'killed', grace);
  }

  /** Marks the call as killed for `name` (the spawner did the killing, or `output` is about to). */
  private hitLimit(name: CallLimitKind | 'output' | 'cpu' | 'fileSize'): void {
    // The thread bound is the process limit's, times THREADS_PER_PROCESS (the spawner's).
    const n = name === 'threads' ? (this.limits?.processes ?? 0) * THREADS_PER_PROCESS : (this.limits?.[name] ?? 0);
    const words = {
      processes: 'process limit',
      threads: 'thread limit',
      memory: 'memory limit',
      output: 'output limit',
      cpu: 'CPU time limit',
      fileSize: 'file size limit',
    }[name];
    this.overLimit ??= `killed: ${words} ${describeLimit(name === 'threads' ? 'processes' : name, n)}${name === 'cpu' || name === 'fileSize' ? ' (per process)' : name === 'threads' ? ` (${THREADS_PER_PROCESS} per process of the process limit)` : ''}`;
    this.stop ??= 'killed';
  }

  private output(b: Uint8Array): void {
    this.outputBytes += b.length;
    const cap = this.limits?.output;
    if (cap && this.outputBytes > cap && this.state === 'running' && !this.overLimit) {
      this.hitLimit('output');
      this.terminate('killed', 0);
    }
    if (this.retained < RETAIN) {
      const keep = b.length <= RETAIN - this.retained ? b : b.subarray(0, RETAIN - this.retained);
      this.chunks.push(keep);
      this.retained += keep.length;
      this.feed.push(keep);
    }
    const t = new Uint8Array(Math.min(TAIL, this.tailBuf.length + b.length));
    const fromB = Math.min(b.length, t.length);
    const fromTail = t.length - fromB;
    t.set(this.tailBuf.subarray(this.tailBuf.length - fromTail), 0);
    t.set(b.subarray(b.length - fromB), fromTail);
    this.tailBuf = t;
  }

  private failed(reason: string): void {
    if (this.state === 'exited') return;
    this.error = reason;
    this.status = 'refused';
    this.end();
  }

  private exited(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.state === 'exited') return;
    this.exit = code;
    this.signal = signal;
    // RLIMIT_CPU and RLIMIT_FSIZE are enforced by these signals (a process that catches them is killed later).
    if (this.limits?.cpu && signal === 'SIGXCPU') this.hitLimit('cpu');
    if (this.limits?.fileSize && signal === 'SIGXFSZ') this.hitLimit('fileSize');
    this.status = this.stop ?? (signal ? 'killed' : 'exited');
    if (this.overLimit) this.error = this.overLimit;
    else if (this.limits?.memory && code !== 0 && OUT_OF_MEMORY.test(this.tail())) {
      // RLIMIT_DATA refuses the allocation rather than killing: the tool dies of it in its own words.
      this.error = `an allocation failed: the memory limit is ${describeLimit('memory', this.limits.memory)} (per process, and for the whole call)`;
    } else if (this.stop === 'timeout') this.error = 'timed out: the process group was killed';
    else if (signal) this.error = `killed by ${signal}`;
    this.end();
  }

  private end(): void {
    this.state = 'exited';
    this.ended = Date.now();
    this.lastRead = this.ended;
    clearTimeout(this.timer);
    clearTimeout(this.kill9);
    if (this.retained < this.outputBytes) {
      const note = new TextEncoder().encode(
        `\n[output beyond ${RETAIN} bytes was not kept; ${this.outputBytes} bytes in all]\n`,
      );
      this.chunks.push(note);
      this.feed.push(note);
    }
    this.feed.close();
    this.finish();
  }

  /** Sends a signal to the whole group. */
  killGroup(sig: NodeJS.Signals | number): boolean {
    if (this.cancelHosted) {
      // The host's process serves other calls too: a signal to this call is a cancel request to the host.
      if (this.state !== 'running') return false;
      // Signal 0 only asks whether the target exists.
      if (sig === 0) return true;
      this.cancelHosted(sig);
      // SIGKILL cannot be waited on: the call ends now, whatever the host is doing; its late reply is dropped.
      if (sig === 'SIGKILL' || sig === osConstants.signals.SIGKILL) this.exited(null, 'SIGKILL');
      return true;
    }
    if (!this.osPid) return false;
    try {
      process.kill(-this.osPid, sig);
      return true;
    } catch {
      return false;
    }
  }

  /** Stops the group: SIGTERM, then SIGKILL after a grace period. `why` becomes its status. */
  terminate(why: Stop, graceMs = KILL_GRACE_MS): void {
    if (this.state === 'exited') return;
    this.stop ??= why;
    if (!this.osPid && !this.cancelHosted) {
      // Still being started by the spawner: the group gets it once it exists, the shortest
      // grace asked for meanwhile counting.
      this.deferredGrace = Math.min(this.deferredGrace ?? graceMs, graceMs);
      return;
    }
    if (graceMs <= 0) {
      this.killGroup('SIGKILL');
      return;
    }
    this.killGroup('SIGTERM');
    this.kill9 ??= setTimeout(() => this.killGroup('SIGKILL'), graceMs);
    this.kill9.unref();
  }

  /** Whether it runs in a pseudo-terminal (a tty tool), so that it can be typed to and resized. */
  get tty(): boolean {
    return this.isTty;
  }

  /** Keystrokes for a tty tool's terminal (proc/{pid}/in). A process without one has no input once started. */
  input(data: Uint8Array): void {
    if (!this.isTty) throw new Error('not a terminal: only a tty tool takes input once started');
    if (this.state !== 'running' || !this.term) throw new Error('the process has exited');
    // Else they would vanish unseen, the writer told they were typed.
    if (this.inputClosed)
      throw new Error(
        'the terminal takes no more keystrokes: more than 16 MiB of them waited for the process to read them',
      );
    this.term.write(data);
  }

  /** Resizes a tty tool's terminal (ctl resize COLS ROWS); its process gets SIGWINCH. */
  resize(cols: number, rows: number): void {
    if (!this.isTty) throw new Error('not a terminal: only a tty tool can be resized');
    if (this.state !== 'running' || !this.term) return;
    this.term.resize({ cols, rows });
  }

  /** Marks a user's stop (ctl kill/term/signal) so the status says killed even if the tool exits cleanly on it. */
  markKilled(): void {
    if (this.state === 'running') this.stop ??= 'killed';
  }

  /** The output so far, then live chunks until exit. */
  follow(signal: AbortSignal): AsyncGenerator<Uint8Array> {
    this.lastRead = Date.now();
    return this.feed.follow(signal, () => [...this.chunks]);
  }

  tail(): string {
    return new TextDecoder().decode(this.tailBuf);
  }

  /** The output for a result: all of it up to OUTPUT_CAP, else its head and tail around a note. */
  resultOutput(): string {
    const all = concatBytes(this.chunks);
    if (all.length <= OUTPUT_CAP) return new TextDecoder().decode(all);
    const half = OUTPUT_CAP / 2;
    const dec = new TextDecoder();
    return `${dec.decode(all.subarray(0, half))}\n[… ${this.outputBytes - OUTPUT_CAP} bytes omitted; the whole output is in proc/${this.id}/out …]\n${dec.decode(all.subarray(all.length - half))}`;
  }

  /** The exit code as `wait` reports it: the code, or 128 + the signal number (as a shell does). */
  waitCode(): number {
    if (this.exit !== null) return this.exit;
    if (this.signal) return 128 + (osConstants.signals[this.signal as keyof typeof osConstants.signals] ?? 0);
    return -1;
  }

  runtimeMs(): number {
    return (this.ended ?? Date.now()) - this.started;
  }
}
