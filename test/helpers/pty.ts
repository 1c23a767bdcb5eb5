/**
 * A program on a real pseudo-terminal, for tests of what programs do when a person is at the terminal (a question
 * answered, a pager started). The terminal comes from the project's spawner (Launcher.launchTty), as a tty tool's
 * does; the test types into it with `type`.
 */
import { Launcher, LaunchEnd } from '../../src/platform/launcher.js';

export interface OnPty {
  cwd?: string;
  env?: Record<string, string>;
  cols?: number;
  rows?: number;
  /** Called with everything printed so far, after each piece; returns what to type, if anything. */
  answer?(printed: string): string | undefined;
}

/** Runs `file args` on a terminal; resolves with everything it printed and its exit code (-1 when killed). */
export async function runOnPty(file: string, args: string[], o: OnPty = {}): Promise<{ out: string; code: number }> {
  const launcher = Launcher.create();
  if (!launcher.native) throw new Error('a terminal needs the spawner: run node scripts/build-native.mjs');
  const env =
    o.env ?? Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
  const dec = new TextDecoder();
  let out = '';
  let type: ((s: string) => void) | undefined;
  const typed: string[] = [];
  try {
    return await new Promise((resolve, reject) => {
      const end = new LaunchEnd<number>((code) => resolve({ out, code }));
      launcher
        .launchTty(
          { file, args, cwd: o.cwd ?? process.cwd(), env, stdin: '' },
          { cols: o.cols ?? 80, rows: o.rows ?? 24 },
          {
            output: (b) => {
              out += dec.decode(b, { stream: true });
              const t = o.answer?.(out);
              if (t === undefined) return;
              if (type) type(t);
              else typed.push(t);
            },
            exited: (code) => end.exited(code ?? -1),
            closed: () => end.outputClosed(),
            lost: (why) => reject(new Error(why)),
          },
        )
        .then((t) => {
          end.abandon = t.abandonOutput;
          type = (s) => t.write(s);
          for (const s of typed.splice(0)) t.write(s);
        }, reject);
    });
  } finally {
    launcher.close();
  }
}
