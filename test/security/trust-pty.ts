/** The built `ollie trust` on a real pseudo-terminal, answered the way the owner answers its question. */
import { join } from 'node:path';
import { runOnPty } from '../helpers/pty.js';

export const OLLIE = join(import.meta.dirname, '../../dist/cli/ollie.js');

/**
 * Runs `ollie trust ...args` on a pseudo-terminal; at its "[y/N]" question calls `answer` (which may first act, as
 * an agent racing the owner would) and types what it returns. Resolves with everything printed and the exit code.
 */
export async function trustOnPty(args: string[], answer: () => string): Promise<{ out: string; code: number }> {
  let answered = false;
  return runOnPty(process.execPath, [OLLIE, 'trust', ...args], {
    cols: 200,
    rows: 40,
    answer: (out) => {
      if (answered || !out.includes('[y/N]')) return undefined;
      answered = true;
      return `${answer()}\r`;
    },
  });
}
