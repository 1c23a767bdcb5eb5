/** unifiedDiff: hunks in the usual format, and applying them gives back the new text (random texts). */
import { describe, expect, test } from 'vitest';
import { unifiedDiff } from '../../src/tools/common/diff.js';

/** Applies a unified diff to `before` (strictly: context and removed lines must match). */
function patch(before: string, diff: string): string {
  const a = before === '' ? [] : before.replace(/\n$/, '').split('\n');
  const out: string[] = [];
  let ai = 0;
  const lines = diff.split('\n').slice(2, -1);
  for (let i = 0; i < lines.length;) {
    const h = /^@@ -(\d+),(\d+) \+(\d+),(\d+) @@$/.exec(lines[i]!);
    if (!h) throw new Error(`not a hunk header: ${lines[i]}`);
    const start = Number(h[2]) === 0 ? Number(h[1]) : Number(h[1]) - 1;
    while (ai < start) out.push(a[ai++]!);
    i++;
    while (i < lines.length && !lines[i]!.startsWith('@@')) {
      const l = lines[i]!;
      if (l[0] === ' ' || l[0] === '-') {
        if (a[ai] !== l.slice(1))
          throw new Error(`mismatch at ${ai}: ${JSON.stringify(a[ai])} vs ${JSON.stringify(l)}`);
        if (l[0] === ' ') out.push(a[ai]!);
        ai++;
      } else out.push(l.slice(1));
      i++;
    }
  }
  while (ai < a.length) out.push(a[ai++]!);
  return out.length ? `${out.join('\n')}\n` : '';
}

describe('unifiedDiff', () => {
  test('format: headers, hunk ranges, 3 lines of context, hunks merged when close', () => {
    const a = 'a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n';
    expect(unifiedDiff(a, a.replace('g\n', 'G\n'), 'x')).toBe(
      '--- x\n+++ x\n@@ -4,7 +4,7 @@\n d\n e\n f\n-g\n+G\n h\n i\n j\n',
    );
    expect(unifiedDiff(a, a.replace('b\n', 'B\n').replace('m\n', 'M\n'), 'x')).toBe(
      '--- x\n+++ x\n@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -10,5 +10,5 @@\n j\n k\n l\n-m\n+M\n n\n',
    );
    expect(unifiedDiff('', 'new\n', 'f')).toBe('--- f\n+++ f\n@@ -0,0 +1,1 @@\n+new\n');
    expect(unifiedDiff('same\n', 'same\n', 'f')).toBe('');
  });

  test('patching the old text with the diff gives the new text (300 random cases)', () => {
    let seed = 7;
    const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed % n);
    for (let k = 0; k < 300; k++) {
      const a = Array.from({ length: rnd(30) }, () => 'abcde'[rnd(5)]!);
      const b = a.flatMap((l) => (rnd(4) === 0 ? [] : rnd(5) === 0 ? [l, 'xyz'[rnd(3)]!] : rnd(6) === 0 ? ['Q'] : [l]));
      const before = a.length ? `${a.join('\n')}\n` : '';
      const after = b.length ? `${b.join('\n')}\n` : '';
      const d = unifiedDiff(before, after, 'f');
      if (before === after) expect(d).toBe('');
      else expect(patch(before, d)).toBe(after);
    }
  });
});
