import { Validator } from '@cfworker/json-schema';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { buildNative, makeWorld, readMeta, runTool, TOOLS_DIR, type World } from '../sandbox-helpers.js';

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
  const files: Record<string, string> = {
    'src/a.ts': 'import x from "y";\nconst answer = 42;\nexport default answer;\n',
    'src/b.c': 'int main(void) {\n  return 42;\n}\n',
    'src/deep/c.ts': 'one\ntwo\nthree\nfour\nfive\nsix\nseven\nAnswer\n',
    'bin.dat': 'answer\0binary',
    '.hidden/h.ts': 'answer hidden\n',
    'node_modules/m/i.ts': 'answer vendored\n',
  };
  for (const [f, text] of Object.entries(files)) {
    mkdirSync(dirname(join(w.cwd, f)), { recursive: true });
    writeFileSync(join(w.cwd, f), text);
  }
});
afterEach(() => w.cleanup());

const grep = async (args: Record<string, unknown>) => (await runTool(w, 'file_grep', args)).out;
const sorted = (s: string) => s.split('\n').filter(Boolean).sort().join('\n');

describe('built in', () => {
  test('path:line:text for each match; binary, hidden and node_modules skipped', async () => {
    expect(sorted(await grep({ pattern: 'answer' }))).toBe(
      ['src/a.ts:2:const answer = 42;', 'src/a.ts:3:export default answer;'].join('\n'),
    );
    expect(sorted(await grep({ pattern: 'answer', ignore_case: true }))).toBe(
      ['src/a.ts:2:const answer = 42;', 'src/a.ts:3:export default answer;', 'src/deep/c.ts:8:Answer'].join('\n'),
    );
  });

  test('extended regular expressions with \\d and \\s; globs by name at any depth or by path', async () => {
    expect(sorted(await grep({ pattern: 'return\\s+\\d+;' }))).toBe('src/b.c:2:  return 42;');
    expect(sorted(await grep({ pattern: '42', glob: ['*.ts'] }))).toBe('src/a.ts:2:const answer = 42;');
    expect(sorted(await grep({ pattern: '42', glob: '**/*.c' }))).toBe('src/b.c:2:  return 42;');
    expect(sorted(await grep({ pattern: '(one|six)', glob: ['src/deep/*.{ts,js}'] }))).toBe(
      'src/deep/c.ts:1:one\nsrc/deep/c.ts:6:six',
    );
  });

  test('context lines, separators, files_only, a search path and max_results', async () => {
    expect(await grep({ pattern: '^(two|six)$', context: 1, path: 'src/deep' })).toBe(
      'src/deep/c.ts:1-one\nsrc/deep/c.ts:2:two\nsrc/deep/c.ts:3-three\n--\nsrc/deep/c.ts:5-five\nsrc/deep/c.ts:6:six\nsrc/deep/c.ts:7-seven\n',
    );
    expect(sorted(await grep({ pattern: '42', files_only: true }))).toBe('src/a.ts\nsrc/b.c');
    expect(await grep({ pattern: 'e', path: 'src/deep/c.ts', max_results: 2 })).toBe(
      'src/deep/c.ts:1:one\nsrc/deep/c.ts:3:three\n[stopped after 2 results: narrow the search or raise max_results]\n',
    );
  });

  test('a 10 MB line is cut to a window around the match, on whole UTF-8 characters', async () => {
    const head = 'é'.repeat(3_000_000); // 6 MB of two-byte characters before the match
    writeFileSync(join(w.cwd, 'src/min.js'), `${head}NEEDLE${'x'.repeat(4_000_000)}\nshort NEEDLE\n`);
    const out = await grep({ pattern: 'NEEDLE', path: 'src/min.js' });
    const [long, short] = out.split('\n');
    expect(short).toBe('src/min.js:2:short NEEDLE');
    const m = /^src\/min\.js:1:…(é+)NEEDLE(x+)… \[line of 10000006 bytes cut to bytes (\d+)-(\d+)\]$/.exec(long!);
    expect(m).not.toBeNull();
    // 500 bytes (a quarter of the 2000-byte window) before the match, the rest after it.
    expect(m![1]!.length).toBe(250);
    expect(m![2]!.length).toBe(1494);
    expect([Number(m![3]), Number(m![4])]).toEqual([6_000_000 - 500 + 1, 6_000_000 + 1500]);
  });

  test('what .gitignore files name is skipped, in the directory and below', async () => {
    writeFileSync(join(w.cwd, '.gitignore'), '# build output\ndist/\n*.log\n/src/gen\n!keep.log\n');
    writeFileSync(join(w.cwd, 'src/deep/.gitignore'), 'local.ts\n');
    const files: Record<string, string> = {
      'dist/out.js': 'answer built\n',
      'src/dist/x.ts': 'answer in a dir named dist\n',
      'run.log': 'answer logged\n',
      'keep.log': 'answer kept\n',
      'src/gen/g.ts': 'answer generated\n',
      'src/deep/local.ts': 'answer local\n',
    };
    for (const [f, text] of Object.entries(files)) {
      mkdirSync(dirname(join(w.cwd, f)), { recursive: true });
      writeFileSync(join(w.cwd, f), text);
    }
    expect(sorted(await grep({ pattern: 'answer' }))).toBe(
      ['keep.log:1:answer kept', 'src/a.ts:2:const answer = 42;', 'src/a.ts:3:export default answer;'].join('\n'),
    );
    // Named, an ignored directory is searched.
    expect(await grep({ pattern: 'answer', path: 'dist' })).toBe('dist/out.js:1:answer built\n');
  });

  test('no match and a bad expression', async () => {
    expect(await grep({ pattern: 'nothing-like-this' })).toBe('no matches for nothing-like-this\n');
    expect(await runTool(w, 'file_grep', { pattern: 'a(' })).toMatchObject({
      code: 1,
      out: expect.stringMatching(/^file_grep: bad regular expression a\(: /),
    });
  });

  test('cannot search ~/.ssh inside the sandbox', async () => {
    const key = join(w.home, '.ssh', 'id_ed25519');
    expect(await runTool(w, 'file_grep', { pattern: 'PRIVATE', path: key })).toMatchObject({
      code: 1,
      out: `file_grep: ${key}: Permission denied\n`,
    });
    const free = await runTool(
      w,
      'file_grep',
      { pattern: 'PRIVATE', path: join(w.home, '.ssh', 'id_ed25519') },
      { unsandboxed: true },
    );
    expect(free.out).toContain('PRIVATE KEY');
  });
});

test('with ripgrep: the .meta variant hands the same arguments to rg', async () => {
  const meta = readMeta('file_grep');
  expect(meta.variants).toEqual([{ binary: 'rg', cmd: 'file_grep --rg' }]);
  // A stand-in rg that prints its arguments and one line per "match", to check the translation and the cap.
  const bin = join(w.root, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'rg'), '#!/bin/sh\nfor a in "$@"; do echo "arg:$a"; done\necho "f:1:x"\necho "f:2:y"\n');
  chmodSync(join(bin, 'rg'), 0o755);
  const r = await runTool(
    w,
    'file_grep',
    { pattern: 'a|b', glob: ['*.ts'], ignore_case: true, context: 2, max_results: 100 },
    {
      unsandboxed: true,
      argv: ['/bin/sh', '-c', 'file_grep --rg'],
      env: { PATH: `${bin}:${TOOLS_DIR}:${process.env.PATH}` },
    },
  );
  expect(r.out).toBe(
    [
      '--line-number',
      '--no-heading',
      '--color=never',
      '--with-filename',
      '--ignore-case',
      '--context=2',
      '--no-require-git',
      '--null',
      '--glob',
      '!node_modules',
      '--glob',
      '*.ts',
      '--regexp',
      'a|b',
      '--',
      '.',
    ]
      .map((a) => `arg:${a}\n`)
      .join('') + 'f:1:x\nf:2:y\n',
  );
});

