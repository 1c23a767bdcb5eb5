/**
 * The GUI's file operations, each one logged as the `ollie-9p` command line that does the same thing from a
 * shell (the 9P console shows them). Nothing here knows about the UI: it is paths and bytes.
 */
import type { Client } from '../../../ninep/index.js';

export interface ConsoleEntry {
  seq: number;
  time: number;
  /** The equivalent shell command. */
  command: string;
  /** Set when the operation failed. */
  error?: string;
  /** How many times this same read was made, when more than once (the console shows the last). */
  count?: number;
}

const quote = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** `printf '%s' DATA | ollie-9p OP PATH`: the shell form of a write-style operation. */
function piped(op: string, path: string, data: string): string {
  const body = data.endsWith('\n') ? `echo ${quote(data.slice(0, -1))}` : `printf '%s' ${quote(data)}`;
  return `${body} | ollie-9p ${op} ${quote(path)}`;
}

export class Api {
  private seq = 0;
  constructor(
    readonly client: Client,
    private readonly log: (e: ConsoleEntry) => void,
  ) {}

  private async op<T>(command: string, run: () => Promise<T>): Promise<T> {
    const entry: ConsoleEntry = { seq: ++this.seq, time: Date.now(), command };
    try {
      const r = await run();
      this.log(entry);
      return r;
    } catch (e) {
      this.log({ ...entry, error: (e as Error).message });
      throw e;
    }
  }

  read(path: string): Promise<string> {
    return this.op(`ollie-9p read ${quote(path)}`, () => this.client.readText(path));
  }

  async readOr(path: string, fallback: string): Promise<string> {
    try {
      return await this.read(path);
    } catch {
      return fallback;
    }
  }

  /** `shown` is what the console line shows instead of the data (API keys masked: the console is copied and kept). */
  write(path: string, data: string, shown = data): Promise<void> {
    return this.op(piped('write', path, shown), () => this.client.write(path, data));
  }

  rdwr(path: string, data: string, shown = data): Promise<string> {
    return this.op(piped('rdwr', path, shown), () => this.client.rdwrText(path, data));
  }

  remove(path: string): Promise<void> {
    return this.op(`ollie-9p rm ${quote(path)}`, () => this.client.remove(path));
  }

  async ls(path: string): Promise<string[]> {
    const st = await this.op(`ollie-9p ls ${quote(path)}`, () => this.client.ls(path));
    return st.map((s) => s.name);
  }

  /** Streams a file (or, with `request`, a streaming Rdwr) as text chunks until EOF or abort. */
  async *stream(path: string, opts: { request?: string; signal?: AbortSignal } = {}): AsyncGenerator<string> {
    this.log({
      seq: ++this.seq,
      time: Date.now(),
      command: opts.request === undefined ? `ollie-9p read ${quote(path)}` : piped('rdwrs', path, opts.request),
    });
    const dec = new TextDecoder();
    for await (const chunk of this.client.stream(path, opts)) yield dec.decode(chunk, { stream: true });
  }
}
