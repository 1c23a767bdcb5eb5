/**
 * Compaction: the history's older part is replaced by a structured summary written by the compaction model;
 * the recent tail stays verbatim. The split never separates a tool result from the call that asked for it.
 */
import type { Backend, Message } from '../backend/types.js';

/** Messages kept verbatim at the end of the history. */
export const KEEP_TAIL = 8;

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

/** Index where the kept tail starts: at most KEEP_TAIL messages, never starting at a tool result. */
export function tailStart(msgs: readonly Message[], keep = KEEP_TAIL): number {
  let i = Math.max(0, msgs.length - keep);
  while (i > 0 && msgs[i]!.role === 'tool') i--;
  return i;
}

/** The history as plain text for the summarizer: tool calls and results flattened. */
export function flatten(msgs: readonly Message[]): string {
  const out: string[] = [];
  for (const m of msgs) {
    if (m.role === 'system') continue;
    if (m.role === 'user') out.push(`USER:\n${m.content}`);
    else if (m.role === 'assistant') {
      if (m.content) out.push(`ASSISTANT:\n${m.content}`);
      for (const c of m.toolCalls ?? []) out.push(`TOOL CALL ${c.name}: ${c.args}`);
    } else {
      const body = m.content.length > 4000 ? `${m.content.slice(0, 2000)}\n…\n${m.content.slice(-2000)}` : m.content;
      out.push(`TOOL RESULT ${m.name}${m.isError ? ' (error)' : ''}:\n${body}`);
    }
  }
  return out.join('\n\n');
}

export function summaryMessage(summary: string, compacted: number): Message {
  return {
    role: 'user',
    content: `<context>\nThe earlier part of this conversation (${compacted} messages) was compacted into this summary:\n\n${summary.trim()}\n</context>`,
  };
}

/** Asks the compaction model for a summary of `head`. */
export async function summarize(backend: Backend, model: string, head: readonly Message[], signal?: AbortSignal): Promise<string> {
  let text = '';
  for await (const ev of backend.stream({
    model,
    messages: [
      { role: 'system', content: COMPACTION_PROMPT },
      { role: 'user', content: flatten(head) },
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
