/**
 * The files and directories a git configuration names that git then reads or runs: `[include]` and
 * `[includeIf "…"]` paths (read as configuration, so a `core.fsmonitor` or an alias in them runs) and
 * `core.hooksPath` (the hooks git runs instead of `.git/hooks`). A read-only `.git/config` protects nothing when
 * it names a file the agent can write (protected.ts). The syntax read is git's: sections and keys in any case, a
 * key on its section's line, values quoted or not, with `;`/`#` comments and `\` escapes; `~/` is the home, an
 * include is relative to the file that names it.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';

/** Includes may nest; git stops at 10 levels, and so does this. */
const MAX_DEPTH = 10;
/** A configuration larger than this is not a user's: it is not read (what it names stays unprotected). */
const MAX_SIZE = 1 << 20;
/**
 * The most included files and hooks directories a configuration may name, at all depths: a user's names a few.
 * Each is opened (or made) and kept read-only at every command, and a megabyte of `path =` lines would make every
 * call pay tens of thousands.
 */
export const MAX_NAMED = 64;

export interface GitConfigPaths {
  /** Configuration files included, at any depth (they may not exist). */
  includes: string[];
  /** core.hooksPath values: absolute, or as written when relative (relative to where git runs). */
  hooksPaths: string[];
  /** extensions.worktreeConfig: `config.worktree` beside `config` is read as configuration too. */
  worktreeConfig: boolean;
}

/** A value as git reads it: quotes removed, escapes applied, a comment outside quotes ended. */
function value(raw: string): string {
  let out = '';
  let quoted = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === '"') quoted = !quoted;
    else if (c === '\\' && i + 1 < raw.length) {
      const n = raw[++i]!;
      out += n === 'n' ? '\n' : n === 't' ? '\t' : n === 'b' ? '\b' : n;
    } else if (!quoted && (c === ';' || c === '#')) break;
    else out += c;
  }
  return out.trim();
}

const expand = (p: string, home: string, base: string): string =>
  p === '~' || p.startsWith('~/') ? join(home, p.slice(1)) : isAbsolute(p) ? p : resolve(base, p);

/** One buffer for every read (they are synchronous): a megabyte allocated per file per command would cost more than the read. */
let READ_BUFFER: Buffer | undefined;

/**
 * A configuration file's text, or undefined when it is not a regular file of at most MAX_SIZE bytes. This runs in
 * toolsrv's one thread at every command, and the agent names the files (a `.git/config` it made, an include): a
 * FIFO would block the open and the read forever, and /dev/zero never ends, so the file is opened without waiting,
 * must be a regular file, and no more than MAX_SIZE + 1 bytes are read of it (a /proc file says size 0).
 */
function readConfig(f: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(f, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > MAX_SIZE) return undefined;
    const buf = (READ_BUFFER ??= Buffer.allocUnsafe(MAX_SIZE + 1));
    let n = 0;
    for (let got = 1; got > 0 && n < buf.length; n += got) got = readSync(fd, buf, n, buf.length - n, null);
    return n > MAX_SIZE ? undefined : buf.toString('utf8', 0, n);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * What `file` (and what it includes) names; a file that cannot be read names nothing. Throws when it names more
 * than MAX_NAMED of them.
 */
export function gitConfigPaths(file: string, home: string): GitConfigPaths {
  const out: GitConfigPaths = { includes: [], hooksPaths: [], worktreeConfig: false };
  const seen = new Set<string>();
  // Past the bound nothing more is read: what is named beyond could not be kept read-only, so the caller must not
  // run tools under a protection that leaves it out (protected.ts refuses).
  const named = (): void => {
    if (out.includes.length + out.hooksPaths.length >= MAX_NAMED)
      throw new Error(`${file} names more than ${MAX_NAMED} included files and hooks directories`);
  };
  const walk = (f: string, depth: number): void => {
    if (depth > MAX_DEPTH || seen.has(f)) return;
    seen.add(f);
    const text = readConfig(f);
    if (text === undefined) return;
    let section = '';
    for (let line of text.split('\n')) {
      line = line.trim();
      const header = /^\[\s*([A-Za-z0-9.-]+)(\s+"(?:[^"\\]|\\.)*")?\s*\]/.exec(line);
      if (header) {
        // `[core "x"]` is another section than `[core]`; `[includeIf "…"]` always has its condition.
        section = `${header[1]!.toLowerCase()}${header[2] ? ' "…"' : ''}`;
        line = line.slice(header[0].length).trim();
      }
      // A key alone is a boolean true.
      const kv = /^([A-Za-z][A-Za-z0-9-]*)\s*(?:=(.*)|[;#].*)?$/.exec(line);
      if (!kv) continue;
      const key = kv[1]!.toLowerCase();
      const v = kv[2] === undefined ? 'true' : value(kv[2]);
      if (section === 'extensions' && key === 'worktreeconfig')
        out.worktreeConfig = ['true', 'yes', 'on', '1'].includes(v.toLowerCase());
      if (!v) continue;
      if ((section === 'include' || section === 'includeif "…"') && key === 'path') {
        const inc = expand(v, home, dirname(f));
        named();
        out.includes.push(inc);
        walk(inc, depth + 1);
      } else if (section === 'core' && key === 'hookspath') {
        named();
        out.hooksPaths.push(v === '~' || v.startsWith('~/') ? join(home, v.slice(1)) : v);
      }
    }
  };
  walk(file, 0);
  return out;
}
