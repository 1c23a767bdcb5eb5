/**
 * The `limits:` section of the sandbox policy (docs/sandbox.md, "Limits"): what one tool call may use. The
 * spawner enforces them (native/ollie-spawner.c: it counts each call's processes and memory, rlimits
 * bound each process), toolsrv the output (exec/proc.ts).
 */

export interface Limits {
  /** Processes of the call at once (the tool and everything it started). 0: none. */
  processes: number;
  /** Bytes: resident memory of the whole call, and the data segment of each process. */
  memory: number;
  /** CPU seconds of each process. */
  cpu: number;
  /** Bytes: the largest file a process may write. */
  fileSize: number;
  /** Descriptors each process may have open. */
  openFiles: number;
  /** Bytes of output (stdout and stderr) of the call. */
  output: number;
}

export type LimitName = keyof Limits;

/** The settings as written in YAML, and what each holds. */
export const LIMIT_KEYS: Record<string, { name: LimitName; kind: 'count' | 'bytes' | 'seconds' }> = {
  processes: { name: 'processes', kind: 'count' },
  memory: { name: 'memory', kind: 'bytes' },
  cpu_seconds: { name: 'cpu', kind: 'seconds' },
  file_size: { name: 'fileSize', kind: 'bytes' },
  open_files: { name: 'openFiles', kind: 'count' },
  output: { name: 'output', kind: 'bytes' },
};

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/**
 * The limits of a policy file that has no `limits:` section or leaves a setting out: the same as the shipped
 * data/sandbox.yaml (a test checks they agree), so an older copy of the file is not unlimited.
 */
export const DEFAULT_LIMITS: Limits = {
  processes: 256,
  memory: 2 * GiB,
  cpu: 600,
  fileSize: 4 * GiB,
  openFiles: 4096,
  output: 64 * MiB,
};

const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: MiB,
  mb: MiB,
  mib: MiB,
  g: GiB,
  gb: GiB,
  gib: GiB,
  t: 1024 * GiB,
  tb: 1024 * GiB,
  tib: 1024 * GiB,
};

/**
 * One setting's value: a non-negative integer, `unlimited` (0 internally), or for sizes a number with a unit
 * (`2 GiB`, `512M`; K, M, G and T are powers of 1024 whichever way they are spelt). Throws the message to
 * report at the setting's line.
 */
export function parseLimit(key: string, value: unknown): number {
  const spec = LIMIT_KEYS[key];
  if (!spec) throw new Error(`limits.${key}: unknown setting (known: ${Object.keys(LIMIT_KEYS).join(', ')})`);
  if (value === 'unlimited') return 0;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) return value;
  const what =
    spec.kind === 'bytes'
      ? 'a size in bytes, or with a unit (512 MiB, 2 GiB)'
      : spec.kind === 'seconds'
        ? 'a number of seconds'
        : 'a whole number';
  if (spec.kind === 'bytes' && typeof value === 'string') {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(value);
    const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
    if (m && unit !== undefined) {
      const n = Math.round(Number(m[1]) * unit);
      if (Number.isSafeInteger(n) && n > 0) return n;
    }
  }
  throw new Error(`limits.${key}: must be ${what} greater than 0, or unlimited (got ${JSON.stringify(value)})`);
}

/** A project file may only lower a limit (or set one where the base has none). Returns the offending key. */
export function widenedLimit(base: Limits, project: Partial<Limits>): string | undefined {
  for (const [key, { name }] of Object.entries(LIMIT_KEYS)) {
    const v = project[name];
    if (v === undefined) continue;
    if (base[name] !== 0 && (v === 0 || v > base[name])) return key;
  }
  return undefined;
}

/** A limit in words, as results and docs give it: `2 GiB`, `600 s`, `256`. */
export function describeLimit(name: LimitName, n: number): string {
  if (n === 0) return 'unlimited';
  const spec = Object.values(LIMIT_KEYS).find((s) => s.name === name)!;
  if (spec.kind === 'seconds') return `${n} s`;
  if (spec.kind === 'count') return String(n);
  for (const [unit, size] of [
    ['TiB', 1024 * GiB],
    ['GiB', GiB],
    ['MiB', MiB],
    ['KiB', 1024],
  ] as const) {
    if (n >= size) {
      const v = n / size;
      return `${Number.isInteger(v) ? v : v.toFixed(1)} ${unit}`;
    }
  }
  return `${n} bytes`;
}
