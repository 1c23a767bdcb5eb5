/**
 * The MCP servers of one toolsrv (one session's workspace): their connections, and their tools as toolsrv Tools
 * named `mcp__SERVER__TOOL` (Claude Code's convention), which every scope of this toolsrv has without a `load`.
 * A call goes through Core.call like any tool (validation, dispatch flags, bypass, lock, proc/ record, timeout,
 * kill) and is answered by the server: its output is the result's content in words, exit 1 when the server says
 * the call failed.
 *
 * Tools are `cold` (toolsrv's tier): not one schema or line of them is sent to the model until it loads one
 * with tool_search or calls one by name (olliesrv/agent/tooling.ts); the system prompt names only the servers.
 *
 * Locks: a stdio server sees the workspace read only (unless its config says "workspace": "rw") and a remote one
 * not at all, so their calls take the shared lock (scope read) beside file writes; a server with a writable
 * workspace takes the global lock unless the tool is annotated read only.
 *
 * Sandbox: a stdio server runs under the sandbox helper with the cwd's policy narrowed for it: the workspace read
 * only, no network (TCP or Unix sockets) but the ports its config names (`ollie.sandbox.network`), its own env
 * names kept. It is started through the spawner (spawned-transport.ts): contained as a tool call is, with the
 * policy's process, memory, file size and open files limits (not CPU seconds: a server is long-lived). A call
 * with the bypass flag, once approved, runs in a separate unsandboxed instance started for that call alone
 * (connection.ts, call with `unconfined`).
 */
import { isAbsolute, relative } from 'node:path';
import type { Confinement } from '../exec/confine.js';
import type { Proc } from '../exec/proc.js';
import type { ToolInfo } from '../protocol.js';
import { validatorFor, type Tool } from '../registry/catalog.js';
import { DEFAULT_TIMEOUT_S, type ToolFields } from '../registry/meta.js';
import type { SandboxPolicy } from '../sandbox/policy.js';
import type { Launcher } from '../../platform/launcher.js';
import { Feed } from '../../platform/queue.js';
import { loadMcpConfig, type McpConfig, type StdioServer } from './config.js';
import { McpConnection, type McpState } from './connection.js';
import type { McpServerStatus } from '../../formats/mcp-status.js';

export const MCP_PREFIX = 'mcp__';
/** What providers accept as a tool name (OpenAI: ^[a-zA-Z0-9_-]{1,64}$). */
const MAX_NAME = 64;
/** The longest tool description taken from a server (characters). */
const MAX_DESCRIPTION = 2048;

export interface McpManagerOptions {
  configDir: string;
  confinement: Confinement;
  /** toolsrv's launcher, which starts stdio servers (spawned-transport.ts). */
  launcher?: Launcher;
  /** The environment servers start from (toolsrv's base env; the sandbox filters it). */
  baseEnv: Record<string, string>;
  backoffMs?: number;
  startTimeoutMs?: number;
  /** The periodic re-check's interval (RECHECK_MS). */
  recheckMs?: number;
  /** Tools, resources, prompts or states changed: bump every scope's revision. */
  changed: () => void;
  log: (m: string) => void;
}

/** Where a tool of ours is answered: the server and the tool's own name there. */
export interface McpTarget {
  server: string;
  tool: string;
}

export type McpTool = Tool & { mcp: McpTarget };

export type ServerStatus = McpServerStatus<McpState | 'invalid'>;

const FLAG_NAMES = ['bypass', 'timeout', 'background'] as const;
/**
 * How often running stdio servers are re-checked against the policy in force besides at every tool call's end:
 * what no call of this toolsrv changes (the owner's sandbox.yaml and trust list, a trusted project file edited
 * from outside, a `.git` a server made itself) reaches them within this. bench/mcp-recheck.mjs measures a check.
 */
export const RECHECK_MS = 2000;

export class McpManager {
  readonly servers = new Map<string, McpConnection>();
  private config: McpConfig = { servers: [], bad: [], errors: [], notices: [] };
  private tools = new Map<string, McpTool>();
  /** A count pushed at every change of a server's state or lists (mcp/changes). */
  readonly changes = new Feed<number>();
  private changeCount = 0;
  private recheckTimer?: NodeJS.Timeout;
  private readonly serverPolicies = new WeakMap<SandboxPolicy, { rw?: SandboxPolicy; ro?: SandboxPolicy }>();

  constructor(private readonly o: McpManagerOptions) {}

  /** The session the servers run for ('' for a toolsrv of no session), once started. */
  session?: string;
  /** Their workspace: the cwd (or policy root) of the session's first agent. */
  workspace = '';

