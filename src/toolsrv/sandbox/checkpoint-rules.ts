/**
 * The `checkpoint:` section of a sandbox policy: how the writable roots are checkpointed before a tool round
 * (docs/checkpoints.md). It lives in the policy because the roots do: what a tool may write is what a checkpoint
 * must cover, and the large directories a project's tools fill (node_modules, build caches) are named per project.
 *
 *   checkpoint:
 *     skip: [node_modules, .venv, target]   # directory or file names (or relative paths, globs with *) not checkpointed
 *     whole: [vendor]                       # directories checkpointed as one entry (one fingerprint, one tree)
 *     tmp: false                            # checkpoint the system temp dir when a rule makes it writable
 *     max_file: 64 MiB                      # larger files are listed as not checkpointed
 *     max_total: 2 GiB                      # roots holding more than this (outside skip) are not checkpointed
 *     keep:                                 # retention (the base policy's; a project file cannot change it)
 *       count: 200                          # checkpoints per agent
 *       age: 30d                            # s, m, h, d
 *       size: 2 GiB                         # the whole store
 */
import { parseLimit } from './limits.js';

export interface CheckpointRules {
  skip: string[];
  /**
   * Directories tracked as a whole: one entry of the checkpoint (a fingerprint of their entries' metadata and a
   * stored tree), listed, diffed and rewound as one. A name in both lists is tracked as a whole: `whole` is the
   * narrower request (`skip` holds node_modules by default, and `whole: [node_modules]` must not need the whole
   * skip list restated to take it out).
   */
  whole: string[];
  tmp: boolean;
  maxFile: number;
  maxTotal: number;
  keep: { count: number; ageMs: number; size: number };
}

/** Directories that are rebuilt rather than edited: not checkpointed unless a policy's own `skip` list says otherwise. */
export const DEFAULT_SKIP = [
  'node_modules',
  '.venv',
  'venv',
  '__pycache__',
  '.pytest_cache',
  '.mypy_cache',
  'target',
  '.gradle',
  '.cache',
  '.next',
  '.turbo',
];

export const DEFAULT_CHECKPOINT_RULES: CheckpointRules = {
  skip: DEFAULT_SKIP,
  whole: [],
  tmp: false,
  maxFile: 64 * 1024 * 1024,
  maxTotal: 2 * 1024 ** 3,
  keep: { count: 200, ageMs: 30 * 86_400_000, size: 2 * 1024 ** 3 },
};

const AGE_UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses the section's JSON form; `where` (file:line) prefixes every error. */
export type CheckpointSection = Partial<Omit<CheckpointRules, 'keep'>> & { keep?: Partial<CheckpointRules['keep']> };

