/**
 * A file's change stamp: what a cache of something read from the file compares to see whether it must read it
 * again (inode, size and mtime, so a replaced or edited file shows). `-` for a file that is not there.
 */
import { statSync } from 'node:fs';

export function fileStamp(path: string): string {
  try {
    const st = statSync(path);
    return `${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch {
    return '-';
  }
}
