/**
 * An agent's chat log: JSONL blocks (`log.raw`, see the README's namespace table). A block streamed from the model is
 * sent as partial blocks, each carrying the new text only (so a long reply costs O(n) bytes, not O(n²)), and closed
 * by a final block with the same id carrying the whole content. Only final blocks are stored.
 *
 * Readers of `log.raw` start from the beginning: every final block so far, then one partial block with the text
 * so far of each block still open, then live lines. A reader that falls behind by more than READER_LIMIT lines
 * loses partial lines (never final ones): the final block of each still arrives with the whole content.
 *
 * Readers of `log.from` start where they ask (fromRequest): the last N final blocks, the N before a block, or
 * everything after one. A session with 100k blocks opens from its tail instead of all 44 MB of the log.
 *
 * Backed by the store (StoredLog), only the last WINDOW..2×WINDOW final blocks stay in memory; older ones are
 * read from SQLite by number when a reader reaches them (log.raw from the start reads them a page at a time).
 */
import { FormatError, splitWords } from '../../formats/index.js';
import { LOG_FROM } from '../../formats/olliesrv.js';
import { createHash } from 'node:crypto';
import { WakeQueue } from '../../platform/queue.js';

export type Role =
  'user' | 'assistant' | 'context' | 'reasoning' | 'call' | 'tool' | 'error' | 'info' | 'retry' | 'stalled';

export interface Block {
  role: Role;
  id: string;
  content: string;
  name?: string;
  format?: string;
  partial?: boolean;
}

export const READER_LIMIT = 4096;
/** Size of the rendered text log (`log`). */
export const TEXT_LOG_LIMIT = 64 * 1024;
/** Final blocks kept in memory when the log is backed by the store (between WINDOW and 2×WINDOW). */
export const WINDOW = 1000;
/** Blocks read from the store at once by a reader behind the window. */
const STORE_PAGE = 1000;

/**
 * The final blocks already in the store: how many, the last of them, and reads of the rest by number (0 is the
 * first block) or by id. Lines are the stored JSON, without the newline.
 */
export interface StoredLog {
  count: number;
  tail: string[];
  range(from: number, to: number): string[];
  seqOf(id: string): number | undefined;
}

/** Most blocks one `log.from` request may ask for: a page, not a way around reading the whole log by parts. */
export const FROM_LIMIT = 10_000;

/**
 * A `log.from` request: `tail N` (the last N final blocks, then live), `before ID N` (the N final blocks before
 * block ID, then EOF), `after ID` (every final block after block ID, then live).
 */
export type FromRequest =
  { kind: 'tail'; n: number } | { kind: 'before'; id: string; n: number } | { kind: 'after'; id: string };

const FROM_USAGE = 'expected "tail N", "before BLOCKID N" or "after BLOCKID"';

/** Parses a `log.from` request (LOG_FROM); a malformed one is an error that quotes it and says what was expected. */
export function parseFromRequest(req: string): FromRequest {
  const bad = (why: string) => new Error(`log.from: ${why} in ${JSON.stringify(req.trim())}: ${FROM_USAGE}`);
  const count = (w: string | undefined): number => {
    if (w === undefined || !/^\d+$/.test(w))
      throw bad(`N ${w === undefined ? 'missing' : JSON.stringify(w) + ' is not a number'}`);
    const n = Number(w);
    if (n < 1 || n > FROM_LIMIT) throw bad(`N ${n} out of range 1..${FROM_LIMIT}`);
    return n;
  };
  const verb = req.trim().split(/\s+/)[0] ?? '';
  const decl = LOG_FROM.get(verb);
  if (!decl) throw bad(`unknown request ${JSON.stringify(verb)}`);
  let args: string[];
  try {
    ({ args } = LOG_FROM.parse(req));
  } catch (e) {
    // Too few arguments: the missing N is named; too many, or a bad quote: the count is wrong.
    const given = req.trim().split(/\s+/).length - 1;
    if (e instanceof FormatError && given < decl.args.length && decl.args.at(-1)!.name === 'N') throw bad('N missing');
    throw bad(
      given < decl.args.length ? `${decl.args.map((a) => a.name).join(' ')} missing` : 'wrong number of arguments',
    );
  }
  // An unquoted last argument takes the rest of the line: more words than arguments is one argument too many.
  let words = 0;
  try {
    words = splitWords(req).length;
  } catch {
    words = -1;
  }
  if (words !== args.length + 1) throw bad('wrong number of arguments');
  if (decl.name === 'tail') return { kind: 'tail', n: count(args[0]) };
  if (decl.name === 'before') return { kind: 'before', id: args[0]!, n: count(args[1]) };
  return { kind: 'after', id: args[0]! };
}

