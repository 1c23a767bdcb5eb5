/**
 * Resident tool hosts: long-lived processes that serve many calls of the tools naming them (`"host": NAME` in
 * a .meta), so that what is costly to load — grammars, language servers — loads once per host, not per call.
 *
 * A host is `node hosts/NAME.mjs --idle-ms N`, started on first use by the project's launcher (its interactive
 * launch: src/platform/launcher.ts) through the same sandbox wrapping as any tool (Confinement.wrap with the
 * calling scope's cwd, policy and the tool's own rules). Through the spawner it is contained as a call is (what
 * it starts, however detached, dies with it) and has the policy's limits but the CPU seconds (a host lives for
 * many calls: launcher.ts says why). Hosts are keyed by that wrapped command, its limits and the cwd, so a host
 * only serves calls whose Landlock rules and limits are exactly its own: another cwd, another policy (its limits
 * included), a bypass, or other per-tool rules get another host.
 *
 * Wire (JSON lines; stdin toolsrv → host, stdout host → toolsrv; stderr is kept for error messages):
 *   → {"id": N, "tool": T, "args": {…}, "cwd": C, "env": {…}}     a call
 *   → {"cancel": N, "signal": S}                                    stop call N (a flush, ctl kill, a timeout)
 *   → {"id": N, "stats": true}                                      the host's counters
 *   ← {"hello": {"pid": P}}                                         once started
 *   ← {"id": N, "out": TEXT}                                        output of call N (any number)
 *   ← {"id": N, "exit": CODE}  |  {"id": N, "exit": null, "signal": S}   call N is over
 *   ← {"id": N, "stats": {…}}
 *
 * Life: a call's proc/ record, path lock and timeout are toolsrv's as for any tool; a cancel ends only that
 * call. A host that dies fails the calls it was serving with the reason, and the next call starts a new one.
 * A host with no call for `idleMs` is stopped (stdin closed, then its process group killed), and so are all
 * hosts when toolsrv closes. `retireAll()` (ctl reload) lets running calls finish and starts new hosts for
 * new calls, so edited host code and policies take effect.
 */
import { Launcher, limitWords, type CallLimits, type Interactive } from '../../platform/launcher.js';
import type { HostedCall, Proc } from './proc.js';

export const DEFAULT_HOST_IDLE_MS = 10 * 60 * 1000;
/** Hosts of one name in one cwd kept at once (more would be several policies' or per-tool rules' worth). */
const MAX_HOSTS_PER_CWD = 3;
/** How long a host gets to exit after its stdin closed before its process group is killed. */
const STOP_GRACE_MS = 2000;
const STDERR_TAIL = 4096;
/** The sandbox helper's own exit codes: the host never ran (bad policy, Landlock unavailable, setup). */
const SANDBOX_CODES = new Set([120, 121, 122]);

export interface HostCommand {
  file: string;
  args: string[];
  env: Record<string, string>;
  /** The policy's limits (the launcher leaves out the CPU seconds); none for a bypassed or --yolo host. */
  limits?: CallLimits;
}

export interface HostInfo {
  name: string;
  cwd: string;
  pid: number;
  startedAt: number;
  /** Calls served so far, and running now. */
  calls: number;
  inflight: number;
}

interface Pending {
  sink: HostedCall;
  proc: Proc;
}

class Host {
  private readonly proc: Interactive;
  /** Called once it has exited (or never started). */
  private readonly onExit: Array<() => void> = [];
  private exitSeen = false;
  readonly startedAt = Date.now();
  readonly pending = new Map<number, Pending>();
  private readonly waiting = new Map<number, (v: unknown) => void>();
  private nextId = 1;
  calls = 0;
  hello = false;
  dead = false;
  retired = false;
  private stderr = '';
  private buf = '';
  private idle?: NodeJS.Timeout;

