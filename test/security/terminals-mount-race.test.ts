/**
 * The machine's devpts bound in a build chroot of the project, while another of the agent's processes swaps the
 * chroot's directory with a symlink to a decoy beside it (renameat2 RENAME_EXCHANGE, in a loop): the helper read the
 * mount point from the mount table, then bound the tool's own instance over that path, which by then could lead
 * through the symlink to the decoy. The bind covered the decoy, and the machine's instance, under the other name
 * for the moment, stayed the tool's: listed, its terminals the owner's. The helper as toolsrv runs it under the
 * shipped policy, as root, many calls in a mount namespace of the test's own.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { landlockStatus, loadPolicy, sandboxCommand } from '../../src/toolsrv/sandbox/index.js';
import { testDir } from '../helpers/temp-dir.js';
import { policyContext } from '../toolsrv/sandbox-helpers.js';

/** Exchanges the two paths argv[1] and argv[2] as fast as it can, until killed. */
const SWAPPER = `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
while True:
    libc.renameat2(-100, a, -100, b, 2)
`;

const CALLS = 200;

describe.skipIf(landlockStatus().abi < 1 || process.getuid?.() !== 0)(
  'the machine terminals, their mount point raced',
  () => {
    it("a chroot swapped with a symlink during the calls: the machine's devpts is never the tool's", async () => {
      const dir = testDir('ollie-sec-pts-race-');
      const home = join(dir, 'home');
      mkdirSync(join(home, 'chroot', 'dev', 'pts'), { recursive: true });
      mkdirSync(join(home, 'decoy', 'dev', 'pts'), { recursive: true });
      symlinkSync('decoy', join(home, 'link'));
      const machine = statSync('/dev/pts').dev;
      const policy = loadPolicy(policyContext(dir, { cwd: home, home }));
      const tool = [
        `for d in chroot link; do if ls "$d/dev/pts" >/dev/null 2>&1 && [ "$(stat -c %d "$d/dev/pts")" = ${machine} ]; then echo "reached $d"; fi; done`,
      ];
      const cmd = sandboxCommand(policy, ['/bin/sh', '-c', ['cd "$1"', ...tool].join('; '), 'sh', home]);
      const q = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
      const script = [
        `mount --bind /dev/pts ${q(join(home, 'chroot', 'dev', 'pts'))} || exit 1`,
        `/usr/bin/python3 -c ${q(SWAPPER)} ${q(join(home, 'chroot'))} ${q(join(home, 'link'))} & S=$!`,
        `for i in $(seq 1 ${CALLS}); do ${[cmd.file, ...cmd.args].map(q).join(' ')} 2>&1; done`,
        'kill $S; echo calls-done',
      ].join('\n');
      const child = spawn('unshare', ['-m', '--propagation', 'private', '/bin/sh', '-c', script], {
        env: cmd.env({ PATH: '/usr/bin:/bin', HOME: home }),
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (out += c.toString()));
      await new Promise((resolve) => child.on('close', resolve));
      expect(out).toContain('calls-done');
      expect(out).not.toContain('reached');
    }, 180_000);

    it("the machine's devpts bound twice on one path, and one hidden under a later mount: the calls run, none reached", () => {
      const dir = testDir('ollie-sec-pts-stacked-');
      const home = join(dir, 'home');
      mkdirSync(join(home, 'a', 'pts'), { recursive: true });
      mkdirSync(join(home, 'b', 'pts'), { recursive: true });
      const machine = statSync('/dev/pts').dev;
      const policy = loadPolicy(policyContext(dir, { cwd: home, home }));
      const tool = [
        `if ls a/pts >/dev/null 2>&1 && [ "$(stat -c %d a/pts)" = ${machine} ]; then echo reached a; fi`,
        'echo ran',
      ];
      const cmd = sandboxCommand(policy, ['/bin/sh', '-c', ['cd "$1"', ...tool].join('; '), 'sh', home]);
      const q = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
      const script = [
        `mount --bind /dev/pts ${q(join(home, 'a', 'pts'))} && mount --bind /dev/pts ${q(join(home, 'a', 'pts'))}`,
        `mount --bind /dev/pts ${q(join(home, 'b', 'pts'))} && mount -t tmpfs none ${q(join(home, 'b'))} || exit 1`,
        `exec ${[cmd.file, ...cmd.args].map(q).join(' ')}`,
      ].join('\n');
      const r = spawnSync('unshare', ['-m', '--propagation', 'private', '/bin/sh', '-c', script], {
        env: cmd.env({ PATH: '/usr/bin:/bin', HOME: home }),
        encoding: 'utf8',
      });
      const out = r.stdout + r.stderr;
      expect(out).toContain('ran');
      expect(out).not.toContain('reached');
      expect(out).not.toContain('moved');
    });
  },
);
