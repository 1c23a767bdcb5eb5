/** The built `ollie serve` (dist/cli/ollie.js) as a child process, on private dirs, for tests of the CLI itself. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

export const OLLIE_CLI = new URL('../../dist/cli/ollie.js', import.meta.url).pathname;

/**
 * Spawns `ollie serve --no-tools ...args` with its socket, config and data dirs in a fresh temp dir (named from
 * `prefix`), stdout and stderr piped. When the test ends, a process still running is killed and the dir removed.
 */
export function spawnServe(prefix: string, args: string[]): { p: ChildProcess; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const p = spawn(
    process.execPath,
    [
      OLLIE_CLI,
      'serve',
      '--no-tools',
      ...args,
      ...['--socket', join(dir, 'run', 'ollie.sock'), '--config', join(dir, 'config'), '--data', join(dir, 'data')],
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  onTestFinished(async () => {
    if (p.exitCode === null && p.signalCode === null) {
      p.kill('SIGKILL');
      await new Promise((r) => p.once('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  });
  return { p, dir };
}
