/**
 * ToolHost over 9P: one connection to toolsrv, attached with aname = the agent id (its scope) and
 * authenticated with the shared secret the toolsrv was started with.
 */
import { ORDWR, sharedSecretResponder, type Client } from '../../ninep/index.js';
import { dial } from '../../ninep/node.js';
import type { CatalogEntry, ProcInterrupt, ProcRequest, ProcResult, ToolInfo, ToolsrvInfo } from '../../toolsrv/protocol.js';
import type { ToolHost } from './host.js';

/** Where a toolsrv listens and how to prove we may talk to it. */
export interface ToolsrvAddress {
  socket: string;
  secret: string;
}

/** A raw authenticated 9P connection to toolsrv in scope `aname`. */
export function connectToolsrv(addr: ToolsrvAddress, aname: string, uname = 'olliesrv'): Promise<Client> {
  return dial({ kind: 'unix', path: addr.socket }, { uname, aname, authenticate: sharedSecretResponder(addr.secret) });
}

/** Splits a byte stream into lines (a 9P read may end anywhere). */
export async function* lines(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const dec = new TextDecoder();
  let buf = '';
  for await (const c of chunks) {
    buf += dec.decode(c, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line) yield line;
    }
  }
  if (buf) yield buf;
}

export class ToolClient implements ToolHost {
  private constructor(readonly client: Client, readonly agentId: string) {}

  static async connect(addr: ToolsrvAddress, agentId: string, uname?: string): Promise<ToolClient> {
    return new ToolClient(await connectToolsrv(addr, agentId, uname), agentId);
  }

  async list(): Promise<{ rev: number; tools: ToolInfo[] }> {
    // rev is read on both sides of the list, so a change in between is seen and the list read again.
    for (;;) {
      const before = await this.rev();
      const tools = JSON.parse(await this.client.readText('tools')) as ToolInfo[];
      if ((await this.rev()) === before) return { rev: before, tools };
    }
  }

  async rev(): Promise<number> {
    return Number((await this.client.readText('rev')).trim());
  }

  async ctl(command: string): Promise<void> {
    if (command.includes('\n')) throw new Error('a ctl command is one line (values with newlines cannot be set)');
    await this.client.write('ctl', command);
  }

  async call(req: ProcRequest, signal?: AbortSignal): Promise<ProcResult> {
    // Rdwr by hand, to save round trips on the hot path: a reply shorter than the iounit is the whole reply
    // (no second read for EOF), and the clunk is not waited for.
    const f = await this.client.open('proc/new', ORDWR, signal);
    try {
      await f.writeAll(new TextEncoder().encode(JSON.stringify(req)), signal);
      let reply = await f.read(0, f.iounit, signal);
      if (reply.length === f.iounit) reply = await f.readAll(signal);
      return JSON.parse(new TextDecoder().decode(reply)) as ProcResult;
    } finally {
      void f.clunk().catch(() => undefined);
    }
  }

  /** Starts a background proc and returns its pid (refusals reject with the reason). */
  async start(req: ProcRequest, signal?: AbortSignal): Promise<number> {
    return Number((await this.client.rdwrText('proc/new.bg', JSON.stringify(req), signal)).trim());
  }

  async *interrupts(signal: AbortSignal): AsyncGenerator<ProcInterrupt> {
    try {
      for await (const l of lines(this.client.stream('proc/interrupts', { signal }))) yield JSON.parse(l) as ProcInterrupt;
    } catch (e) {
      if (!signal.aborted) throw e;
    }
  }

  /** A proc's output, live until it exits. */
  output(pid: number, signal?: AbortSignal): AsyncGenerator<Uint8Array> {
    return this.client.stream(`proc/${pid}/out`, signal ? { signal } : {});
  }

  /** Blocks until the proc exits; its exit code. */
  async wait(pid: number, signal?: AbortSignal): Promise<number> {
    return Number((await this.client.readText(`proc/${pid}/wait`, signal)).trim());
  }

  async stat(pid: number): Promise<Record<string, string>> {
    const text = await this.client.readText(`proc/${pid}/stat`);
    return Object.fromEntries(text.split('\n').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  }

  /** `signal N`, `term`, `kill` or `dismiss`. */
  async procCtl(pid: number, command: string): Promise<void> {
    await this.client.write(`proc/${pid}/ctl`, command);
  }

  async catalog(): Promise<CatalogEntry[]> {
    return JSON.parse(await this.client.readText('catalog')) as CatalogEntry[];
  }

  async info(): Promise<ToolsrvInfo> {
    return JSON.parse(await this.client.readText('info')) as ToolsrvInfo;
  }

  async close(): Promise<void> {
    this.client.close();
  }
}
