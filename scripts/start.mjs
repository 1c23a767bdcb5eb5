// `npm start`: the desktop app when the Electron binary is installed; otherwise olliesrv headless with the web
// UI (`ollie serve --ui`), whose URL (with its per-start token) is printed. Extra arguments go to `ollie serve`
// in headless mode (e.g. `npm start -- --ui-port 8765`).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);

/** The Electron executable, if its binary was downloaded (`require('electron')` throws when it was not). */
function electronBinary() {
  try {
    const path = createRequire(join(root, 'package.json'))('electron');
    return typeof path === 'string' && existsSync(path) ? path : undefined;
  } catch {
    return undefined;
  }
}

/** Newest modification time under `dir` (files only), 0 when it does not exist. */
function newest(dir) {
  if (!existsSync(dir)) return 0;
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/** Runs a build step; a failure is fatal only when there is no earlier build to fall back on. */
function step(what, args, output) {
  console.error(`ollie: ${what}…`);
  const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (r.status === 0) return;
  if (!existsSync(output)) {
    console.error(`ollie: ${what} failed`);
    process.exit(1);
  }
  console.error(`ollie: ${what} failed; running the previous build`);
}

/** dist/ (the daemons) and out/ (main, preload, renderer), rebuilt when missing or older than their sources. */
function build() {
  if (
    !existsSync(join(root, 'dist/cli/ollie.js')) ||
    newest(join(root, 'src/olliesrv')) > newest(join(root, 'dist/olliesrv'))
  ) {
    step(
      'building dist/ (npm run build:node)',
      [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.node.json'],
      join(root, 'dist/cli/ollie.js'),
    );
    // tsc wrote the unbundled dist/cli/ollie.js and dist/toolsrv/main.js (they work too): bundle them again.
    step(
      'bundling the ollie CLI and toolsrv (scripts/bundle.mjs)',
      [join(root, 'scripts/bundle.mjs'), '--quiet'],
      join(root, 'dist/cli/ollie.js'),
    );
  }
  const sources = Math.max(
    newest(join(root, 'src/renderer')),
    newest(join(root, 'src/main')),
    newest(join(root, 'src/preload')),
  );
  if (!existsSync(join(root, 'out/renderer/index.html')) || sources > newest(join(root, 'out'))) {
    step('building out/ (npm run build:app)', [join(root, 'node_modules/electron-vite/bin/electron-vite.js'), 'build']);
  }
}

/** Runs a child with the terminal attached, forwards SIGINT/SIGTERM to it, and exits as it exits. */
function run(cmd, args) {
  const child = spawn(cmd, args, { stdio: 'inherit' });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('error', (e) => {
    console.error(`ollie: could not start ${cmd}: ${e.message}`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => process.exit(code ?? (signal === 'SIGINT' ? 130 : 143)));
}

build();
const electron = electronBinary();
if (electron) {
  run(electron, [root, ...process.argv.slice(2)]);
} else {
  console.error(
    'ollie: the Electron binary is not installed (node_modules/electron has no dist/), so there is no window;',
  );
  console.error('ollie: serving the same UI to your browser instead (headless web mode). Open the URL below.');
  run(process.execPath, [join(root, 'dist/cli/ollie.js'), 'serve', '--ui', ...process.argv.slice(2)]);
}
