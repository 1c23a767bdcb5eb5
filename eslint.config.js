// ESLint 9 flat config. Syntax-only typescript-eslint rules (no type-aware linting, so it stays fast), plus the
// import layers of design.md, enforced with no-restricted-imports: code is grouped by where it may run, and a
// folder may not import what cannot run there. no-restricted-imports does not merge across config objects,
// so each layer below lists its complete set of restrictions, most specific layer last.
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
  regex: `${ours('olliesrv|toolsrv|cli|platform|devtools|main|preload')}|${ours('ninep/node(\\.js)?')}`,
  message: 'The renderer talks 9P only: it may import src/ninep/index (browser-safe), not daemon, Node or Electron code.',
};
const APP_CODE = {
  regex: ours('renderer|main|preload'),
  message: 'Daemon code (olliesrv, toolsrv, cli, platform) runs without Electron and may not import the app.',
};
const RENDERER_CODE = { regex: ours('renderer'), message: 'The renderer is reached over 9P, not imported.' };
/** An import that climbs out of src/ninep from a file `depth` folders below it. */
const escapesNinep = (depth) => ({
  regex: `^(\\.\\./){${depth + 1}}`,
  message: 'src/ninep is a standalone library: it imports nothing of ours from outside src/ninep.',
});

const restrict = (...patterns) => ({ 'no-restricted-imports': ['error', { patterns }] });

/** src/ninep at each depth (src/ninep/*.ts is depth 0), with `extra` restrictions for the subtree. */
const ninepLayer = (base, extra, maxDepth = 4) =>
  Array.from({ length: maxDepth + 1 }, (_, depth) => ({
    files: [`${base}/${'*/'.repeat(depth)}*.{ts,tsx}`],
    rules: restrict(escapesNinep(depth + base.split('/').length - 2), ELECTRON, REACT, ...extra),
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
    rules: restrict(NODE_BUILTINS, ELECTRON, DAEMON_CODE),
  },
  {
    files: ['src/olliesrv/**', 'src/toolsrv/**', 'src/cli/**', 'src/platform/**', 'src/devtools/**', 'src/webui/**', 'src/gateway/**', 'src/tools/**'],
    rules: restrict(ELECTRON, REACT, APP_CODE),
  },
  {
    files: ['src/main/**'],
    rules: restrict(REACT, RENDERER_CODE),
  },
  {
    // Sandboxed: only `electron` is available, and the preload must not grow into a second API.
    files: ['src/preload/**'],
    rules: restrict(NODE_BUILTINS, REACT, RENDERER_CODE, DAEMON_CODE),
  },
  // Deeper than ninepLayer's depths: at least no Electron or React.
  { files: ['src/ninep/**'], rules: restrict(ELECTRON, REACT) },
  ...ninepLayer('src/ninep', []),
  ...ninepLayer('src/ninep/common', [NODE_BUILTINS]),
);
