/**
 * Files for code intelligence: resolving the model's paths against the call's cwd, walking a tree the way a
 * person would look at it (no .git, node_modules, build caches, nothing the root's .gitignore names, no
 * huge or binary files), reading text, and keeping output within a bound.
 */
import { readdirSync, readFileSync, statSync, type Dirent } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { ToolError } from '../hosts/runtime.js';

/** Directories never walked into. */
export const SKIP_DIRS = new Set([
  '.git',
  '.hg',
  '.svn',
  'node_modules',
  '__pycache__',
  '.venv',
  'venv',
  '.mypy_cache',
  '.pytest_cache',
  '.tox',
  '.next',
  '.cache',
  '.gradle',
  '.idea',
]);
/** Files larger than this are not parsed when met in a walk (a file named directly is). */
export const MAX_WALK_FILE = 1 << 20;

export function resolvePath(cwd: string, p: unknown, what = 'path'): string {
  if (p === undefined || p === null || p === '') return cwd;
  if (typeof p !== 'string') throw new ToolError(`${what} must be a string`);
  return isAbsolute(p) ? resolve(p) : resolve(cwd, p);
}

/** How a path is shown: relative to the cwd when inside it. */
export function show(cwd: string, p: string): string {
  const r = relative(cwd, p);
  return r === '' ? '.' : r.startsWith('..') || isAbsolute(r) ? p : r;
}

export function readText(file: string): string {
  let buf: Buffer;
  try {
    buf = readFileSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ToolError(
      code === 'ENOENT'
        ? `${file}: no such file`
        : code === 'EISDIR'
          ? `${file} is a directory`
          : code === 'EACCES'
            ? `${file}: permission denied (outside what the sandbox lets this tool read?)`
            : `${file}: ${(e as Error).message}`,
    );
  }
  if (buf.subarray(0, 8192).includes(0)) throw new ToolError(`${file} is binary`);
  return buf.toString('utf8');
}

export function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The root .gitignore as a matcher over paths relative to the root (with `/`). Supported: blank lines and
 * `#` comments, `*`, `?`, `**`, a leading `/` (anchored), a trailing `/` (directories only), patterns without
 * `/` matching at any depth. Negations (`!`) are not supported (such lines are ignored).
 */
export function gitignore(root: string): (rel: string, dir: boolean) => boolean {
  let text = '';
  try {
    text = readFileSync(join(root, '.gitignore'), 'utf8');
  } catch {
    return () => false;
  }
  const rules: Array<{ re: RegExp; dirOnly: boolean }> = [];
  for (let line of text.split('\n')) {
    line = line.trim();
    if (!line || line.startsWith('#') || line.startsWith('!')) continue;
    const dirOnly = line.endsWith('/');
    if (dirOnly) line = line.slice(0, -1);
    const anchored = line.includes('/');
    if (line.startsWith('/')) line = line.slice(1);
    let re = '';
    for (let i = 0; i < line.length; i++) {
      const c = line[i]!;
      if (c === '*' && line[i + 1] === '*') {
        re += line[i + 2] === '/' ? '(?:.*/)?' : '.*';
        i += line[i + 2] === '/' ? 2 : 1;
      } else if (c === '*') re += '[^/]*';
      else if (c === '?') re += '[^/]';
      else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
    rules.push({ re: new RegExp(anchored ? `^${re}(?:/.*)?$` : `(?:^|/)${re}(?:/.*)?$`), dirOnly });
  }
  return (rel, dir) => rules.some((r) => (!r.dirOnly || dir) && r.re.test(rel));
}

export interface WalkOptions {
  /** Stop after this many files (the walk says it stopped). */
  maxFiles?: number;
  /** Only files this predicate accepts. */
  accept?: (path: string) => boolean;
  signal?: AbortSignal;
}

/** Files under `root` in a stable order (directories first, by name), skipping what a person would skip. */
export function walk(root: string, o: WalkOptions = {}): { files: string[]; truncated: boolean } {
  const ignored = gitignore(root);
  const files: string[] = [];
  const max = o.maxFiles ?? 20_000;
  let truncated = false;
  const visit = (dir: string): void => {
    if (truncated) return;
    o.signal?.throwIfAborted();
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    entries.sort(
      (a, b) => Number(b.isDirectory()) - Number(a.isDirectory()) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
    );
    for (const e of entries) {
      const p = join(dir, e.name);
      const rel = relative(root, p).split(sep).join('/');
      if (e.isDirectory()) {
        if (SKIP_DIRS.has(e.name) || ignored(rel, true)) continue;
        visit(p);
      } else if (e.isFile()) {
        if (ignored(rel, false) || (o.accept && !o.accept(p))) continue;
        try {
          if (statSync(p).size > MAX_WALK_FILE) continue;
        } catch {
          continue;
        }
        if (files.length >= max) {
          truncated = true;
          return;
        }
        files.push(p);
      }
      if (truncated) return;
    }
  };
  visit(root);
  return { files, truncated };
}

/** Collects output lines up to a byte bound; `done()` adds a note saying how much was left out. */
export class Bounded {
  private readonly lines: string[] = [];
  private size = 0;
  dropped = 0;

  constructor(readonly max: number) {}

  get full(): boolean {
    return this.size >= this.max;
  }

  push(line: string): boolean {
    if (this.size + line.length + 1 > this.max) {
      this.dropped++;
      this.size = this.max;
      return false;
    }
    this.lines.push(line);
    this.size += line.length + 1;
    return true;
  }

  done(note = (n: number) => `[… ${n} more lines not shown: narrow the path or the query]`): string {
    const body = this.lines.join('\n');
    return `${body}${body ? '\n' : ''}${this.dropped ? `${note(this.dropped)}\n` : ''}`;
  }
}

export const num = (v: unknown, dflt: number, min = 1, max = 1_000_000): number => {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new ToolError(`expected a number, not ${JSON.stringify(v)}`);
  return Math.max(min, Math.min(max, Math.floor(v)));
};