  constructor(
    readonly name: string,
    readonly key: string,
    readonly cwd: string,
    cmd: HostCommand,
    private readonly idleMs: number,
    private readonly gone: (h: Host) => void,
    launcher: Launcher,
  ) {
    const out = new TextDecoder();
    const err = new TextDecoder();
    const exited = (): void => {
      this.exitSeen = true;
      for (const f of this.onExit.splice(0)) f();
    };
    // Its own process group, so that stopping it also stops what it started (language servers).
    this.proc = launcher.launchInteractive(
      { file: cmd.file, args: cmd.args, cwd, env: cmd.env, ...(cmd.limits && { limits: cmd.limits }) },
      {
        // A call sent before the host ran was recorded with pid 0.
        running: (pid) => {
          for (const p of this.pending.values()) if (!p.proc.osPid) p.proc.osPid = pid;
        },
        output: (b) => this.read(out.decode(b, { stream: true })),
        errorOutput: (b) => {
          this.stderr = (this.stderr + err.decode(b, { stream: true })).slice(-STDERR_TAIL);
        },
        exited: (code, signal, limit) => {
          this.died(code, signal, limit && `killed for going over its ${limitWords(limit)}`);
          exited();
        },
        closed: () => undefined,
        lost: (why) => {
          this.died(null, null, why);
          exited();
        },
        // The spawner closed its stdin (spawner only): calls written from now on would be dropped, and one may
        // have been cut in two. It is stopped at once, so that the next call starts a new host rather than wait
        // on a deaf one until this one happens to exit.
        inputDropped: () => this.died(null, null, 'it left 16 MiB of requests unread, so its input was closed'),
      },
    );
  }

  get pid(): number {
    return this.proc.pid;
  }

  /** Runs `f` once the host has exited, or failed to start (at once if it has). */
  whenExited(f: () => void): void {
    if (this.exitSeen) f();
    else this.onExit.push(f);
  }

  private send(msg: unknown): void {
    if (!this.dead) this.proc.write(`${JSON.stringify(msg)}\n`);
  }

  run(
    proc: Proc,
    req: { tool: string; args: Record<string, unknown>; env: Record<string, string> },
    timeoutS?: number,
  ): void {
    clearTimeout(this.idle);
    const id = this.nextId++;
    this.calls++;
    const sink = proc.startHosted(
      this.pid,
      (sig) => {
        if (!this.pending.has(id)) return;
        this.send({ cancel: id, signal: typeof sig === 'number' ? sig : String(sig) });
        // SIGKILL ends the call at once (Proc.killGroup); the host's late answer is dropped.
        if (sig === 'SIGKILL' || sig === 9) this.settle(id);
      },
      timeoutS,
    );
    this.pending.set(id, { sink, proc });
    this.send({ id, tool: req.tool, args: req.args, cwd: this.cwd, env: req.env });
  }

  stats(): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      if (this.dead) return resolve(undefined);
      this.waiting.set(id, resolve);
      this.send({ id, stats: true });
    });
  }

  private read(d: string): void {
    this.buf += d;
    let nl: number;
    while ((nl = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + 1);
      if (!line.trim()) continue;
      let m: {
        id?: number;
        out?: string;
        exit?: number | null;
        signal?: NodeJS.Signals;
        hello?: unknown;
        stats?: unknown;
      };
      try {
        m = JSON.parse(line) as typeof m;
      } catch {
        // A host must write only its protocol to stdout; anything else is kept as a diagnostic.
        this.stderr = (this.stderr + `${line}\n`).slice(-STDERR_TAIL);
        continue;
      }
      if (m.hello) this.hello = true;
      if (typeof m.id !== 'number') continue;
      const w = this.waiting.get(m.id);
      if (w && 'stats' in m) {
        this.waiting.delete(m.id);
        w(m.stats);
        continue;
      }
      const p = this.pending.get(m.id);
      if (!p) continue;
      if (typeof m.out === 'string') p.sink.output(m.out);
      if ('exit' in m) {
        p.sink.exit(typeof m.exit === 'number' ? m.exit : null, m.signal ?? null);
        this.settle(m.id);
      }
    }
  }

  /** Call `id` is over (answered, or given up on): forget it, and stop the host when nothing is left. */
  private settle(id: number): void {
    if (!this.pending.delete(id) || this.pending.size > 0) return;
    if (this.retired) this.stop();
    else {
      this.idle = setTimeout(() => this.stop(), this.idleMs);
      this.idle.unref();
    }
  }

  private died(code: number | null, signal: NodeJS.Signals | null, why?: string): void {
    if (this.dead) return;
    this.dead = true;
    clearTimeout(this.idle);
    this.gone(this);
    const tail = this.stderr.trim();
    const how = why ?? (signal ? `killed by ${signal}` : `exit code ${code}`);
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      if (!this.hello && code !== null && SANDBOX_CODES.has(code)) {
        // The sandbox helper refused to start it: reported like any tool the sandbox refused (core.result).
        p.sink.output(`${tail}\n`);
        p.sink.exit(code);
      } else {
        p.sink.lost(
          `the ${this.name} tool host ${this.hello ? 'died during the call' : 'could not start'} (${how})${tail ? `: ${lastWords(tail)}` : ''}; it is started again on the next call`,
        );
      }
    }
    for (const w of this.waiting.values()) w(undefined);
    this.waiting.clear();
    // Whatever it started goes with it.
    this.killGroup('SIGKILL');
  }

  private killGroup(sig: NodeJS.Signals): void {
    try {
      if (this.pid) process.kill(-this.pid, sig);
    } catch {
      // already gone
    }
  }

  /** Closes its stdin (a host exits on EOF); kills its process group if it is still there after a grace. */
  stop(): void {
    if (this.dead) return;
    this.gone(this);
    this.proc.endInput();
    const t = setTimeout(() => this.killGroup('SIGKILL'), STOP_GRACE_MS);
    t.unref();
    this.whenExited(() => {
      clearTimeout(t);
      this.killGroup('SIGKILL');
    });
  }

  kill(): void {
    this.killGroup('SIGKILL');
  }

  info(): HostInfo {
    return {
      name: this.name,
      cwd: this.cwd,
      pid: this.pid,
      startedAt: this.startedAt,
      calls: this.calls,
      inflight: this.pending.size,
    };
  }
}

