/**
 * Scripted tool calls for tests that drive a real agent through the mock LLM (agent-harness.ts): one model
 * reply per call, then a closing text; and the cleanup of a test's harness and workspace.
 */
import { rmSync } from 'node:fs';
import type { Block, Harness } from './agent-harness.js';

export type Call = { name: string; args: Record<string, unknown> };

/** The profile of an agent that attacks through the namespace (client_9p) and the shell. */
export const ATTACKER = { description: 'attacker', prompt: 'You are a test agent.', autoLoad: ['client_9p', 'shell'], maxSteps: 20 };

/** One model reply per round (a tool call each), then a closing text. */
export const script = (...calls: Call[]) => [...calls.map((c) => [{ toolCalls: [c] }]), [{ text: 'done' }]];
export const sh = (command: string): Call => ({ name: 'shell', args: { command } });
export const client9p = (op: 'read' | 'write' | 'rdwr', path: string, data?: string): Call => ({ name: 'client_9p', args: { op, path, ...(data !== undefined && { data }) } });
/** What the tool calls returned, in order. */
export const results = (blocks: Block[]): string[] => blocks.filter((b) => b.role === 'tool').map((b) => b.content);

/** Closes a test's harness and removes its workspace (either may be missing). */
export async function closeRun(h: Harness | undefined, ws: string | undefined): Promise<void> {
  await h?.close();
  if (ws) rmSync(ws, { recursive: true, force: true });
}
