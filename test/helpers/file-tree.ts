/** What "byte for byte" compares: every entry under a directory with what it holds. */
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

export interface FileTreeOptions {
  /** Record each file's and directory's permission bits too (a rewind must restore them). */
  modes?: boolean;
  /** Names not descended into nor listed, at any depth (e.g. `.git`, which a rewind never touches). */
  skip?: string[];
}

/** Every file, link and directory under `dir` (paths relative to it) with its content hash or link target. */
export function fileTree(dir: string, opts: FileTreeOptions = {}, rel = ''): Record<string, string> {
  const out: Record<string, string> = {};
  const mode = (m: number): string => (opts.modes ? `${(m & 0o777).toString(8)}` : '');
  for (const name of readdirSync(join(dir, rel)).sort()) {
    if (opts.skip?.includes(name)) continue;
    const r = rel ? `${rel}/${name}` : name;
    const st = lstatSync(join(dir, r));
    if (st.isSymbolicLink()) out[r] = `link ${readlinkSync(join(dir, r))}`;
    else if (st.isDirectory()) {
      out[`${r}/`] = opts.modes ? `dir ${mode(st.mode)}` : 'dir';
      Object.assign(out, fileTree(dir, opts, r));
    } else {
      const hash = createHash('sha256')
        .update(readFileSync(join(dir, r)))
        .digest('hex');
      out[r] = opts.modes ? `${mode(st.mode)} ${hash}` : hash;
    }
  }
  return out;
}
