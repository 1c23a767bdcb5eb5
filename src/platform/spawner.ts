/**
 * The client of native/ollie-spawner, the fork server behind the project's one process launcher (launcher.ts). Node's spawn forks all of toolsrv and blocks its
 * event loop until the child has exec'd (2.3 ms a call here, during which no other call moves); the spawner
 * is a small C process that forks instead, so toolsrv only writes a frame and reads the answers. The frames
 * are described in native/ollie-spawner.c.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Socket } from 'node:net';
import { concatBytes } from '../ninep/index.js';

/** The fork server, built by scripts/build-native.mjs beside the sandbox helper (this file is two levels below the root). */
export const SPAWNER = fileURLToPath(new URL('../../native/build/ollie-spawner', import.meta.url));

/** What a spawned process reports, by the frames of its id. */
export interface SpawnedHandlers {
  output(bytes: Uint8Array): void;
  /** `limit`: the call's process or memory limit, when the spawner killed the call for exceeding it. */
  exited(code: number | null, signal: NodeJS.Signals | null, limit?: CallLimitKind): void;
  /** The output pipe reached end of file. */
  closed(): void;
  /** The spawner died while the process ran: nothing more will be heard of it. */
  lost(reason: string): void;
}

/**
 * What one call may use (docs/sandbox.md, "Limits"); undefined or 0: no limit. The spawner applies them to the
 * call as a whole (processes, memory: counted by the spawner below the call's process) and to each process (rlimits).
 */
export interface CallLimits {
  processes?: number;
  /** Bytes. */
  memory?: number;
  /** CPU seconds, per process. */
  cpu?: number;
  /** Bytes, per file written. */
  fileSize?: number;
  openFiles?: number;
  /** Bytes of output; enforced by toolsrv (toolsrv/exec/proc.ts), not the spawner. */
  output?: number;
}

/** The limits the spawner kills a call for by itself; the others come back as the signal that enforced them. */
export type CallLimitKind = 'processes' | 'memory' | 'threads';
const LIMIT_KINDS: (CallLimitKind | undefined)[] = [undefined, 'processes', 'memory', 'threads'];
/** Threads a call may hold per process of its process limit (native/ollie-spawner.c, THREADS_PER_PROCESS). */
export const THREADS_PER_PROCESS = 16;

/** The limit in words, as a setting of the policy names it (no setting is called `threads`). */
export function limitWords(kind: CallLimitKind): string {
  if (kind === 'threads') return `thread limit (${THREADS_PER_PROCESS} per process of the process limit)`;
  return kind === 'processes' ? 'process limit' : 'memory limit';
}

export interface SpawnRequest {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  stdin: string;
  limits?: CallLimits;
}

/** A started process, as the spawner knows it. */
export interface Spawned {
  pid: number;
  /** Stops reading its output (a process that left its group may hold the pipe long after the call). */
  abandonOutput(): void;
}

/** What a process started with spawnInteractive reports besides: its stderr, apart from its stdout. */
export interface InteractiveHandlers extends SpawnedHandlers {
  /** It has exec'd: heard before any output or exit of it (the promise settles a microtask later). */
  running?(pid: number): void;
  errorOutput(bytes: Uint8Array): void;
  /** The spawner closed its stdin: more than it buffers (16 MiB) waited for the process to read. */
  inputDropped?(): void;
}

/** A process whose stdin stays open (a resident tool host, a stdio MCP server). */
export interface SpawnedInteractive extends Spawned {
  /** Writes to its stdin (dropped once its stdin is closed, or it is gone). */
  write(bytes: Uint8Array | string): void;
  /** Closes its stdin once what was written has been. */
  endInput(): void;
}

/** The size of a terminal, in characters. */
export interface TermSize {
  cols: number;
  rows: number;
}

/** A process on a pseudo-terminal of its own (a tty tool): its stdin is the terminal's keyboard. */
export interface SpawnedTty extends SpawnedInteractive {
  /** Sets the terminal's size; the process gets SIGWINCH. Ignored once it is gone. */
  resize(size: TermSize): void;
}

/** Whether both numbers fit the u16 a frame carries, and make a size at all. */
function validSize(s: TermSize): boolean {
  return [s.cols, s.rows].every((n) => Number.isInteger(n) && n > 0 && n <= 0xffff);
}

/** The largest 'I' frame sent: a big write goes in pieces, each well below the spawner's frame limit. */
const INPUT_FRAME = 1 << 20;

interface Pending extends SpawnedHandlers {
  started?: { resolve(s: Spawned): void; reject(e: Error): void };
  running?(pid: number): void;
  errorOutput?(bytes: Uint8Array): void;
  inputDropped?(): void;
  /** Its exit and the end of its output come in either order; it is forgotten after both. */
  exitSeen?: boolean;
  closeSeen?: boolean;
}

const SIGNAL_NAMES = new Map(Object.entries(osConstants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));
const enc = new TextEncoder();

export class Spawner {
  private child?: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private buf = new Uint8Array(0);
  private errTail = '';

