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
 *   proc/new       Rdwr: write ProcRequest JSON, the read blocks until the tool exits and returns ProcResult JSON.
 *                  A Tflush of the pending read kills the tool's process group.
 *   proc/new.bg    Rdwr: write ProcRequest JSON, read back the pid at once
 *   proc/{pid}/out (stream) output as it is produced, EOF at exit
 *   proc/{pid}/wait  blocks until exit, returns the exit code
 *   proc/{pid}/stat  key=value: state (running|exited), runtime_ms, tool, exit
 *   proc/{pid}/ctl   write: `signal N`, `term`, `kill`, `dismiss`
 *   bypass/pending (stream) one BypassRequest JSON per line, for every request not yet resolved (from the start)
 *   bypass/resolve write: `ID approve|deny [once|session|always:PATTERN]`
 */

export type ToolScope = 'read' | 'write' | 'global';
export type ToolTier = 'hot' | 'warm' | 'cold';

export interface ToolInfo {
  name: string;
  description: string;
  /** Markdown for the system prompt (the .meta `prompt`), empty when none. */
  prompt: string;
  /** JSON Schema of the arguments, with the dispatch flags (bypass, timeout, background) injected. */
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
}

export interface BypassRequest {
  id: string;
  /** Agent id (the attach aname) of the caller. */
  agent: string;
  tool: string;
  /** The exact command line or arguments that will run unsandboxed. */
  cmd: string;
  cwd: string;
  /** What the sandbox refused, or why a bypass was asked. */
  reason: string;
}

export interface ToolsrvInfo {
  platform: string;
  arch: string;
  /** Landlock ABI version, 0 when unavailable. */
  landlockAbi: number;
  /** What the sandbox enforces, in words ("filesystem writes", "TCP bind/connect", …). */
  enforces: string[];
  pid: number;
}

/** The full output of a tool can be large; proc/new returns at most this much of it. */
export const OUTPUT_CAP = 1 << 20;
