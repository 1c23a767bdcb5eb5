/**
 * The review panel's reading of `checkpoint/ID/diff` (a unified diff, file by file). The hunks are the agent's
 * file contents, so a hunk's lines are taken by the counts of its `@@ -a,b +c,d @@` header, never by what they
 * look like: a removed line `-- a/x` followed by an added `++ b/x` reads `--- a/x`, `+++ b/x`, which a reader
 * going by looks would take for a new file and show the rest of the real file's changes under the name the
 * agent chose.
 */

export interface FileDiff {
  path: string;
  /** The hunks, header lines (---/+++) left out. */
  lines: string[];
}

const HUNK = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/;

/** Splits a unified diff into files; a file's name is its `+++ b/…` (or `--- a/…` when deleted). */
export function parseDiff(text: string): FileDiff[] {
  const out: FileDiff[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    const hunk = out.length ? HUNK.exec(l) : null;
    if (hunk) {
      const cur = out[out.length - 1]!.lines;
      cur.push(l);
      let before = Number(hunk[1] ?? 1);
      let after = Number(hunk[2] ?? 1);
      while ((before > 0 || after > 0) && i + 1 < lines.length) {
        const h = lines[++i]!;
        cur.push(h);
        if (h.startsWith('-')) before--;
        else if (h.startsWith('+')) after--;
        else {
          before--;
          after--;
        }
      }
    } else if (l.startsWith('--- ') && lines[i + 1]?.startsWith('+++ ')) {
      const from = l.slice(4);
      const to = lines[i + 1]!.slice(4);
      const name = to === '/dev/null' ? from : to;
      out.push({ path: name.replace(/^[ab]\//, ''), lines: [] });
      i++;
    } else if (out.length && l !== '') out[out.length - 1]!.lines.push(l);
  }
  return out;
}