test('with ripgrep: node_modules only when asked; PATH NUL LINE output reprinted, a long line cut around the match', async () => {
  const bin = join(w.root, 'bin');
  mkdirSync(bin);
  // A stand-in rg printing its arguments, then what rg --null prints: a match on a 100 kB line, a context line.
  writeFileSync(join(w.root, 'long.txt'), `f:1\x003:${'a'.repeat(50_000)}HERE${'b'.repeat(50_000)}\nf:1\x004-after\n`);
  writeFileSync(
    join(bin, 'rg'),
    `#!/bin/sh\nfor a in "$@"; do echo "arg:$a"; done\ncat '${join(w.root, 'long.txt')}'\n`,
  );
  chmodSync(join(bin, 'rg'), 0o755);
  const rg = (args: Record<string, unknown>) =>
    runTool(w, 'file_grep', args, {
      unsandboxed: true,
      argv: ['/bin/sh', '-c', 'file_grep --rg'],
      env: { PATH: `${bin}:${TOOLS_DIR}:${process.env.PATH}` },
    });
  const plain = (await rg({ pattern: 'HERE' })).out;
  expect(plain).toContain('arg:--glob\narg:!node_modules\n');
  const lines = plain.split('\n').filter((l) => !l.startsWith('arg:'));
  expect(lines[0]).toBe(
    `f:1:3:…${'a'.repeat(500)}HERE${'b'.repeat(1496)}… [line of 100004 bytes cut to bytes 49501-51500]`,
  );
  expect(lines[1]).toBe('f:1:4-after');
  expect((await rg({ pattern: 'HERE', glob: 'node_modules/**' })).out).not.toContain('!node_modules');
  expect((await rg({ pattern: 'HERE', path: 'node_modules/m' })).out).not.toContain('!node_modules');
});

test('glob is a string or a list of strings in the schema toolsrv validates calls with', () => {
  const v = new Validator(readMeta('file_grep').args as Record<string, unknown>, '7', false);
  expect(v.validate({ pattern: 'x', glob: '*.ts' }).valid).toBe(true);
  expect(v.validate({ pattern: 'x', glob: ['*.ts', '*.c'] }).valid).toBe(true);
  expect(v.validate({ pattern: 'x', glob: 3 }).valid).toBe(false);
});