  /**
   * Reads the configuration and starts every enabled server (again: `reload`); the first start names the session
   * and workspace, which stay.
   */
  start(first?: { session: string; cwd: string }): void {
    if (first && this.session === undefined) {
      this.session = first.session;
      this.workspace = first.cwd;
    }
    if (this.session === undefined)
      throw new Error('no session has started its MCP servers yet (they start with its first agent)');
    for (const c of this.servers.values()) c.stop('configuration reloaded');
    this.servers.clear();
    this.config = loadMcpConfig(this.o.configDir, this.workspace);
    for (const e of [...this.config.errors, ...this.config.bad.map((b) => b.error)]) this.o.log(`MCP: ${e}`);
    for (const n of this.config.notices) this.o.log(`MCP: ${n}`);
    for (const s of this.config.servers) {
      const conn = new McpConnection(s, {
        cwd: s.type === 'stdio' && s.cwd !== 'workspace' ? s.cwd : this.workspace,
        launch: (srv, unconfined) => this.launch(srv, unconfined),
        ...(this.o.launcher && { launcher: this.o.launcher }),
        yolo: this.o.confinement.yolo,
        changed: () => this.rebuild(),
        log: this.o.log,
        ...(this.o.backoffMs !== undefined && { backoffMs: this.o.backoffMs }),
        ...(this.o.startTimeoutMs !== undefined && { startTimeoutMs: this.o.startTimeoutMs }),
      });
      this.servers.set(s.name, conn);
      conn.start();
    }
    clearInterval(this.recheckTimer);
    this.recheckTimer = undefined;
    // --yolo: servers run outside any policy, so none can change under them.
    if (!this.o.confinement.yolo && this.config.servers.some((s) => s.type === 'stdio')) {
      this.recheckTimer = setInterval(() => this.recheck(), this.o.recheckMs ?? RECHECK_MS);
      this.recheckTimer.unref();
    }
    this.rebuild();
  }

  /**
   * Re-checks every stdio server against the policy in force (connection.ts, recheck): after every tool call of
   * this toolsrv (a shell call may have made a `.git` or edited a trusted project file), and every RECHECK_MS.
   * A server that is neither running nor stopped by the policy costs nothing.
   */
  recheck(): void {
    for (const c of this.servers.values()) {
      try {
        c.recheck();
      } catch (e) {
        // A server whose policy could not be checked does not keep running on the old one.
        const why = `re-checking it against the sandbox policy failed: ${(e as Error).message}`;
        this.o.log(`MCP server ${c.name}: ${why}`);
        c.stop(`stopped: ${why}`);
      }
    }
  }

  /** Waits (at most `ms`) until no server is still starting: an agent's first tool list should hold their tools. */
  async settled(ms: number): Promise<void> {
    await Promise.all([...this.servers.values()].map((c) => c.settled(ms)));
  }

  /** The sandboxed command of a stdio server (unconfined: an approved bypass). */
  private launch(s: StdioServer, unconfined: boolean): ReturnType<Confinement['wrap']> {
    const env = { ...this.o.baseEnv, ...s.env };
    // The server's own variables pass the policy's env filter: its config named them.
    const sandbox = { ...s.sandbox, env: [...new Set([...(s.sandbox.env ?? []), ...Object.keys(s.env)])] };
    return this.o.confinement.wrap([s.command, ...s.args], this.workspace, env, {
      unconfined,
      sandbox,
      adjust: (p) => this.serverPolicyOf(p, s.workspaceWritable),
    });
  }

  /**
   * serverPolicy of the policy in force, made once per policy (Confinement keeps one per cwd until it changes):
   * the same object each time lets the sandbox reuse its resolved rules, which every re-check would otherwise
   * resolve again (bench/mcp-recheck.mjs).
   */
  private serverPolicyOf(p: SandboxPolicy, workspaceWritable: boolean): SandboxPolicy {
    let made = this.serverPolicies.get(p);
    if (!made) this.serverPolicies.set(p, (made = {}));
    const key = workspaceWritable ? 'rw' : 'ro';
    return (made[key] ??= serverPolicy(p, this.workspace, workspaceWritable));
  }

  /** Rebuilds the tool table from the servers' lists and tells Core. */
  private rebuild(): void {
    const tools = new Map<string, McpTool>();
    for (const conn of this.servers.values()) {
      // A server coming back after a crash keeps its tools listed (a call meanwhile says it is restarting), so an
      // agent's tool list and system prompt do not change with every restart; so does one the policy in force
      // stopped (a call says why; it starts again once the policy allows it).
      if (
        conn.state !== 'ready' &&
        conn.state !== 'restarting' &&
        !(conn.state === 'starting' && conn.restarts > 0) &&
        !conn.stoppedByPolicy
      )
        continue;
      for (const t of conn.tools) {
        const name = uniqueName(`${MCP_PREFIX}${conn.name}__${t.name.replace(/[^A-Za-z0-9_-]/g, '_')}`, tools);
        tools.set(name, this.toolFor(conn, name, t));
      }
    }
    this.tools = tools;
    this.o.changed();
    this.changes.push(++this.changeCount);
  }

