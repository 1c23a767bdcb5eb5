/**
 * What changed under a directory tracked as a whole (checkpoint.whole): its two tree objects compared, for the
 * one line `files` gives it, the summary of `diff` and the count of `idx`.
 */
import { sameEntry } from './scan.js';
import type { CheckpointStore, Entry, TreeEntry } from './store.js';

export interface WholeChanges {
  /** The files and links that differ, as [A|D|M|T, path under the directory], sorted by path. */
  list: Array<['A' | 'D' | 'M' | 'T', string]>;
  /** Their sizes: the file after the change, or before it for a deleted one. */
  bytes: number;
}

/** Either side may be a whole directory, something else (taken as holding nothing) or nothing. */
export function wholeChanges(store: CheckpointStore, x: Entry | undefined, y: Entry | undefined): WholeChanges {
  const entries = (e: Entry | undefined): Record<string, TreeEntry> => {
    if (e?.t !== 'w') return {};
    try {
      return store.tree(e.tree).entries;
    } catch {
      return {};
    }
  };
  const a = entries(x);
  const b = entries(y);
  const list: WholeChanges['list'] = [];
  let bytes = 0;
  for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
    const p = a[k];
    const q = b[k];
    if ((!p || p.t === 'd') && (!q || q.t === 'd')) continue;
    if (sameEntry(p, q)) continue;
    list.push([!p || p.t === 'd' ? 'A' : !q || q.t === 'd' ? 'D' : p.t !== q.t ? 'T' : 'M', k]);
    const sized = q?.t === 'f' ? q : p?.t === 'f' && (!q || q.t === 'd') ? p : undefined;
    if (sized) bytes += sized.size;
  }
  return { list, bytes };
}
