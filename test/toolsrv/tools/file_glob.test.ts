import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, beforeAll, beforeEach, expect, test } from 'vitest';
import { buildNative, makeWorld, runTool, type World } from '../sandbox-helpers.js';

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
  const files = [
    'src/a.ts',
    'src/b.test.ts',
    'src/lib/c.ts',
    'src/lib/d.js',
    'docs/x.md',
    '.hidden/h.ts',
    'node_modules/m/i.ts',
    'top.ts',
  ];
  files.forEach((f, i) => {
    const p = join(w.cwd, f);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, f);
    utimesSync(p, 1_000_000 + i, 1_000_000 + i); // later in the list = newer
  });
});
afterEach(() => w.cleanup());

const glob = async (args: Record<string, unknown>) => (await runTool(w, 'file_glob', args)).out;

test('** crosses directories, * does not; newest first; hidden and node_modules skipped', async () => {
  expect(await glob({ pattern: '**/*.ts' })).toBe('top.ts\nsrc/lib/c.ts\nsrc/b.test.ts\nsrc/a.ts\n');
  expect(await glob({ pattern: '*.ts' })).toBe('top.ts\n');
  expect(await glob({ pattern: 'src/*' })).toBe('src/lib/\nsrc/b.test.ts\nsrc/a.ts\n');
});

test('braces, classes, ? and a search directory', async () => {
  expect(await glob({ pattern: 'src/**/*.{js,md}' })).toBe('src/lib/d.js\n');
  expect(await glob({ pattern: '{src,docs}/**/[ac].ts' })).toBe('src/lib/c.ts\nsrc/a.ts\n');
  expect(await glob({ pattern: 'src/[!a]*.ts' })).toBe('src/b.test.ts\n');
  expect(await glob({ pattern: '**/?.md' })).toBe('docs/x.md\n');
  expect(await glob({ pattern: '**/*.ts', path: 'src/lib' })).toBe('src/lib/c.ts\n');
  expect(await glob({ pattern: '.hidden/*' })).toBe('.hidden/h.ts\n');
});

test('no match, limits and errors', async () => {
  expect(await glob({ pattern: '**/*.rs' })).toBe('no files match **/*.rs\n');
  expect(await glob({ pattern: '**/*.ts', max_results: 2 })).toBe(
    'top.ts\nsrc/lib/c.ts\n[2 more: the newest 2 shown; narrow the pattern or raise max_results]\n',
  );
  expect(await runTool(w, 'file_glob', { pattern: '*', path: 'nowhere' })).toMatchObject({
    code: 1,
    out: 'file_glob: nowhere is not a directory\n',
  });
});

test('when cut off, the newest matches are listed, whatever order the walk met them in', async () => {
  // Many old files walked before (and after) one new file deep down: the cut must not drop the new one.
  for (let i = 0; i < 50; i++) {
    const p = join(w.cwd, 'many', `f${i}.txt`);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, 'old');
    utimesSync(p, 500_000 + i, 500_000 + i);
  }
  const fresh = join(w.cwd, 'many', 'z', 'new.txt');
  mkdirSync(dirname(fresh), { recursive: true });
  writeFileSync(fresh, 'new');
  utimesSync(fresh, 2_000_000, 2_000_000);
  expect(await glob({ pattern: 'many/**/*.txt', max_results: 3 })).toBe(
    'many/z/new.txt\nmany/f49.txt\nmany/f48.txt\n[48 more: the newest 3 shown; narrow the pattern or raise max_results]\n',
  );
});

test('what .gitignore files name is skipped, also by a pattern starting below them; naming it lists it', async () => {
  writeFileSync(join(w.cwd, '.gitignore'), 'src/lib/*.js\n*.md\n');
  writeFileSync(join(w.cwd, 'src', '.gitignore'), 'b.*\n');
  expect(await glob({ pattern: '**/*.{ts,js,md}' })).toBe('top.ts\nsrc/lib/c.ts\nsrc/a.ts\n');
  expect(await glob({ pattern: 'src/lib/*' })).toBe('src/lib/c.ts\n');
  expect(await glob({ pattern: '*', path: 'src' })).toBe('src/lib/\nsrc/a.ts\n');
  // A directory ignored as a whole is still listed when the pattern walks from inside it.
  writeFileSync(join(w.cwd, '.gitignore'), 'docs/\n');
  expect(await glob({ pattern: '**/*.md' })).toBe('README.md\n');
  expect(await glob({ pattern: 'docs/*.md' })).toBe('docs/x.md\n');
});
