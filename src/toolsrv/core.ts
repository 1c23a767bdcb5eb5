/**
 * toolsrv's state and the one path every call takes: look up the scope's tool, lift the dispatch flags out
 * of the arguments, validate them, wait for a bypass approval when asked, take the path lock, wrap the argv in
 * the sandbox, spawn, wait. Everything a call needs (validators, argv, the environment) is prepared when a
 * tool is loaded or the scope's env changes, so a call reads no files and compiles nothing.
 *
 * Scopes: each attach name (an agent id; '' for the session-wide connection) has its own loaded tools, env,
 * cwd and revision. Procs, locks and the bypass queue are shared by all scopes.
 */
import { statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { privateDir, writePrivateFile } from '../platform/private.js';
import { BypassBroker } from './bypass/broker.js';
import { Confinement, SANDBOX_EXIT_CODES, SANDBOX_MESSAGE } from './exec/confine.js';
import { containmentStatus } from './exec/containment.js';
import { HostPool } from './exec/hosts.js';
import { LockTable, type LockKind } from './exec/locks.js';
import { Proc } from './exec/proc.js';
import { NO_SPAWNER, NO_SPAWNER_TTY, type Launcher } from '../platform/launcher.js';
import { Feed } from '../platform/queue.js';
import type { ProcFlags, ProcInterrupt, ProcRequest, ProcResult, ToolInfo, ToolsrvInfo } from './protocol.js';
import { Catalog, describeErrors, type Tool } from './registry/catalog.js';
import { hostFacts } from './registry/meta.js';
import { McpManager, type McpTool } from './mcp/manager.js';

export interface CoreOptions {
  /** Tool directories, highest precedence first (user's config dir, then the shipped data/tools). */
  toolDirs: string[];
  /** The starting cwd of every scope. */
  cwd: string;
  confinement: Confinement;
  /** Environment every tool starts from (before the scope's env). */
  baseEnv: Record<string, string>;
  sessionId?: string;
  /** The Ollie socket's address, handed to tools as OLLIE_ADDR. */
  ollieAddr?: string;
  /** Exited procs are collected this long after their last read (default 10 minutes). */
  procTtlMs?: number;
  /** Resident tool hosts stop after this long without a call (default 10 minutes). */
  hostIdleMs?: number;
  /** Starts tool processes (src/platform/launcher.ts); without one, or one without the spawner, sandboxed calls are refused. */
  launcher?: Launcher;
  /** MCP servers (mcp/): Ollie's config dir holds mcp.json and the trust list; absent: none. */
  mcp?: { configDir: string; backoffMs?: number; startTimeoutMs?: number };
  log?: (m: string) => void;
}

const PROC_TTL_MS = 10 * 60 * 1000;
/** How long a call of an MCP server that is starting waits for it. */
const MCP_START_WAIT_MS = 15_000;

/** Why sandboxed calls are refused where the spawner is not built. */
export { NO_SPAWNER };

export class Scope {
  readonly tools = new Map<string, Tool>();
  readonly env = new Map<string, string>();
  rev = 1;
  /** Background procs that finished and were not delivered yet. */
  readonly interrupts: ProcInterrupt[] = [];
  readonly interruptFeed = new Feed<null>();
  /** The environment of this scope's calls, rebuilt when the env changes. */
  callEnv: Record<string, string> = {};

  /**
   * Where the scope's sandbox policy is loaded for, when it is not `cwd`: a sub-agent working in a directory of
   * its creator's keeps its creator's policy ({CWD} and the project's file included), never the one a
   * subdirectory would give (a project file higher up would not apply there).
   */
  root?: string;

  constructor(
    readonly name: string,
    public uname: string,
    public cwd: string,
  ) {}
}

export class RequestError extends Error {
  override name = 'RequestError';
}

export class Core {
  readonly catalog: Catalog;
  readonly locks = new LockTable();
  readonly bypass: BypassBroker;
  readonly procs = new Map<number, Proc>();
  /** Resident hosts of the tools whose .meta names one (exec/hosts.ts). */
  readonly hosts: HostPool;
  /** The MCP servers of this toolsrv's workspace; their tools are in every scope (mcp/manager.ts). */
  readonly mcp?: McpManager;
  private readonly scopes = new Map<string, Scope>();
  private nextPid = 1;
  private readonly gc: NodeJS.Timeout;
  private readonly log: (m: string) => void;
  private readonly ttl: number;

  constructor(readonly opts: CoreOptions) {
    this.log = opts.log ?? (() => undefined);
    this.catalog = new Catalog(opts.toolDirs);
    for (const e of this.catalog.errors()) this.log(`invalid tool: ${e}`);
    this.bypass = new BypassBroker(this.log);
    this.ttl = opts.procTtlMs ?? PROC_TTL_MS;
    this.hosts = new HostPool(opts.hostIdleMs, opts.launcher);
    if (opts.mcp) {
      // Started by the first session that asks (mcp-wait), in its workspace: a toolsrv may be started before it
      // knows its session (a spare) or serve several (shared), and a server sees one workspace.
      this.mcp = new McpManager({
        ...opts.mcp,
        confinement: opts.confinement,
        ...(opts.launcher && { launcher: opts.launcher }),
        baseEnv: opts.baseEnv,
        log: this.log,
        changed: () => {
          for (const s of this.scopes.values()) s.rev++;
        },
      });
    }
    this.gc = setInterval(() => this.collect(), Math.max(10, Math.min(this.ttl / 4, 60_000)));
    this.gc.unref();
  }

  scope(name: string, uname = 'none'): Scope {
    let s = this.scopes.get(name);
    if (!s) {
      s = new Scope(name, uname, this.opts.cwd);
      this.scopes.set(name, s);
      this.rebuildEnv(s);
    }
    return s;
  }

  // ---- registry ----------------------------------------------------------------------------------

  private facts(s: Scope): ReturnType<typeof hostFacts> {
    return hostFacts(s.callEnv);
  }

  load(s: Scope, name: string): void {
    // A tool added (or fixed) while sessions run is found without a `reload` by hand: a name the catalog does not
    // know makes it rescan the directories first. Only a miss pays for the rescan, never a load of a known tool.
    if (!this.catalog.get(name)) this.reload();
    const t = this.catalog.resolve(name, this.facts(s));
    s.tools.set(name, t);
    s.rev++;
  }

  unload(s: Scope, name: string): void {
    if (!s.tools.delete(name)) throw new RequestError(`${name} is not loaded`);
    s.rev++;
  }

  /** Rescans the tool directories; loaded tools whose definition changed are re-resolved (or dropped). */
  reload(): string[] {
    const changed = this.catalog.scan();
    this.opts.confinement.forget();
    // Hosts run the code and the policy they were started with: new calls get new ones.
    this.hosts.retireAll();
    for (const s of this.scopes.values()) this.reresolve(s, changed);
    const errors = this.catalog.errors();
    for (const e of errors) this.log(`invalid tool: ${e}`);
    return errors;
  }

  /** Re-resolves loaded tools (all, or those named) after the definitions or the scope's env changed. */
  private reresolve(s: Scope, only?: Set<string>): void {
    let bumped = false;
    for (const [name, old] of [...s.tools]) {
      if (only && !only.has(name)) continue;
      if (!this.catalog.get(name)) {
        s.tools.delete(name);
        this.log(`${name} disappeared from the tool directories; unloaded from scope ${JSON.stringify(s.name)}`);
        bumped = true;
        continue;
      }
      const t = this.catalog.resolve(name, this.facts(s));
      s.tools.set(name, t);
      if (only || t.variant !== old.variant) bumped = true;
    }
    if (bumped) s.rev++;
  }

  /** The scope's agent's spill dir here (what its tools may read; see Confinement.spillDir). */
  spillDir(s: Scope): string | undefined {
    return this.opts.confinement.spillDir({
      session: this.opts.sessionId ?? s.env.get('OLLIE_SESSION_ID'),
      agent: s.name,
    });
  }

  /**
   * Saves a long tool result whole where the agent's tools can read it (`proc/spill`): on the host the tools run
   * on, which for a remote session is this one, not olliesrv's. `message` is the file's name (letters, digits,
   * `.`, `_`, `-`), a newline, then the content. Every level owner-only, the file 0600 (written new: a link
   * planted under that name is replaced, never followed).
   */
  saveSpill(s: Scope, message: Uint8Array): void {
    const nl = message.indexOf(10);
    const name = new TextDecoder().decode(message.subarray(0, nl < 0 ? 0 : nl));
    if (nl < 0 || !/^[\w.-]{1,128}$/.test(name) || name === '.' || name === '..')
      throw new Error('proc/spill: write NAME (letters, digits, . _ -), a newline, then the content');
    const dir = this.spillDir(s);
    if (!dir) throw new Error('proc/spill: this scope has no session, so no spill directory');
    let d = privateDir(dirname(dirname(dir)), 'the spill directory');
    for (const part of [basename(dirname(dir)), basename(dir)]) d = privateDir(join(d, part), 'the spill directory');
    writePrivateFile(join(d, `${name}.txt`), message.subarray(nl + 1));
  }

  toolInfos(s: Scope): ToolInfo[] {
    return [...[...s.tools.values()].map((t) => t.info), ...(this.mcpFor(s)?.infos() ?? [])];
  }

  /** Starts the MCP servers for this scope's session, in its workspace, unless a session started them already. */
  private startMcp(s: Scope): void {
    if (this.mcp && this.mcp.session === undefined)
      this.mcp.start({ session: s.env.get('OLLIE_SESSION_ID') ?? this.opts.sessionId ?? '', cwd: s.root ?? s.cwd });
  }

  /** The MCP servers a scope has: those of its session, once that session started them. */
  private mcpFor(s: Scope): McpManager | undefined {
    return this.mcp && this.mcp.session === (s.env.get('OLLIE_SESSION_ID') ?? this.opts.sessionId ?? '')
      ? this.mcp
      : undefined;
  }

  /** A `ctl` line: load NAME, unload NAME, env K=V (env K unsets), cwd PATH, reload. */
  ctl(s: Scope, line: string): string | Promise<string> {
    const m = /^\s*(\S+)\s*(.*?)\s*$/s.exec(line);
    if (!m) return '';
    const [, cmd, arg = ''] = m;
    switch (cmd) {
      case 'load':
      case 'unload':
        if (!arg) throw new RequestError(`${cmd} needs a tool name`);
        for (const n of arg.split(/\s+/)) {
          if (cmd === 'load') {
            try {
              this.load(s, n);
            } catch (e) {
              throw new RequestError((e as Error).message);
            }
          } else this.unload(s, n);
        }
        return '';
      case 'env': {
        if (!arg) throw new RequestError('env needs K=V (or K to unset it)');
        const eq = arg.indexOf('=');
        const k = eq < 0 ? arg : arg.slice(0, eq);
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new RequestError(`bad variable name ${JSON.stringify(k)}`);
        // An environment string ends at its first NUL: a value holding one cannot be passed to a process.
        if (arg.includes('\0')) throw new RequestError(`the value of ${k} contains a NUL byte`);
        if (eq < 0) s.env.delete(k);
        else s.env.set(k, arg.slice(eq + 1));
        this.rebuildEnv(s);
        this.reresolve(s);
        // olliesrv names an agent's session after its cwd and root: the session's MCP servers can start (also in a
        // toolsrv that replaced one that died, where no agent asks again).
        if (k === 'OLLIE_SESSION_ID' && eq >= 0) this.startMcp(s);
        return '';
      }
      case 'cwd': {
        if (!arg || !isAbsolute(arg)) throw new RequestError('cwd needs an absolute path');
        let ok = false;
        try {
          ok = statSync(arg).isDirectory();
        } catch {
          ok = false;
        }
        if (!ok) throw new RequestError(`cwd: ${arg} is not a directory`);
        s.cwd = resolve(arg);
        return '';
      }
      case 'root': {
        // Without an argument: the policy is the cwd's again.
        if (!arg) {
          s.root = undefined;
          return '';
        }
        if (!isAbsolute(arg)) throw new RequestError('root needs an absolute path');
        s.root = resolve(arg);
        return '';
      }
      case 'reload':
        return this.reload()
          .map((e) => `${e}\n`)
          .join('');
      case 'mcp-reload':
        // The owner changed config/mcp.json or trusted a project's .mcp.json.
        this.mcp?.start();
        return '';
      case 'mcp-wait': {
        // An agent's first tool list should hold the MCP servers' tools: start them for its session (the first to
        // ask), then wait (bounded) for them.
        if (!this.mcp) return '';
        this.startMcp(s);
        return this.mcpFor(s) ? this.mcp.settled(Math.min(Number(arg) || 10_000, 60_000)).then(() => '') : '';
      }
      default:
        throw new RequestError(
          `unknown command ${JSON.stringify(cmd)}; commands: load NAME, unload NAME, env K=V, cwd PATH, root PATH, reload, mcp-reload, mcp-wait [MS]`,
        );
    }
  }

  private rebuildEnv(s: Scope): void {
    // The tool directories come first on PATH, also when the scope sets its own PATH.
    const path = [
      ...this.opts.toolDirs,
      s.env.get('PATH') ?? this.opts.baseEnv.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    ].join(':');
    const ollie: Record<string, string> = { OLLIE_UNAME: s.uname, OLLIE_AGENT_ID: s.name };
    if (this.opts.sessionId) ollie.OLLIE_SESSION_ID = this.opts.sessionId;
    if (this.opts.ollieAddr) ollie.OLLIE_ADDR = this.opts.ollieAddr;
    s.callEnv = { ...this.opts.baseEnv, ...ollie, ...Object.fromEntries(s.env), PATH: path };
  }

  info(): ToolsrvInfo {
    const sandbox = this.opts.confinement.status();
    if (!this.opts.launcher?.native && !sandbox.yolo) sandbox.unavailable ??= NO_SPAWNER;
    return {
      platform: process.platform,
      arch: process.arch,
      pid: process.pid,
      ...sandbox,
      containment: containmentStatus(!!this.opts.launcher?.native),
    };
  }

  // ---- calls -------------------------------------------------------------------------------------

  /** Runs one call. Problems of the request come back as status refused, for the model to read. */
  async call(s: Scope, req: ProcRequest, signal: AbortSignal): Promise<ProcResult> {
    const refused = (error: string, tool = String(req?.tool ?? '')): ProcResult => ({
      pid: 0,
      tool,
      status: 'refused',
      exit: null,
      output: '',
      outputBytes: 0,
      error,
    });
    if (typeof req !== 'object' || req === null || typeof req.tool !== 'string')
      return refused('the request needs {"tool": NAME, "args": {…}, "flags": {…}}');
    let tool: Tool | McpTool | undefined = s.tools.get(req.tool) ?? this.mcpFor(s)?.tool(req.tool);
    // A call of a server that is starting (a toolsrv that replaced a dead one, a restart asked for) waits for it.
    if (!tool && this.mcpFor(s)?.starting(req.tool)) {
      await this.mcp!.settled(MCP_START_WAIT_MS);
      tool = this.mcpFor(s)?.tool(req.tool);
    }
    if (!tool) {
      const known = this.catalog.get(req.tool)
        ? `it is not loaded (write "load ${req.tool}" to ctl)`
        : this.mcpFor(s) && req.tool.startsWith('mcp__')
          ? this.mcp!.whyNot(req.tool)
          : this.catalog.whyNot(req.tool);
      return refused(`cannot run ${req.tool}: ${known}`);
    }
    if (req.args !== undefined && (typeof req.args !== 'object' || req.args === null || Array.isArray(req.args)))
      return refused('args must be a JSON object');
    if (req.flags !== undefined && (typeof req.flags !== 'object' || req.flags === null || Array.isArray(req.flags)))
      return refused('flags must be a JSON object');
    const args: Record<string, unknown> = { ...(req.args ?? {}) };
    const flags: ProcFlags = { ...(req.flags ?? {}) };
    // The model sees the flags among the arguments; lift them out so the tool's own schema judges only its own.
    for (const f of tool.liftable) {
      if (f in args) {
        (flags as Record<string, unknown>)[f] ??= args[f];
        delete args[f];
      }
    }
    if (flags.bypass !== undefined && typeof flags.bypass !== 'boolean')
      return refused('flag bypass must be true or false');
    if (flags.background !== undefined && typeof flags.background !== 'boolean')
      return refused('flag background must be true or false');
    if (flags.timeout !== undefined && !(typeof flags.timeout === 'number' && flags.timeout > 0))
      return refused('flag timeout must be a positive number of seconds');
    if (!tool.validate(args)) return refused(`invalid arguments for ${tool.name}: ${describeErrors(tool.validate)}`);
    // A tty tool's terminal is the spawner's: without it the call cannot run at all, bypassed or --yolo, so the owner
    // is not asked to approve one.
    if (tool.fields.tty && !this.opts.launcher?.native) return refused(NO_SPAWNER_TTY, tool.name);

    const cmd = describeCall(tool.name, args);
    let lock: LockKind | undefined;
    // A global lock is the caller's session's (locks.ts): on a shared toolsrv, one session's long call stops no other's.
    const lockSession = this.opts.sessionId ?? s.env.get('OLLIE_SESSION_ID');
    const global: LockKind = { kind: 'global', ...(lockSession && { session: lockSession }) };
    if (tool.fields.scope === 'global') lock = global;
    else if (tool.fields.scope === 'write' && tool.fields.lockPath)
      lock = { kind: 'path', path: tool.fields.lockPath, ...(lockSession && { session: lockSession }) };
    else if (tool.fields.scope === 'write') {
      const p = args[tool.fields.pathArg!];
      // Without a usable path the call cannot say what it touches: it takes everything.
      lock =
        typeof p === 'string' && p !== ''
          ? { kind: 'path', path: resolve(s.cwd, p), ...(lockSession && { session: lockSession }) }
          : global;
    }

    if (flags.ask !== undefined && typeof flags.ask !== 'string')
      return refused('flag ask must be a string (the reason shown to the person)');
    let bypassed = false;
    const unsandboxed = flags.bypass && !this.opts.confinement.yolo;
    if (unsandboxed || flags.ask !== undefined) {
      const session = s.env.get('OLLIE_SESSION_ID') ?? this.opts.sessionId;
      // One request: leaving the sandbox, a hook's ask, or both (approving the bypass answers the hook too). With a
      // hook's ask it is a person's, once: were a remembered bypass rule to answer it, a model could skip the hook's
      // question by adding `bypass` to a call a person once approved always.
      const reason = [
        unsandboxed && 'the model asked to run this outside the sandbox',
        flags.ask !== undefined &&
          `a hook asks for your approval${unsandboxed ? '' : ' (the call runs inside the sandbox)'}: ${flags.ask}`,
      ]
        .filter(Boolean)
        .join('; ');
      // An MCP tool's `command` is the server's to interpret (SQL, a DSL…), not argv: no command line, so a
      // remembered approval is exact and never a prefix that lets words be added.
      const command = 'mcp' in tool ? undefined : commandOf(args);
      const approved = await this.bypass.request(
        {
          agent: s.name,
          tool: tool.name,
          cmd,
          ...(command !== undefined && { command }),
          cwd: s.cwd,
          reason,
          ...(session && { session }),
          ...(flags.ask !== undefined && { ask: true }),
        },
        signal,
      );
      if (!approved) return refused('denied by user', tool.name);
      bypassed = !!unsandboxed;
    }

    if ('mcp' in tool) return this.callMcp(s, tool as McpTool, args, flags, { cmd, bypassed, lock }, signal);
    const release = lock ? await this.locks.acquire(lock, signal) : undefined;
    let proc: Proc;
    let notice: string | undefined;
    try {
      const callEnv = tool.fields.tty ? { ...s.callEnv, OLLIE_ARGS: JSON.stringify(args) } : s.callEnv;
      // A hosted tool's command is its host's: the same wrapping, so the host runs under this call's rules.
      const argv = tool.host ? [process.execPath, tool.host.program, ...this.hosts.programArgs()] : tool.argv;
      // The agent's own spill files are readable to its tools. The session is toolsrv's own when it serves one; a
      // shared toolsrv knows it from the scope olliesrv set up. Not for hosted tools: a host is shared by every
      // agent in a cwd (its key is its command line), and a per-agent rule would start one per agent.
      const owner = tool.host
        ? undefined
        : { session: this.opts.sessionId ?? s.env.get('OLLIE_SESSION_ID'), agent: s.name };
      const outside = s.root !== undefined && !within(s.cwd, s.root);
      if (outside) {
        release?.();
        return refused(
          `the working directory ${s.cwd} is outside ${s.root}, whose sandbox policy this agent has: refused`,
          tool.name,
        );
      }
      const wrapped = this.opts.confinement.wrap(argv, s.root ?? s.cwd, callEnv, {
        unconfined: bypassed,
        ollieSocket: tool.ollieSocket,
        sandbox: tool.sandbox,
        ...(owner && { owner }),
      });
      if ('refused' in wrapped) {
        release?.();
        return refused(wrapped.refused, tool.name);
      }
      notice = wrapped.notice;
      // Containment and limits are the spawner's: a sandboxed call, hosted ones included, does not run without them.
      if (!this.opts.launcher?.native && !bypassed && !this.opts.confinement.yolo) {
        release?.();
        return refused(`sandbox unavailable: ${NO_SPAWNER}`, tool.name);
      }
      proc = new Proc({
        id: this.nextPid++,
        tool: tool.name,
        agent: s.name,
        cmd,
        background: !!flags.background,
        bypassed,
        ...(tool.fields.outputFormat && { format: tool.fields.outputFormat }),
      });
      this.procs.set(proc.id, proc);
      const timeout = flags.timeout ?? (flags.background ? undefined : tool.fields.timeout);
      if (tool.host) this.hosts.run(tool.host.name, wrapped, s.cwd, proc, { tool: tool.name, args }, timeout);
      else
        await proc.start(
          {
            file: wrapped.file,
            args: wrapped.args,
            cwd: s.cwd,
            env: wrapped.env,
            stdin: JSON.stringify(args),
            tty: tool.fields.tty,
            ...(wrapped.limits && { limits: wrapped.limits }),
          },
          timeout,
          this.opts.launcher,
        );
    } catch (e) {
      release?.();
      throw e;
    }
    if (flags.background) {
      // A background proc waits its turn to start, then lets go: it may run for hours beside other calls.
      return this.letGo(s, proc, release, bypassed);
    }
    await this.awaitCall(proc, release, signal);
    return notice ? { ...this.result(proc), notice } : this.result(proc);
  }

  /** A call answered by an MCP server: the lock, proc/ record, background and abort of any call (mcp/manager.ts). */
  private async callMcp(
    s: Scope,
    tool: McpTool,
    args: Record<string, unknown>,
    flags: ProcFlags,
    o: { cmd: string; bypassed: boolean; lock?: LockKind },
    signal: AbortSignal,
  ): Promise<ProcResult> {
    const release = o.lock ? await this.locks.acquire(o.lock, signal) : undefined;
    const proc = new Proc({
      id: this.nextPid++,
      tool: tool.name,
      agent: s.name,
      cmd: o.cmd,
      background: !!flags.background,
      bypassed: o.bypassed,
    });
    this.procs.set(proc.id, proc);
    this.mcp!.run(
      tool.mcp,
      proc,
      args,
      o.bypassed,
      flags.timeout ?? (flags.background ? undefined : tool.fields.timeout),
    );
    if (flags.background) {
      return this.letGo(s, proc, release, o.bypassed);
    }
    await this.awaitCall(proc, release, signal);
    return this.result(proc);
  }

  /** A background call lets go of its lock at once; its end is told to the agent as an interruption. */
  private letGo(s: Scope, proc: Proc, release: (() => void) | undefined, bypassed: boolean): ProcResult {
    release?.();
    void proc.done.then(() => {
      this.mcp?.recheck();
      this.interrupted(s, proc);
    });
    return {
      pid: proc.id,
      tool: proc.meta.tool,
      status: 'background',
      exit: null,
      output: '',
      outputBytes: 0,
      ...(bypassed && { bypassed }),
    };
  }

  /** Waits for a foreground call (an abort kills it); its lock goes however it ends. */
  private async awaitCall(proc: Proc, release: (() => void) | undefined, signal: AbortSignal): Promise<void> {
    const onAbort = (): void => proc.terminate('killed', 0);
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    try {
      await proc.done;
    } finally {
      signal.removeEventListener('abort', onAbort);
      // What the call changed (a `.git` made, a trusted project file edited) reaches the running MCP servers
      // before its result does (mcp/manager.ts, recheck).
      this.mcp?.recheck();
      release?.();
    }
  }

  result(p: Proc): ProcResult {
    p.lastRead = Date.now();
    const output = p.resultOutput();
    const r: ProcResult = {
      pid: p.id,
      tool: p.meta.tool,
      status: p.status,
      exit: p.exit,
      output,
      outputBytes: p.outputBytes,
      ...(p.meta.format && { format: p.meta.format }),
      ...(p.error && { error: p.error }),
      ...(p.meta.bypassed && { bypassed: true }),
    };
    // The sandbox helper's own failures (Landlock missing or weaker than the policy) mean the tool never ran.
    if (
      !p.meta.bypassed &&
      !this.opts.confinement.yolo &&
      p.status === 'exited' &&
      SANDBOX_EXIT_CODES.has(p.exit ?? -1)
    ) {
      const m = SANDBOX_MESSAGE.exec(output);
      if (m) return { ...r, status: 'refused', error: `sandbox unavailable: ${m[0]}` };
    }
    return r;
  }

  private interrupted(s: Scope, p: Proc): void {
    if (!this.procs.has(p.id)) return; // dismissed
    const tail = lastLines(p.tail(), 40);
    const attr = (v: string): string =>
      v.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/\n/g, ' ');
    const exit = p.exit === null ? '' : ` exit="${p.exit}"`;
    // Why a call was ended from outside (its MCP server restarted or stopped under it) is not in its output.
    const why = p.error ? `error: ${p.error}\n` : '';
    const text = `<system-proc-interrupt id="${p.id}" cmd="${attr(p.meta.cmd)}" status="${p.status}"${exit}>\n${tail}${tail.endsWith('\n') || !tail ? '' : '\n'}${why}</system-proc-interrupt>\n`;
    s.interrupts.push({
      pid: p.id,
      agent: s.name,
      tool: p.meta.tool,
      cmd: p.meta.cmd,
      status: p.status,
      exit: p.exit,
      tail,
      text,
    });
    s.interruptFeed.push(null);
  }

  /** proc/interrupts: each finished background proc of the scope, delivered once. */
  async *followInterrupts(s: Scope, signal: AbortSignal): AsyncGenerator<string> {
    for await (const _ of s.interruptFeed.follow(signal, () => [null])) {
      while (s.interrupts.length) yield `${JSON.stringify(s.interrupts.shift())}\n`;
    }
  }

  proc(id: string): Proc {
    const p = /^\d+$/.test(id) ? this.procs.get(Number(id)) : undefined;
    if (!p) throw new RequestError(`no proc ${id}`);
    return p;
  }

  /** Procs a scope sees: its own, or every one for the session-wide scope (''). */
  procIds(s: Scope): string[] {
    return [...this.procs.values()].filter((p) => s.name === '' || p.meta.agent === s.name).map((p) => String(p.id));
  }

  procCtl(p: Proc, line: string): void {
    const [cmd, arg, ...rest] = line.trim().split(/\s+/);
    if (rest.length > (cmd === 'resize' ? 1 : 0)) throw new RequestError(`too many arguments: ${line.trim()}`);
    switch (cmd) {
      case 'signal': {
        if (!arg) throw new RequestError('signal needs a number or a name (signal 15, signal TERM)');
        const sig = /^\d+$/.test(arg)
          ? Number(arg)
          : arg.toUpperCase().startsWith('SIG')
            ? arg.toUpperCase()
            : `SIG${arg.toUpperCase()}`;
        p.markKilled();
        try {
          // A hosted call shares its host's process with other calls: the signal becomes a cancel of this call.
          if (p.hosted) p.killGroup(sig as NodeJS.Signals);
          else if (p.state === 'running' && p.osPid) process.kill(-p.osPid, sig as NodeJS.Signals);
        } catch (e) {
          throw new RequestError(`signal ${arg}: ${(e as Error).message}`);
        }
        return;
      }
      case 'term':
        p.markKilled();
        p.killGroup('SIGTERM');
        return;
      case 'kill':
        p.markKilled();
        p.killGroup('SIGKILL');
        return;
      case 'resize': {
        const m = /^(\d{1,4})\s+(\d{1,4})$/.exec(line.trim().slice('resize'.length).trim());
        if (!m || Number(m[1]) < 1 || Number(m[2]) < 1)
          throw new RequestError('resize needs COLS ROWS, e.g. resize 120 40');
        try {
          p.resize(Number(m[1]), Number(m[2]));
        } catch (e) {
          throw new RequestError((e as Error).message);
        }
        return;
      }
      case 'dismiss':
        // Gone from the tree now; a running one is killed and announces nothing.
        this.procs.delete(p.id);
        p.terminate('killed', 0);
        return;
      default:
        throw new RequestError(
          `unknown command ${JSON.stringify(cmd)}; commands: signal N, term, kill, resize COLS ROWS, dismiss`,
        );
    }
  }

  statText(p: Proc): string {
    p.lastRead = Date.now();
    const lines = [
      `state=${p.state}`,
      `status=${p.state === 'running' ? 'running' : p.status}`,
      `runtime_ms=${p.runtimeMs()}`,
      `tool=${p.meta.tool}`,
      `exit=${p.exit ?? ''}`,
      `signal=${p.signal ?? ''}`,
      `agent=${p.meta.agent}`,
      `os_pid=${p.osPid}`,
      `background=${p.meta.background ? 1 : 0}`,
      `bypassed=${p.meta.bypassed ? 1 : 0}`,
      `tty=${p.tty ? 1 : 0}`,
      `output_bytes=${p.outputBytes}`,
      `cmd=${JSON.stringify(p.meta.cmd)}`,
    ];
    return `${lines.join('\n')}\n`;
  }

  /** Drops exited procs nobody has read for the TTL. */
  collect(now = Date.now()): void {
    for (const p of this.procs.values())
      if (p.state === 'exited' && now - p.lastRead >= this.ttl) this.procs.delete(p.id);
  }

  /** Kills every running proc (toolsrv is going away). */
  close(): void {
    clearInterval(this.gc);
    for (const p of this.procs.values()) p.terminate('killed', 0);
    this.opts.launcher?.close();
    this.hosts.close();
    this.mcp?.close();
    this.bypass.close();
  }
}

/**
 * The command line of a call whose only argument is `command`. With any other argument it is not the whole
 * call: a person asked to approve it must see every argument (as JSON), not the command alone.
 */
export function commandOf(args: Record<string, unknown>): string | undefined {
  return typeof args.command === 'string' && Object.keys(args).length === 1 ? args.command : undefined;
}

/** The command in words: the tool and its command line when that is the whole call, else its arguments as JSON. */
export function describeCall(tool: string, args: Record<string, unknown>): string {
  return `${tool} ${commandOf(args) ?? JSON.stringify(args)}`;
}

function lastLines(s: string, n: number): string {
  const lines = s.split('\n');
  const trailing = lines[lines.length - 1] === '' ? 1 : 0;
  return lines.slice(-(n + trailing)).join('\n');
}

/** Whether `dir` is `root` or below it (both absolute and resolved). */
function within(dir: string, root: string): boolean {
  const rel = relative(root, dir);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}
