/**
 * The machine's terminals where it has many mounts of them. The helper kept the first 512 devpts and devtmpfs
 * mounts of its mount table (and looked at the first 64 devtmpfs ones), so the machine's devpts bound a 513th time
 * under the project stayed the machine's, reachable through the rule on the project; and it denied the terminal
 * devices of every /dev a rule covers in a list of 512, so a project with the machine's /dev bound in a few build
 * chroots failed every call ("too many --deny options"). The mounts are made in a mount namespace of the test's own
 * (`unshare -m`), the helper run in it under the shipped policy, as toolsrv runs it, as root.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { landlockStatus, loadPolicy, sandboxCommand } from '../../src/toolsrv/sandbox/index.js';
import { testDir } from '../helpers/temp-dir.js';
import { policyContext } from '../toolsrv/sandbox-helpers.js';

/** Runs `lines` under the helper (cwd and HOME `dir/home`), in a mount namespace where `setup` ran first. */
function runWithMounts(dir: string, setup: string, lines: string[]) {
  const home = join(dir, 'home');
  mkdirSync(home, { recursive: true });
  const policy = loadPolicy(policyContext(dir, { cwd: home, home }));
  const cmd = sandboxCommand(policy, ['/bin/sh', '-c', ['cd "$1"', ...lines].join('; '), 'sh', home]);
  const r = spawnSync(
    'unshare',
    ['-m', '--propagation', 'private', '/bin/sh', '-c', `${setup} && exec "$@"`, 'sh', cmd.file, ...cmd.args],
    { env: cmd.env({ PATH: '/usr/bin:/bin', HOME: home }), encoding: 'utf8', timeout: 120_000 },
  );
  return { out: r.stdout + r.stderr, status: r.status };
}

describe.skipIf(landlockStatus().abi < 1 || process.getuid?.() !== 0)('the machine terminals under many names', () => {
  it("the machine's devpts bound 600 times in the project: none of them is reached", () => {
    const dir = testDir('ollie-sec-pts-many-');
    const machine = statSync('/dev/pts').dev;
    const setup = `for i in $(seq 1 600); do mkdir -p "${dir}/home/c$i" && mount --bind /dev/pts "${dir}/home/c$i" || exit 1; done`;
    const { out } = runWithMounts(dir, setup, [
      // Listed (a rule reaches it) and the machine's: the owner's terminals are there.
      `for d in $(seq -f c%g 1 600); do if ls "$d" >/dev/null 2>&1 && [ "$(stat -c %d "$d")" = ${machine} ]; then echo "reached $d"; fi; done`,
      'echo checked',
    ]);
    expect(out).toContain('checked');
    expect(out).not.toContain('reached');
  }, 180_000);

  it("the machine's /dev bound 80 times in the project: the calls run, and no console is reached", () => {
    const dir = testDir('ollie-sec-dev-many-');
    const setup = `for i in $(seq 1 80); do mkdir -p "${dir}/home/d$i" && mount --bind /dev "${dir}/home/d$i" || exit 1; done`;
    const { out } = runWithMounts(dir, setup, [
      'for d in $(seq -f d%g 1 80); do (: > "$d/console") 2>/dev/null && echo "opened $d/console"; done',
      'echo x > d80/null && echo devices-work',
    ]);
    expect(out).not.toContain('too many');
    expect(out).not.toContain('opened ');
    expect(out).toContain('devices-work');
  }, 180_000);
});
