/** A synthetic chat for the large-chat test and bench/gui.mjs. */
import type { Block } from '../src/olliesrv/agent/chatlog.js';

const LOREM = 'The build runs vite for the renderer and tsc for the daemons; tests use vitest and Chromium. ';

/**
 * Block i of a synthetic chat: a realistic mix of prompts, markdown replies, tool calls and long results (≈500
 * bytes a block), the same for the test and for bench/gui.mjs.
 */
export function syntheticBlock(i: number): Omit<Block, 'id'> {
  const kind = i % 4;
  return kind === 0
    ? { role: 'user', content: `Question ${i}: ${LOREM.repeat(4)}` }
    : kind === 1
      ? {
          role: 'assistant',
          content: `Answer ${i}: **bold** and \`code\`.\n\n- ${LOREM.repeat(2)}\n- ${LOREM.repeat(2)}\n`,
        }
      : kind === 2
        ? {
            role: 'call',
            name: 'shell',
            content: JSON.stringify({ command: `grep -rn item${i} src/ | head -50 # ${LOREM}` }),
          }
        : {
            role: 'tool',
            name: 'shell',
            format: 'text',
            content: Array.from({ length: 14 }, (_, j) => `src/file${j}.ts:${i}: const item${i} = ${j};`).join('\n'),
          };
}
