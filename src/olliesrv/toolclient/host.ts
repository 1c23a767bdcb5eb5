/**
 * What an agent needs from toolsrv, as the agent loop sees it. The 9P client (client.ts) implements it over a
 * connection attached with aname = the agent id; tests may implement it over an in-test 9P server speaking the
 * same namespace (src/toolsrv/protocol.ts).
 */
import type { Client } from '../../ninep/index.js';
import type { BypassRequest, ProcInterrupt, ProcRequest, ProcResult, ToolInfo } from '../../toolsrv/protocol.js';

export interface ToolHost {
  /** Loaded tools of this agent's scope and the registry revision they belong to. */
  list(): Promise<{ rev: number; tools: ToolInfo[] }>;
  /** The registry revision alone (cheap: compared after each tool round). */
  rev(): Promise<number>;
  /** A toolsrv ctl command: `load NAME`, `unload NAME`, `env K=V`, `cwd PATH`. Rejects with toolsrv's error. */
  ctl(command: string): Promise<void>;
  /** Runs one tool and waits for its result; aborting the signal flushes the request, which kills the process. */
  call(req: ProcRequest, signal?: AbortSignal): Promise<ProcResult>;
  /**
   * Background procs of this agent that finished, each delivered once, until `signal` aborts. Each carries
   * the `<system-proc-interrupt>` block (`text`) to queue as the agent's next prompt. (The 9P client implements it.)
   */
  interrupts?(signal: AbortSignal): AsyncIterable<ProcInterrupt>;
  /** A proc's output, live until it exits (olliesrv mirrors it as the agent's proc/{pid}/out). */
  output?(pid: number, signal?: AbortSignal): AsyncIterable<Uint8Array>;
  /** Blocks until the proc exits; its exit code. */
  wait?(pid: number, signal?: AbortSignal): Promise<number>;
  /** proc/{pid}/stat as key=value pairs. */
  stat?(pid: number): Promise<Record<string, string>>;
  /** `signal N`, `term`, `kill`, `resize COLS ROWS` or `dismiss`. */
  procCtl?(pid: number, command: string): Promise<void>;
  /** Keystrokes for a tty tool's terminal (toolsrv's proc/{pid}/in); rejected for a process without a pty. */
  input?(pid: number, data: Uint8Array): Promise<void>;
  /**
   * Saves a long result whole on the host the tools run on (toolsrv's proc/spill), where the agent's tools can read
   * it; its path there. For tools on another host: a file olliesrv wrote here would not be there.
   */
  spill?(name: string, body: string): Promise<string>;
  close(): Promise<void>;
}

/** The toolsrv of one session (one process, or the shared per-host one), as olliesrv keeps it. */
export interface SessionTools {
  /** A connection scoped to one agent (attach aname = agentId), set to the agent's cwd and session env. */
  /** `root`: where the agent's sandbox policy is loaded for, when not `cwd` (toolsrv's `root` command). */
  forAgent(agentId: string, cwd: string, env: Record<string, string>, root?: string): Promise<ToolHost>;
  /** Bypass requests waiting for a person. */
  pending(): BypassRequest[];
  /**
   * Resolve a pending request: `approve` or `deny`, remembered `once` (default), for the `session` or `always`
   * by the rule store/bypass.ts's ruleFor computes from the request.
   */
  resolve(id: string, decision: 'approve' | 'deny', remember?: string): Promise<void>;
  /** Whether its toolsrv is reachable now (false while a remote one's connection is down). */
  readonly connected?: boolean;
  /** The remote host its toolsrv runs on, when not this machine. */
  readonly host?: string | undefined;
  /** Called for every new request and every resolution; returns an unsubscribe function. */
  onBypass(listener: (e: BypassEvent) => void): () => void;
  /** The session-wide 9P connection to toolsrv, where there is one (olliesrv/mcp reads its mcp/ directory). */
  toolsrv?(): Client;
  close(): Promise<void>;
}

/**
 * What SessionTools.onBypass listeners hear. Every request gets a `request` and later a `resolved` (also when
 * it was approved automatically from a remembered approval: `remembered` says which; or when its call was
 * cancelled: `cancelled`, with approved false).
 */
export type BypassEvent =
  | { kind: 'request'; req: BypassRequest }
  | { kind: 'resolved'; id: string; agent: string; approved: boolean; cancelled?: boolean; remembered?: string };
