/**
 * Compaction: the history's older part is replaced by a structured summary written by the compaction model;
 * the recent tail stays verbatim. The tail is chosen by size (tokens), not by count: eight messages can be
 * 200 tokens or 80,000. The split never separates a tool result from the call that asked for it.
 */
import { countTokens } from '../backend/tokens.js';
import type { Backend, Message } from '../backend/types.js';
import { messageTokens } from './context.js';

export const COMPACTION_PROMPT = `You are compacting the history of a coding agent's session so that it can continue with less context.
Write a summary that lets the agent carry on as if it remembered everything important. Use exactly these sections:

## Goal
What the user asked for, in their words where it matters, and any constraints they set.
## Decisions
Choices made and why (one line each).
## Files
Files read, created or changed, with what matters about each.
## State
What is done, what is in progress, errors seen and whether they were fixed.
## Next
The next concrete steps.

Be specific (names, paths, commands, numbers). Do not invent anything. Reply with the summary only.`;

/**
 * Index where the kept tail starts: the longest tail of at most `keepTokens` (measured on `sized`, the view that
 * is sent, index for index), moved forward past tool results whose call would be summarized.
 */
export function tailStart(msgs: readonly Message[], sized: readonly Message[], keepTokens: number): number {
  let i = msgs.length;
  let acc = 0;
  while (i > 0 && acc + messageTokens(sized[i - 1]!) <= keepTokens) acc += messageTokens(sized[--i]!);
  while (i < msgs.length && msgs[i]!.role === 'tool') i++;
  return i;
}

/** Characters kept of each tool result, widest first, until the flattened head fits the summarizer's window. */
const RESULT_CAPS = [4000, 1500, 500, 160];

/**
 * The history as plain text for the summarizer, at most `maxTokens`: tool results and arguments cut shorter
 * and shorter, and as a last resort the middle of the text left out (its start, the goal, and its end, the
 * latest state, matter most).
 */
export function flattenWithin(msgs: readonly Message[], maxTokens: number): string {
  let text = '';
  for (const cap of RESULT_CAPS) {
    text = flatten(msgs, cap);
    if (countTokens(text) <= maxTokens) return text;
  }
  const keep = Math.max(400, maxTokens * 3);
  const half = Math.floor(keep / 2);
  return `${text.slice(0, half)}\n\n[… ${text.length - 2 * half} characters of the middle of the history left out to fit the summarizer's window …]\n\n${text.slice(-half)}`;
}

const cut = (s: string, cap: number): string =>
  s.length > cap ? `${s.slice(0, cap / 2)}\n…\n${s.slice(-cap / 2)}` : s;

/** The history as plain text for the summarizer: tool calls and results flattened, each cut to `cap` characters. */
export function flatten(msgs: readonly Message[], cap = RESULT_CAPS[0]!): string {
  const out: string[] = [];
  for (const m of msgs) {
    if (m.role === 'system') continue;
    if (m.role === 'user') out.push(`USER:\n${m.content}`);
    else if (m.role === 'assistant') {
      if (m.content) out.push(`ASSISTANT:\n${m.content}`);
      for (const c of m.toolCalls ?? []) out.push(`TOOL CALL ${c.name}: ${cut(c.args, cap)}`);
    } else {
      out.push(`TOOL RESULT ${m.name}${m.isError ? ' (error)' : ''}:\n${cut(m.content, cap)}`);
    }
  }
  return out.join('\n\n');
}

export function summaryMessage(summary: string, compacted: number): Message {
  return {
    role: 'user',
    kind: 'summary',
    content: `<context>\nThe earlier part of this conversation (${compacted} messages) was compacted into this summary:\n\n${summary.trim()}\n</context>`,
  };
}

/** Room the summary itself needs in the compaction model's window. */
export const SUMMARY_RESERVE = 1500;

/** Asks the compaction model for a summary of `head`, sent within `window` tokens. */
export async function summarize(
  backend: Backend,
  model: string,
  head: readonly Message[],
  window: number,
  signal?: AbortSignal,
): Promise<string> {
  const room = Math.max(500, window - countTokens(COMPACTION_PROMPT) - SUMMARY_RESERVE - 64);
  let text = '';
  for await (const ev of backend.stream({
    model,
    messages: [
      { role: 'system', content: COMPACTION_PROMPT },
      { role: 'user', content: flattenWithin(head, room) },
    ],
    tools: [],
    params: { temperature: 0.2 },
    signal,
  })) {
    if (ev.type === 'text') text += ev.delta;
  }
  if (!text.trim()) throw new Error('the compaction model returned an empty summary');
  return text;
}
