/**
 * The owner's terminal, for the attack tests on the machine's terminals: a pseudo-terminal of the machine's devpts
 * whose slave belongs to `uid`, with a line the owner typed waiting on it. `report()` says what was written to it
 * (what its owner would see), the echo of the typed line included.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { onTestFinished } from 'vitest';

const OWNER_TERMINAL = `
import os, pty, select, sys
m, s = pty.openpty()
os.chown(os.ttyname(s), int(sys.argv[1]), -1)
os.chmod(os.ttyname(s), 0o620)
os.write(m, b"typed-secret\\n")
print(os.ttyname(s), flush=True)
seen = b""
while True:
    r, _, _ = select.select([m, sys.stdin], [], [])
    if m in r:
        seen += os.read(m, 4096)
    if sys.stdin in r:
        sys.stdin.readline()
        while select.select([m], [], [], 0)[0]:
            seen += os.read(m, 4096)
        print(repr(seen), flush=True)
        break
`;

export interface OwnerTerminal {
  /** Its name in the machine's devpts: /dev/pts/N. */
  name: string;
  /** What was written to the terminal, as Python's repr of the bytes. */
  report(): Promise<string>;
}

/** What the owner's screen shows when nothing but the owner's own typing reached it. */
export const UNTOUCHED = String.raw`b'typed-secret\r\n'`;

export function ownerTerminal(uid: number): Promise<OwnerTerminal> {
  const p: ChildProcessWithoutNullStreams = spawn('/usr/bin/python3', ['-c', OWNER_TERMINAL, String(uid)]);
  onTestFinished(() => {
    p.kill();
  });
  // One listener appends; the waits look again on every chunk (a listener per wait appended each chunk twice).
  let out = '';
  let ended: string | undefined;
  const waiting: Array<() => void> = [];
  const wake = () => waiting.splice(0).forEach((w) => w());
  p.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    wake();
  });
  // 'close', not 'exit': what it printed last may come after its exit.
  p.once('close', (c) => {
    ended = `the terminal's helper exited (${c}): ${out}`;
    wake();
  });
  /** Line `n` (from 1) of what the helper printed, once it is whole. */
  const line = async (n: number): Promise<string> => {
    for (;;) {
      const lines = out.split('\n');
      if (lines.length > n) return lines[n - 1]!;
      if (ended) throw new Error(ended);
      await new Promise<void>((r) => waiting.push(r));
    }
  };
  return line(1).then((name) => ({
    name,
    report: () => {
      p.stdin.write('report\n');
      return line(2);
    },
  }));
}
