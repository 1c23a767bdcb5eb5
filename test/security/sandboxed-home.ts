/**
 * A shell script run under the sandbox helper in a home the default policy makes writable (cwd = $HOME), as root
 * (a mount namespace) or as nobody (a user namespace first), the way a tool of the owner's or of another user runs.
 */
import { spawnSync } from 'node:child_process';
import { chownSync } from 'node:fs';
import { join } from 'node:path';
import { loadPolicy, sandboxCommand } from '../../src/toolsrv/sandbox/index.js';
import { policyContext } from '../toolsrv/sandbox-helpers.js';

export type RunAs = 'root' | 'nobody';

/**
 * Runs `lines` (joined by `; `, after a `cd` to the home) sandboxed, with `dir` holding the home (`dir/home`), the
 * owner's config (`dir/config`) and the helper's data, runtime and temporary dirs; `dir` is first given to the
 * user it runs as. Returns what the script printed, stdout then stderr.
 */
export function runInHome(as: RunAs, dir: string, lines: string[]): string {
  const home = join(dir, 'home');
  if (as === 'nobody') spawnSync('chown', ['-R', '-h', 'nobody:nogroup', dir]);
  else chownSync(dir, 0, 0);
  const ctx = policyContext(dir, { cwd: home, home });
  const cmd = sandboxCommand(loadPolicy(ctx), ['/bin/sh', '-c', ['cd "$1"', ...lines].join('; '), 'sh', home]);
  // loadPolicy made the temporary dir, as root: the user the script runs as must own it.
  if (as === 'nobody') spawnSync('chown', ['-R', 'nobody:nogroup', ctx.tmpDir]);
  const run = spawnSync(
    as === 'nobody' ? 'setpriv' : cmd.file,
    as === 'nobody' ? ['--reuid=nobody', '--regid=nogroup', '--clear-groups', cmd.file, ...cmd.args] : cmd.args,
    { env: cmd.env({ PATH: '/usr/bin:/bin', HOME: home }), encoding: 'utf8' },
  );
  return run.stdout + run.stderr;
}
