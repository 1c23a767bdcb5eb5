/**
 * The chat log model: an agent's JSONL log parsed into an ordered list of blocks. It is opened from its tail
 * (`log.from`: `tail N`, then live), and older pages (`before ID N`) are prepended as the user scrolls up, so a
 * session of 100k blocks opens as fast as a short one. Streaming chunks arrive as
 * partial blocks and a final non-partial block with the same id closes them; each updates its block in place
 * (a new object, so React re-renders that one row only). Bytes may arrive cut anywhere: a trailing partial
 * line waits for the rest.
 */

export type Role =
  'user' | 'assistant' | 'context' | 'reasoning' | 'call' | 'tool' | 'error' | 'info' | 'retry' | 'stalled';

export interface Block {
  role: Role | string;
  id: string;
  content: string;
  name?: string;
  format?: string;
  partial?: boolean;
  /** Set here (not by olliesrv) on a block that arrived partial: it was written while this chat was open. */
  live?: boolean;
}

/** Roles that are never shown: context blocks are what the daemon adds for the model (skills, hints, the plan). */
export const HIDDEN_ROLES: ReadonlySet<string> = new Set(['context']);

export class ChatLog {
  /** Every block in log order, context included (hidden at render time). */
  blocks: Block[] = [];
  /** Indices into `blocks` of the shown blocks, kept incrementally so a chunk costs O(1), not O(blocks). */
  visible: number[] = [];
  /** Bumped on every change; cheap to compare in a store selector. */
  version = 0;
  private readonly index = new Map<string, number>();
  private rest = '';
  /** Lines that were not JSON blocks, kept for the error state rather than dropped silently. */
  bad = 0;
  /** False once a page of older blocks came back short: the log's first block is here. */
  hasOlder = true;
  /** Shown rows prepended so far (older pages): the chat keeps what is on screen in place when it grows. */
  prepended = 0;

  /** Feeds text from the stream; returns true when a block changed. */
  push(text: string): boolean {
    const data = this.rest + text;
    const lines = data.split('\n');
    this.rest = lines.pop() ?? '';
    let changed = false;
    for (const b of this.parse(lines)) {
      this.apply(b);
      changed = true;
    }
    if (changed) this.version++;
    return changed;
  }

  /**
   * Puts a page of older final blocks (whole lines, oldest first) in front of the log. Blocks already known are
   * skipped, so a page can never show a block twice. `asked` is how many the page was asked for: fewer means
   * the log starts here. Returns how many shown rows were added.
   */
  prepend(text: string, asked: number): number {
    const lines = text.split('\n');
    const older = this.parse(lines).filter((b) => !this.index.has(b.id));
    if (lines.filter((l) => l.trim() !== '').length < asked) this.hasOlder = false;
    if (!older.length) return 0;
    this.blocks = [...older, ...this.blocks];
    // Every position moved: rebuilding costs O(blocks) per page, against one page read from the daemon.
    this.index.clear();
    this.visible = [];
    this.blocks.forEach((b, i) => {
      this.index.set(b.id, i);
      if (!HIDDEN_ROLES.has(b.role)) this.visible.push(i);
    });
    const shown = older.filter((b) => !HIDDEN_ROLES.has(b.role)).length;
    this.prepended += shown;
    this.version++;
    return shown;
  }

  /** The oldest block the daemon has stored (final): where the next older page ends. */
  oldestFinal(): Block | undefined {
    return this.blocks.find((b) => !b.partial);
  }

  private parse(lines: string[]): Block[] {
    const out: Block[] = [];
    for (const line of lines) {
      if (line.trim() === '') continue;
      let b: Block;
      try {
        b = JSON.parse(line) as Block;
      } catch {
        this.bad++;
        continue;
      }
      if (typeof b !== 'object' || b === null || typeof b.id !== 'string' || typeof b.role !== 'string') {
        this.bad++;
        continue;
      }
      if (typeof b.content !== 'string') b.content = b.content === undefined ? '' : JSON.stringify(b.content);
      out.push(b);
    }
    return out;
  }