function line(b: Block): string {
  return `${JSON.stringify(b)}\n`;
}

/** Plain text of a block for the `log` file: no markup, context hidden. */
export function renderBlock(b: Block): string {
  switch (b.role) {
    case 'context':
    case 'reasoning':
      return '';
    case 'user':
      return `> ${b.content.replace(/\n/g, '\n> ')}\n\n`;
    case 'assistant':
      return `${b.content}\n\n`;
    case 'call':
      return `→ ${b.name ?? 'tool'} ${b.content}\n`;
    case 'tool':
      return `${b.content}${b.content.endsWith('\n') ? '' : '\n'}\n`;
    default:
      return `[${b.role}] ${b.content}\n`;
  }
}

export class ChatLog {
  /** The final blocks numbered base.. (all of them unless the store holds the older ones). */
  private finals: string[] = [];
  private ids: string[] = [];
  private base = 0;
  /** Block id → its number, for the blocks in `finals` (the `block` file, log.from's `before`/`after`). */
  private readonly seqOf = new Map<string, number>();
  private readonly open = new Map<string, Block>();
  private readonly readers = new Set<WakeQueue<string>>();
  private readonly source?: StoredLog;
  /** False once a block could not be stored (the agent is gone): nothing may leave memory any more. */
  private trimmable: boolean;
  private text = '';
  private seq: number;
  private closed = false;

  /**
   * @param agentId salts the block ids
   * @param stored final blocks from the store, oldest first: all of them, or a StoredLog that reads the older
   *   ones on demand
   * @param persist called with each new final block (and its number) to store it; false when it was not stored
   */
  constructor(
    private readonly agentId: string,
    stored: string[] | StoredLog,
    private readonly persist: (seq: number, id: string, json: string) => boolean | void,
  ) {
    const all = Array.isArray(stored);
    if (!all) this.source = stored;
    this.trimmable = !all;
    const tail = all ? stored : stored.tail;
    this.base = all ? 0 : stored.count - tail.length;
    for (const json of tail) this.keep(JSON.parse(json) as Block, `${json}\n`);
    // The text log is the last 64 KiB: when the blocks in memory render to less, older ones from the store
    // fill it (a page at a time, backwards, so a log of large blocks reads none).
    for (let to = this.base; this.source && to > 0 && this.text.length < TEXT_LOG_LIMIT;) {
      const from = Math.max(0, to - STORE_PAGE);
      this.text =
        this.source
          .range(from, to)
          .map((j) => renderBlock(JSON.parse(j) as Block))
          .join('') + this.text;
      to = from;
    }
    this.seq = this.total;
  }

  /** The number of final blocks. */
  private get total(): number {
    return this.base + this.finals.length;
  }

  private nextId(): string {
    return createHash('sha256').update(`${this.agentId}:${this.seq}`).digest('hex').slice(0, 8);
  }

  private keep(b: Block, l: string): void {
    this.seqOf.set(b.id, this.total);
    this.finals.push(l);
    this.ids.push(b.id);
    this.text += renderBlock(b);
    if (this.text.length > TEXT_LOG_LIMIT * 2) this.trimText();
  }

  /** Drops the oldest blocks of the window once it doubles (they are in the store). */
  private trimWindow(): void {
    if (!this.trimmable || this.finals.length < 2 * WINDOW) return;
    const drop = this.finals.length - WINDOW;
    for (const id of this.ids.slice(0, drop)) this.seqOf.delete(id);
    this.finals = this.finals.slice(drop);
    this.ids = this.ids.slice(drop);
    this.base += drop;
  }

  /** The number of block `id`, in memory or in the store. */
  private numberOf(id: string): number | undefined {
    return this.seqOf.get(id) ?? this.source?.seqOf(id);
  }

  /** Final blocks from..to-1 as lines, from the store for those before the window. */
  private lines(from: number, to: number): string[] {
    const out =
      from < this.base && this.source ? this.source.range(from, Math.min(to, this.base)).map((j) => `${j}\n`) : [];
    return out.concat(this.finals.slice(Math.max(from, this.base) - this.base, Math.max(to - this.base, 0)));
  }

  private trimText(): void {
    let cut = this.text.length - TEXT_LOG_LIMIT;
    const nl = this.text.indexOf('\n', cut);
    if (nl !== -1 && nl - cut < 4096) cut = nl + 1;
    this.text = this.text.slice(cut);
  }

  private emit(l: string, partial: boolean): void {
    for (const r of this.readers) {
      if (partial && r.length >= READER_LIMIT) continue;
      r.push(l);
    }
  }

