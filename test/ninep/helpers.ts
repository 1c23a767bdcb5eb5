import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  decode,
  encode,
  Framer,
  Server,
  type Message,
  type RMessage,
  type ServerOptions,
} from '../../src/ninep/index.js';
import { dial, listen, type Listener } from '../../src/ninep/node.js';
import type { Client, ClientOptions } from '../../src/ninep/index.js';

export interface TestServer<N> {
  server: Server<N>;
  path: string;
  listener: Listener;
  client(opts?: ClientOptions): Promise<Client>;
  raw(): Promise<RawConn>;
  close(): Promise<void>;
}

/** Serves `opts.fs` on a Unix socket in a fresh private directory. */
export async function serve<N>(opts: ServerOptions<N>): Promise<TestServer<N>> {
  const dir = mkdtempSync(join(tmpdir(), 'ninep-test-'));
  const path = join(dir, 's.sock');
  const server = new Server(opts);
  const listener = await listen(server, { kind: 'unix', path });
  const clients: Client[] = [];
  const raws: RawConn[] = [];
  return {
    server,
    path,
    listener,
    async client(o) {
      const c = await dial({ kind: 'unix', path }, { uname: 'alice', ...o });
      clients.push(c);
      return c;
    },
    async raw() {
      const r = await RawConn.open(path);
      raws.push(r);
      return r;
    },
    async close() {
      for (const c of clients) c.close();
      for (const r of raws) r.close();
      server.close();
      await listener.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

type Untagged<T> = T extends unknown ? Omit<T, 'tag'> : never;

/** A hand-driven 9P connection: send any frame, await replies by tag. */
export class RawConn {
  private readonly framer = new Framer(1 << 24);
  readonly replies: RMessage[] = [];
  private waiters: Array<() => void> = [];
  closed = false;

  private constructor(readonly sock: net.Socket) {
    sock.on('data', (b) => {
      for (const f of this.framer.push(b)) this.replies.push(decode(f) as RMessage);
      for (const w of this.waiters.splice(0)) w();
    });
    sock.on('close', () => {
      this.closed = true;
      for (const w of this.waiters.splice(0)) w();
    });
    sock.on('error', () => undefined);
  }

  static open(path: string): Promise<RawConn> {
    return new Promise((resolve, reject) => {
      const s = net.connect(path, () => resolve(new RawConn(s)));
      s.once('error', reject);
    });
  }

  send(m: Message | Uint8Array): void {
    this.sock.write(m instanceof Uint8Array ? m : encode(m));
  }

  /** Sends a request with `tag` and resolves with the reply to that tag. */
  async rpc(tag: number, m: Untagged<Message>): Promise<RMessage> {
    this.send({ ...m, tag } as Message);
    return this.reply(tag);
  }

  async reply(tag: number, timeoutMs = 2000): Promise<RMessage> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.replies.findIndex((r) => r.tag === tag);
      if (i !== -1) return this.replies.splice(i, 1)[0]!;
      if (this.closed) throw new Error('connection closed');
      if (Date.now() > deadline) throw new Error(`no reply to tag ${tag}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }

  /** Resolves true once the server has closed the connection. */
  async waitClosed(timeoutMs = 2000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    return this.closed;
  }

  close(): void {
    this.sock.destroy();
  }
}
