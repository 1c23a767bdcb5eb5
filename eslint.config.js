// ESLint 9 flat config. Syntax-only typescript-eslint rules (no type-aware linting, so it stays fast), plus the
// import layers of the project, enforced on static imports with no-restricted-imports and on dynamic import() with
// no-restricted-syntax: code is grouped by where it may run, and a folder may not import what cannot run there.
// Neither rule merges across config objects, so each layer below lists its complete set of restrictions, most
// specific layer (and the justified exceptions) last.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';

const alt = (names) => names.map((n) => n.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('|');
const builtins = builtinModules.filter((m) => !m.startsWith('_'));

/** Import restrictions, as regexes over the import specifier (`no-restricted-imports` patterns). */
const NODE_BUILTINS = {
  regex: `^(node:.*|(${alt(builtins)})(/.*)?)$`,
  message: 'Node builtins are not available here (browser or sandboxed code).',
};
const ELECTRON = { regex: '^electron(/.*)?$', message: 'Only src/main and src/preload may import electron.' };
const REACT = { regex: '^react(-dom)?(/.*)?$', message: 'Only src/renderer may import React.' };
/** A relative import (our own code) that reaches into one of `folders`. */
const ours = (folders) => `^\\.\\.?/(.*/)?(${folders})(/|$)`;
const DAEMON_CODE = {
  regex: `${ours('olliesrv|toolsrv|tools|cli|platform|devtools|gateway|webui|main|preload')}|${ours('ninep/node(\\.js)?')}`,
  message:
    'The renderer talks 9P only: it may import src/ninep/index (browser-safe), not daemon, Node or Electron code.',
};
const APP_CODE = {
  regex: ours('renderer|main|preload'),
  message: 'Daemon code (olliesrv, toolsrv, cli, platform) runs without Electron and may not import the app.',
};
const RENDERER_CODE = { regex: ours('renderer'), message: 'The renderer is reached over 9P, not imported.' };
/** toolsrv's internals: other programs use its wire protocol (protocol.ts) and its declared public entry (public.ts). */
const TOOLSRV_INTERNALS = {
  regex: '^\\.\\.?/(.*/)?toolsrv/(?!(protocol|public)\\.js$)',
  message:
    'Outside src/toolsrv, use only toolsrv/protocol.js (the wire protocol) and toolsrv/public.js (sandbox, trust, status).',
};
/** The gateway and the web UI are clients of the namespace, like any other. */
const DAEMON_INTERNALS = {
  regex: ours('olliesrv|toolsrv|tools|cli|devtools'),
  message: 'The gateway and the web UI reach the daemon over 9P (src/ninep), never by importing its code.',
};
/** An import that climbs out of src/ninep from a file `depth` folders below it. */
const escapesNinep = (depth) => ({
  regex: `^(\\.\\./){${depth + 1}}`,
  message: 'src/ninep is a standalone library: it imports nothing of ours from outside src/ninep.',
});

/**
 * Packages that may be loaded with a dynamic import(), each late for a reason. Any other dynamic import() is an
 * error unless a layer below allows it by name (LAZY_OURS), so that import() cannot be used to step around the
 * layers or to hide a dependency.
 */
const LAZY_PACKAGES = [
  // renderer (lib/highlight.ts): the highlighter and each grammar load with the first code block that needs them.
  'shiki/',
  // olliesrv (backend/tokens.ts): the exact tokenizer's tables (~60 MB in memory) load only near the window.
  'gpt-tokenizer/',
  // olliesrv (backend/*.ts): a provider's SDK loads with the first request to that provider.
  '@ai-sdk/',
  'ollama-ai-provider-v2',
  // cli (mcp.ts): the MCP SDK and zod load only for `ollie mcp`, a tenth of a second the other commands skip.
  '@modelcontextprotocol/sdk/',
  'zod',
  // olliesrv (skills/embed.ts): an optional dependency (289 MB); without it, search falls back to words.
  'onnxruntime-node',
];

/** A selector for ImportExpression sources matching `regex` (esquery regexes cannot contain a slash). */
const importSource = (regex) => `[source.value=/${regex.replaceAll('\\/', '/').replaceAll('/', '\\x2F')}/]`;
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/**
 * The rules of a layer: `patterns` refused in static imports and in import(); import() of anything but
 * LAZY_PACKAGES and `lazy` (exact specifiers of our own modules) refused too. `lazy: null` allows any import()
 * (for a file whose specifier is computed: see its exception below).
 */
const restrict = (patterns, { lazy = [] } = {}) => {
  const allowed = `^(${[...LAZY_PACKAGES.map(escape), ...(lazy ?? []).map((l) => `${escape(l)}$`)].join('|')})`;
  return {
    'no-restricted-imports': ['error', { patterns }],
    'no-restricted-syntax': [
      'error',
      ...patterns.map((p) => ({
        selector: `ImportExpression${importSource(p.regex)}`,
        message: `${p.message} (import())`,
      })),
      ...(lazy === null
        ? []
        : [
            {
              selector: `ImportExpression:not(${importSource(allowed)})`,
              message:
                'import() is for the packages in LAZY_PACKAGES and the modules a layer lists (eslint.config.js); import this statically, or add it there with the reason it loads late.',
            },
          ]),
    ],
  };
};

/** src/ninep at each depth (src/ninep/*.ts is depth 0), with `extra` restrictions for the subtree. */
const ninepLayer = (base, extra, maxDepth = 4) =>
  Array.from({ length: maxDepth + 1 }, (_, depth) => ({
    files: [`${base}/${'*/'.repeat(depth)}*.{ts,tsx}`],
    rules: restrict([escapesNinep(depth + base.split('/').length - 2), ELECTRON, REACT, ...extra]),
  }));

export default defineConfig(
  { ignores: ['dist/', 'out/', 'node_modules/', 'bench/results/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ['**/*.{js,mjs,cjs,ts,tsx}'],
    ignores: ['src/renderer/**'],
    languageOptions: { globals: { ...globals.node } },
  },
  {
    rules: {
      // Prettier owns the layout; this rule objects to the line breaks it makes (a chained call's `[...]` on its own
      // line), as eslint-config-prettier would turn it off.
      'no-unexpected-multiline': 'off',
      // `_`-prefixed names are deliberately unused (callback positions, destructuring).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['src/renderer/**'],
    languageOptions: { globals: { ...globals.browser } },
    rules: restrict([NODE_BUILTINS, ELECTRON, DAEMON_CODE]),
  },
  {
    files: ['src/olliesrv/**', 'src/toolsrv/**', 'src/cli/**', 'src/platform/**', 'src/devtools/**', 'src/tools/**'],
    rules: restrict([ELECTRON, REACT, APP_CODE, TOOLSRV_INTERNALS]),
  },
  {
    files: ['src/webui/**', 'src/gateway/**'],
    rules: restrict([ELECTRON, REACT, APP_CODE, DAEMON_INTERNALS]),
  },
  {
    // Each command loads its code when it runs: `ollie --help`, `o` and `ollie run -a` never load the daemon
    // (SQLite, the providers), and `ollie setup` dials a daemon only after saving.
    files: ['src/cli/**'],
    rules: restrict([ELECTRON, REACT, APP_CODE, TOOLSRV_INTERNALS], {
      lazy: [
        '../olliesrv/daemon.js',
        '../olliesrv/toolclient/spawn.js',
        '../webui/server.js',
        '../platform/front-door.js',
        '../gateway/http.js',
        '../toolsrv/public.js',
        '../ninep/node.js',
      ],
    }),
  },
  {
    // The embedder (and with it onnxruntime-node) loads only when a model is installed.
    files: ['src/olliesrv/memory/tool.ts'],
    rules: restrict([ELECTRON, REACT, APP_CODE, TOOLSRV_INTERNALS], { lazy: ['../skills/embed.js'] }),
  },
  {
    // A sandbox module named by toolsrv's options (tests replace the sandbox with one of their own).
    files: ['src/toolsrv/exec/confine.ts'],
    rules: restrict([ELECTRON, REACT, APP_CODE, TOOLSRV_INTERNALS], { lazy: null }),
  },
  {
    files: ['src/main/**'],
    rules: restrict([REACT, RENDERER_CODE]),
  },
  {
    // The app runs the daemon built in dist/ (by path, at run time): electron-vite bundles main, not the daemon.
    files: ['src/main/index.ts'],
    rules: restrict([REACT, RENDERER_CODE], { lazy: null }),
  },
  {
    // Sandboxed: only `electron` is available, and the preload must not grow into a second API.
    files: ['src/preload/**'],
    rules: restrict([NODE_BUILTINS, REACT, RENDERER_CODE, DAEMON_CODE]),
  },
  // Deeper than ninepLayer's depths: at least no Electron or React.
  { files: ['src/ninep/**'], rules: restrict([ELECTRON, REACT]) },
  ...ninepLayer('src/ninep', []),
  ...ninepLayer('src/ninep/common', [NODE_BUILTINS]),
);
