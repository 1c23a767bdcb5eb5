/** codebase_overview, code_symbols and code_dependencies over a workspace, through the sandboxed host. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { codeEnv, type CodeEnv } from './helpers.js';

let e: CodeEnv;
beforeAll(async () => {
  e = await codeEnv();
});
afterAll(async () => {
  await e.close();
});

describe('codebase_overview', () => {
  test('the tree with each file’s main declarations; node_modules, .gitignore’d paths skipped', async () => {
    const out = await e.ok('codebase_overview', {});
    const lines = out.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^\.: 18 files \(/);
    expect(lines).toContain('go/');
    expect(lines).toContain(
      '  server.go (25): const DefaultPort, struct Server, interface Handler, func New, method Start',
    );
    expect(lines).toContain('  greeter.ts (21): class Greeter, function makeGreeter, const VERSION, function shout');
    expect(lines).toContain('  lib.rs (20): mod parser, struct Cache, trait Store, impl Store for Cache, fn new_cache');
    expect(lines).toContain('README.md (15): # Fixture');
    expect(out).not.toMatch(/node_modules|hidden|build\/|secret\.ts/);
    // Files come after the subdirectories of their directory.
    expect(lines.indexOf('src/')).toBeLessThan(lines.indexOf('README.md (15): # Fixture'));
  });

  test('bounded: symbols per file, and the output cut with a note', async () => {
    const few = await e.ok('codebase_overview', { path: 'src', symbols_per_file: 1 });
    expect(few).toBe(
      'src: 4 files (typescript 2, javascript 1, tsx 1)\ngreeter.ts (21): class Greeter, +3 more\nlegacy.js (9): const fs, +1 more\ntypes.ts (14): interface Options, +3 more\nview.tsx (7): function Hello\n',
    );
    const small = await e.ok('codebase_overview', { max_bytes: 400 });
    expect(Buffer.byteLength(small)).toBeLessThan(520);
    expect(small).toMatch(
      /\n\[… the rest of the tree is not shown: give a subdirectory as path, or raise max_bytes\]\n$/,
    );
  });
});

describe('code_symbols', () => {
  test('exact matches first, then prefix and substring; containers named; skipped paths not searched', async () => {
    const out = await e.ok('code_symbols', { query: 'Store' });
    const lines = out.trimEnd().split('\n');
    expect(lines[0]).toBe('rust/lib.rs:8:1: trait Store — pub trait Store');
    expect(lines[1]).toBe('src/legacy.js:3:1: class Store — class Store');
    expect(lines).toContain('rust/lib.rs:12:1: impl Store for Cache — impl Store for Cache');
    expect((await e.ok('code_symbols', { query: 'greet' })).split('\n')[0]).toBe(
      'src/greeter.ts:10:3: method greet (in Greeter) — greet(name: string): string',
    );
    expect(await e.ok('code_symbols', { query: 'hidden' })).toBe('no symbol matching "hidden" in 17 files\n');
  });

  test('regex, kinds, path and max_results', async () => {
    expect(await e.ok('code_symbols', { query: '/^(New|new_cache)$/' })).toBe(
      'go/server.go:18:1: func New — func New(port int) *Server\nrust/lib.rs:18:1: fn new_cache — pub fn new_cache() -> Cache\n',
    );
    expect(await e.ok('code_symbols', { query: 'o', kind: 'interface', path: 'src' })).toBe(
      'src/types.ts:1:8: interface Options — interface Options\n',
    );
    const capped = await e.ok('code_symbols', { query: 'e', max_results: 2 });
    expect(capped).toMatch(/\n\[\d+ more matches not shown: raise max_results or narrow the query\]\n$/);
    expect(await e.ok('code_symbols', { query: 'port', kind: 'key' })).toBe(
      'config.yaml:2:3: key port (in server) — port\n',
    );
  });

  test('a changed file is parsed again; unchanged ones come from the host’s cache', async () => {
    const before = (await e.env.ts.core.hosts.stats(
      e.env.ts.core.hosts.list().find((h) => h.name === 'codeintel')!.pid,
    )) as { outlines: { parsed: number; cached: number } };
    writeFileSync(join(e.root, 'src/extra.ts'), 'export function brandNewThing() {}\n');
    expect(await e.ok('code_symbols', { query: 'brandNewThing' })).toBe(
      'src/extra.ts:1:8: function brandNewThing — function brandNewThing()\n',
    );
    const after = (await e.env.ts.core.hosts.stats(
      e.env.ts.core.hosts.list().find((h) => h.name === 'codeintel')!.pid,
    )) as { outlines: { parsed: number; cached: number } };
    expect(after.outlines.parsed - before.outlines.parsed).toBe(1);
    expect(after.outlines.cached - before.outlines.cached).toBeGreaterThanOrEqual(17);
  });
});

describe('code_dependencies', () => {
  test('a file: imports with the files they resolve to', async () => {
    expect(await e.ok('code_dependencies', { path: 'src/greeter.ts' })).toBe(
      'src/greeter.ts: typescript, 2 dependencies\n1: import node:path (external)\n2: import ./types.js -> src/types.ts\n',
    );
    expect(await e.ok('code_dependencies', { path: 'py/app.py' })).toBe(
      'py/app.py: python, 3 dependencies\n1: import os (external)\n2: from .util -> py/util.py\n3: from collections (external)\n',
    );
    expect(await e.ok('code_dependencies', { path: 'c/main.c' })).toBe(
      'c/main.c: c, 2 dependencies\n1: include <stdio.h> (external)\n2: include util.h -> c/util.h\n',
    );
    expect(await e.ok('code_dependencies', { path: 'rust/lib.rs' })).toBe(
      'rust/lib.rs: rust, 2 dependencies\n1: use std::collections::HashMap (external)\n2: mod parser -> rust/parser.rs\n',
    );
    expect(await e.ok('code_dependencies', { path: 'src/legacy.js' })).toBe(
      'src/legacy.js: javascript, 1 dependency\n1: require fs (external)\n',
    );
  });

  test('a directory: every file, and the external packages counted', async () => {
    const out = await e.ok('code_dependencies', { path: '.' });
    expect(out.split('\n')[0]).toMatch(/^\.: 1[78] source files; external: /);
    expect(out).toContain('go/server.go:\n  4: import fmt (external)\n  5: import net/http (external)\n');
    expect(out).toContain('src/view.tsx:\n  1: import react (external)\n  2: import ./greeter -> src/greeter.ts\n');
    expect(out.split('\n')[0]).toContain('react (1)');
  });

  test('importers: who imports a file', async () => {
    expect(await e.ok('code_dependencies', { path: 'src/greeter.ts', importers: true })).toBe(
      'src/view.tsx:2: import ./greeter\n',
    );
    expect(await e.ok('code_dependencies', { path: 'py/app.py', importers: true })).toBe(
      'no file under . imports py/app.py\n',
    );
  });
});
