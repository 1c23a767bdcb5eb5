/**
 * A unified diff of two texts (3 lines of context, `---`/`+++` headers), for previews of rewrites and
 * renames. Lines are compared whole; the edit script is Myers' O(ND) shortest one.
 */

function editScript(a: string[], b: string[]): Array<'=' | '-' | '+'> {
  const n = a.length;
  const m = b.length;
  const max = n + m;
  const v = new Int32Array(2 * max + 2);
  const trace: Int32Array[] = [];
  let found = false;
  for (let d = 0; d <= max && !found; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[max + k - 1]! < v[max + k + 1]!) ? v[max + k + 1]! : v[max + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[max + k] = x;
      if (x >= n && y >= m) {
        found = true;
        break;
      }
    }
  }
  // Walk back through the saved frontiers.
  const ops: Array<'=' | '-' | '+'> = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 1; d >= 0; d--) {
    const vd = trace[d]!;
    const k = x - y;
    const prevK = k === -d || (k !== d && vd[max + k - 1]! < vd[max + k + 1]!) ? k + 1 : k - 1;
    const prevX = d === 0 ? 0 : vd[max + prevK]!;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      ops.push('=');
      x--;
      y--;
    }
    if (d > 0) ops.push(x === prevX ? '+' : '-');
    x = prevX;
    y = prevY;
  }
  return ops.reverse();
}

const splitLines = (s: string): string[] => {
  if (s === '') return [];
  const l = s.split('\n');
  if (l[l.length - 1] === '') l.pop();
  return l;
};

/** The unified diff turning `before` into `after` ('' when they are equal). */
export function unifiedDiff(before: string, after: string, fromName: string, toName = fromName, context = 3): string {
  if (before === after) return '';
  const a = splitLines(before);
  const b = splitLines(after);
  const ops = editScript(a, b);
  // Line numbers of each op in a and b.
  const rows: Array<{ op: '=' | '-' | '+'; ai: number; bi: number }> = [];
  let ai = 0;
  let bi = 0;
  for (const op of ops) {
    rows.push({ op, ai, bi });
    if (op !== '+') ai++;
    if (op !== '-') bi++;
  }
  let out = `--- ${fromName}\n+++ ${toName}\n`;
  let i = 0;
  while (i < rows.length) {
    if (rows[i]!.op === '=') {
      i++;
      continue;
    }
    let start = Math.max(0, i - context);
    let end = i;
    // Extend the hunk while changes are within 2*context of each other.
    for (;;) {
      while (end < rows.length && rows[end]!.op !== '=') end++;
      let next = end;
      while (next < rows.length && rows[next]!.op === '=') next++;
      if (next < rows.length && next - end <= 2 * context) end = next;
      else break;
    }
    const stop = Math.min(rows.length, end + context);
    const hunk = rows.slice(start, stop);
    const aStart = hunk[0]!.ai;
    const bStart = hunk[0]!.bi;
    const aLen = hunk.filter((r) => r.op !== '+').length;
    const bLen = hunk.filter((r) => r.op !== '-').length;
    out += `@@ -${aLen ? aStart + 1 : aStart},${aLen} +${bLen ? bStart + 1 : bStart},${bLen} @@\n`;
    for (const r of hunk) out += r.op === '=' ? ` ${a[r.ai]}\n` : r.op === '-' ? `-${a[r.ai]}\n` : `+${b[r.bi]}\n`;
    i = stop;
    start = stop;
  }
  return out;
}
