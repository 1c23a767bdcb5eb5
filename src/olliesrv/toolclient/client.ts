/**
 * ToolHost over 9P: a connection to toolsrv, attached with aname = the agent id (its scope) and
 * authenticated with the shared secret the toolsrv was started with.
 *
 * When the toolsrv goes away (a crash; olliesrv replaces it), the next use reconnects — to a new toolsrv when
 * the address comes from a provider such as ToolsrvKeeper.lease — and replays the scope's setup (cwd, env,
 * loaded tools), so an agent keeps its ToolHost for life. A call in flight when the connection broke fails
 * (it cannot be known whether the tool ran); `rev` changes, so the agent re-reads its tools.
 */
import { concatBytes, IOHDRSZ, lines, OREAD, ORDWR, OWRITE, Type, type Client, type Fid } from '../../ninep/index.js';
import { dial } from '../../ninep/node.js';
import type {
  CatalogEntry,
  ProcInterrupt,
  ProcRequest,
  ProcResult,
  ToolInfo,
  ToolsrvInfo,
} from '../../toolsrv/protocol.js';
import type { ToolHost } from './host.js';

/** Where a toolsrv listens and how to prove we may talk to it. */
export interface ToolsrvAddress {
  socket: string;
  secret: string;
  /** The remote host it runs on (`[user@]host[:port]`), for toolsrvs reached over SSH. */
  host?: string;
}

/** A fixed address, or a provider that returns a live toolsrv's (starting one when needed). */
export type ToolsrvSource = ToolsrvAddress | (() => Promise<ToolsrvAddress>);

export const addressOf = (src: ToolsrvSource): Promise<ToolsrvAddress> =>
  typeof src === 'function' ? src() : Promise.resolve(src);

/** A raw authenticated 9P connection to toolsrv in scope `aname` (every agent opens one: auth and attach together). */
export function connectToolsrv(addr: ToolsrvAddress, aname: string, uname = 'olliesrv'): Promise<Client> {
  return dial({ kind: 'unix', path: addr.socket }, { uname, aname, authData: addr.secret });
}

/** The scope's setup as ctl commands have made it, to replay on a new connection. */
class Setup {
  cwd?: string;
  readonly env = new Map<string, string | undefined>();
  readonly loaded = new Set<string>();

  /** Records a ctl line that succeeded. */
  note(line: string): void {
    const m = /^\s*(\S+)\s*(.*?)\s*$/.exec(line);
    if (!m) return;
    const [, cmd, arg = ''] = m;
    if (cmd === 'cwd') this.cwd = arg;
    else if (cmd === 'env') {
      const eq = arg.indexOf('=');
      const k = eq < 0 ? arg : arg.slice(0, eq);
      // Re-inserted at the end, so replay keeps the order of the last settings.
      this.env.delete(k);
      this.env.set(k, eq < 0 ? undefined : arg.slice(eq + 1));
    } else if (cmd === 'load') for (const n of arg.split(/\s+/)) this.loaded.add(n);
    else if (cmd === 'unload') for (const n of arg.split(/\s+/)) this.loaded.delete(n);
  }

  /** Env before loads: variants are chosen with the scope's env. */
  lines(): string[] {
    return [
      ...(this.cwd ? [`cwd ${this.cwd}`] : []),
      ...[...this.env].map(([k, v]) => (v === undefined ? `env ${k}` : `env ${k}=${v}`)),
      ...[...this.loaded].map((n) => `load ${n}`),
    ];
  }
}

export class ToolClient implements ToolHost {
  private current?: Client;
  private connecting?: Promise<Client>;
  private readonly setup = new Setup();
  private closed = false;
  /** The remote host of the toolsrv of the current connection (undefined for this machine). */
  host?: string;
  /** Replayed setup lines that failed on the last reconnect (a tool that no longer loads), for the log. */
  replayErrors: string[] = [];

  private constructor(
    private readonly source: ToolsrvSource,
    readonly agentId: string,
    private readonly uname: string | undefined,
    private readonly localEnv: Readonly<Record<string, string | undefined>>,
  ) {}

  /**
   * @param localEnv this machine's environment (olliesrv's): a remote toolsrv does not get the variables an agent
   *   inherited from it (HOME, PATH, … name things here), only those set for the session or the agent
   */
  static async connect(
    src: ToolsrvSource,
    agentId: string,
    uname?: string,
    localEnv: Readonly<Record<string, string | undefined>> = {},
  ): Promise<ToolClient> {
    const tc = new ToolClient(src, agentId, uname, localEnv);
    await tc.conn();
    return tc;
  }

