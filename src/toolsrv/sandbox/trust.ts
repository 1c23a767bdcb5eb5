/**
 * Which projects' `.ollie-sandbox.yaml` the owner has trusted: the way direnv's `allow` and VS Code's workspace
 * trust work, a project's policy file applies only once the owner has trusted that exact file (its SHA-256 at
 * its canonical path). A changed file is untrusted again. The list is `$XDG_CONFIG_HOME/ollie/trusted-projects`
 * (the config dir, which no tool can read or write), one `sha256<TAB>path` line per file, written owner-only.
 * `ollie trust PATH` and the namespace's `config/trust` edit it.
 */
import { TRUST } from '../../formats/olliesrv.js';
import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, realpathSync, renameSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { privateDir, writePrivateFile } from '../../platform/private.js';

export const TRUST_FILE_NAME = 'trusted-projects';
export const PROJECT_POLICY_NAME = '.ollie-sandbox.yaml';
/** A project's hooks file (olliesrv/hooks/config.ts), trusted the same way. */
export const PROJECT_HOOKS_FILE_NAME = '.ollie-hooks.json';
/** A project's MCP servers (toolsrv/mcp/config.ts), trusted by naming the file. */
export const PROJECT_MCP_NAME = '.mcp.json';

export class TrustError extends Error {
  override name = 'TrustError';
}

export const trustFile = (configDir: string): string => join(configDir, TRUST_FILE_NAME);

/** The trusted files: canonical path → SHA-256 (hex). A missing list trusts nothing. */
export function readTrusted(configDir: string): Map<string, string> {
  const out = new Map<string, string>();
  let text: string;
  try {
    text = readFileSync(trustFile(configDir), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return out;
    throw e;
  }
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]{64})\t(\/.*)$/.exec(line);
    if (m) out.set(m[2]!, m[1]!);
  }
  return out;
}

export const sha256 = (data: Uint8Array | string): string => createHash('sha256').update(data).digest('hex');

/**
 * A project's policy file as it is now: its canonical path, its bytes and their hash. `path` may name the file
 * or the project directory. A symlink or anything but a regular file is refused: what gets trusted is the
 * bytes at that name, not whatever a link points at later.
 */
export function projectPolicy(path: string): { file: string; bytes: Buffer; sha: string } {
  let file = resolve(path);
  try {
    // A path naming a trusted kind of file (.mcp.json, the hooks file) is that file, never a project directory: an
    // agent that made `.mcp.json` a directory would have "trust …/.mcp.json" trust the policy file it put there.
    const named = [PROJECT_POLICY_NAME, PROJECT_HOOKS_FILE_NAME, PROJECT_MCP_NAME].includes(basename(file));
    if (!named && lstatSync(file).isDirectory()) file = join(file, PROJECT_POLICY_NAME);
  } catch (e) {
    throw new TrustError(
      `${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`,
    );
  }
  file = join(realpathSync(dirname(file)), file.slice(dirname(file).length + 1));
  // Opened once (no link followed, no wait on a FIFO) and read through that descriptor: the agent may swap the
  // name between a check and a read by name.
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new TrustError(`${file} is a symbolic link: only a regular file can be trusted`);
    throw new TrustError(`${file}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  try {
    if (!fstatSync(fd).isFile())
      throw new TrustError(`${file} is not a regular file: only a regular file can be trusted`);
    const bytes = readFileSync(fd);
    return { file, bytes, sha: sha256(bytes) };
  } finally {
    closeSync(fd);
  }
}

function save(configDir: string, m: Map<string, string>): void {
  privateDir(configDir, 'the config directory');
  const file = trustFile(configDir);
  const tmp = `${file}.${process.pid}.tmp`;
  writePrivateFile(tmp, [...m].map(([p, h]) => `${h}\t${p}\n`).join(''));
  renameSync(tmp, file);
}

/**
 * Trusts the policy file at `path` (or in the project directory `path`) as it is now. Returns its `sha\tpath` line.
 * With `expected` (the SHA-256 of the bytes the owner read), a file that differs is refused: an agent that rewrites
 * the file between the owner's reading and this call does not get its version trusted.
 */
export function trust(configDir: string, path: string, expected?: string): string {
  const { file, sha } = projectPolicy(path);
  if (expected !== undefined && expected.toLowerCase() !== sha)
    throw new TrustError(
      `${file} has changed since you read it: its SHA-256 is ${sha}, not ${expected.toLowerCase()}; read it again, nothing was trusted`,
    );
  if (/[\t\n]/.test(file))
    throw new TrustError(`${JSON.stringify(file)}: a path with a tab or newline cannot be listed`);
  const m = readTrusted(configDir);
  m.set(file, sha);
  save(configDir, m);
  return `${sha}\t${file}`;
}

/** Forgets `path` (the file or its project directory). Returns whether it was trusted. */
export function untrust(configDir: string, path: string): boolean {
  const m = readTrusted(configDir);
  let file = resolve(path);
  // A project's hooks file (olliesrv/hooks) and MCP servers file (.mcp.json) are trusted by their own names; a
  // directory means its policy file.
  if (![PROJECT_POLICY_NAME, PROJECT_HOOKS_FILE_NAME, PROJECT_MCP_NAME].some((n) => file.endsWith(`/${n}`)))
    file = join(file, PROJECT_POLICY_NAME);
  // The list holds canonical paths; a path spelled through a symlink, or one that no longer exists, both count.
  let canon = file;
  try {
    canon = join(realpathSync(dirname(file)), basename(file));
  } catch {
    // The project is gone: forget the spelling given.
  }
  const had = m.delete(file) || m.delete(canon);
  if (had) save(configDir, m);
  return had;
}

/**
 * `config/trust` and `ollie trust`: applies `trust PATH [SHA256]` / `untrust PATH` lines; returns one result line
 * each. A trailing SHA-256 pins the bytes to trust (see `trust`); a path that itself ends in a space and 64 hex
 * digits cannot be named without one (such a line is refused as ambiguous).
 */
export function applyTrustCommands(configDir: string, text: string): string {
  const out: string[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^(?:trust\s+(\/.*?)(?:\s+([0-9a-fA-F]{64}))?|untrust\s+(\/.*))$/.exec(line);
    if (!m)
      throw new TrustError(
        `${JSON.stringify(line)}: expected "trust /abs/path [sha256]" or "untrust /abs/path" (the project directory or its ${PROJECT_POLICY_NAME})`,
      );
    // The agent names directories: `/p/evil SHA` (a directory the owner read) must not trust `/p/evil`, the one
    // whose file the agent gave that SHA-256. Where the whole text names something, the line is ambiguous.
    const whole = line.replace(/^trust\s+/, '');
    if (m[2] !== undefined && existsPath(whole))
      throw new TrustError(
        `${JSON.stringify(whole)} exists, so "trust ${whole}" could mean it or ${m[1]} with SHA-256 ${m[2]}: add the SHA-256 of the file you read after it, or name the file itself`,
      );
    if (m[1] !== undefined) out.push(`trusted ${trust(configDir, m[1], m[2])}`);
    else out.push(untrust(configDir, m[3]!) ? `untrusted ${m[3]}` : `${m[3]} was not trusted`);
  }
  return out.map((l) => `${l}\n`).join('');
}

function existsPath(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** The list as `config/trust` shows it. */
export function listTrusted(configDir: string): string {
  return TRUST.format([...readTrusted(configDir)].map(([path, sha256]) => ({ sha256, path })));
}
