/**
 * The wire contract of toolsrv's namespace, shared by the server (src/toolsrv) and its client in olliesrv
 * (src/olliesrv/toolclient). Types only: the bytes on the wire are the JSON of these shapes.
 *
 * Scope: a client attaches with aname = the agent id (empty = a session-wide scope). The registry of loaded
 * tools, `ctl` env/cwd and `rev` are per scope, so each agent of a session sees its own loaded tools.
 *
 *   ctl            write: `load NAME`, `unload NAME`, `env K=V`, `cwd PATH`
 *   tools          read: ToolInfo[] as JSON (loaded tools, schemas with the dispatch flags injected); write a name to load
 *   rev            read: registry revision (decimal), bumped on every change of this scope's registry
 *   info           read: ToolsrvInfo as JSON
 *   proc/new       Rdwr: write ProcRequest JSON; the write returns when the tool has exited, and a read on the same
 *                  fid then returns ProcResult JSON. A Tflush of the pending write kills the tool's process group
 *                  (or withdraws the call from the bypass or lock queue).
 *   proc/new.bg    Rdwr: write ProcRequest JSON, read back the pid at once
 *   proc/{pid}/out (stream) output as it is produced, EOF at exit
 *   proc/{pid}/wait  blocks until exit, returns the exit code
 *   proc/{pid}/stat  key=value: state (running|exited), runtime_ms, tool, exit (and status, signal, agent, os_pid,
 *                  background, bypassed, output_bytes, cmd)
 *   proc/{pid}/ctl   write: `signal N`, `term`, `kill`, `dismiss`
 *   bypass/pending (stream) one BypassRequest JSON per line, for every request not yet resolved (from the start)
 *   bypass/resolve write: `ID approve|deny [once|session|always]` (remembering is olliesrv's; toolsrv logs it)
 *
 * Extensions (added with the toolsrv issue; the shapes above are unchanged):
 *   catalog        read: CatalogEntry[] as JSON: every tool on disk (loaded or not) and every invalid .meta
 *   proc/interrupts (stream) one ProcInterrupt JSON per line: background procs of this scope that finished and
 *                  have not been delivered yet (each is delivered once, to whoever reads it first)
 *   bypass/pending also carries BypassResolution lines (`{"id", "resolved": …}`) when a request is resolved or
 *                  its call is cancelled, so a follower can drop it from its list
 *   ctl            also `reload` (rescan the tool directories; every scope's loaded tools are re-resolved)
 */

import type { SandboxFilter, SandboxPrivileges } from './sandbox/index.js';

export type ToolScope = 'read' | 'write' | 'global';
export type ToolTier = 'hot' | 'warm' | 'cold';

export interface ToolInfo {
  name: string;
  description: string;
  /** Markdown for the system prompt (the .meta `prompt`), empty when none. */
  prompt: string;
  /**
   * JSON Schema of the arguments. The dispatch flags (bypass, timeout, background) are accepted among them too,
   * unless the schema declares an argument of that name, but are not in it: clients describe them once.
   */
  parameters: Record<string, unknown>;
  scope: ToolScope;
  /** For scope write: the argument naming the path the lock is taken on. */
  pathArg?: string;
  tier: ToolTier;
  outputFormat?: string;
}

export interface ProcFlags {
  /** Ask to run outside the sandbox (needs an approval). */
  bypass?: boolean;
  /** Seconds; the tool's own timeout (or the default) when unset. */
  timeout?: number;
  /** Run in the background: proc/new answers at once with status "background" and the pid. */
  background?: boolean;
  /**
   * A PreToolUse hook's "ask" (olliesrv/hooks): the call waits for a person's approval, through the bypass queue,
   * and then runs inside the sandbox as usual. Set by olliesrv only: never lifted from the model's arguments.
   */
  ask?: string;
}

export interface ProcRequest {
  tool: string;
  args: Record<string, unknown>;
  flags?: ProcFlags;
}

