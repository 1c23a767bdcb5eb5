/**
 * SessionTools over a running toolsrv: opens a ToolClient per agent, follows bypass/pending on a connection
 * of its own, approves by itself what a person approved before (a rule computed from the approved request,
 * store/bypass.ts: for this session or always), and tells listeners about every request and resolution. On a
 * shared toolsrv it sees only the requests of its own session.
 *
 * When `toolsrv` is a provider (ToolsrvKeeper.lease), a toolsrv that dies is replaced: the bypass queue is
 * followed again on the new one, and every ToolHost handed out reconnects on its next use.
 *
 * Construction in olliesrv (per session):
 *   const lease = keeper.lease(session.id);                              // spawn.ts, keeper made once
 *   const tools = await ToolsrvSessionTools.open({ toolsrv: lease.address, sessionId: session.id,
 *                                                  rules: new BypassRuleStore(db), onClose: lease.release });
 */
import type { Client } from '../../ninep/index.js';
import type { BypassRequest, BypassResolution } from '../../toolsrv/protocol.js';
import { ruleFor, type BypassRuleStore } from '../store/bypass.js';
import { lines } from '../../ninep/index.js';
import { addressOf, connectToolsrv, ToolClient, type ToolsrvSource } from './client.js';
import type { BypassEvent, SessionTools, ToolHost } from './host.js';

export interface SessionToolsOptions {
  /** The toolsrv: a fixed address, or a provider that returns a live one (replacing a dead one). */
  toolsrv: ToolsrvSource;
  sessionId: string;
  /** Remembered approvals (session and always); without it, only `once` is accepted. */
  rules?: BypassRuleStore;
  /** The uname connections attach with (tools see it as OLLIE_UNAME); default: the agent id. */
  uname?: string;
  /** olliesrv's environment: what of an agent's a remote toolsrv does not get (ToolClient.connect). */
  localEnv?: Readonly<Record<string, string | undefined>>;
  /** Told when the connection to the toolsrv is made and when it is lost (with the host, for a remote one). */
  onState?: (connected: boolean, host: string | undefined, why?: string) => void;
  /** Runs after close(), e.g. the keeper's release of the toolsrv. */
  onClose?: () => Promise<void>;
  log?: (m: string) => void;
}

type Listener = (e: BypassEvent) => void;

export class ToolsrvSessionTools implements SessionTools {
  private readonly waiting = new Map<string, BypassRequest>();
  private readonly listeners = new Set<Listener>();
  /** Why a request was approved automatically, by id, until its resolution arrives. */
  private readonly autoReason = new Map<string, string>();
  private readonly hosts = new Set<ToolClient>();
  private readonly life = new AbortController();
  private following: Promise<void> = Promise.resolve();
  private closed = false;

  private constructor(
    private readonly o: SessionToolsOptions,
    private control: Client,
    private where: string | undefined,
  ) {}

  static async open(o: SessionToolsOptions): Promise<ToolsrvSessionTools> {
    const addr = await addressOf(o.toolsrv);
    const control = await connectToolsrv(addr, '', o.uname ?? 'olliesrv');
    const st = new ToolsrvSessionTools(o, control, addr.host);
    o.onState?.(true, addr.host);
    st.following = st.follow();
    return st;
  }

  /** Whether the toolsrv is reachable now (its control connection is up). */
  get connected(): boolean {
    return !this.closed && !this.control.closed;
  }

  /** The remote host of the toolsrv (undefined for this machine). */
  get host(): string | undefined {
    return this.where;
  }

  /**
   * Drops every connection to the toolsrv: each reconnects on its next use, through the provider, to the toolsrv
   * the session has now (after `ctl remote` moved it to another host).
   */
  reconnect(): void {
    for (const h of this.hosts) h.dropConnection();
    this.control.close();
  }

  private log(m: string): void {
    (this.o.log ?? ((x: string) => process.stderr.write(`olliesrv: ${x}\n`)))(m);
  }

  private emit(e: BypassEvent): void {
    for (const l of [...this.listeners]) {
      try {
        l(e);
      } catch (err) {
        this.log(`bypass listener failed: ${(err as Error).message}`);
      }
    }
  }

