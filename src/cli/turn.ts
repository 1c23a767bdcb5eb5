/**
 * One prompt to an agent and the turn it starts, through the namespace's files: the agent's `turn` events say when
 * a turn ends, its `log.raw` which blocks are ours (those after our prompt's user block), and `state` decides that
 * the agent is idle again. For programs that wait for a reply (`ollie mcp`) or show the turn as it streams (`o prompt`).
 */
import { lines, ORDWR, OREAD, type Client, type Fid } from '../ninep/index.js';
import type { Block } from '../olliesrv/agent/chatlog.js';

export interface TurnResult {
  /** The turn's last answer (the final assistant block), '' when it gave none. */
  reply: string;
  /** The content of the turn's error block, when it ended in one. */
  error?: string;
  /** Every finished block of the turn after the prompt: calls, tool results, answers. */
  blocks: Block[];
}

/** Told of the turn as it goes, for a caller that shows it. */
export interface TurnObserver {
  /** Every block of the turn after the prompt, partial ones included, in order; awaited before the next. */
  block?(b: Block): void | Promise<void>;
  /** The prompt has been written to the agent. */
  sent?(): void;
  /** The log shows the next turn starting: ours is over. */
  nextTurn?(): void;
}

const enc = new TextEncoder();

/**
 * Reads what log.raw holds already, so that only what follows is followed: a new reader gets the whole backlog in
 * its first read (awaited when the log has blocks); a quiet moment after it ends the backlog. The read still in
 * flight is returned, to be continued from.
 */
async function backlog(
  f: Fid,
  hasBlocks: boolean,
  signal: AbortSignal,
): Promise<{ offset: number; next: Promise<Uint8Array> }> {
  let offset = 0;
  for (let first = true; ; first = false) {
    const next = f.read(offset, f.iounit, signal);
    next.catch(() => undefined); // its reader handles the rejection
    const got =
      first && hasBlocks
        ? await next
        : await Promise.race([next, new Promise<undefined>((r) => setTimeout(() => r(undefined), 60))]);
    if (got === undefined || got.length === 0) return { offset, next };
    offset += got.length;
  }
}

/**
 * Writes `prompt` to the agent at `path` (session/S/agent/A) and waits until its turn is over. A prompt queued
 * behind another turn waits for that one too. `signal` gives up waiting (the turn goes on).
 */
export async function promptTurn(
  c: Client,
  path: string,
  prompt: string,
  signal: AbortSignal,
  observer: TurnObserver = {},
): Promise<TurnResult> {
  const text = prompt.replace(/\n+$/, '');
  const session = path.split('/')[1]!;
  const sid = (await c.readText(`session/${session}/id`)).trim();
  const aid = (await c.readText(`${path}/id`)).trim();
  const life = new AbortController();
  const stop = (): void => life.abort(signal.reason);
  signal.addEventListener('abort', stop, { once: true });
  // Subscribed and reading before the prompt goes in, so that nothing is missed.
  const events = await c.open('event', ORDWR);
  let log: Fid | undefined;
  try {
    await events.writeAll(enc.encode(`session.${sid}.agent.${aid}.turn session.${sid}.agent.${aid}.state`));
    log = await c.open(`${path}/log.raw`, OREAD);
    const before = await backlog(log, (await c.readText(`${path}/log`)) !== '', life.signal);
    const result: TurnResult = { reply: '', blocks: [] };
    let ours = false;
    const follow = (async () => {
      const dec = new TextDecoder();
      let buf = '';
      let offset = before.offset;
      let pending: Promise<Uint8Array> | undefined = before.next;
      for (;;) {
        const chunk = await (pending ?? log.read(offset, log.iounit, life.signal));
        pending = undefined;
        if (chunk.length === 0) return;
        offset += chunk.length;
        buf += dec.decode(chunk, { stream: true });
        for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n')) {
          const b = JSON.parse(buf.slice(0, nl)) as Block;
          buf = buf.slice(nl + 1);
          if (!ours) {
            ours = b.role === 'user' && !b.partial && b.content === text;
            continue;
          }
          // The next prompt (not an injection into ours) starts another turn: ours is over.
          if (b.role === 'user' && !b.partial && b.name !== 'inject') return void observer.nextTurn?.();
          await observer.block?.(b);
          if (b.partial) continue;
          result.blocks.push(b);
          if (b.role === 'assistant') result.reply = b.content;
          if (b.role === 'error') result.error = b.content;
        }
      }
    })();
    follow.catch(() => undefined);
    // Events wake the check; the state file decides (an event of an earlier turn may still be on its way).
    const ended = (async () => {
      const it = lines(events.chunks(life.signal))[Symbol.asyncIterator]();
      let next: Promise<unknown> = it.next();
      next.catch(() => undefined);
      for (;;) {
        const woke: unknown = await Promise.race([next, new Promise((r) => setTimeout(r, 250, 'tick'))]);
        if (woke !== 'tick') {
          next = (woke as IteratorResult<string>).done ? new Promise(() => undefined) : it.next();
          next.catch(() => undefined);
        }
        life.signal.throwIfAborted();
        if (ours && (await c.readText(`${path}/state`, life.signal)).trim() === 'idle') return;
      }
    })();
    await c.write(`${path}/prompt`, text);
    observer.sent?.();
    ended.catch(() => undefined);
    // Over when the agent is idle after our prompt, or when the log shows the next turn starting (or ends: the
    // agent is gone).
    await Promise.race([ended, follow]);
    if (!ours) throw new Error(`${path}: the agent ended before taking the prompt`);
    // The turn's last blocks were sent before its state changed; one more round trip makes sure they are in.
    await c.readText(`${path}/state`);
    await new Promise((r) => setImmediate(r));
    life.abort(new Error('turn over'));
    await follow.catch(() => undefined);
    return result;
  } finally {
    signal.removeEventListener('abort', stop);
    life.abort(new Error('turn over'));
    await events.clunk().catch(() => undefined);
    await log?.clunk().catch(() => undefined);
  }
}
