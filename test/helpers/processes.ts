/**
 * Finding the processes an attack test left running: by pid, or by an argument no other process has (a marker,
 * such as a sleep's number of seconds), read from /proc as the kernel reports them.
 */
import { readFileSync, readdirSync } from 'node:fs';

/** Alive and not a zombie. */
export const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

/** Pids of live processes whose command line holds `marker` as an argument. */
export function withArg(marker: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').includes(marker) && alive(Number(d)))
        out.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
