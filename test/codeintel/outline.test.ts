/** code_outline on a file of each language, through toolsrv and the sandboxed codeintel host. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { codeEnv, type CodeEnv } from './helpers.js';

let e: CodeEnv;
beforeAll(async () => {
  e = await codeEnv();
});
afterAll(async () => {
  await e.close();
});

/** The outline's lines without the header. */
const body = async (path: string, args: Record<string, unknown> = {}): Promise<string[]> =>
  (await e.ok('code_outline', { path, ...args })).trimEnd().split('\n').slice(1);

describe('code_outline', () => {
  test('TypeScript: classes with their members nested, functions, consts, arrow functions', async () => {
    const out = await e.ok('code_outline', { path: 'src/greeter.ts' });
    expect(out.split('\n')[0]).toBe('src/greeter.ts: typescript, 21 lines, 7 symbols');
    expect(await body('src/greeter.ts')).toEqual([
      '5-14   class Greeter',
      '6        private count',
      '8        constructor(readonly opts: Options)',
      '10-13    method greet(name: string): string',
      "16-18  function makeGreeter(prefix = 'hi'): Greeter",
      '20     const VERSION',
      '21     function shout',
    ]);
    expect(await body('src/types.ts')).toEqual([
      '1-4    interface Options',
      '2        property prefix: string',
      '3        property loud?: boolean',
      '6      type Name',
      '8      enum Mode',
      '10-14  namespace Util',
      '11-13    function id<T>(x: T): T',
    ]);
    expect(await body('src/greeter.ts', { max_depth: 0 })).toHaveLength(4);
  });

  test('TSX and JavaScript', async () => {
    expect(await body('src/view.tsx')).toEqual(['4-7  function Hello({ name }: { name: string })']);
    expect(await body('src/legacy.js')).toEqual(['1    const fs', '3-7  class Store', '4-6    method get(key)']);
  });

  test('Python: classes and methods (through decorators), functions, module constants', async () => {
    expect(await body('py/app.py')).toEqual([
      '5      variable LIMIT = 10',
      '7-13   class App',
      '8-9      def __init__(self, name)',
      '12-13    def title(self)',
      '15-16  def main()',
    ]);
  });

  test('Go: consts, structs, interfaces, functions and methods', async () => {
    expect(await body('go/server.go')).toEqual([
      '8      const DefaultPort',
      '10-12  struct Server',
      '14-16  interface Handler',
      '18-20  func New(port int) *Server',
      '22-25  func (s *Server) Start() error',
    ]);
  });

  test('Rust: items, traits and impls with their functions', async () => {
    expect(await body('rust/lib.rs')).toEqual([
      '2      mod parser;',
      '4-6    pub struct Cache',
      '8-10   pub trait Store',
      '9        fn get(&self, k: &str) -> Option<String>;',
      '12-16  impl Store for Cache',
      '13-15    fn get(&self, k: &str) -> Option<String>',
      '18-20  pub fn new_cache() -> Cache',
    ]);
  });

  test('C (tree-sitter-c) and C++ (namespaces, classes, functions in a namespace)', async () => {
    expect(await body('c/main.c')).toEqual([
      '4      #define MAX',
      '6-8    struct point',
      '7        field int x, y;',
      '10     typedef struct point point_t;',
      '12-14  static int add(int a, int b)',
      '16-19  function int main(void)',
    ]);
    expect(await body('c/util.h')).toEqual(['2    #define UTIL_H', '3    function int util_twice(int x);']);
    expect(await body('cpp/shape.cpp')).toEqual([
      '4-18   namespace geo',
      '6-10     class Shape',
      '8          method virtual double area() const = 0;',
      '9          field int sides;',
      '12-16    function double total(const std::vector<Shape*>& v)',
    ]);
  });

  test('JSON and YAML keys (two levels), Markdown headings outside code fences, shell functions', async () => {
    expect(await body('package.json')).toEqual([
      '2    name',
      '3-5  scripts',
      '4      test',
      '6-8  dependencies',
      '7      react',
    ]);
    expect(await body('config.yaml')).toEqual(['1-5  server', '2      port', '3-5    hosts', '6    debug']);
    expect(await body('README.md')).toEqual([
      '1      # Fixture',
      '5        ## Install',
      '12       ## Usage',
      '15         ### Details',
    ]);
    expect(await body('scripts/build.sh')).toEqual(['2-4  function build()']);
  });

  test('PHP, Java, Ruby and C# (grammars of @vscode/tree-sitter-wasm), with their imports', async () => {
    const files: Record<string, string> = {
      'more/app.php':
        '<?php\nnamespace App\\Models;\nuse Foo\\Bar;\nrequire_once "util.php";\nclass User extends Model {\n  private $name;\n  const MAX = 3;\n  public function area(): float { return 1.0; }\n}\nfunction helper($x) { return $x; }\n',
      'more/util.php': '<?php function u() {}\n',
      'more/Foo.java':
        'package a.b;\nimport java.util.List;\npublic class Foo<T> {\n  private int x, y;\n  public Foo() {}\n  public List<T> get(int i) { return null; }\n  enum E { A, B }\n}\n',
      'more/app.rb':
        "require 'json'\nrequire_relative 'util'\nmodule App\n  class User < Base\n    def initialize(name)\n      @name = name\n    end\n  end\nend\n",
      'more/util.rb': 'def u; end\n',
      'more/User.cs':
        'using System.Collections.Generic;\nnamespace App {\n  public class User {\n    private int x;\n    public void Run(int a) {}\n  }\n  interface IShape { double Area(); }\n}\n',
    };
    for (const [p, t] of Object.entries(files)) {
      mkdirSync(dirname(join(e.root, p)), { recursive: true });
      writeFileSync(join(e.root, p), t);
    }
    expect(await body('more/app.php')).toEqual([
      '2      namespace App\\Models;',
      '5-9    class User extends Model',
      '6        property $name',
      '7        const MAX = 3',
      '8        public function area(): float',
      '10     function helper($x)',
    ]);
    expect(await body('more/Foo.java')).toEqual([
      '3-8  public class Foo<T>',
      '4      field x',
      '4      field y',
      '5      public Foo()',
      '6      public List<T> get(int i)',
      '7      enum E',
      '7        constant A',
      '7        constant B',
    ]);
    expect(await body('more/app.rb')).toEqual([
      '3-9  module App',
      '4-8    class User < Base',
      '5-7      def initialize(name)',
    ]);
    expect(await body('more/User.cs')).toEqual([
      '2-8  namespace App',
      '3-6    public class User',
      '4        field x',
      '5        public void Run(int a)',
      '7      interface IShape',
      '7        method double Area();',
    ]);
    expect(await e.ok('code_dependencies', { path: 'more/app.php' })).toBe(
      'more/app.php: php, 2 dependencies\n3: use Foo\\Bar (external)\n4: require util.php -> more/util.php\n',
    );
    expect(await e.ok('code_dependencies', { path: 'more/app.rb' })).toBe(
      'more/app.rb: ruby, 2 dependencies\n1: require json (external)\n2: require util -> more/util.rb\n',
    );
    expect(await e.ok('code_dependencies', { path: 'more/Foo.java' })).toBe(
      'more/Foo.java: java, 1 dependency\n2: import java.util.List (external)\n',
    );
    expect(await e.ok('code_dependencies', { path: 'more/User.cs' })).toBe(
      'more/User.cs: csharp, 1 dependency\n1: using System.Collections.Generic (external)\n',
    );
  });

  test('errors come back as words for the model', async () => {
    const missing = await e.run('code_outline', { path: 'nope.ts' });
    expect(missing).toMatchObject({ status: 'exited', exit: 1 });
    expect(missing.output).toMatch(/^code_outline: .*nope\.ts: no such file\n$/);
    const dir = await e.run('code_outline', { path: 'src' });
    expect(dir.output).toBe(
      'code_outline: src is a directory: code_outline takes one file (codebase_overview shows a tree)\n',
    );
    const unknown = await e.run('code_outline', { path: '.gitignore' });
    expect(unknown.output).toMatch(/^code_outline: \.gitignore: this file is not a language known here/);
    const outside = await e.run('code_outline', { path: '/root/.bashrc' });
    expect(outside.exit).toBe(1);
  });
});