  /** `adopt`: told of the spawner's own process when it starts (olliesrv confines it: see auth/confined.ts). */
  constructor(
    private readonly binary: string,
    private readonly adopt?: (child: ChildProcess) => void,
  ) {}

  /** The spawner at `binary` when it is there and executable, else undefined (no native build here). */
  static find(binary: string, adopt?: (child: ChildProcess) => void): Spawner | undefined {
    try {
      accessSync(binary, constants.X_OK);
      return new Spawner(binary, adopt);
    } catch {
      return undefined;
    }
  }

  /**
   * Starts a process; resolves with its pid once it has exec'd, or rejects with what stopped it (a missing
   * program or cwd). The handlers then hear its output, then its exit and the end of its output (in either order).
   */
  spawn(req: SpawnRequest, handlers: SpawnedHandlers): Promise<Spawned> {
    return this.start('S', req, handlers).started;
  }

  /**
   * Starts a process whose stdin stays open for write() (frame 'T'), its stderr apart from its stdout (to
   * `errorOutput`). It is contained and limited as spawn's are (a long-lived one is given no CPU-seconds limit by
   * its caller: see launcher.ts). Resolves once it has exec'd, or rejects with what stopped it.
   */
  async spawnInteractive(req: SpawnRequest, handlers: InteractiveHandlers): Promise<SpawnedInteractive> {
    const { s } = await this.startInteractive('T', req, handlers);
    return s;
  }

  /**
   * Starts a process on a new pseudo-terminal of `size` (frame 'Y'): the terminal is its stdin, stdout and stderr
   * and its controlling terminal; write() types into it and what it prints comes to `output`. Contained and
   * limited as spawn's are, CPU seconds included (it is a call). `req.stdin` is typed once it runs.
   */
  async spawnTty(req: SpawnRequest, size: TermSize, handlers: InteractiveHandlers): Promise<SpawnedTty> {
    if (!validSize(size))
      throw new Error(`cannot start ${req.file}: a terminal of ${size.cols}x${size.rows} (1 to 65535 each)`);
    const { s, send, id } = await this.startInteractive('Y', req, handlers, size);
    return {
      ...s,
      resize: (to) => {
        if (!validSize(to)) throw new Error(`a terminal of ${to.cols}x${to.rows}: 1 to 65535 each`);
        send(frame('W', id, [u16s([to.cols, to.rows])]));
      },
    };
  }

  private async startInteractive(
    type: 'T' | 'Y',
    req: SpawnRequest,
    handlers: InteractiveHandlers,
    size?: TermSize,
  ): Promise<{ s: SpawnedInteractive; send: (f: Uint8Array) => void; id: number }> {
    // Frames go only to the spawner this process was started by: a new one (after a crash) reuses no id of it.
    const { id, started } = this.start(type, req, handlers, size);
    const child = this.child;
    const s = await started;
    let ended = false;
    const send = (f: Uint8Array): void => {
      if (child && this.child === child && this.pending.has(id)) child.stdin!.write(f);
    };
    const interactive: SpawnedInteractive = {
      ...s,
      write: (data) => {
        if (ended) return;
        const b = typeof data === 'string' ? enc.encode(data) : data;
        for (let off = 0; off < b.length; off += INPUT_FRAME)
          send(frame('I', id, [b.subarray(off, off + INPUT_FRAME)]));
      },
      endInput: () => {
        if (ended) return;
        ended = true;
        send(frame('D', id, []));
      },
    };
    return { s: interactive, send, id };
  }

  private start(
    type: 'S' | 'T' | 'Y',
    req: SpawnRequest,
    handlers: SpawnedHandlers,
    size?: TermSize,
  ): { id: number; started: Promise<Spawned> } {
    // Strings travel NUL-terminated: one with a NUL inside would shift every field after it (as execve would cut it).
    const bad = [req.file, ...req.args, req.cwd, ...Object.entries(req.env).flat()].find((x) => x.includes('\0'));
    if (bad !== undefined)
      return {
        id: 0,
        started: Promise.reject(
          new Error(`cannot start ${req.file.replace(/\0/g, '\\0')}: ${JSON.stringify(bad)} contains a NUL byte`),
        ),
      };
    const child = this.ensure();
    const id = this.nextId++;
    const started = new Promise<Spawned>((resolve, reject) =>
      this.pending.set(id, { ...handlers, started: { resolve, reject } }),
    );
    this.holdOpen();
    const strings = (xs: string[]): Uint8Array[] => xs.map((x) => enc.encode(`${x}\0`));
    const argv = strings([req.file, ...req.args]);
    const env = strings(Object.entries(req.env).map(([k, v]) => `${k}=${v}`));
    const l = req.limits ?? {};
    const limits = u64s([l.processes, l.memory, l.cpu, l.fileSize, l.openFiles]);
    const parts = [
      ...(size ? [u16s([size.cols, size.rows])] : []),
      u32(argv.length),
      ...argv,
      u32(env.length),
      ...env,
      enc.encode(`${req.cwd}\0`),
      limits,
      enc.encode(req.stdin),
    ];
    child.stdin!.write(frame(type, id, parts));
    return { id, started };
  }

