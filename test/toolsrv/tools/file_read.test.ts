import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, expect, test } from 'vitest';
import { buildNative, makeWorld, runTool, type World } from '../sandbox-helpers.js';

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
  writeFileSync(join(w.cwd, 'lines.txt'), Array.from({ length: 10 }, (_, i) => `line ${i + 1}`).join('\n') + '\n');
});
afterEach(() => w.cleanup());

const read = (args: Record<string, unknown>) => runTool(w, 'file_read', args);

test('numbers the lines of a file, relative to the cwd', async () => {
  const r = await read({ path: 'README.md' });
  expect(r).toMatchObject({ code: 0, out: '     1\tproject\n' });
});

test('offset and limit pick a window and say how to continue', async () => {
  const r = await read({ path: 'lines.txt', offset: 3, limit: 2 });
  expect(r.out).toBe('     3\tline 3\n     4\tline 4\n[more lines follow: continue with offset=5]\n');
  expect((await read({ path: 'lines.txt', offset: 9 })).out).toBe('     9\tline 9\n    10\tline 10\n');
  expect((await read({ path: 'lines.txt', offset: 50 })).out).toBe(
    'lines.txt has 10 lines; offset 50 is past the end\n',
  );
});

test('binary files are detected, not printed; empty files and CRLF lines are handled', async () => {
  writeFileSync(join(w.cwd, 'blob.bin'), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2, 3]));
  expect((await read({ path: 'blob.bin' })).out).toBe('blob.bin: binary file (8 bytes), not shown\n');
  writeFileSync(join(w.cwd, 'empty.txt'), '');
  expect((await read({ path: 'empty.txt' })).out).toBe('empty.txt: empty file\n');
  writeFileSync(join(w.cwd, 'dos.txt'), 'a\r\nb');
  expect((await read({ path: 'dos.txt' })).out).toBe(
    '     1\ta\n     2\tb\n[dos.txt: 1 of the lines shown end in CRLF (\\r\\n), not shown; file_edit matches LF text against them]\n',
  );
});

test('very long lines are cut', async () => {
  writeFileSync(join(w.cwd, 'long.txt'), 'x'.repeat(5000) + '\n');
  const r = await read({ path: 'long.txt' });
  expect(r.out).toBe(`     1\t${'x'.repeat(2000)}… [line cut at 2000 of 5000 characters]\n`);
});

test('errors name the path; the sandbox keeps ~/.ssh closed, unsandboxed it opens', async () => {
  expect(await read({ path: 'missing.txt' })).toMatchObject({
    code: 1,
    out: 'file_read: missing.txt: No such file or directory\n',
  });
  expect(await read({ path: '.' })).toMatchObject({
    code: 1,
    out: 'file_read: . is a directory (use file_glob to list it)\n',
  });
  const key = join(w.home, '.ssh', 'id_ed25519');
  expect(await read({ path: key })).toMatchObject({ code: 1, out: `file_read: ${key}: Permission denied\n` });
  expect(await runTool(w, 'file_read', { path: key }, { unsandboxed: true })).toMatchObject({
    code: 0,
    out: '     1\tPRIVATE KEY\n',
  });
});