  private apply(b: Block): void {
    const at = this.index.get(b.id);
    if (at === undefined) {
      this.index.set(b.id, this.blocks.length);
      if (!HIDDEN_ROLES.has(b.role)) this.visible.push(this.blocks.length);
      this.blocks.push(b.partial ? { ...b, live: true } : b);
      return;
    }
    const old = this.blocks[at]!;
    // olliesrv sends each partial chunk as the new text only, and closes the block with a final (non-partial)
    // block carrying the whole content. A reader joining mid-stream first gets one partial with the text so
    // far, which is the first we see of that id, so appending is right in both cases.
    const content = b.partial && old.partial ? old.content + b.content : b.content;
    // A block without `partial` is final, whatever the chunks before it said.
    this.blocks[at] = { ...old, ...b, content, partial: b.partial === true };
  }

  get(id: string): Block | undefined {
    const at = this.index.get(id);
    return at === undefined ? undefined : this.blocks[at];
  }
}

/** A unified-diff-looking text (file_edit results): shown with added/removed lines coloured. */
export function looksLikeDiff(b: Block): boolean {
  if (b.format === 'diff' || b.format === 'patch') return true;
  return /^(---|\+\+\+|@@) /m.test(b.content) && /^@@ .* @@/m.test(b.content);
}

/** Pretty JSON for call arguments; the raw text when it is not JSON. */
export function prettyArgs(content: string): string {
  try {
    return JSON.stringify(JSON.parse(content), null, 2);
  } catch {
    return content;
  }
}

/**
 * A call's arguments as the tool's view shows them: the command of a shell call, the path of a file tool, a diff
 * of a file_edit; the other arguments as key=value. `undefined` when the arguments are not a JSON object yet (a
 * call still streaming) or not one at all: the raw text is shown then.
 */
export type CallView =
  | { kind: 'shell'; command: string; rest: [string, string][] }
  | { kind: 'path'; path: string; rest: [string, string][]; content?: string }
  | { kind: 'edit'; path: string; diff: string; rest: [string, string][] }
  | { kind: 'args'; rest: [string, string][] };

const scalar = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

export function callView(tool: string | undefined, content: string): CallView | undefined {
  let args: unknown;
  try {
    args = JSON.parse(content);
  } catch {
    return undefined;
  }
  if (!args || typeof args !== 'object' || Array.isArray(args)) return undefined;
  const a = args as Record<string, unknown>;
  const rest = (...skip: string[]): [string, string][] =>
    Object.entries(a)
      .filter(([k]) => !skip.includes(k))
      .map(([k, v]) => [k, scalar(v)]);
  if ((tool === 'shell' || tool === 'bash') && typeof a.command === 'string')
    return { kind: 'shell', command: a.command, rest: rest('command') };
  if (
    tool === 'file_edit' &&
    typeof a.path === 'string' &&
    typeof a.old_string === 'string' &&
    typeof a.new_string === 'string'
  ) {
    return {
      kind: 'edit',
      path: a.path,
      diff: editDiff(a.old_string, a.new_string),
      rest: rest('path', 'old_string', 'new_string'),
    };
  }
  if (tool?.startsWith('file_') && typeof a.path === 'string') {
    return {
      kind: 'path',
      path: a.path,
      rest: rest('path', 'content'),
      content: typeof a.content === 'string' ? a.content : undefined,
    };
  }
  return { kind: 'args', rest: rest() };
}

/** old → new as diff lines: the common first and last lines kept as context, the middle removed and added. */
export function editDiff(oldText: string, newText: string): string {
  const a = oldText === '' ? [] : oldText.split('\n');
  const b = newText === '' ? [] : newText.split('\n');
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  return [
    ...a.slice(0, head).map((l) => ` ${l}`),
    ...a.slice(head, a.length - tail).map((l) => `-${l}`),
    ...b.slice(head, b.length - tail).map((l) => `+${l}`),
    ...a.slice(a.length - tail).map((l) => ` ${l}`),
  ].join('\n');
}

/** Results longer than this (lines or characters) start collapsed. */
export const COLLAPSE_LINES = 12;
export const COLLAPSE_CHARS = 1500;
export function isLong(text: string): boolean {
  if (text.length > COLLAPSE_CHARS) return true;
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) if (++n > COLLAPSE_LINES) return true;
  return false;
}