  /** The spawner's own pid while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Ends the spawner; it kills the process groups it started. */
  close(): void {
    this.child?.stdin!.end();
  }

  private ensure(): ChildProcess {
    if (this.child) return this.child;
    const child = spawn(this.binary, [], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.adopt?.(child);
    this.child = child;
    this.buf = new Uint8Array(0);
    this.errTail = '';
    child.stdin!.on('error', () => undefined);
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => (this.errTail = (this.errTail + d).slice(-2000)));
    child.stdout!.on('data', (b: Buffer) => this.receive(b));
    const gone = (why: string): void => {
      if (this.child !== child) return;
      this.child = undefined;
      const reason = `the process spawner ${why}${this.errTail.trim() ? `: ${this.errTail.trim()}` : ''}`;
      const lost = [...this.pending.values()];
      this.pending.clear();
      for (const p of lost) {
        if (p.started) p.started.reject(new Error(reason));
        else p.lost(reason);
      }
    };
    child.once('error', (e) => gone(`could not start (${e.message})`));
    // 'close' rather than 'exit': its stderr (the reason) and any last frames have been read by then.
    child.once('close', (code, signal) => gone(signal ? `was killed by ${signal}` : `exited with status ${code}`));
    return child;
  }

  /** The spawner keeps toolsrv alive only while one of its processes runs, as a child process would. */
  private holdOpen(): void {
    const child = this.child;
    if (!child) return;
    // Piped stdio are sockets, which hold the event loop open on their own.
    const streams = [child.stdin, child.stdout, child.stderr] as (Socket | null)[];
    if (this.pending.size) {
      child.ref();
      for (const s of streams) s?.ref();
    } else {
      child.unref();
      for (const s of streams) s?.unref();
    }
  }

  private receive(chunk: Uint8Array): void {
    let b = this.buf.length ? concatBytes([this.buf, chunk]) : chunk;
    let off = 0;
    const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
    while (b.length - off >= 4) {
      const len = view.getUint32(off, true);
      if (b.length - off - 4 < len) break;
      const type = String.fromCharCode(b[off + 4]!);
      const id = view.getUint32(off + 5, true);
      const payload = b.subarray(off + 9, off + 4 + len);
      off += 4 + len;
      this.dispatch(type, id, payload);
    }
    b = b.subarray(off);
    // Kept as a copy: the chunk's memory belongs to the stream.
    this.buf = b.length ? b.slice() : new Uint8Array(0);
    this.holdOpen();
  }

  private dispatch(type: string, id: number, payload: Uint8Array): void {
    const p = this.pending.get(id);
    if (!p) return; // a process whose output was given up on
    const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
    switch (type) {
      case 'P': {
        const abandonOutput = (): void => {
          if (!this.pending.delete(id)) return;
          this.child?.stdin!.write(frame('C', id, []));
          this.holdOpen();
        };
        const pid = view.getUint32(0, true);
        p.running?.(pid);
        p.started?.resolve({ pid, abandonOutput });
        delete p.started;
        return;
      }
      case 'F':
        this.pending.delete(id);
        p.started?.reject(new Error(new TextDecoder().decode(payload)));
        return;
      case 'O':
        // Copied: the payload is a view of a buffer that the next read reuses.
        p.output(payload.slice());
        return;
      case 'R':
        p.errorOutput?.(payload.slice());
        return;
      case 'Q':
        p.inputDropped?.();
        return;
      case 'X': {
        const code = view.getInt32(0, true);
        const sig = view.getInt32(4, true);
        const limit = LIMIT_KINDS[view.getUint32(8, true)];
        p.exitSeen = true;
        if (p.closeSeen) this.pending.delete(id);
        p.exited(code < 0 ? null : code, sig ? (SIGNAL_NAMES.get(sig) ?? null) : null, limit);
        return;
      }
      case 'E':
        p.closeSeen = true;
        if (p.exitSeen) this.pending.delete(id);
        p.closed();
        return;
    }
  }
}

function u16s(ns: number[]): Uint8Array {
  const b = new Uint8Array(2 * ns.length);
  const view = new DataView(b.buffer);
  ns.forEach((n, i) => view.setUint16(2 * i, n, true));
  return b;
}

function u32(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n, true);
  return b;
}

/** Little-endian u64s; undefined, 0 and anything not a positive integer are 0 (no limit). */
function u64s(ns: (number | undefined)[]): Uint8Array {
  const b = new Uint8Array(8 * ns.length);
  const view = new DataView(b.buffer);
  ns.forEach((n, i) =>
    view.setBigUint64(8 * i, n !== undefined && Number.isSafeInteger(n) && n > 0 ? BigInt(n) : 0n, true),
  );
  return b;
}

function frame(type: string, id: number, parts: Uint8Array[]): Uint8Array {
  const len = parts.reduce((a, p) => a + p.length, 0);
  const out = new Uint8Array(9 + len);
  const view = new DataView(out.buffer);
  view.setUint32(0, 5 + len, true);
  out[4] = type.charCodeAt(0);
  view.setUint32(5, id, true);
  let off = 9;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