  private toolFor(conn: McpConnection, name: string, t: McpConnection['tools'][number]): McpTool {
    const schema: Record<string, unknown> = { ...(t.inputSchema as Record<string, unknown>), type: 'object' };
    const own = (schema.properties ?? {}) as Record<string, unknown>;
    const cfg = conn.config;
    const isolated = cfg.type !== 'stdio' || !cfg.workspaceWritable;
    // A server's words reach the model (tool_search, a loaded tool's schema): a description is cut, as other MCP
    // clients cut it, so no server fills the context with one.
    let about = t.description?.trim() || t.title || t.name;
    if (about.length > MAX_DESCRIPTION) about = `${about.slice(0, MAX_DESCRIPTION)}… (cut)`;
    const fields: ToolFields = {
      description: `${about} (MCP server ${conn.name})`,
      prompt: '',
      args: schema,
      tier: 'cold',
      scope: isolated || t.annotations?.readOnlyHint ? 'read' : 'global',
      timeout: cfg.timeout ?? DEFAULT_TIMEOUT_S,
      tty: false,
    };
    const info: ToolInfo = {
      name,
      description: fields.description,
      prompt: '',
      parameters: { ...schema, properties: own },
      scope: fields.scope,
      tier: 'cold',
    };
    let validate: Tool['validate'];
    try {
      const checkable = withoutPatterns(schema);
      if (checkable === undefined) throw new Error('a schema toolsrv leaves to the server');
      validate = validatorFor(checkable as Record<string, unknown>, '2020-12');
    } catch {
      // A schema the validator cannot read: the server judges the arguments itself.
      validate = Object.assign(() => true, { errors: '' });
    }
    return {
      name,
      fields,
      variant: -1,
      validate,
      info,
      argv: [],
      ollieSocket: false,
      sandbox: {},
      liftable: FLAG_NAMES.filter((f) => !(f in own)),
      def: { name, file: cfg.file, dir: this.o.configDir, base: fields, variants: [], extra: {} },
      mcp: { server: conn.name, tool: t.name },
    };
  }

  /** Whether `name` belongs to a server that is starting now (its tools are not listed yet). */
  starting(name: string): boolean {
    const server = /^mcp__(.+?)__/.exec(name)?.[1];
    return server !== undefined && this.servers.get(server)?.state === 'starting';
  }

  tool(name: string): McpTool | undefined {
    return name.startsWith(MCP_PREFIX) ? this.tools.get(name) : undefined;
  }

  infos(): ToolInfo[] {
    return [...this.tools.values()].map((t) => t.info);
  }

  /** Why `name` (an mcp__ name) cannot be called, in words. */
  whyNot(name: string): string {
    const server = /^mcp__(.+?)__/.exec(name)?.[1];
    const conn = server ? this.servers.get(server) : undefined;
    if (!server || !conn) {
      const bad = this.config.bad.find((b) => b.name === server);
      if (bad) return `MCP server ${server} is not started: ${bad.error}`;
      return `no MCP server ${JSON.stringify(server ?? name)} is configured (servers: ${[...this.servers.keys()].join(', ') || 'none'})`;
    }
    if (conn.state !== 'ready') return `MCP server ${server} is ${conn.state}${conn.error ? ` (${conn.error})` : ''}`;
    return `MCP server ${server} has no tool ${JSON.stringify(name.slice(MCP_PREFIX.length + server.length + 2))}`;
  }

  /** Runs a call on its server; the proc is ended by the answer, a failure, a timeout or a kill. */
  run(
    target: McpTarget,
    proc: Proc,
    args: Record<string, unknown>,
    bypassed: boolean,
    timeoutS: number | undefined,
  ): void {
    const conn = this.servers.get(target.server);
    const ac = new AbortController();
    const sink = proc.startHosted(conn?.pid ?? 0, () => ac.abort(), timeoutS);
    if (!conn) return sink.lost(`MCP server ${target.server} is gone`);
    // The SDK's own timeout is a backstop; the proc's timer is the one that ends the call (and says so).
    const ms = (timeoutS ?? 24 * 3600) * 1000 + 5000;
    const call = conn.call(target.tool, args, ac.signal, ms, bypassed);
    call.then(
      (r) => {
        sink.output(r.text.endsWith('\n') || !r.text ? r.text : `${r.text}\n`);
        sink.exit(r.isError ? 1 : 0);
      },
      (e: Error) => {
        if (ac.signal.aborted) sink.exit(null, 'SIGTERM');
        else sink.lost(`MCP server ${target.server}: ${e.message}`);
      },
    );
  }

