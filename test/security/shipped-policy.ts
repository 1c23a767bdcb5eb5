/**
 * For test files that run a sandboxed toolsrv in-process under the shipped policy (the real spawner, helper and
 * kernel): a config dir of the file's own, so that what the machine's user has configured changes nothing, and
 * whatever `sandbox.yaml` a test writes there is gone before the next test.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { SPAWNER } from '../../src/platform/spawner.js';
import { landlockStatus } from '../../src/toolsrv/sandbox/index.js';
import { buildNative, shippedPolicyText } from '../toolsrv/sandbox-helpers.js';

/** Sets limits of the shipped policy (`{ memory: '256 MiB' }`) as the owner's sandbox.yaml at `file`. */
export function writeLimits(file: string, limits: Record<string, string>): void {
  let text = shippedPolicyText();
  for (const [k, v] of Object.entries(limits)) {
    const next = text.replace(new RegExp(`^(  ${k}: ).*$`, 'm'), `$1${v}`);
    if (next === text) throw new Error(`the shipped policy has no limit ${k}`);
    text = next;
  }
  writeFileSync(file, text);
}

/**
 * Registers the file's hooks: the native programs built (the spawner required), Landlock ABI 6 or later required
 * (the shipped policy scopes signals; loud, never a silent pass), `XDG_CONFIG_HOME` and `XDG_DATA_HOME` in a
 * temporary dir `prefix…` for the file's tests. Returns the path of the owner's `sandbox.yaml` there.
 */
export function useShippedPolicy(prefix: string): { userPolicy: () => string } {
  let xdg: string | undefined;
  const saved = { XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME, XDG_DATA_HOME: process.env.XDG_DATA_HOME };
  beforeAll(() => {
    buildNative();
    if (!existsSync(SPAWNER)) throw new Error(`these tests need ${SPAWNER}: run node scripts/build-native.mjs`);
    const ll = landlockStatus();
    if (ll.abi < 6)
      throw new Error(`these tests need Landlock ABI 6 or later; this kernel: ${ll.reason ?? `ABI ${ll.abi}`}`);
    xdg = mkdtempSync(join(tmpdir(), prefix));
    process.env.XDG_CONFIG_HOME = join(xdg, 'config');
    process.env.XDG_DATA_HOME = join(xdg, 'data');
    mkdirSync(join(xdg, 'config', 'ollie'), { recursive: true });
  });
  afterAll(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    if (xdg) rmSync(xdg, { recursive: true, force: true });
  });
  const userPolicy = () => {
    if (!xdg) throw new Error('useShippedPolicy: its beforeAll has not run');
    return join(xdg, 'config', 'ollie', 'sandbox.yaml');
  };
  afterEach(() => {
    if (xdg) rmSync(userPolicy(), { force: true });
  });
  return { userPolicy };
}
