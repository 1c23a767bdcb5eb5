// `npm start`: the desktop app when the Electron binary is installed, otherwise olliesrv headless.
// Extra arguments go to `ollie serve` in headless mode (e.g. `npm start -- --tcp 127.0.0.1:5640`).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
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

/** Runs a child with the terminal attached, forwards SIGINT/SIGTERM to it, and exits as it exits. */
function run(args) {
  const child = spawn(process.execPath, args, { stdio: 'inherit' });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('error', (e) => {
    console.error(`ollie: could not start ${args[0]}: ${e.message}`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => process.exit(code ?? (signal === 'SIGINT' ? 130 : 143)));
}

if (electronBinary()) {
  // Builds main, preload and renderer into out/ and launches Electron on them.
  run([join(root, 'node_modules/electron-vite/bin/electron-vite.js'), 'preview']);
} else {
  console.error('ollie: the Electron binary is not installed (node_modules/electron has no dist/), so there is no window;');
  console.error('ollie: running olliesrv headless instead. Talk to it with `ollie-9p`, e.g. `node dist/cli/ollie-9p.js ls /`.');
  const cli = join(root, 'dist/cli/ollie.js');
  if (!existsSync(cli)) {
    // dist/ is built by `npm run build:node` (the `prepare` script); build it if it is missing.
    const r = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.node.json'], { stdio: 'inherit' });
    if (r.status !== 0 || !existsSync(cli)) {
      console.error('ollie: building dist/ failed; run `npm run build:node` and try again.');
      process.exit(1);
    }
  }
  run([cli, 'serve', ...process.argv.slice(2)]);
}