  /** Appends a complete block; returns it. */
  add(role: Role, content: string, extra?: { name?: string; format?: string }): Block {
    const b: Block = { role, id: this.nextId(), content, ...extra };
    this.seq++;
    this.finish(b);
    return b;
  }

  /** Opens a streamed block; fill it with delta(), close it with end(). */
  begin(role: Role, extra?: { name?: string; format?: string }): string {
    const id = this.nextId();
    this.seq++;
    this.open.set(id, { role, id, content: '', ...extra });
    return id;
  }

  delta(id: string, text: string): void {
    const b = this.open.get(id);
    if (!b || !text) return;
    b.content += text;
    this.emit(line({ ...b, content: text, partial: true }), true);
  }

  /** Closes a streamed block (dropped when empty); returns the final block. */
  end(id: string, patch?: { content?: string }): Block | undefined {
    const b = this.open.get(id);
    if (!b) return undefined;
    this.open.delete(id);
    if (patch?.content !== undefined) b.content = patch.content;
    if (!b.content) {
      // Readers may have seen nothing of it (no delta was emitted for an empty block).
      return undefined;
    }
    this.finish(b);
    return b;
  }

  private finish(b: Block): void {
    const l = line(b);
    this.keep(b, l);
    if (this.persist(this.total - 1, b.id, l.slice(0, -1)) === false) this.trimmable = false;
    this.emit(l, false);
    this.trimWindow();
  }

  get(id: string): string | undefined {
    const at = this.numberOf(id);
    return at === undefined ? undefined : this.lines(at, at + 1)[0];
  }

  get length(): number {
    return this.total;
  }

  /** How many readers follow the log now. */
  get readerCount(): number {
    return this.readers.size;
  }

  /** How many final blocks are held in memory (the rest are read from the store). */
  get resident(): number {
    return this.finals.length;
  }

  /** The rendered text log, last TEXT_LOG_LIMIT bytes at most. */
  rendered(): string {
    if (this.text.length > TEXT_LOG_LIMIT) this.trimText();
    return this.text;
  }

  /** The final blocks, parsed (for tests: it reads the whole log). */
  blocks(): Block[] {
    return this.lines(0, this.total).map((l) => JSON.parse(l) as Block);
  }

  /** log.raw: everything from the start, then live, until close() or the signal. */
  stream(signal: AbortSignal): AsyncIterable<string> {
    return this.follow(0, signal);
  }

  /**
   * log.from: the blocks a request names (parseFromRequest). `tail` and `after` then follow the log live as
   * log.raw does (the text so far of open blocks, then new lines), so a client reading a tail misses nothing;
   * `before` pages back through history and ends. An unknown block id is an error naming it.
   */
  from(req: FromRequest, signal: AbortSignal): AsyncIterable<string> {
    if (req.kind === 'tail') return this.follow(Math.max(0, this.total - req.n), signal);
    const at = this.numberOf(req.id);
    if (at === undefined) throw new Error(`log.from: no block ${JSON.stringify(req.id)} in this log`);
    if (req.kind === 'after') return this.follow(at + 1, signal);
    const page = this.lines(Math.max(0, at - req.n), at).join('');
    return (async function* () {
      if (page) yield page;
    })();
  }

  /** Final blocks from number `start`, the open blocks so far, then live until close() or the signal. */
  private async *follow(start: number, signal: AbortSignal): AsyncIterable<string> {
    // Behind the window: pages from the store. The window may move on while a page is read by the client, so
    // where it starts is looked at again each time; the last step (window, open blocks, joining the readers)
    // runs without a pause, so no block is missed or sent twice.
    let pos = start;
    while (pos < this.base && this.source) {
      const to = Math.min(this.base, pos + STORE_PAGE);
      yield this.source
        .range(pos, to)
        .map((j) => `${j}\n`)
        .join('');
      pos = to;
      if (signal.aborted) return;
    }
    const first = this.finals.slice(pos - this.base);
    for (const b of this.open.values()) if (b.content) first.push(line({ ...b, partial: true }));
    if (this.closed) {
      if (first.length) yield first.join('');
      return;
    }
    const r = new WakeQueue<string>(first);
    this.readers.add(r);
    try {
      // Each batch is everything queued: one 9P read can carry many lines.
      for await (const batch of r.batches(signal)) yield batch.join('');
    } finally {
      this.readers.delete(r);
    }
  }

  /** The agent died: readers get what is queued, then EOF. */
  close(): void {
    this.closed = true;
    for (const r of this.readers) r.end();
  }
}
