import { execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { buildNative, makeWorld, runTool, type World } from '../sandbox-helpers.js';

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

const numbered = (n: number) => Array.from({ length: n }, (_, i) => `l${i + 1}`).join('\n') + '\n';
const edit = (args: Record<string, unknown>) => runTool(w, 'file_edit', { path: 'f.txt', ...args });

test('replaces the one occurrence and returns a unified diff with 3 lines of context', async () => {
  writeFileSync(join(w.cwd, 'f.txt'), numbered(12));
  const r = await edit({ old_string: 'l6\n', new_string: 'six\nSIX\n' });
  expect(r.code).toBe(0);
  expect(r.out).toBe('--- a/f.txt\n+++ b/f.txt\n@@ -3,7 +3,8 @@\n l3\n l4\n l5\n-l6\n+six\n+SIX\n l7\n l8\n l9\n');
  expect(readFileSync(join(w.cwd, 'f.txt'), 'utf8')).toBe(numbered(12).replace('l6\n', 'six\nSIX\n'));
});

test('more than one occurrence is refused (with their lines) unless replace_all', async () => {
  writeFileSync(join(w.cwd, 'f.txt'), 'x = 1\nfoo\nx = 2\n');
  const r = await edit({ old_string: 'x =', new_string: 'y =' });
  expect(r).toMatchObject({
    code: 1,
    out: 'file_edit: old_string occurs 2 times in f.txt, at lines 1 3; include more context to make it unique, or set replace_all\n',
  });
  expect(readFileSync(join(w.cwd, 'f.txt'), 'utf8')).toBe('x = 1\nfoo\nx = 2\n');
  const all = await edit({ old_string: 'x =', new_string: 'y =', replace_all: true });
  expect(all.out).toBe('--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n-x = 1\n+y = 1\n foo\n-x = 2\n+y = 2\n');
});

test('not found, identical strings, and a missing file are errors', async () => {
  writeFileSync(join(w.cwd, 'f.txt'), 'abc\n');
  expect(await edit({ old_string: 'zzz', new_string: 'y' })).toMatchObject({
    code: 1,
    out: 'file_edit: old_string was not found in f.txt (it must match exactly, whitespace included; read the file again to copy the text as it is now)\n',
  });
  expect(await edit({ old_string: 'abc', new_string: 'abc' })).toMatchObject({
    code: 1,
    out: 'file_edit: old_string and new_string are the same: nothing to do\n',
  });
  expect(await edit({ path: 'nope.txt', old_string: 'a', new_string: 'b' })).toMatchObject({
    code: 1,
    out: 'file_edit: nope.txt: No such file or directory\n',
  });
});

test('on a CRLF file, multi-line text given with LF (as file_read shows it) is matched and written with CRLF', async () => {
  writeFileSync(join(w.cwd, 'f.txt'), 'one\r\ntwo\r\nthree\r\n');
  const r = await edit({ old_string: 'one\ntwo\n', new_string: 'uno\ndos\n' });
  expect(r.code).toBe(0);
  expect(r.out).toBe(
    '[f.txt has CRLF line ends: old_string and new_string were matched and written with CRLF]\n' +
      '--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n-one\r\n-two\r\n+uno\r\n+dos\r\n three\r\n',
  );
  expect(readFileSync(join(w.cwd, 'f.txt'), 'utf8')).toBe('uno\r\ndos\r\nthree\r\n');
  // Text given with CRLF still matches as it is, with no note.
  const exact = await edit({ old_string: 'dos\r\nthree', new_string: 'tres' });
  expect(exact.out.startsWith('--- a/f.txt')).toBe(true);
  expect(readFileSync(join(w.cwd, 'f.txt'), 'utf8')).toBe('uno\r\ntres\r\n');
});

test('"not found" says how much of old_string matched, and where', async () => {
  writeFileSync(join(w.cwd, 'f.txt'), 'a\n  function f() {\n    return 1;\n  }\n');
  expect(await edit({ old_string: '  function f() {\n    return 2;\n', new_string: 'x' })).toMatchObject({
    code: 1,
    out: 'file_edit: old_string was not found in f.txt (it must match exactly, whitespace included); its first 1 line matches the file from line 2, its line 2 differs\n',
  });
  expect(await edit({ old_string: '    function f() {\n  return 1;\n', new_string: 'x' })).toMatchObject({
    code: 1,
    out: 'file_edit: old_string was not found in f.txt (it must match exactly, whitespace included); its first line, without its indentation, occurs at line 2: compare the indentation and the lines after it\n',
  });
  expect(readFileSync(join(w.cwd, 'f.txt'), 'utf8')).toBe('a\n  function f() {\n    return 1;\n  }\n');
});

test('an empty old_string creates a new file', async () => {
  const r = await edit({ path: 'new.txt', old_string: '', new_string: 'one\ntwo\n' });
  expect(r.out).toBe('--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n');
  expect(readFileSync(join(w.cwd, 'new.txt'), 'utf8')).toBe('one\ntwo\n');
});

test('a file outside the project cannot be edited in the sandbox', async () => {
  const f = join(w.home, 'other', 'notes.txt');
  expect(await runTool(w, 'file_edit', { path: f, old_string: 'notes', new_string: 'x' })).toMatchObject({
    code: 1,
    out: `file_edit: ${f}: Permission denied\n`,
  });
  expect(
    (await runTool(w, 'file_edit', { path: f, old_string: 'notes', new_string: 'x' }, { unsandboxed: true })).code,
  ).toBe(0);
  expect(readFileSync(f, 'utf8')).toBe('x\n');
});

describe('the diff applies with patch(1) and gives the edited file', () => {
  const cases: Array<[string, string, Record<string, unknown>]> = [
    ['deletes a line', numbered(13), { old_string: 'l3\n', new_string: '' }],
    ['splits a line', numbered(13), { old_string: 'l2', new_string: 'B1\nB2' }],
    [
      'far-apart edits make two hunks',
      `x1\n${numbered(12)}x2`,
      { old_string: 'x', new_string: 'yy', replace_all: true },
    ],
    [
      'near edits share a hunk',
      'x1\nb\nc\nd\nx\nf\ng\nh\ni\nj\nk\nl\nx2',
      { old_string: 'x', new_string: 'yy', replace_all: true },
    ],
    ['adds a newline at the end', 'hello world', { old_string: 'world', new_string: 'there\n' }],
    ['removes everything', 'one\ntwo\n', { old_string: 'one\ntwo\n', new_string: '' }],
    ['several on one line', 'one two one\n', { old_string: 'one', new_string: '1', replace_all: true }],
    ['edits the last line without newline', 'a\nb\nc', { old_string: 'c', new_string: 'C' }],
  ];
  test.each(cases)('%s', async (_name, before, args) => {
    const f = join(w.cwd, 'f.txt');
    writeFileSync(f, before);
    copyFileSync(f, join(w.root, 'orig.txt'));
    const r = await edit(args);
    expect(r.code).toBe(0);
    writeFileSync(join(w.root, 'd.diff'), r.out);
    execFileSync('patch', ['-s', join(w.root, 'orig.txt'), join(w.root, 'd.diff')]);
    expect(readFileSync(join(w.root, 'orig.txt'), 'utf8')).toBe(readFileSync(f, 'utf8'));
  });
});
