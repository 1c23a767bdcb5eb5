/**
 * The policy's `limits:` section: the shipped values, the user's overrides, a project that may only lower them,
 * and errors naming file and line. (Enforcement is attacked in test/security/containment.test.ts.)
 */
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { loadPolicy, PolicyError } from '../../src/toolsrv/sandbox/index.js';
import { DEFAULT_LIMITS, describeLimit } from '../../src/toolsrv/sandbox/limits.js';
import { makeWorld, shippedPolicyText, writePolicy, type World } from './sandbox-helpers.js';

let w: World;
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

function policyError(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyError);
    return (e as Error).message;
  }
  throw new Error('no error thrown');
}

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

describe('limits', () => {
  test('the shipped policy sets what a file without the section gets', () => {
    expect(loadPolicy(w).limits).toEqual({
      processes: 256,
      memory: 2 * GiB,
      cpu: 600,
      fileSize: 4 * GiB,
      openFiles: 4096,
      output: 64 * MiB,
    });
    expect(loadPolicy(w).limits).toEqual(DEFAULT_LIMITS);
    writePolicy(w, 'env: [PATH]\n');
    expect(loadPolicy(w).limits).toEqual(DEFAULT_LIMITS);
  });

  test('the user sets them: counts, sizes with units, unlimited', () => {
    writePolicy(
      w,
      'limits:\n  processes: 1000\n  memory: 512M\n  file_size: unlimited\n  output: 1.5 GiB\n  open_files: 100\n  cpu_seconds: 30\n',
    );
    expect(loadPolicy(w).limits).toEqual({
      processes: 1000,
      memory: 512 * MiB,
      cpu: 30,
      fileSize: 0,
      openFiles: 100,
      output: 1.5 * GiB,
    });
  });

  test('a project lowers them, and only lowers them', () => {
    writePolicy(w, shippedPolicyText());
    const file = writePolicy(w, 'limits:\n  memory: 1 GiB\n  processes: 64\n', 'project');
    expect(loadPolicy(w).limits).toMatchObject({ memory: GiB, processes: 64, cpu: 600 });
    writePolicy(w, 'limits:\n  cpu_seconds: 6000\n', 'project');
    expect(policyError(() => loadPolicy(w))).toBe(
      `${file}:2: limits.cpu_seconds: a project file can only lower a limit of ${w.configDir}/sandbox.yaml`,
    );
    writePolicy(w, '\nlimits:\n  memory: unlimited\n', 'project');
    expect(policyError(() => loadPolicy(w))).toBe(
      `${file}:3: limits.memory: a project file can only lower a limit of ${w.configDir}/sandbox.yaml`,
    );
    // Where the user has none, a project may set one.
    writePolicy(w, 'limits:\n  memory: unlimited\n');
    writePolicy(w, 'limits:\n  memory: 3 GiB\n', 'project');
    expect(loadPolicy(w).limits.memory).toBe(3 * GiB);
  });

  test('mistakes are errors at their line', () => {
    const file = writePolicy(w, 'env: [PATH]\nlimits:\n  memory: lots\n');
    expect(policyError(() => loadPolicy(w))).toBe(
      `${file}:3: limits.memory: must be a size in bytes, or with a unit (512 MiB, 2 GiB) greater than 0, or unlimited (got "lots")`,
    );
    writePolicy(w, 'limits:\n  processes: -1\n');
    expect(policyError(() => loadPolicy(w))).toBe(
      `${file}:2: limits.processes: must be a whole number greater than 0, or unlimited (got -1)`,
    );
    writePolicy(w, 'limits:\n  threads: 5\n');
    expect(policyError(() => loadPolicy(w))).toBe(
      `${file}:2: limits.threads: unknown setting (known: processes, memory, cpu_seconds, file_size, open_files, output)`,
    );
    writePolicy(w, 'limits: 5\n');
    expect(policyError(() => loadPolicy(w))).toBe(`${file}:1: limits: must be a mapping`);
  });

  test('in words, as results give them', () => {
    expect(describeLimit('memory', 2 * GiB)).toBe('2 GiB');
    expect(describeLimit('memory', 1.5 * GiB)).toBe('1.5 GiB');
    expect(describeLimit('output', 64 * MiB)).toBe('64 MiB');
    expect(describeLimit('cpu', 300)).toBe('300 s');
    expect(describeLimit('processes', 256)).toBe('256');
    expect(describeLimit('fileSize', 0)).toBe('unlimited');
  });
});
