/**
 * The lsp_* tools against typescript-language-server on a fixture project (test/lsp/fixture), through a real
 * sandboxed toolsrv: the lsp host and the language server it starts run under Landlock.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import type { ProcResult } from '../../src/toolsrv/protocol.js';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { startEnv, until, type Env } from '../toolsrv/helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';

const LSP_TOOLS = [
  'lsp_hover',
  'lsp_definition',
  'lsp_references',
  'lsp_symbols',
  'lsp_diagnostics',
  'lsp_completion',
  'lsp_rename',
];
const FIXTURE = join(import.meta.dirname, 'fixture');

interface LspEnv {
  env: Env;
  c: Client;
  root: string;
  run(tool: string, args: Record<string, unknown>, c?: Client): Promise<ProcResult>;
  ok(tool: string, args: Record<string, unknown>): Promise<string>;
  stats(): Promise<{ started: Record<string, number>; servers: Array<{ id: string; pid: number; root: string }> }>;
  close(): Promise<void>;
}

async function lspEnv(hostIdleMs?: number): Promise<LspEnv> {
  buildNative();
  const root = mkdtempSync(join(tmpdir(), 'lsp-'));
  cpSync(FIXTURE, root, { recursive: true });
  // A file with type errors, written here so that the repository's own typecheck does not meet it.
  writeFileSync(
    join(root, 'src/broken.ts'),
    "import { makeGreeter } from './greeter.js';\n\nconst n: number = makeGreeter().greet(42);\nexport default n;\n",
  );
  const env = await startEnv(
    {},
    { yolo: false, toolDirs: [SHIPPED_TOOLS], cwd: root, ...(hostIdleMs !== undefined && { hostIdleMs }) },
  );
  const c = await env.client('agent1');
  await c.write('ctl', `load ${LSP_TOOLS.join(' ')}`);
  const run = (tool: string, args: Record<string, unknown>, cl = c): Promise<ProcResult> =>
    env.call(cl, { tool, args });
  return {
    env,
    c,
    root,
    run,
    async ok(tool, args) {
      const r = await run(tool, args);
      expect(r, r.output + (r.error ?? '')).toMatchObject({ status: 'exited', exit: 0 });
      return r.output;
    },
    async stats() {
      const h = env.ts.core.hosts.list().find((x) => x.name === 'lsp')!;
      return (await env.ts.core.hosts.stats(h.pid)) as Awaited<ReturnType<LspEnv['stats']>>;
    },
    async close() {
      await env.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

describe('lsp tools on typescript-language-server', () => {
  let e: LspEnv;
  beforeAll(async () => {
    e = await lspEnv();
  }, 60_000);
  afterAll(async () => {
    await e.close();
  });

  test('hover: the type and the doc comment, at a 1-based position', async () => {
    expect(await e.ok('lsp_hover', { path: 'src/main.ts', line: 4, column: 27 })).toBe(
      'src/main.ts:4:27\n\n```typescript\n(method) Greeter.greet(name: string): string\n```\nSays the greeting to `name`.\n',
    );
    expect(await e.ok('lsp_hover', { path: 'src/main.ts', line: 2, column: 1 })).toBe(
      'nothing to show at src/main.ts:2:1\n',
    );
  });

  test('definition and references, with the lines they are on', async () => {
    expect(await e.ok('lsp_definition', { path: 'src/main.ts', line: 3, column: 11 })).toBe(
      "src/greeter.ts:11:17: export function makeGreeter(greeting = 'Hello'): Greeter {\n",
    );
    expect(await e.ok('lsp_references', { path: 'src/greeter.ts', line: 11, column: 17 })).toBe(
      [
        '5 references:',
        "src/greeter.ts:11:17: export function makeGreeter(greeting = 'Hello'): Greeter {",
        "src/broken.ts:1:10: import { makeGreeter } from './greeter.js';",
        'src/broken.ts:3:19: const n: number = makeGreeter().greet(42);',
        "src/main.ts:1:10: import { makeGreeter } from './greeter.js';",
        "src/main.ts:3:11: const g = makeGreeter('Hi');",
        '',
      ].join('\n'),
    );
  });

  test('symbols: a file’s, nested, and the workspace’s by query', async () => {
    const doc = await e.ok('lsp_symbols', { path: 'src/greeter.ts' });
    expect(doc.split('\n')).toEqual(
      expect.arrayContaining([
        'src/greeter.ts:',
        '2:14  class Greeter',
        '6:3    method greet',
        '11:17  function makeGreeter',
      ]),
    );
    const ws = await e.ok('lsp_symbols', { path: 'src/main.ts', query: 'makeGreeter' });
    expect(ws).toContain('src/greeter.ts:11:1: function makeGreeter');
  });

  test('diagnostics: type errors, a clean file, and fresh results after the file changes on disk', async () => {
    expect(await e.ok('lsp_diagnostics', { path: 'src/broken.ts' })).toBe(
      "src/broken.ts:3:7: error [typescript 2322]: Type 'string' is not assignable to type 'number'.\nsrc/broken.ts:3:39: error [typescript 2345]: Argument of type 'number' is not assignable to parameter of type 'string'.\n",
    );
    expect(await e.ok('lsp_diagnostics', { path: 'src/main.ts' })).toBe('src/main.ts: no problems\n');
    writeFileSync(
      join(e.root, 'src/broken.ts'),
      "import { makeGreeter } from './greeter.js';\n\nconst n: number = makeGreeter().greet('x').length;\nexport default n;\n",
    );
    expect(await e.ok('lsp_diagnostics', { path: 'src/broken.ts' })).toBe('src/broken.ts: no problems\n');
  });

  test('completion at a position', async () => {
    const out = await e.ok('lsp_completion', { path: 'src/main.ts', line: 4, column: 27 });
    expect(out.split('\n')).toContain('greet (method)');
  });

  test('rename: a preview diff over every file, then applied, and the server sees the new texts', async () => {
    const before = readFileSync(join(e.root, 'src/main.ts'), 'utf8');
    const preview = await e.ok('lsp_rename', {
      path: 'src/greeter.ts',
      line: 11,
      column: 17,
      new_name: 'createGreeter',
    });
    expect(preview).toContain(
      "-export function makeGreeter(greeting = 'Hello'): Greeter {\n+export function createGreeter(greeting = 'Hello'): Greeter {\n",
    );
    expect(preview).toContain(
      "--- a/src/main.ts\n+++ b/src/main.ts\n@@ -1,5 +1,5 @@\n-import { makeGreeter } from './greeter.js';\n+import { createGreeter } from './greeter.js';\n",
    );
    expect(
      preview.endsWith('5 edits in 3 files: preview only, nothing written (call again with apply: true to write)\n'),
    ).toBe(true);
    expect(readFileSync(join(e.root, 'src/main.ts'), 'utf8')).toBe(before);
    const applied = await e.ok('lsp_rename', {
      path: 'src/greeter.ts',
      line: 11,
      column: 17,
      new_name: 'createGreeter',
      apply: true,
    });
    expect(applied.endsWith('5 edits in 3 files: applied\n')).toBe(true);
    expect(readFileSync(join(e.root, 'src/main.ts'), 'utf8')).toBe(before.replaceAll('makeGreeter', 'createGreeter'));
    expect(await e.ok('lsp_diagnostics', { path: 'src/main.ts' })).toBe('src/main.ts: no problems\n');
    expect(await e.ok('lsp_definition', { path: 'src/main.ts', line: 3, column: 11 })).toBe(
      "src/greeter.ts:11:17: export function createGreeter(greeting = 'Hello'): Greeter {\n",
    );
  });

  test('the server stays warm: one start for every call so far', async () => {
    const st = await e.stats();
    expect(st.started).toEqual({ typescript: 1 });
    expect(st.servers).toEqual([expect.objectContaining({ id: 'typescript', root: e.root })]);
  });

  test('files without a server, and servers not installed, are refused in words', async () => {
    writeFileSync(join(e.root, 'notes.md'), '# notes\n');
    const md = await e.run('lsp_hover', { path: 'notes.md', line: 1, column: 1 });
    expect(md.exit).toBe(1);
    expect(md.output).toMatch(/^lsp_hover: no language server for \.md \(known: /);
    writeFileSync(join(e.root, 'main.go'), 'package main\n');
    const c2 = await e.env.client('agent2');
    await c2.write('ctl', 'env PATH=/nonexistent\nload lsp_hover');
    const go = await e.run('lsp_hover', { path: 'main.go', line: 1, column: 1 }, c2);
    expect(go.output).toBe(
      'lsp_hover: no go language server here: gopls is not on PATH (install gopls (go install golang.org/x/tools/gopls@latest) and put it on PATH)\n',
    );
    const past = await e.run('lsp_hover', { path: 'src/main.ts', line: 99, column: 1 });
    expect(past.output).toBe('lsp_hover: line 99 is past the end of the file (6 lines)\n');
  });
});

test('a language server stops after the idle time, with its host', async () => {
  const e = await lspEnv(1500);
  try {
    await e.ok('lsp_hover', { path: 'src/main.ts', line: 4, column: 27 });
    const server = (await e.stats()).servers[0]!.pid;
    const host = e.env.ts.core.hosts.list()[0]!.pid;
    const alive = (pid: number): boolean => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    expect(alive(server)).toBe(true);
    await until(() => !alive(server) && !alive(host), 'the server and its host to exit', 10_000);
    // The next call starts both again.
    expect(await e.ok('lsp_hover', { path: 'src/main.ts', line: 4, column: 27 })).toContain('Greeter.greet');
  } finally {
    await e.close();
  }
}, 30_000);