export type ProcStatus =
  /** Ran and exited (any exit code). */
  | 'exited'
  /** Killed by a signal: a timeout, `kill`, or a cancelled call. */
  | 'killed'
  | 'timeout'
  /** Started in the background; `pid` names it. */
  | 'background'
  /** Never ran: unknown tool, invalid arguments, bypass denied, sandbox unavailable. `error` says why. */
  | 'refused';

export interface ProcResult {
  pid: number;
  tool: string;
  status: ProcStatus;
  /** Exit code when status is exited. */
  exit: number | null;
  /** Combined stdout and stderr, capped at OUTPUT_CAP bytes (the full output stays in proc/{pid}/out). */
  output: string;
  /** Size in bytes of the full output. */
  outputBytes: number;
  /** Output format hint from the tool's .meta (text, markdown, diff, json, a language name…). */
  format?: string;
  /** Why the tool did not run or was stopped, in words for the model. */
  error?: string;
  /** True when it ran outside the sandbox after an approval. */
  bypassed?: boolean;
  /** What the owner should know about the sandbox this call ran in (a project policy file ignored as untrusted). */
  notice?: string;
}

export interface BypassRequest {
  id: string;
  /** Agent id (the attach aname) of the caller. */
  agent: string;
  tool: string;
  /** The exact command line or arguments that will run unsandboxed: `TOOL COMMAND` or `TOOL JSON-ARGUMENTS`. */
  cmd: string;
  /** The command line alone, when it is the call's only argument (what remembered approvals parse into words). */
  command?: string;
  cwd: string;
  /** What the sandbox refused, or why a bypass was asked. */
  reason: string;
  /** The caller's OLLIE_SESSION_ID (set by olliesrv with `env`), so a shared toolsrv's followers can filter. */
  session?: string;
  /** A hook asked for this approval (with or without a bypass): approved once at a time, never remembered. */
  ask?: boolean;
}

/** A bypass/pending line telling that a request left the queue. */
export interface BypassResolution {
  id: string;
  agent: string;
  resolved: 'approve' | 'deny' | 'cancelled';
}

/** A background proc that finished, as proc/interrupts delivers it. */
export interface ProcInterrupt {
  pid: number;
  agent: string;
  tool: string;
  /** The command in words (tool name and its command or arguments). */
  cmd: string;
  status: ProcStatus;
  exit: number | null;
  /** The last lines of its output. */
  tail: string;
  /** The `<system-proc-interrupt …>` block to deliver to the agent as its next prompt. */
  text: string;
}

/** One entry of `catalog`: a tool that loads, or a .meta that does not (with the reason). */
export interface CatalogEntry {
  name: string;
  /** The .meta file it comes from. */
  file: string;
  /** Set when the .meta is invalid: what is wrong with it. */
  error?: string;
  description?: string;
  tier?: ToolTier;
}

export interface ToolsrvInfo {
  platform: string;
  arch: string;
  /** Landlock ABI version, 0 when unavailable. */
  landlockAbi: number;
  /** What the sandbox enforces, in words ("filesystem writes", "TCP bind/connect", …). */
  enforces: string[];
  pid: number;
  /** Started with --yolo: nothing is sandboxed. */
  yolo?: boolean;
  /** Why sandboxed calls are refused here (no Landlock, no helper), when they are. */
  unavailable?: string;
  /** The rest of what the sandbox helper applies (its --probe, docs/sandbox.md): the system call filter and the
   * capabilities it drops. */
  filter?: SandboxFilter;
  capabilities?: SandboxPrivileges;
  /** All of it in one line, as the daemon logs it. */
  summary?: string;
  /** How a call's processes are kept together and limited (exec/containment.ts). */
  containment?: { mechanism: 'subreaper' | 'process-group'; limits: Record<string, string>; cgroup: string };
}

/** The full output of a tool can be large; proc/new returns at most this much of it. */
export const OUTPUT_CAP = 1 << 20;