  private async follow(): Promise<void> {
    let delay = 200;
    for (;;) {
      try {
        for await (const line of lines(this.control.stream('bypass/pending', { signal: this.life.signal }))) {
          delay = 200;
          const m = JSON.parse(line) as BypassRequest | BypassResolution;
          if ('resolved' in m) this.resolved(m);
          else this.requested(m);
        }
      } catch (e) {
        if (!this.life.signal.aborted)
          this.log(`lost toolsrv's bypass queue${this.where ? ` on ${this.where}` : ''}: ${(e as Error).message}`);
      }
      if (!this.life.signal.aborted)
        this.o.onState?.(false, this.where, this.where ? `lost the connection to ${this.where}` : 'toolsrv went away');
      // The queue is gone with its toolsrv: nothing that waited can be approved any more.
      for (const r of [...this.waiting.values()]) this.resolved({ id: r.id, agent: r.agent, resolved: 'cancelled' });
      if (this.life.signal.aborted || typeof this.o.toolsrv !== 'function') return;
      // A provider can start a new toolsrv: follow its queue, retrying with a growing pause while it fails.
      for (;;) {
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5000);
        if (this.life.signal.aborted) return;
        try {
          this.control.close();
          const addr = await addressOf(this.o.toolsrv);
          this.control = await connectToolsrv(addr, '', this.o.uname ?? 'olliesrv');
          this.where = addr.host;
          this.o.onState?.(true, addr.host);
          this.log(`following the bypass queue of a new toolsrv${addr.host ? ` on ${addr.host}` : ''}`);
          break;
        } catch (e) {
          this.log(`cannot reach a toolsrv: ${(e as Error).message}`);
        }
      }
    }
  }

  private requested(req: BypassRequest): void {
    if (req.session && req.session !== this.o.sessionId) return;
    this.waiting.set(req.id, req);
    this.emit({ kind: 'request', req });
    // A hook's ask is for a person every time: a remembered rule does not answer it.
    const why = req.ask ? undefined : this.remembered(req);
    if (why) void this.send(req.id, 'approve', why);
  }

  private resolved(r: BypassResolution): void {
    if (!this.waiting.delete(r.id)) return;
    const remembered = this.autoReason.get(r.id);
    this.autoReason.delete(r.id);
    this.emit({
      kind: 'resolved',
      id: r.id,
      agent: r.agent,
      approved: r.resolved === 'approve',
      ...(r.resolved === 'cancelled' && { cancelled: true }),
      ...(remembered && { remembered }),
    });
  }

  /** Which remembered approval covers `req`, in words (`session:prefix npm test`), if any. */
  private remembered(req: BypassRequest): string | undefined {
    const rule = this.o.rules?.match(req, this.o.sessionId);
    return rule ? `${rule.session === null ? 'always' : 'session'}:${rule.kind} ${rule.rule}` : undefined;
  }

  private async send(id: string, decision: 'approve' | 'deny', auto?: string): Promise<void> {
    if (auto) this.autoReason.set(id, auto);
    try {
      await this.control.write(
        'bypass/resolve',
        `${id} ${decision}${auto ? ` ${auto.startsWith('always') ? 'always' : 'session'}` : ''}\n`,
      );
    } catch (e) {
      this.autoReason.delete(id);
      // Resolved elsewhere or cancelled meanwhile: the stream tells; anything else is worth a line in the log.
      if (this.waiting.has(id)) this.log(`bypass ${id}: ${(e as Error).message}`);
      if (!auto) throw e;
    }
  }

  async forAgent(agentId: string, cwd: string, env: Record<string, string>, root?: string): Promise<ToolHost> {
    if (!agentId) throw new Error("an agent id is needed (the empty scope is the session's own)");
    // `root` always goes out: the scope outlives a connection, and one set before must not stay.
    const cmds = [`cwd ${cwd}`, root ? `root ${root}` : 'root', `env OLLIE_SESSION_ID=${this.o.sessionId}`];
    for (const [k, v] of Object.entries(env)) {
      if (v.includes('\n')) throw new Error(`env ${k}: values with newlines cannot be passed to tools`);
      cmds.push(`env ${k}=${v}`);
    }
    // The agent attaches as itself: tools see its id as OLLIE_UNAME (client_9p expands it in agent paths).
    const host = await ToolClient.connect(this.o.toolsrv, agentId, this.o.uname ?? agentId, this.o.localEnv);
    try {
      await host.ctlLines(cmds);
    } catch (e) {
      await host.close();
      throw e;
    }
    this.hosts.add(host);
    const close = host.close.bind(host);
    host.close = async () => {
      this.hosts.delete(host);
      await close();
    };
    return host;
  }

  /** The session-wide connection to toolsrv (its mcp/ directory is mirrored by olliesrv/mcp). */
  toolsrv(): Client {
    return this.control;
  }

  pending(): BypassRequest[] {
    return [...this.waiting.values()].filter((r) => !this.autoReason.has(r.id));
  }

  /**
   * `remember`: `once` (default), `session` or `always`: the rule ruleFor computes from the request (the one
   * the bypass file shows), for this session or persisted. Only approvals are remembered; a rule is never
   * taken from the caller, so `always:PATTERN` is refused.
   */
  async resolve(id: string, decision: 'approve' | 'deny', remember = 'once'): Promise<void> {
    const req = this.waiting.get(id);
    if (!req) throw new Error(`no pending bypass request ${id}`);
    if (remember.startsWith('always:')) {
      throw new Error(
        `${JSON.stringify(remember)}: a rule is not given, it is computed from the request (the bypass file's last columns show it); write "${id} approve always"`,
      );
    }
    if (!['once', 'session', 'always'].includes(remember))
      throw new Error(`remember must be once, session or always, not ${JSON.stringify(remember)}`);
    if (decision === 'approve' && remember !== 'once') {
      if (req.ask)
        throw new Error(
          `${remember}: a hook asked for this approval; it is given once at a time (write "${id} approve")`,
        );
      if (!this.o.rules) throw new Error(`${remember}: no rule store here (approve once)`);
      const rule = ruleFor(req);
      if ('refused' in rule) throw new Error(`${remember}: ${rule.refused}`);
      this.o.rules.add(rule, remember === 'session' ? this.o.sessionId : undefined);
    }
    await this.send(id, decision);
    if (decision === 'approve' && remember !== 'once') {
      // Others already waiting that the new approval covers go through too.
      for (const r of [...this.waiting.values()]) {
        const why = r.id !== id && !r.ask && !this.autoReason.has(r.id) ? this.remembered(r) : undefined;
        if (why) await this.send(r.id, 'approve', why);
      }
    }
  }

  onBypass(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.life.abort();
    for (const h of [...this.hosts]) await h.close();
    this.control.close();
    await this.following;
    this.o.rules?.forgetSession(this.o.sessionId);
    await this.o.onClose?.();
  }
}
