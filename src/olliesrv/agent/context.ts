/**
 * The token account of a request and the view of the history that is sent. Every request is measured before it
 * goes out (system prompt, tool schemas, history, skills, attachments: o200k estimate, backend/tokens.ts) and
 * the estimate is scaled by how far off the provider's reported usage showed it to be. What is sent is a view
 * of the history, never the history itself: tool results and tool-call arguments of rounds the model has moved
 * past are cut to a head/tail excerpt that names a file holding the whole text, so a 40 KiB output costs its
 * full size for a few rounds, not for the rest of the session, and the history (the database, `ctl restore`,
 * the log) keeps every byte. When the view is still over budget the agent compacts (fit.ts, fit()).
 */
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { argsTokens, countTokens, MESSAGE_OVERHEAD, messageTokens, toolsTokens } from '../backend/tokens.js';
export { messageTokens } from '../backend/tokens.js';
import type { Message, ToolCall, ToolSpec } from '../backend/types.js';

/** The parts of a request, in estimated tokens. */
export interface Parts {
  system: number;
  tools: number;
  history: number;
  skills: number;
  attachments: number;
}

export const total = (p: Parts): number => p.system + p.tools + p.history + p.skills + p.attachments;

/** Measures a request. History messages tagged as skills or attachments count in their own parts. */
export function measure(system: string, specs: readonly ToolSpec[], msgs: readonly Message[]): Parts {
  const p: Parts = {
    system: MESSAGE_OVERHEAD + countTokens(system),
    tools: toolsTokens(specs),
    history: 0,
    skills: 0,
    attachments: 0,
  };
  for (const m of msgs) {
    const n = messageTokens(m);
    const kind = m.role === 'user' ? m.kind : undefined;
    if (kind === 'skill' || kind === 'hint') p.skills += n;
    else if (kind === 'attachment') p.attachments += n;
    else p.history += n;
  }
  return p;
}

/**
 * Learns how far the estimate is from the provider's count: each reported prompt size against the estimate of
 * the request it answered. The factor moves halfway to each new observation (one odd response does not swing it),
 * is bounded (a provider that reports nonsense cannot make every request look empty or full), and only grows on
 * an overflow (the provider said the prompt was bigger than we thought).
 */
export class Correction {
  factor = 1;

  observe(reported: number, estimated: number): void {
    if (!(reported > 0 && estimated > 0)) return;
    this.factor = clamp((this.factor + reported / estimated) / 2);
  }

  /** An overflow: the provider counted `actual` (when it said) for a request we estimated at `estimated`. */
  overflow(estimated: number, actual?: number): void {
    const seen = actual && estimated > 0 ? actual / estimated : this.factor * 1.15;
    this.factor = clamp(Math.max(this.factor * 1.05, seen));
  }

  apply(n: number): number {
    return Math.ceil(n * this.factor);
  }
}

const clamp = (f: number): number => Math.min(3, Math.max(0.5, f));

// ---- the view ------------------------------------------------------------------------------------------------

/** Tool rounds (assistant messages with calls) whose results and arguments are sent whole. */
export const RECENT_ROUNDS = 3;
/** A result or an argument over this many tokens is cut once its round is no longer recent. */
export const STALE_MIN_TOKENS = 600;
/** Size of what is kept of a cut text: this many tokens of its head and of its tail (about 4 characters each). */
export const EXCERPT_TOKENS = 120;

export interface ViewOptions {
  /** Where the whole texts of cut results and arguments are written. */
  spillDir: string;
  /** Tool rounds sent whole (the rest are cut); Infinity: none cut by age. */
  recentRounds: number;
  /** Cut anything over this many tokens, whatever its age (the tail of an over-budget request). */
  maxTokens?: number;
  /** Leave out skill and hint blocks. */
  dropHints?: boolean;
}

