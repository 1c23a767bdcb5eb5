/** code_query and code_rewrite (preview diffs, apply), through the sandboxed codeintel host. */
import { readFileSync } from 'node:fs';
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

describe('code_query', () => {
  test('captures with positions, node types and text; predicates; _captures hidden', async () => {
    const out = await e.ok('code_query', {
      path: 'src/greeter.ts',
      query: '(method_definition name: (property_identifier) @name) @method',
    });
    expect(out).toBe(
      'src/greeter.ts:8:3: @method method_definition: constructor(readonly opts: Options) {}\nsrc/greeter.ts:8:3: @name property_identifier: constructor\nsrc/greeter.ts:10:3: @method method_definition [lines 10-13]: greet(name: string): string {\nsrc/greeter.ts:10:3: @name property_identifier: greet\n',
    );
    const pred = await e.ok('code_query', {
      path: 'go/server.go',
      query:
        '(call_expression function: (selector_expression operand: (identifier) @_pkg field: (field_identifier) @fn) (#eq? @_pkg "fmt"))',
    });
    expect(pred).toBe(
      'go/server.go:23:6: @fn field_identifier: Println\ngo/server.go:24:33: @fn field_identifier: Sprint\n',
    );
  });

  test('a directory: files of every language the query compiles for; the others are named', async () => {
    const out = await e.ok('code_query', { query: '(class_declaration name: (_) @name)' });
    expect(out).toContain('src/greeter.ts:5:14: @name type_identifier: Greeter\n');
    expect(out).toContain('src/legacy.js:3:7: @name identifier: Store\n');
    expect(out).toMatch(/\[the query does not compile for python: .*; those files were skipped\]/);
    const onlyPy = await e.ok('code_query', {
      query: '(class_definition name: (identifier) @name)',
      language: 'python',
    });
    expect(onlyPy).toBe('py/app.py:7:7: @name identifier: App\n');
  });

  test('bad queries, Markdown and unknown languages are refused in words', async () => {
    const bad = await e.run('code_query', { path: 'src/greeter.ts', query: '(no_such_node) @x' });
    expect(bad.exit).toBe(1);
    expect(bad.output).toMatch(/^code_query: the query does not compile for typescript: /);
    const md = await e.run('code_query', { path: 'README.md', query: '(atx_heading) @h' });
    expect(md.output).toMatch(/no tree-sitter grammar for markdown/);
    const lang = await e.run('code_query', { query: '(x) @y', language: 'cobol' });
    expect(lang.output).toBe('code_query: unknown language "cobol"\n');
    expect(await e.ok('code_query', { path: 'src/types.ts', query: '(class_declaration) @c' })).toBe(
      'no matches in 1 file\n',
    );
  });

  test('max_results bounds the captures', async () => {
    const out = await e.ok('code_query', { query: '(identifier) @id', language: 'go', max_results: 3 });
    expect(out.split('\n').filter((l) => l.startsWith('go/'))).toHaveLength(3);
    expect(out).toMatch(/\[\d+ more captures not shown: raise max_results or narrow the query\]\n$/);
  });
});

describe('code_rewrite', () => {
  const renameCall = {
    query: '(call_expression function: (identifier) @fn (#eq? @fn "makeGreeter") arguments: (arguments) @args) @match',
    template: 'createGreeter$args',
  };

  test('a preview is a unified diff; nothing is written', async () => {
    const before = readFileSync(join(e.root, 'src/view.tsx'), 'utf8');
    const out = await e.ok('code_rewrite', { ...renameCall, path: 'src' });
    expect(out).toBe(`--- a/src/view.tsx
+++ b/src/view.tsx
@@ -2,6 +2,6 @@
 import { makeGreeter } from './greeter';
 
 export function Hello({ name }: { name: string }) {
-  const g = makeGreeter();
+  const g = createGreeter();
   return <div className="hello">{g.greet(name)}</div>;
 }
1 replacement in 1 file: preview only, nothing written (call again with apply: true to write)
`);
    expect(readFileSync(join(e.root, 'src/view.tsx'), 'utf8')).toBe(before);
  });

  test('apply writes; a named capture is the target; ${NAME} and $$ in templates', async () => {
    const out = await e.ok('code_rewrite', {
      path: 'py/app.py',
      query: '(function_definition name: (identifier) @name (#eq? @name "main")) ',
      capture: 'name',
      template: '${name}_entry',
      apply: true,
    });
    expect(out).toMatch(/^--- a\/py\/app\.py\n\+\+\+ b\/py\/app\.py\n@@ -12,5 \+12,5 @@\n/);
    expect(out).toContain('-def main():\n+def main_entry():\n');
    expect(out.endsWith('1 replacement in 1 file: applied\n')).toBe(true);
    expect(readFileSync(join(e.root, 'py/app.py'), 'utf8')).toContain('def main_entry():\n');
    const dollars = await e.ok('code_rewrite', {
      path: 'src/greeter.ts',
      query: '(string (string_fragment) @s (#eq? @s "1.0")) @match',
      template: "'$$$s'",
    });
    expect(dollars).toContain("-export const VERSION = '1.0';\n+export const VERSION = '$1.0';\n");
  });

  test('several files, overlapping matches skipped, template errors', async () => {
    const out = await e.ok('code_rewrite', { query: '(comment) @c', template: '/* gone */', language: 'go' });
    expect(out).toBe('no changes: the query matched nothing to rewrite in 1 file\n');
    const nested = await e.ok('code_rewrite', { path: 'src/types.ts', query: '(object_type) @o', template: '{}' });
    expect(nested).toBe('no changes: the query matched nothing to rewrite in 1 file\n');
    const overl = await e.ok('code_rewrite', {
      path: 'rust/lib.rs',
      query: '[(function_item) (impl_item)] @x',
      template: '/* x */',
    });
    expect(overl).toContain('(1 overlapping match skipped)');
    const bad = await e.run('code_rewrite', { path: 'src/greeter.ts', query: '(identifier) @id', template: '$nope' });
    expect(bad.output).toBe(
      'code_rewrite: the template names $nope, which the query does not capture (captures: @id)\n',
    );
  });
});
