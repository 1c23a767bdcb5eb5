/**
 * electron-vite builds the desktop app into out/: main (Node, ESM), preload (sandboxed, so CommonJS with
 * everything bundled) and renderer (React, served from out/renderer; also what `ollie serve --ui` serves).
 * Main bundles only its own code and the ninep client; olliesrv itself it loads from dist/ at run time, so
 * that the daemon's paths (dist/toolsrv/main.js, data/) are the ones `ollie serve` uses. Packages listed in
 * package.json "dependencies" stay external, as do Node builtins and electron.
 */
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { resolve } from 'node:path';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'electron-vite';

const root = import.meta.dirname;
const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { version: string };
const nodeBuiltins = builtinModules.flatMap((m) => [m, `node:${m}`]);

export default defineConfig({
  main: {
    build: {
      outDir: 'out/main',
      externalizeDeps: true,
      lib: { entry: resolve(root, 'src/main/index.ts') },
      rolldownOptions: {
        external: ['electron', /^electron\//, 'better-sqlite3', ...nodeBuiltins],
      },
    },
  },
  preload: {
    define: { __OLLIE_VERSION__: JSON.stringify(pkg.version) },
    build: {
      outDir: 'out/preload',
      // A sandboxed preload can require only `electron` (and a few builtins) and cannot be an ES module.
      externalizeDeps: false,
      lib: { entry: resolve(root, 'src/preload/index.ts') },
      rolldownOptions: {
        external: ['electron'],
        output: { format: 'cjs', entryFileNames: '[name].cjs' },
      },
    },
  },
  renderer: {
    root: resolve(root, 'src/renderer'),
    plugins: [react()],
    build: {
      outDir: resolve(root, 'out/renderer'),
      rolldownOptions: { input: resolve(root, 'src/renderer/index.html') },
    },
  },
});