/** What a dead host's stderr says, in a line: its error messages (not the stack), else its last lines. */
function lastWords(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const errors = lines.filter((l) => /^([A-Za-z]*Error\b|ollie-sandbox:)/.test(l));
  return (errors.length ? errors.slice(0, 2) : lines.slice(-3)).join(' | ');
}

export class HostPool {
  private readonly hosts = new Map<string, Host>();
  /** Every live host, also retired or stopping ones (for close()). */
  private readonly live = new Set<Host>();

  constructor(
    readonly idleMs = DEFAULT_HOST_IDLE_MS,
    private readonly launcher: Launcher = Launcher.create({ native: false }),
  ) {}

  /** The arguments after the host program (its own idle time, for what it keeps warm inside). */
  programArgs(): string[] {
    return ['--idle-ms', String(this.idleMs)];
  }

  /**
   * Runs one call in the host `name` started by `cmd` (the sandbox-wrapped host program) in `cwd`; `cmd.env`
   * is also the call's environment. Starts the host when none with the same command and cwd is running.
   */
  run(
    name: string,
    cmd: HostCommand,
    cwd: string,
    proc: Proc,
    req: { tool: string; args: Record<string, unknown> },
    timeoutS?: number,
  ): void {
    // The limits too: they are not in the wrapped command, and a host keeps those it was started with, so a
    // lowered limit (a trusted project file) must start a new host rather than go on in one started under the old.
    const key = JSON.stringify([cmd.file, cmd.args, cwd, cmd.limits ?? null]);
    let h = this.hosts.get(key);
    if (!h || h.dead) {
      h = new Host(
        name,
        key,
        cwd,
        cmd,
        this.idleMs,
        (gone) => {
          if (this.hosts.get(gone.key) === gone) this.hosts.delete(gone.key);
          if (gone.dead) this.live.delete(gone);
        },
        this.launcher,
      );
      this.hosts.set(key, h);
      this.live.add(h);
      const started = h;
      h.whenExited(() => this.live.delete(started));
      this.retireOlder(name, cwd);
    }
    h.run(proc, { ...req, env: cmd.env }, timeoutS);
  }

  list(): HostInfo[] {
    return [...this.hosts.values()].map((h) => h.info());
  }

  /** The counters of the running host with this os pid (undefined when there is none, or it died). */
  async stats(pid: number): Promise<unknown> {
    const h = [...this.hosts.values()].find((x) => x.pid === pid);
    return h ? h.stats() : undefined;
  }

  /**
   * Past MAX_HOSTS_PER_CWD hosts of one name in one cwd, the oldest is retired (it finishes its calls and stops).
   * Its key is the wrapped command, which changes with what the sandbox looks up on disk at every command (the
   * protected paths: a new `.git/worktrees` entry changes them): without a bound, an agent that changes it between
   * calls leaves one more resident host each time, every one idling for idleMs.
   */
  private retireOlder(name: string, cwd: string): void {
    const same = [...this.hosts.values()].filter((h) => h.name === name && h.cwd === cwd);
    for (const h of same.slice(0, Math.max(0, same.length - MAX_HOSTS_PER_CWD))) {
      h.retired = true;
      this.hosts.delete(h.key);
      if (h.pending.size === 0) h.stop();
    }
  }

  /** New calls get new hosts; the current ones finish their calls and stop. */
  retireAll(): void {
    for (const h of [...this.hosts.values()]) {
      h.retired = true;
      this.hosts.delete(h.key);
      if (h.pending.size === 0) h.stop();
    }
  }

  close(): void {
    for (const h of this.live) h.kill();
    this.hosts.clear();
  }
}