  status(): ServerStatus[] {
    const out: ServerStatus[] = [...this.servers.values()].map((c) => ({
      name: c.name,
      type: c.config.type,
      file: c.config.file,
      state: c.state,
      error: c.error,
      pid: c.pid,
      restarts: c.restarts,
      tools: c.tools.length,
      resources: c.resources.length,
      prompts: c.prompts.length,
    }));
    for (const b of this.config.bad)
      out.push({
        name: b.name,
        type: '',
        file: b.file,
        state: 'invalid',
        error: b.error,
        pid: 0,
        restarts: 0,
        tools: 0,
        resources: 0,
        prompts: 0,
      });
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Problems and notices of the configuration files. */
  notes(): string[] {
    return [...this.config.errors, ...this.config.notices];
  }

  /** The names of this server's tools as agents see them. */
  toolNames(server: string): string[] {
    return [...this.tools.values()].filter((t) => t.mcp.server === server).map((t) => t.name);
  }

  connection(server: string): McpConnection {
    const c = this.servers.get(server);
    if (!c) throw new Error(`no MCP server ${JSON.stringify(server)}`);
    return c;
  }

  /** The change count now (what mcp/changes starts with). */
  get changeNumber(): number {
    return this.changeCount;
  }

  close(): void {
    clearInterval(this.recheckTimer);
    for (const c of this.servers.values()) c.stop('toolsrv closing');
    this.changes.close();
  }
}

/** Whether `dir` is `root` or below it (both absolute). */
function within(dir: string, root: string): boolean {
  const rel = relative(root, dir);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/**
 * A server's schema as toolsrv checks it: without its `pattern`s, whose regular expressions (the server's, run on
 * the model's arguments in toolsrv's one thread) can backtrack for hours: `^(a+)+$` against 32 a's and a "!"
 * froze every call of the session for 80 s. The server checks them itself. A schema with `patternProperties` or
 * `propertyNames` (regular expressions that decide which properties are allowed), or with references (whose
 * work a server can make grow exponentially with its schema's size), is not checked here at all (undefined):
 * without them a check's work grows with the schema's size times the arguments'.
 */
const REFS = ['$ref', '$dynamicRef', '$recursiveRef'];
function withoutPatterns(s: unknown): unknown {
  if (Array.isArray(s)) {
    const out = s.map(withoutPatterns);
    return out.includes(undefined) ? undefined : out;
  }
  if (typeof s !== 'object' || s === null) return s;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s)) {
    // A property called "pattern" has a schema (an object) for its value, never a string.
    if (k === 'pattern' && typeof v === 'string') continue;
    if (
      (k === 'patternProperties' || k === 'propertyNames') &&
      typeof v === 'object' &&
      v !== null &&
      !Array.isArray(v)
    )
      return undefined;
    // References can multiply the work: 26 definitions each referring twice to the next are 2^26 checks.
    if (REFS.includes(k) && typeof v === 'string') return undefined;
    const w = withoutPatterns(v);
    if (w === undefined) return undefined;
    out[k] = w;
  }
  return out;
}

function uniqueName(base: string, taken: Map<string, unknown>): string {
  let name = base.slice(0, MAX_NAME);
  for (let i = 2; taken.has(name); i++) name = `${base.slice(0, MAX_NAME - String(i).length - 1)}_${i}`;
  return name;
}

/**
 * The policy a stdio server runs under: the cwd's, with the workspace read only (unless its config says rw) and
 * the network off (TCP and Unix sockets); the ports its config names are added by the sandbox rules (SandboxExtra).
 */
export function serverPolicy(p: SandboxPolicy, cwd: string, workspaceWritable: boolean): SandboxPolicy {
  const out = structuredClone(p);
  if (!workspaceWritable) {
    const inWs = (d: string): boolean => within(d, cwd);
    // Both the lists and the paths resolved when the policy was loaded (what the helper is given: resolving
    // again now would follow a symlink planted since), the same way.
    for (const lists of [out.filesystem, ...(out.resolved ? [out.resolved] : [])]) {
      lists.ro = [...lists.ro, ...lists.rw.filter(inWs)];
      lists.rox = [...lists.rox, ...lists.rwx.filter(inWs)];
      lists.rw = lists.rw.filter((d) => !inWs(d));
      lists.rwx = lists.rwx.filter((d) => !inWs(d));
    }
  }
  out.network = { enabled: false, bindTcp: [], connectTcp: [], unix: false };
  return out;
}
