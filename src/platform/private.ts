/**
 * Files at rest that only the user may see: the database, the spill files of long tool outputs, the tool
 * cache, the configuration. Each is created owner-only (0700 directories, 0600 files) with explicit modes, not
 * the process umask (which toolsrv's tools inherit and must keep), and safely against what another local user
 * (or a tool inside the sandbox) may have planted first: a symlink, a directory of theirs, a loose mode.
 *
 * The checks use lstat, so a planted symlink is refused rather than followed. A directory we own with a loose
 * mode is tightened; one owned by someone else, or shared (sticky, like /tmp), is refused: inside it, a name we
 * are about to use could be swapped under us.
 */
import {
  chmodSync,
  closeSync,
  constants,
  lstatSync,
  mkdirSync,
  openSync,
  unlinkSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { dirname } from 'node:path';

export class PrivatePathError extends Error {
  override name = 'PrivatePathError';
}

const uid = (): number | undefined => (typeof process.getuid === 'function' ? process.getuid() : undefined);

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** Refuses what is not ours to use as `kind` ('directory' or 'file'); tightens a loose mode of our own. */
function vet(path: string, st: Stats, kind: 'directory' | 'file', what: string, mode: number): void {
  if (st.isSymbolicLink())
    throw new PrivatePathError(
      `${what} ${path} is a symbolic link: refusing to follow it (someone may have planted it; remove it if it is yours)`,
    );
  if (kind === 'directory' ? !st.isDirectory() : !st.isFile())
    throw new PrivatePathError(`${what} ${path} is not a ${kind}: refusing to use it`);
  const me = uid();
  if (me !== undefined && st.uid !== me)
    throw new PrivatePathError(`${what} ${path} belongs to uid ${st.uid}, not to you (uid ${me}): refusing to use it`);
  if (kind === 'directory' && st.mode & 0o1000)
    throw new PrivatePathError(
      `${what} ${path} is a shared directory (sticky bit, mode ${(st.mode & 0o7777).toString(8)}): give Ollie a directory of its own`,
    );
  if ((st.mode & 0o777) !== mode && st.mode & 0o077) chmodSync(path, mode);
}

/**
 * Makes `path` a directory only the user can enter (0700), creating missing parents as ordinary directories
 * (their modes are the user's business). `what` names it in errors ("the data dir"). Returns `path`.
 */
export function privateDir(path: string, what = 'directory'): string {
  let st = lstatOrUndefined(path);
  if (!st) {
    mkdirSync(dirname(path), { recursive: true });
    try {
      mkdirSync(path, { mode: 0o700 });
    } catch (e) {
      // Created meanwhile (another Ollie starting): vetted below like any existing one.
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    st = lstatSync(path);
  }
  vet(path, st, 'directory', what, 0o700);
  return path;
}

/**
 * Vets an existing file that we are about to let a library open by name (SQLite's database and its -wal, -shm):
 * a symlink or another user's file is refused, a loose mode tightened to 0600. With `create`, a missing file is
 * created empty, 0600, without following a symlink, so the library opens ours. Its directory must already be
 * private (privateDir), so nothing can be planted between this check and the open.
 */
export function privateFile(path: string, what = 'file', o: { create?: boolean } = {}): void {
  const st = lstatOrUndefined(path);
  if (st) return vet(path, st, 'file', what, 0o600);
  if (!o.create) return;
  try {
    closeSync(openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    vet(path, lstatSync(path), 'file', what, 0o600);
  }
}

/**
 * Writes `data` to a new file `path` (0600) in a private directory: O_EXCL|O_NOFOLLOW, so an existing name is
 * never written through. An earlier file of that name (a restarted agent reusing a call id) is unlinked first;
 * unlink removes a symlink itself, never its target.
 */
export function writePrivateFile(path: string, data: string | Uint8Array): void {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  let fd: number;
  try {
    fd = openSync(path, flags, 0o600);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    unlinkSync(path);
    fd = openSync(path, flags, 0o600);
  }
  try {
    const buf = typeof data === 'string' ? Buffer.from(data) : data;
    for (let off = 0; off < buf.length;) off += writeSync(fd, buf, off, buf.length - off);
  } finally {
    closeSync(fd);
  }
}