export function parseCheckpointRules(
  value: unknown,
  where: string,
  /** file:line of a setting's value (or of item `index` of its list), when the parser knows it. */
  whereOf?: (key: string, index?: number) => string,
): CheckpointSection {
  const fail = (what: string, key?: string, index?: number): never => {
    throw new Error(`${(key !== undefined && whereOf?.(key, index)) || where}: checkpoint${what}`);
  };
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value))
    return fail(': must be a mapping (skip, whole, tmp, max_file, max_total, keep)');
  const out: CheckpointSection = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (k === 'skip') {
      out.skip = pathRules(v, 'skip', fail);
    } else if (k === 'whole') {
      out.whole = pathRules(v, 'whole', fail);
      // .git is never checkpointed nor written: a rule naming it (or a name a rewind uses for its own temporary
      // files) would have a rewind replace it whole.
      const bad = out.whole.find((r) => r.split('/').some((p) => p === '.git' || p.startsWith('.ollie-rewind-')));
      if (bad !== undefined)
        fail(`.whole: ${JSON.stringify(bad)}: .git is never checkpointed nor rewound`, 'whole', out.whole.indexOf(bad));
    } else if (k === 'tmp') {
      if (typeof v !== 'boolean') fail('.tmp: must be true or false');
      out.tmp = v as boolean;
    } else if (k === 'max_file') {
      try {
        out.maxFile = parseLimit('file_size', v);
      } catch {
        fail('.max_file: must be a size (64 MiB)');
      }
    } else if (k === 'max_total') {
      try {
        out.maxTotal = parseLimit('file_size', v);
      } catch {
        fail('.max_total: must be a size (2 GiB)');
      }
    } else if (k === 'keep') {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) fail('.keep: must be a mapping (count, age, size)');
      const keep: Partial<CheckpointRules['keep']> = {};
      for (const [kk, vv] of Object.entries(v as Record<string, unknown>)) {
        if (kk === 'count') {
          if (!Number.isSafeInteger(vv) || (vv as number) < 1)
            fail('.keep.count: must be a whole number of at least 1');
          keep.count = vv as number;
        } else if (kk === 'age') {
          const m = /^\s*(\d+)\s*([smhd])\s*$/.exec(String(vv));
          if (!m) fail('.keep.age: must be a number with a unit: 90m, 12h, 30d');
          keep.ageMs = Number(m![1]) * AGE_UNITS[m![2]!]!;
        } else if (kk === 'size') {
          try {
            keep.size = parseLimit('file_size', vv);
          } catch {
            fail('.keep.size: must be a size (2 GiB)');
          }
        } else fail(`.keep.${kk}: unknown setting (known: count, age, size)`);
      }
      out.keep = keep;
    } else fail(`.${k}: unknown setting (known: skip, whole, tmp, max_file, max_total, keep)`);
  }
  return out;
}

/** A list of names, relative paths and globs (skip, whole); `fail` names the setting and the file:line. */
function pathRules(v: unknown, key: string, fail: (what: string, key?: string, index?: number) => never): string[] {
  if (!Array.isArray(v)) return fail(`.${key}: must be a list of names or relative paths (no leading /, no ..)`, key);
  (v as unknown[]).forEach((x, i) => {
    if (typeof x !== 'string' || x === '' || x.startsWith('/') || x.split('/').includes('..'))
      fail(
        `.${key}: ${JSON.stringify(x)} is not a name or relative path (a non-empty string, no leading /, no ..)`,
        key,
        i,
      );
  });
  return v as string[];
}

/** The rules of a base file: unset settings take the defaults. */
export function baseCheckpointRules(parsed: ReturnType<typeof parseCheckpointRules> | undefined): CheckpointRules {
  const p = parsed ?? {};
  return {
    skip: p.skip ?? DEFAULT_SKIP,
    whole: p.whole ?? DEFAULT_CHECKPOINT_RULES.whole,
    tmp: p.tmp ?? DEFAULT_CHECKPOINT_RULES.tmp,
    maxFile: p.maxFile ?? DEFAULT_CHECKPOINT_RULES.maxFile,
    maxTotal: p.maxTotal ?? DEFAULT_CHECKPOINT_RULES.maxTotal,
    keep: { ...DEFAULT_CHECKPOINT_RULES.keep, ...p.keep },
  };
}

/**
 * A project's file may add names to skip (its own build outputs) or to track as a whole (its vendored trees)
 * and lower max_file; it cannot change retention
 * or bring the temp dir in (both are the owner's, and the project's file is written by whoever wrote the project).
 */
export function narrowCheckpointRules(
  base: CheckpointRules,
  project: ReturnType<typeof parseCheckpointRules> | undefined,
  where: string,
): CheckpointRules {
  if (!project) return base;
  if (project.keep)
    throw new Error(`${where}: checkpoint.keep: retention is the owner's setting (sandbox.yaml), not a project's`);
  if (project.tmp && !base.tmp)
    throw new Error(`${where}: checkpoint.tmp: a project file cannot bring the temp dir into checkpoints`);
  return {
    ...base,
    skip: [...new Set([...base.skip, ...(project.skip ?? [])])],
    whole: [...new Set([...base.whole, ...(project.whole ?? [])])],
    maxFile: Math.min(base.maxFile, project.maxFile ?? base.maxFile),
    maxTotal: Math.min(base.maxTotal, project.maxTotal ?? base.maxTotal),
  };
}
