#!/usr/bin/env node
/**
 * Bundles the `ollie` CLI and the toolsrv entry it spawns into a few ESM files, over the tsc output in dist/:
 *
 *   dist/cli/ollie.js       the `ollie` bin (shebang and executable bit kept)
 *   dist/toolsrv/main.js    the toolsrv process (olliesrv spawns it by this path)
 *   dist/chunks/*.js        code shared by the two, and every lazy `import()` as a chunk of its own
 *
 * Why: Node 20 has no module compile cache, and `ollie run` otherwise resolves, reads and compiles some hundreds
 * of ES modules (ours, commander, the AI SDK, zod, yaml) before its first LLM request; one file per load step
 * is measurably faster (bench/agent-loop.mjs, "startup of ollie run"). Lazy imports stay lazy: rolldown splits
 * every dynamic `import()` into its own chunk. Everything else in dist/ stays the tsc output: the tests, the
 * Electron main, `ollie-9p`, `o` and the tool hosts use it as before.
 *
 * `import.meta.url` (and .dirname/.filename) in bundled code would name the bundle file, not the module's own
 * file, and code computes paths from it (data/, out/renderer, the toolsrv entry, createRequire). Every output
 * file sits two levels below the package root (dist/x/y.js), so each module's `import.meta.url` is rewritten to
 * the URL of its tsc output beside it (`new URL('../olliesrv/daemon.js', import.meta.url)`): the paths computed
 * from it are exactly those of the unbundled build.
 *
 * Native and binary packages (and those loaded or resolved by path) stay external, as do node builtins.
 *
 *   node scripts/bundle.mjs [--quiet]      (after tsc -p tsconfig.node.json; part of `npm run build:node`)
 */
import { chmodSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';

// Real paths: the bundler names modules by theirs, even when the checkout is reached through a symlink.
const root = realpathSync(join(dirname(fileURLToPath(import.meta.url)), '..'));
const src = realpathSync(join(root, 'src'));
const dist = join(root, 'dist');
const quiet = process.argv.includes('--quiet');

const ENTRIES = {
  'cli/ollie': join(src, 'cli', 'ollie.ts'),
  'toolsrv/main': join(src, 'toolsrv', 'main.ts'),
};

/** Loaded by path, shipping .node or .wasm files, or spawned: never bundled. */
const EXTERNAL_PACKAGES = [
  'better-sqlite3',
  'onnxruntime-node',
  'web-tree-sitter',
  '@vscode/tree-sitter-wasm',
  'tree-sitter-c',
  'tree-sitter-json',
  '@tree-sitter-grammars/tree-sitter-yaml',
  'typescript-language-server',
  'typescript',
  'ws',
  'electron',
  'shiki',
];
const builtins = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);
const isExternal = (id) =>
  builtins.has(id) || id.startsWith('node:') || EXTERNAL_PACKAGES.some((p) => id === p || id.startsWith(`${p}/`));

/** import.meta.url → the URL of the module's tsc output, relative to an output file two levels below the root. */
const metaUrlPlugin = {
  name: 'ollie-import-meta-url',
  transform: {
    filter: { id: /\.[cm]?[jt]s$/ },
    handler(code, id) {
      // (rolldown's own runtime, a virtual module, uses it for createRequire: right from any output file.)
      if (!code.includes('import.meta.') || id.startsWith('\0')) return null;
      // A bundled package that finds its files from import.meta would look beside the bundle: make it external.
      if (!id.startsWith(src + sep)) throw new Error(`${id} uses import.meta: add its package to EXTERNAL_PACKAGES`);
      const rel = relative(src, id)
        .split(sep)
        .join('/')
        .replace(/\.[cm]?ts$/, '.js');
      const url = `new URL(${JSON.stringify(`../${rel}`)}, import.meta.url)`;
      const out = code
        .replace(/\bimport\.meta\.url\b/g, `${url}.href`)
        .replace(/\bimport\.meta\.dirname\b/g, `__ollie_fileURLToPath(new URL('.', ${url})).replace(/\\/$/, '')`)
        .replace(/\bimport\.meta\.filename\b/g, `__ollie_fileURLToPath(${url})`);
      if (out === code) return null;
      if (!out.includes('__ollie_fileURLToPath')) return { code: out, map: null };
      // On the first line (after a shebang line, if any), so that no line moves and the source map still holds.
      const at = out.startsWith('#!') ? out.indexOf('\n') + 1 : 0;
      return {
        code: `${out.slice(0, at)}import { fileURLToPath as __ollie_fileURLToPath } from 'node:url'; ${out.slice(at)}`,
        map: null,
      };
    },
  },
};

rmSync(join(dist, 'chunks'), { recursive: true, force: true });
const t0 = performance.now();
const out = await build({
  input: ENTRIES,
  platform: 'node',
  external: isExternal,
  resolve: { extensionAlias: { '.js': ['.ts', '.js'] } },
  plugins: [metaUrlPlugin],
  logLevel: quiet ? 'warn' : 'info',
  write: true,
  output: {
    dir: dist,
    format: 'esm',
    entryFileNames: '[name].js',
    chunkFileNames: 'chunks/[name]-[hash].js',
    sourcemap: true,
    minify: false,
  },
});
chmodSync(join(dist, 'cli', 'ollie.js'), 0o755);
if (!quiet) {
  const chunks = readdirSync(join(dist, 'chunks')).filter((f) => f.endsWith('.js'));
  process.stdout.write(
    `bundled ${Object.keys(ENTRIES).length} entries and ${chunks.length} chunks into dist/ in ${Math.round(performance.now() - t0)} ms\n`,
  );
}
void out;
