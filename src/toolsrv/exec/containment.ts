/**
 * How toolsrv keeps a call's processes together and within its limits, in words for the `info` file (and the
 * Settings view that shows it). The mechanism is the spawner's (native/ollie-spawner.c): each call's process is a
 * child subreaper, and the spawner kills the orphans it leaves; cgroups are only described, for the reader who
 * wonders why they are not used.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ContainmentStatus {
  /** `subreaper`: every process of a call ends with it and the call's limits hold; `process-group`: only the
   * call's own process group is killed (a setsid'd process escapes) and no limits hold but output. */
  mechanism: 'subreaper' | 'process-group';
  /** What enforces each limit. */
  limits: Record<string, string>;
  /** What cgroup v2 offers here (not used: see docs/sandbox.md, "Containment and limits"). */
  cgroup: string;
}

let cached: string | undefined;

/** The cgroup v2 this process is in, and its controllers; or why there is none. */
export function cgroupV2(): string {
  if (cached !== undefined) return cached;
  try {
    const self = readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'));
    const mount = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((l) => l.split(' '))
      .find((f) => f[f.indexOf('-') + 1] === 'cgroup2');
    if (!self || !mount) cached = 'no cgroup v2 hierarchy is mounted';
    else {
      const dir = join(mount[4]!, self.slice(3));
      const controllers = readFileSync(join(dir, 'cgroup.controllers'), 'utf8').trim();
      cached = `cgroup v2 at ${dir}, controllers: ${controllers || 'none'}`;
    }
  } catch (e) {
    cached = `cgroup v2 unreadable: ${(e as Error).message}`;
  }
  return cached;
}

/** `withSpawner`: whether toolsrv runs calls through ollie-spawner (it has one, or the binary is built). */
export function containmentStatus(withSpawner: boolean): ContainmentStatus {
  if (!withSpawner) {
    return {
      mechanism: 'process-group',
      limits: {
        output: 'toolsrv',
        others: 'not enforced: native/build/ollie-spawner is not built (sandboxed calls are refused)',
      },
      cgroup: cgroupV2(),
    };
  }
  return {
    mechanism: 'subreaper',
    limits: {
      processes: 'per call: the spawner counts them every 50 ms',
      memory: 'per call: the spawner sums resident memory every 50 ms; per process: RLIMIT_DATA',
      cpu_seconds: 'per process: RLIMIT_CPU',
      file_size: 'per process: RLIMIT_FSIZE',
      open_files: 'per process: RLIMIT_NOFILE',
      output: 'per call: toolsrv',
    },
    cgroup: cgroupV2(),
  };
}

/** The status in the words of the sandbox report (the daemon's log line and Settings): what contains, what limits. */
export function describeContainment(c: ContainmentStatus): { containment: string[]; limits: string[] } {
  return {
    containment: [
      c.mechanism === 'subreaper'
        ? 'every process of a call ends with it (subreapers in ollie-spawner)'
        : "only the call's process group is stopped (ollie-spawner is not built)",
    ],
    limits: Object.entries(c.limits).map(([k, v]) => `${k}: ${v}`),
  };
}