/** Head and tail of `text` around a note that names where the whole of it is. */
export function excerpt(text: string, path: string, what: string, keep = EXCERPT_TOKENS): string {
  const chars = keep * 4;
  if (text.length <= 2 * chars + 200) return text;
  const lines = text.split('\n').length;
  return (
    `${text.slice(0, chars)}\n\n[${what} cut to save context: ${Buffer.byteLength(text)} bytes, ${lines} lines; ` +
    `the whole text is in ${path} — read the part you need with file_read (offset, limit) or search it with file_grep.]\n\n${text.slice(-chars)}`
  );
}

const safe = (s: string): string => s.replace(/[^\w.-]/g, '_');

function spill(dir: string, name: string, text: string): string {
  const path = join(dir, `${safe(name)}.txt`);
  if (!existsSync(path)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(path, text, { mode: 0o600 });
  }
  return path;
}

/** A call with its large string arguments cut (the JSON stays valid: providers parse it). */
function cutCall(c: ToolCall, limit: number, dir: string): ToolCall {
  if (argsTokens(c) <= limit) return c;
  let parsed: unknown;
  try {
    parsed = JSON.parse(c.args);
  } catch {
    return {
      ...c,
      args: JSON.stringify({ invalid_json: excerpt(c.args, spill(dir, `args-${c.id}`, c.args), 'these arguments') }),
    };
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return c;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(parsed as Record<string, unknown>)) {
    out[k] =
      typeof v === 'string' && v.length > 2 * EXCERPT_TOKENS * 4 + 200
        ? excerpt(v, spill(dir, `args-${c.id}-${k}`, v), `argument "${k}"`)
        : v;
  }
  return { ...c, args: JSON.stringify(out) };
}

/**
 * The messages to send: the history with stale (or, given maxTokens, any oversized) tool results and
 * arguments cut, and hints left out when asked. Unchanged messages are the history's own objects, so their
 * token counts stay cached and an unchanged prefix is byte-identical from one request to the next (provider
 * prompt caches keep working).
 */
export function view(msgs: readonly Message[], o: ViewOptions): Message[] {
  let round = 0;
  const roundOf: number[] = new Array<number>(msgs.length);
  for (let i = msgs.length - 1; i >= 0; i--) {
    const m = msgs[i]!;
    if (m.role === 'assistant' && m.toolCalls?.length) round++;
    // A result belongs to the round of the call before it; counting from the end, it sees that call's number + 1.
    roundOf[i] = m.role === 'tool' ? round + 1 : round;
  }
  const out: Message[] = [];
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i]!;
    const stale = roundOf[i]! > o.recentRounds;
    const limit = Math.min(stale ? STALE_MIN_TOKENS : Infinity, o.maxTokens ?? Infinity);
    if (m.role === 'user' && o.dropHints && (m.kind === 'skill' || m.kind === 'hint')) continue;
    if (limit === Infinity) {
      out.push(m);
      continue;
    }
    out.push(cut(m, limit, o.spillDir));
  }
  return out;
}

// The cut form of a message, made (and its spill file written) once per message and limit: the same object on
// every request, so its token count is cached and the request prefix stays byte-identical.
const cuts = new WeakMap<Message, Map<number, Message>>();

function cut(m: Message, limit: number, dir: string): Message {
  let byLimit = cuts.get(m);
  const known = byLimit?.get(limit);
  if (known) return known;
  let c = m;
  if (m.role === 'tool' && messageTokens(m) > limit) {
    c = { ...m, content: excerpt(m.content, spill(dir, `result-${m.toolCallId}`, m.content), 'this output') };
  } else if (m.role === 'assistant' && m.toolCalls?.some((t) => argsTokens(t) > limit)) {
    c = { ...m, toolCalls: m.toolCalls.map((t) => cutCall(t, limit, dir)) };
  }
  if (!byLimit) cuts.set(m, (byLimit = new Map()));
  byLimit.set(limit, c);
  return c;
}
