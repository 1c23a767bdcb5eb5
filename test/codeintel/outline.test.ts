/** code_outline on a file of each language, through toolsrv and the sandboxed codeintel host. */
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
const body = async (path: string, args: Record<string, unknown> = {}): Promise<string[]> => (await e.ok('code_outline', { path, ...args })).trimEnd().split('\n').slice(1);

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
    expect(await body('py/app.py')).toEqual(['5      variable LIMIT = 10', '7-13   class App', '8-9      def __init__(self, name)', '12-13    def title(self)', '15-16  def main()']);
  });

  test('Go: consts, structs, interfaces, functions and methods', async () => {
    expect(await body('go/server.go')).toEqual(['8      const DefaultPort', '10-12  struct Server', '14-16  interface Handler', '18-20  func New(port int) *Server', '22-25  func (s *Server) Start() error']);
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
    expect(await body('c/main.c')).toEqual(['4      #define MAX', '6-8    struct point', '7        field int x, y;', '10     typedef struct point point_t;', '12-14  static int add(int a, int b)', '16-19  function int main(void)']);
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
    expect(await body('package.json')).toEqual(['2    name', '3-5  scripts', '4      test', '6-8  dependencies', '7      react']);
    expect(await body('config.yaml')).toEqual(['1-5  server', '2      port', '3-5    hosts', '6    debug']);
    expect(await body('README.md')).toEqual(['1      # Fixture', '5        ## Install', '12       ## Usage', '15         ### Details']);
    expect(await body('scripts/build.sh')).toEqual(['2-4  function build()']);
  });

  test('errors come back as words for the model', async () => {
    const missing = await e.run('code_outline', { path: 'nope.ts' });
    expect(missing).toMatchObject({ status: 'exited', exit: 1 });
    expect(missing.output).toMatch(/^code_outline: .*nope\.ts: no such file\n$/);
    const dir = await e.run('code_outline', { path: 'src' });
    expect(dir.output).toBe('code_outline: src is a directory: code_outline takes one file (codebase_overview shows a tree)\n');
    const unknown = await e.run('code_outline', { path: '.gitignore' });
    expect(unknown.output).toMatch(/^code_outline: \.gitignore: this file is not a language known here/);
    const outside = await e.run('code_outline', { path: '/root/.bashrc' });
    expect(outside.exit).toBe(1);
  });
});
