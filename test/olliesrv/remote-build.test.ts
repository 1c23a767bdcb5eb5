/**
 * The remote package as a host of another architecture gets it: the shipped files unpacked into a fresh directory
 * and the helpers built there from the shipped C sources with `cc` (remote.ts's buildScript, the script the
 * install runs there), then the sandbox helper probed: it runs and reports the kernel's Landlock ABI.
 */
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildScript, remotePackage } from '../../src/olliesrv/toolclient/remote.js';
import { TOOLSRV_ENTRY } from '../../src/olliesrv/toolclient/spawn.js';

const root = join(TOOLSRV_ENTRY, '..', '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'ollie-remote-build-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(spawnSync('cc', ['--version']).status !== 0)('building the helpers on the remote', () => {
  it('builds ollie-sandbox, its tool links and ollie-spawner from the shipped sources', () => {
    const { files } = remotePackage();
    expect(files).toContain('native/ollie-sandbox.c');
    const pack = spawnSync('sh', ['-c', `tar -cf - -C "${root}" --no-recursion -T - | tar -xf - -C "${dir}"`], {
      input: `${files.join('\n')}\n`,
    });
    expect(pack.status, pack.stderr?.toString()).toBe(0);
    const build = spawnSync('/bin/sh', ['-c', `set -e\n${buildScript(files)}`], { cwd: dir, encoding: 'utf8' });
    expect(build.status, build.stderr).toBe(0);
    expect(lstatSync(join(dir, 'native/build/ollie-spawner')).isFile()).toBe(true);
    expect(readlinkSync(join(dir, 'native/build/file_read'))).toBe('ollie-sandbox');
    const probe = spawnSync(join(dir, 'native/build/ollie-sandbox'), ['--probe'], { encoding: 'utf8' });
    expect(probe.stdout).toMatch(/abi|landlock/i);
  }, 120_000);
});