  /** The live connection, reconnecting (and replaying the setup) when the last one broke. */
  private conn(): Promise<Client> {
    if (this.closed) return Promise.reject(new Error('tool connection closed'));
    if (this.current && !this.current.closed) return Promise.resolve(this.current);
    this.connecting ??= (async () => {
      const { addr, c } = await this.dialAddress();
      this.host = addr.host;
      this.replayErrors = [];
      for (const line of this.forHost(this.setup.lines())) {
        // One line at a time, so one tool that no longer loads does not keep the rest from being restored.
        await c.write('ctl', line).catch((e: Error) => this.replayErrors.push(`${line}: ${e.message}`));
      }
      if (this.closed) {
        c.close();
        throw new Error('tool connection closed');
      }
      this.current = c;
      return c;
    })().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /**
   * Connects to the source's toolsrv. A provider's may have just died without its process having ended yet (an
   * ssh whose connection dropped closes its forwarded sockets before it exits): a failed dial is tried again a
   * few times, briefly, by when the provider hands out a new one.
   */
  private async dialAddress(): Promise<{ addr: ToolsrvAddress; c: Client }> {
    for (let i = 0; ; i++) {
      const addr = await addressOf(this.source);
      try {
        return { addr, c: await connectToolsrv(addr, this.agentId, this.uname) };
      } catch (e) {
        if (typeof this.source !== 'function' || this.closed || i >= 4) throw e;
        await new Promise((r) => setTimeout(r, 100 * 2 ** i));
      }
    }
  }

  async list(): Promise<{ rev: number; tools: ToolInfo[] }> {
    // rev is read on both sides of the list, so a change in between is seen and the list read again. The three
    // reads go out together: toolsrv answers each of these files at once, in the order they arrive.
    for (;;) {
      const c = await this.conn();
      const [before, list, after] = await Promise.all([
        this.readSmall(c, 'rev'),
        this.readSmall(c, 'tools'),
        this.readSmall(c, 'rev'),
      ]);
      if (Number(before.trim()) === Number(after.trim()))
        return { rev: Number(before.trim()), tools: JSON.parse(list) as ToolInfo[] };
    }
  }

  /**
   * The registry's revision. Right after a call it is the one read together with the call's result (the agent
   * asks after every tool round, and this saves the round trip); the value is used once.
   */
  async rev(): Promise<number> {
    const after = this.revAfterCall;
    this.revAfterCall = undefined;
    if (after && after.client === this.current && after.ctls === this.ctls && !after.client.closed) return after.rev;
    return Number((await this.readSmall(await this.conn(), 'rev')).trim());
  }

  /** The rev read with the last call's result, while no ctl command (a load) was sent since it was asked for. */
  private revAfterCall?: { rev: number; client: Client; ctls: number };
  /** ctl writes started on this client: a rev read before one may be out of date. */
  private ctls = 0;

  async spill(name: string, body: string): Promise<string> {
    const c = await this.conn();
    await c.write('proc/spill', `${name}\n${body}`);
    const dir = (await c.readText('proc/spilldir')).trim();
    if (!dir) throw new Error('the tool server has no spill directory for this agent');
    return `${dir}/${name}.txt`;
  }

  async ctl(command: string): Promise<void> {
    if (command.includes('\n')) throw new Error('a ctl command is one line (values with newlines cannot be set)');
    this.ctls++;
    const c = await this.conn();
    const [line] = this.forHost([command]);
    if (line !== undefined) await this.writeSmall(c, 'ctl', line);
    this.setup.note(command);
  }

  /** Several ctl commands in one write (one round trip); all are applied up to the first that fails. */
  async ctlLines(commands: string[]): Promise<void> {
    for (const c of commands)
      if (c.includes('\n'))
        throw new Error(`${c.split('\n')[0]}…: a ctl command is one line (values with newlines cannot be set)`);
    this.ctls++;
    const c = await this.conn();
    const sent = this.forHost(commands);
    if (sent.length) await this.writeSmall(c, 'ctl', `${sent.join('\n')}\n`);
    for (const c of commands) this.setup.note(c);
  }

  async call(req: ProcRequest, signal?: AbortSignal): Promise<ProcResult> {
    const c = await this.conn();
    try {
      return await this.callOn(c, req, signal);
    } catch (e) {
      // A remote toolsrv whose SSH connection dropped: say where, and that the outcome is unknown (it ended
      // with its toolsrv, which follows the connection).
      if (this.host && c.closed && !signal?.aborted) {
        throw new Error(
          `lost the connection to the tool server on ${this.host} during the call (the tool was stopped there; whether it finished its work is unknown): ${(e as Error).message}`,
        );
      }
      throw e;
    }
  }

  /**
   * The ctl lines for the current toolsrv: a remote one never gets the local daemon's address or an agent's
   * token for it (nothing there could reach the daemon, and the host need not be trusted with the credential),
   * nor this machine's paths (OLLIE_DATA, OLLIE_CONFIG, and what the agent inherited from olliesrv's environment).
   */
  private forHost(cmds: string[]): string[] {
    if (!this.host) return cmds;
    return cmds.filter((l) => {
      const m = /^\s*env\s+([^=\s]+)(?:=(.*))?$/.exec(l);
      if (!m) return true;
      const [, k, v] = m;
      if (/^OLLIE_(?:TOKEN|ADDR|DATA|CONFIG)$/.test(k!)) return false;
      return !(v !== undefined && this.localEnv[k!] === v);
    });
  }

  /** Drops the current connection (the next use reconnects: to another host when the session moved). */
  dropConnection(): void {
    this.current?.close();
  }

  private async callOn(c: Client, req: ProcRequest, signal?: AbortSignal): Promise<ProcResult> {
    const data = new TextEncoder().encode(JSON.stringify(req));
    // A Rdwr request is one Twrite (the namespace library takes each write as a whole request).
    if (data.length > c.msize - IOHDRSZ) {
      return {
        pid: 0,
        tool: req.tool,
        status: 'refused',
        exit: null,
        output: '',
        outputBytes: 0,
        error: `the call is ${data.length} bytes of JSON; toolsrv takes at most ${c.msize - IOHDRSZ} (write large content in parts)`,
      };
    }
    // The hot path in two round trips instead of five: walk, open and write go out together, the write returns
    // when the tool has exited, one read brings the result (a reply shorter than the iounit is the whole of it),
    // and the clunk is not waited for.
    const reply = await this.pipelined(c, ['proc', 'new'], ORDWR, async (fid, opened) => {
      await c.rpc({ type: Type.Twrite, fid, offset: 0, data }, signal);
      const { iounit } = await opened;
      const count = Math.min(iounit || c.msize - IOHDRSZ, c.msize - IOHDRSZ);
      // The registry's revision now that the tool has run goes out with the result's read (see rev()).
      const ctls = this.ctls;
      const rev = this.readSmall(c, 'rev').then(
        (r) => Number(r.trim()),
        () => undefined,
      );
      const out = await this.readRest(c, fid, count, signal);
      const n = await rev;
      // Calls of one round end in any order, and a long result may hold an older read: rev only grows, so the
      // highest read is the registry's latest.
      const prev = this.revAfterCall;
      if (
        n !== undefined &&
        Number.isFinite(n) &&
        ctls === this.ctls &&
        !(prev && prev.client === c && prev.ctls === ctls && prev.rev > n)
      ) {
        this.revAfterCall = { rev: n, client: c, ctls };
      }
      return out;
    });
    return JSON.parse(new TextDecoder().decode(reply)) as ProcResult;
  }

  /** Reads `fid` from offset 0 until a reply shorter than `count` (toolsrv's whole-reply files). */
  private async readRest(c: Client, fid: number, count: number, signal?: AbortSignal): Promise<Uint8Array> {
    const parts = [(await c.rpc({ type: Type.Tread, fid, offset: 0, count }, signal)).data];
    for (let off = parts[0]!.length; parts.at(-1)!.length === count; off += parts.at(-1)!.length) {
      const more = (await c.rpc({ type: Type.Tread, fid, offset: off, count }, signal)).data;
      if (!more.length) break;
      parts.push(more);
    }
    return parts.length === 1 ? parts[0]! : concatBytes(parts);
  }

  /**
   * Reads one of toolsrv's small files (rev, tools) in one round trip instead of five: walk, open and read go out
   * together, the clunk is not waited for, and a reply shorter than asked for is the whole file (toolsrv serves
   * these from a snapshot taken at offset 0).
   */
  private async readSmall(c: Client, name: string): Promise<string> {
    const count = c.msize - IOHDRSZ;
    return new TextDecoder().decode(await this.pipelined(c, [name], OREAD, (fid) => this.readRest(c, fid, count)));
  }

  /** Writes a short request (a ctl line) to one of toolsrv's files in one round trip: walk, open, write together. */
  private async writeSmall(c: Client, name: string, text: string): Promise<void> {
    const data = new TextEncoder().encode(text);
    if (data.length > c.msize - IOHDRSZ) return void (await c.write(name, data));
    await this.pipelined(
      c,
      [name],
      OWRITE,
      async (fid) => void (await c.rpc({ type: Type.Twrite, fid, offset: 0, data })),
    );
  }

  /**
   * Walks a new fid from the base fid and opens it, sending the first requests of `io` in the same write (the
   * server applies fid changes in arrival order), then clunks it without waiting for the answer.
   */
  private async pipelined<T>(
    c: Client,
    wnames: string[],
    mode: number,
    io: (fid: number, opened: Promise<{ iounit: number }>) => Promise<T>,
  ): Promise<T> {
    const base = await this.baseFid(c);
    const fid = c.allocFid();
    const walk = c.rpc({ type: Type.Twalk, fid: base.fid, newfid: fid, wnames });
    const open = c.rpc({ type: Type.Topen, fid, mode });
    const done = io(fid, open);
    let walked = false;
    try {
      walked = (await walk).qids.length === wnames.length;
      if (!walked) throw new Error(`${wnames.join('/')}: file not found`);
      await open;
      return await done;
    } finally {
      open.catch(() => undefined);
      done.catch(() => undefined);
      if (walked)
        void c.rpc({ type: Type.Tclunk, fid }).then(
          () => c.releaseFid(fid),
          () => undefined,
        );
      else c.releaseFid(fid);
    }
  }

  /** A walked, never opened clone of the root, to walk the hot path's fids from (one per connection). */
  private baseFid(c: Client): Promise<Fid> {
    if (this.base?.client !== c) this.base = { client: c, fid: c.walk([]) };
    return this.base.fid;
  }

  private base?: { client: Client; fid: Promise<Fid> };

  /** Starts a background proc and returns its pid (refusals reject with the reason). */
  async start(req: ProcRequest, signal?: AbortSignal): Promise<number> {
    return Number((await (await this.conn()).rdwrText('proc/new.bg', JSON.stringify(req), signal)).trim());
  }

  /** Finished background procs, each once; follows a replacement toolsrv when this one goes away. */
  async *interrupts(signal: AbortSignal): AsyncGenerator<ProcInterrupt> {
    let failures = 0;
    while (!signal.aborted && !this.closed) {
      let c: Client;
      try {
        c = await this.conn();
        for await (const l of lines(c.stream('proc/interrupts', { signal }))) {
          failures = 0;
          yield JSON.parse(l) as ProcInterrupt;
        }
      } catch (e) {
        if (signal.aborted || this.closed) return;
        // Reconnect while toolsrv is being replaced; give up when it stays away.
        if (++failures > 5) throw e;
      }
      await new Promise((r) => setTimeout(r, 200 * failures));
    }
  }

  /** A proc's output, live until it exits. */
  async *output(pid: number, signal?: AbortSignal): AsyncGenerator<Uint8Array> {
    yield* (await this.conn()).stream(`proc/${pid}/out`, signal ? { signal } : {});
  }

  /** Blocks until the proc exits; its exit code. */
  async wait(pid: number, signal?: AbortSignal): Promise<number> {
    return Number((await (await this.conn()).readText(`proc/${pid}/wait`, signal)).trim());
  }

  async stat(pid: number): Promise<Record<string, string>> {
    const text = await (await this.conn()).readText(`proc/${pid}/stat`);
    return Object.fromEntries(
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
  }

  /** `signal N`, `term`, `kill`, `resize COLS ROWS` or `dismiss`. */
  async procCtl(pid: number, command: string): Promise<void> {
    await (await this.conn()).write(`proc/${pid}/ctl`, command);
  }

  /** Keystrokes for a tty tool's terminal. */
  async input(pid: number, data: Uint8Array): Promise<void> {
    await (await this.conn()).write(`proc/${pid}/in`, data);
  }

  async catalog(): Promise<CatalogEntry[]> {
    return JSON.parse(await (await this.conn()).readText('catalog')) as CatalogEntry[];
  }

  async info(): Promise<ToolsrvInfo> {
    return JSON.parse(await (await this.conn()).readText('info')) as ToolsrvInfo;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.current?.close();
  }
}
