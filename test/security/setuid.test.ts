/**
 * Set-uid files made in the sandbox (review of the kernel branch). Landlock does not govern a file's mode, and
 * a tool owns what it creates where it may write (as root: root's files). A set-uid copy of a shell left in the
 * workspace or $TMPDIR ran as root — or as the user — for any other local user who executed it: no_new_privs
 * holds inside the sandbox only. The filter refuses set-uid and set-gid modes however they are given (chmod,
 * fchmod, fchmodat, mknod, creating opens, openat2); other modes stay. Tried with the built helper, outside the
 * sandbox first so that the test can fail.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { loadPolicy, type SandboxPolicy } from '../../src/toolsrv/sandbox/index.js';
import {
  buildNative,
  makeWorld,
  runSandboxed,
  shippedPolicyText,
  writePolicy,
  type World,
} from '../toolsrv/sandbox-helpers.js';

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

function policy(): SandboxPolicy {
  writePolicy(w, shippedPolicyText());
  return loadPolicy(w);
}

const PLANT = `import os, shutil
shutil.copy("/bin/sh", "sh1")
def attempt(name, f):
    try:
        f(); print(name, "ok")
    except OSError as e:
        print(name, "refused", e.errno)
attempt("chmod", lambda: os.chmod("sh1", 0o4755))
attempt("chmod-g", lambda: os.chmod("sh1", 0o2755))
attempt("fchmod", lambda: os.fchmod(os.open("sh1", os.O_RDONLY), 0o4755))
attempt("open-creat", lambda: os.close(os.open("sh2", os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt("mknod", lambda: os.mknod("sh3", 0o104755))
attempt("plain", lambda: os.chmod("sh1", 0o755))
attempt("open-mode-unused", lambda: os.close(os.open("sh1", os.O_RDONLY, 0o4755)))
attempt("opendir", lambda: os.listdir("."))`;

const modes = (): string[] =>
  ['sh1', 'sh2', 'sh3'].map((f) => {
    try {
      return (statSync(join(w.cwd, f)).mode & 0o7777).toString(8);
    } catch {
      return '-';
    }
  });

describe('set-uid and set-gid files', () => {
  test('cannot be made in the workspace, by any of the calls that set a mode; plain modes can', async () => {
    const free = await runSandboxed(null, ['/usr/bin/python3', '-c', PLANT], { cwd: w.cwd, env: process.env });
    expect(free.out).toContain('chmod ok');
    expect(modes()).toEqual(['755', '4755', '4755']);
    for (const f of ['sh1', 'sh2', 'sh3'])
      await runSandboxed(null, ['/bin/rm', '-f', f], { cwd: w.cwd, env: process.env });

    const r = await runSandboxed(policy(), ['/usr/bin/python3', '-c', PLANT], {
      cwd: w.cwd,
      env: { ...process.env, HOME: w.home },
    });
    expect(r.out).toBe(
      'chmod refused 1\nchmod-g refused 1\nfchmod refused 1\nopen-creat refused 1\nmknod refused 1\nplain ok\nopen-mode-unused ok\nopendir ok\n',
    );
    expect(modes()).toEqual(['755', '-', '-']);
    // The shell's way.
    const sh = await runSandboxed(policy(), ['/bin/sh', '-c', 'chmod u+s sh1; chmod +x sh1 && echo x-ok'], {
      cwd: w.cwd,
      env: { ...process.env, HOME: w.home },
    });
    expect(sh.out).toBe("chmod: changing permissions of 'sh1': Operation not permitted\nx-ok\n");
    expect(modes()[0]).toBe('755');
  });
});
