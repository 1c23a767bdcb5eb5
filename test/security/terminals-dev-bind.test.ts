/**
 * The machine's /dev bound (not recursively: `mount --bind /dev chroot/dev`, as chroot guides say) in a build chroot
 * of the project, under a policy that names neither /dev/pts nor /dev/ptmx. toolsrv asked the helper for the
 * terminals' isolation only where a rule reached a devpts mount, and such a bind brings no devpts along: the
 * helper was not asked, so its consoles and serial lines, denied under a rule on /dev, stayed the tool's through
 * the rule on the project. The helper under that policy, as root, the way toolsrv runs it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { landlockStatus, loadPolicy, PACKAGE_ROOT, sandboxCommand } from '../../src/toolsrv/sandbox/index.js';
import { testDir } from '../helpers/temp-dir.js';
import { policyContext } from '../toolsrv/sandbox-helpers.js';

const SHIPPED = readFileSync(join(PACKAGE_ROOT, 'data', 'sandbox.yaml'), 'utf8');
/** The machine's consoles, virtual consoles, their screens and a serial line: those this machine has are tried. */
const CONSOLES = ['/dev/console', '/dev/tty1', '/dev/tty0', '/dev/vcs', '/dev/vcsa1', '/dev/ttyS0'];

describe.skipIf(landlockStatus().abi < 1 || process.getuid?.() !== 0)('the machine /dev bound in the project', () => {
  it("without a rule on /dev/pts or /dev/ptmx, its consoles and serial lines are not the tool's", () => {
    const devices = CONSOLES.filter((d) => existsSync(d));
    expect(devices.length).toBeGreaterThan(0);
    const dir = testDir('ollie-sec-dev-bind-');
    const home = join(dir, 'home');
    const dev = join(home, 'chroot', 'dev');
    mkdirSync(dev, { recursive: true });
    const ctx = policyContext(dir, { cwd: home, home });
    mkdirSync(ctx.configDir, { recursive: true });
    const policy = SHIPPED.replace(/^ {4}- \/dev\/ptmx\n/m, '').replace(/^ {4}- \/dev\/pts\n/m, '');
    expect(policy).not.toMatch(/- \/dev\/pt/);
    writeFileSync(join(ctx.configDir, 'sandbox.yaml'), policy);
    const loaded = loadPolicy(ctx);
    expect(spawnSync('mount', ['--bind', '/dev', dev]).status).toBe(0);
    let out: string;
    try {
      const lines = [
        ...devices.map((d) => `(: > chroot${d}) 2>/dev/null && echo "opened chroot${d}"`),
        'echo x > chroot/dev/null && echo devices-work',
      ];
      const cmd = sandboxCommand(loaded, ['/bin/sh', '-c', ['cd "$1"', ...lines].join('; '), 'sh', home]);
      const r = spawnSync(cmd.file, cmd.args, {
        env: cmd.env({ PATH: '/usr/bin:/bin', HOME: home }),
        encoding: 'utf8',
        timeout: 30_000,
      });
      out = r.stdout + r.stderr;
    } finally {
      spawnSync('umount', [dev]);
    }
    expect(out).not.toContain('opened ');
    expect(out).toContain('devices-work');
  });
});
