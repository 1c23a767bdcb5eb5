// Runs after `npm install`: tries to fetch the Electron binary (optional) and builds the native part (required).
// Electron's own install script downloads its binary from the web; on machines without that access it fails
// and would fail `npm install`. It is switched off in package.json's allowScripts and tried here instead,
// where a failure is only a warning: everything but the Electron window runs without the binary.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const installer = 'node_modules/electron/install.js';
if (existsSync(installer)) {
  const r = spawnSync(process.execPath, [installer], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 120_000 });
  if (r.status !== 0) {
    const why = (r.stderr?.toString() ?? '').trim().split('\n').pop() || r.error?.message || `exit ${r.status}`;
    console.warn(`ollie: the Electron binary could not be installed (${why}).`);
    console.warn('ollie: the desktop window is unavailable; `npm start` will run headless instead.');
  }
}

// The native sandbox helper and the C tools (scripts/build-native.mjs). Unlike Electron this is not optional:
// toolsrv fails closed without the sandbox, so a missing compiler fails the install with its message.
const build = spawnSync(process.execPath, ['scripts/build-native.mjs'], { stdio: 'inherit' });
if (build.status !== 0) process.exit(build.status ?? 1);
