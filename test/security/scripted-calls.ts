/** Tool calls scripted for the mock LLM, the way a model makes them, and what each returned to the model. */
import type { Block } from '../olliesrv/agent-harness.js';

export type Call = { name: string; args: Record<string, unknown> };
/** One model turn per call, then a closing text: the calls run one after another, as a model would make them. */
export const script = (...calls: Call[]) => [...calls.map((c) => [{ toolCalls: [c] }]), [{ text: 'done' }]];
export const client9p = (op: 'read' | 'write' | 'rdwr', path: string, data?: string): Call => ({ name: 'client_9p', args: { op, path, ...(data !== undefined && { data }) } });
/** What each tool call returned to the model, in order. */
export const results = (blocks: Block[]): string[] => blocks.filter((b) => b.role === 'tool').map((b) => b.content);
