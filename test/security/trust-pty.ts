/** The built `ollie trust` on a real pseudo-terminal, answered the way the owner answers its question. */
import { join } from 'node:path';

export const OLLIE = join(import.meta.dirname, '../../dist/cli/ollie.js');

/**
 * Runs `ollie trust ...args` on a pseudo-terminal; at its "[y/N]" question calls `answer` (which may first act, as
 * an agent racing the owner would) and types what it returns. Resolves with everything printed and the exit code.
 */
export async function trustOnPty(args: string[], answer: () => string): Promise<{ out: string; code: number }> {
  const pty = await import('node-pty');
  return new Promise((resolve) => {
    const t = pty.spawn(process.execPath, [OLLIE, 'trust', ...args], { cols: 200, rows: 40 });
    let out = '';
    let answered = false;
    t.onData((d) => {
      out += d;
      if (!answered && out.includes('[y/N]')) {
        answered = true;
        t.write(`${answer()}\r`);
      }
    });
    t.onExit(({ exitCode }) => resolve({ out, code: exitCode }));
  });
}
