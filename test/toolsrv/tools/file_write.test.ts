import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, expect, test } from 'vitest';
import { buildNative, makeWorld, runTool, type World } from '../sandbox-helpers.js';

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

test('creates a file and its missing parent directories; unicode and escapes survive', async () => {
  const content = 'héllo "wörld" 😀\n\ttab\\n\n';
  const r = await runTool(w, 'file_write', { path: 'a/b/c.txt', content });
  expect(r).toMatchObject({ code: 0, out: `created a/b/c.txt: ${Buffer.byteLength(content)} bytes, 2 lines\n` });
  expect(readFileSync(join(w.cwd, 'a/b/c.txt'), 'utf8')).toBe(content);
});

test('replaces an existing file, keeping its mode', async () => {
  const f = join(w.cwd, 'run.sh');
  writeFileSync(f, 'old old old\n');
  chmodSync(f, 0o755);
  const r = await runTool(w, 'file_write', { path: 'run.sh', content: '#!/bin/sh\necho new' });
  expect(r.out).toBe('overwrote run.sh: 18 bytes, 2 lines\n');
  expect(readFileSync(f, 'utf8')).toBe('#!/bin/sh\necho new');
  expect(statSync(f).mode & 0o777).toBe(0o755);
});

test('outside the project the sandbox refuses; unsandboxed it writes', async () => {
  const target = join(w.home, 'other', 'out.txt');
  expect(await runTool(w, 'file_write', { path: target, content: 'x' })).toMatchObject({
    code: 1,
    out: `file_write: ${target}: Permission denied\n`,
  });
  expect(existsSync(target)).toBe(false);
  expect((await runTool(w, 'file_write', { path: target, content: 'x' }, { unsandboxed: true })).code).toBe(0);
  expect(readFileSync(target, 'utf8')).toBe('x');
});

test('missing content and directories are errors', async () => {
  expect(await runTool(w, 'file_write', { path: 'x' })).toMatchObject({
    code: 1,
    out: 'file_write: argument content is required\n',
  });
  expect(await runTool(w, 'file_write', { path: '.', content: '' })).toMatchObject({
    code: 1,
    out: 'file_write: . is a directory\n',
  });
});
