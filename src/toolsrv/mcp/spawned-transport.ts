/**
 * The transport of a stdio MCP server: the SDK's Transport over a process started by the project's launcher
 * (its interactive launch, src/platform/launcher.ts), in place of the SDK's StdioClientTransport, which starts
 * servers with Node's spawn. Through the spawner a server is contained as a tool call is — whatever it starts,
 * setsid'd or double-forked, dies with it — and has the policy's limits but the CPU seconds (launcher.ts says
 * why); its stdout carries JSON-RPC alone, its stderr comes apart to `stderr` (the server's log). Framing is the
 * SDK's own (ReadBuffer, serializeMessage), so messages are read and written exactly as StdioClientTransport does.
 *
 * Reached only by toolsrv (the server's stdin and stdout are pipes to the spawner, and so to toolsrv); the server
 * itself runs under the sandbox helper with the server's policy (manager.ts).
 */
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { limitWords, type CallLimits, type Interactive, type Launcher } from '../../platform/launcher.js';

/** The sandbox-wrapped command of a server, and the policy's limits (none for an approved bypass). */
export interface ServerCommand {
  file: string;
  args: string[];
  env: Record<string, string>;
  limits?: CallLimits;
}

/** How long close() waits for the server to leave after its stdin closed, and again after SIGTERM. */
const CLOSE_GRACE_MS = 2000;

export class SpawnedTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;
  private proc?: Interactive;
  private readonly incoming = new ReadBuffer();
  private why = '';
  /** kill() was called: the process is killed when it starts, if it had not yet. */
  private killed = false;
  private readonly gone: Promise<void>;
  private markGone!: () => void;

  constructor(
    private readonly launcher: Launcher,
    private readonly cmd: ServerCommand,
    private readonly cwd: string,
    /** What the server wrote to stderr, as text in the order written. */
    private readonly stderr: (text: string) => void,
  ) {
    this.gone = new Promise((resolve) => (this.markGone = resolve));
  }

  /** The server's pid (also its process group's), 0 before it runs. */
  get pid(): number {
    return this.proc?.pid ?? 0;
  }

  /** Why the server ended ('' while it runs): its exit status, signal, or the limit it was killed for. */
  get ended(): string {
    return this.why;
  }

  start(): Promise<void> {
    if (this.proc) throw new Error('SpawnedTransport already started');
    const errText = new TextDecoder();
    return new Promise((resolve, reject) => {
      let running = false;
      this.proc = this.launcher.launchInteractive(
        {
          file: this.cmd.file,
          args: this.cmd.args,
          cwd: this.cwd,
          env: this.cmd.env,
          ...(this.cmd.limits && { limits: this.cmd.limits }),
        },
        {
          running: (pid) => {
            running = true;
            // Killed before it ran (a re-check right after a start): it dies as it starts, not at close()'s pace.
            if (this.killed) killGroup(pid);
            resolve();
          },
          output: (b) => this.receive(b),
          errorOutput: (b) => this.stderr(errText.decode(b, { stream: true })),
          exited: (code, signal, limit) =>
            this.end(
              limit
                ? `the server was killed for going over its ${limitWords(limit)}`
                : signal
                  ? `the server was killed by ${signal}`
                  : `the server exited with status ${code}`,
            ),
          closed: () => undefined,
          lost: (why) => {
            // Not started: the start fails with the reason (a close would be taken for a dropped connection).
            if (!running) {
              this.why = why;
              this.markGone();
              return reject(new Error(why));
            }
            this.end(why);
          },
          // Requests written from now on would be dropped unanswered: it is stopped, and restarted as after a crash.
          inputDropped: () => {
            this.onerror?.(new Error('the server left 16 MiB of requests unread; its stdin was closed'));
            void this.close();
          },
        },
      );
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (!this.proc || this.why) return Promise.reject(new Error('Not connected'));
    this.proc.write(serializeMessage(message));
    return Promise.resolve();
  }

  /** Closes the server's stdin, then SIGTERM and SIGKILL to its group should it linger; resolves once it is gone. */
  async close(): Promise<void> {
    const proc = this.proc;
    if (!proc || this.why) return;
    proc.endInput();
    for (const sig of ['SIGTERM', 'SIGKILL'] as const) {
      if (await this.goneWithin(CLOSE_GRACE_MS)) return;
      try {
        if (proc.pid) process.kill(-proc.pid, sig);
      } catch {
        // Already gone.
      }
    }
    await this.goneWithin(CLOSE_GRACE_MS);
  }

  /**
   * Kills the server's group at once: its rights were taken back (the policy in force changed or refuses it),
   * and the grace close() gives is time in which it would still act under them.
   */
  kill(): void {
    const proc = this.proc;
    if (!proc || this.why) return;
    // Not running yet (the spawner has not said its pid): killed as soon as it is.
    this.killed = true;
    if (proc.pid) killGroup(proc.pid);
  }

  private goneWithin(ms: number): Promise<boolean> {
    let t: NodeJS.Timeout | undefined;
    return Promise.race([
      this.gone.then(() => true),
      new Promise<boolean>((resolve) => (t = setTimeout(() => resolve(false), ms))),
    ]).finally(() => clearTimeout(t));
  }

  private receive(bytes: Uint8Array): void {
    try {
      this.incoming.append(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    } catch (e) {
      // Past the SDK's 10 MiB line limit: a server that never ends a line is not speaking the protocol.
      this.onerror?.(e as Error);
      void this.close();
      return;
    }
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.incoming.readMessage();
      } catch (e) {
        this.onerror?.(e as Error);
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  private end(why: string): void {
    if (this.why) return;
    this.why = why;
    this.incoming.clear();
    this.markGone();
    this.onclose?.();
  }
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}
