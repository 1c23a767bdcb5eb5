/**
 * The project policy file is checked (a regular file of at most 1 MiB) and then read through the same descriptor,
 * but the agent writes the workspace while toolsrv reads it: a file that was empty or small at the check and that
 * a process of the agent's grows (a sparse truncate is instant) before the read must not be read past the bound —
 * else the bound only holds for files that stay still, and toolsrv reads and hashes gigabytes in its one thread.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadPolicy } from '../../src/toolsrv/sandbox/policy.js';
import { sha256 } from '../../src/toolsrv/sandbox/trust.js';
import { policyContext } from '../toolsrv/sandbox-helpers.js';

const stops: Array<() => void> = [];
afterEach(() => {
  for (const s of stops.splice(0)) s();
});

describe('a project policy file grown between its check and its read', () => {
  it('is never read past 1 MiB', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'ollie-project-race-')));
    const ctx = policyContext(dir);
    for (const d of [ctx.configDir, ctx.cwd, ctx.home!]) mkdirSync(d, { recursive: true });
    const file = join(ctx.cwd, '.ollie-sandbox.yaml');
    writeFileSync(file, '');
    // What the agent would run in a call beside others: the file flips between empty and 8 MiB (sparse).
    const flipper = spawn('sh', ['-c', `while :; do truncate -s 0 '${file}'; truncate -s 8M '${file}'; done`], {
      stdio: 'ignore',
    });
    stops.push(() => flipper.kill('SIGKILL'));
    await new Promise((r) => flipper.once('spawn', r));
    const empty = sha256(Buffer.alloc(0));
    const big = sha256(Buffer.alloc(8 << 20));
    let small = 0;
    let over = 0;
    // Enough reads that the flips land between check and read on the old code (it takes a few hundred).
    for (let i = 0; i < 1500 && over === 0; i++) {
      const notices = loadPolicy(ctx).notices.join('\n');
      // A read cut short by a flip to empty reads fewer bytes (a sha of its own): only the whole 8 MiB is over.
      if (notices.includes(big)) over++;
      else if (notices.includes(empty)) small++;
    }
    expect(small).toBeGreaterThan(0);
    expect(over).toBe(0);
  }, 60_000);
});
