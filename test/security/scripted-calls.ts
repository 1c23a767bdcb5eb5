/** Tool calls scripted for the mock LLM, the way a model makes them, and what each returned to the model. */
import { rmSync } from 'node:fs';
import type { Block, Harness } from '../olliesrv/agent-harness.js';

export type Call = { name: string; args: Record<string, unknown> };

/** The profile of an agent that attacks with the tools it loads; `maxSteps` bounds the rounds of one turn. */
export const attackerProfile = (autoLoad: string[], maxSteps = 20) => ({
  description: 'attacker',
  prompt: 'You are a test agent.',
  autoLoad,
  maxSteps,
});

/** The profile of an agent that attacks through the namespace (client_9p) and the shell. */
export const ATTACKER = attackerProfile(['client_9p', 'shell']);

/** One model turn per call, then a closing text: the calls run one after another, as a model would make them. */
export const script = (...calls: Call[]) => [...calls.map((c) => [{ toolCalls: [c] }]), [{ text: 'done' }]];
export const sh = (command: string): Call => ({ name: 'shell', args: { command } });
export const client9p = (op: 'read' | 'write' | 'rdwr', path: string, data?: string): Call => ({
  name: 'client_9p',
  args: { op, path, ...(data !== undefined && { data }) },
});
/** What each tool call returned to the model, in order. */
export const results = (blocks: Block[]): string[] => blocks.filter((b) => b.role === 'tool').map((b) => b.content);

/** Closes a test's harness and removes its workspace (either may be missing). */
export async function closeRun(h: Harness | undefined, ws: string | undefined): Promise<void> {
  await h?.close();
  if (ws) rmSync(ws, { recursive: true, force: true });
}
