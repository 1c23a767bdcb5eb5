/**
 * Second review of project policy files (src/toolsrv/sandbox/policy.ts projectFile): the file was checked with
 * lstat (a regular file, not a link) and then read by name, which follows a symlink put there in between. The
 * agent's shell can swap the name in a loop while its calls make toolsrv reload the policy; through a link to a
 * FIFO of its own the read blocks toolsrv's event loop for good (every session on that toolsrv), through
 * /dev/zero it reads until memory runs out. Here the link points to a regular file, and the attack shows as a
 * notice carrying that file's hash: the read went through the link.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { loadPolicy } from '../../src/toolsrv/sandbox/index.js';
import { policyContext } from '../toolsrv/sandbox-helpers.js';

test('the project file is read through the descriptor that was checked, never through a link swapped in', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ollie-sec-race-'));
  const ctx = policyContext(dir);
  mkdirSync(ctx.cwd);
  mkdirSync(ctx.home);
  const elsewhere = 'network:\n  enabled: false\n# read through the link\n';
  writeFileSync(join(dir, 'elsewhere.yaml'), elsewhere);
  writeFileSync(join(ctx.cwd, 'plain.yaml'), 'network:\n  enabled: false\n');
  const linkSha = createHash('sha256').update(elsewhere).digest('hex');
  // The agent's loop: the name is a regular file, then a link, then a regular file again…
  const swapper = spawn(
    'bash',
    [
      '-c',
      `cd ${ctx.cwd}; while :; do ln -sfn ${join(dir, 'elsewhere.yaml')} l.tmp; mv -T l.tmp .ollie-sandbox.yaml; cp plain.yaml f.tmp; mv -T f.tmp .ollie-sandbox.yaml; done`,
    ],
    // A group of its own: the mv or cp it runs when killed must die with it, not write into dir as it is removed.
    { stdio: 'ignore', detached: true },
  );
  const exited = new Promise((r) => swapper.once('exit', r));
  try {
    let throughLink = 0;
    const end = Date.now() + 4000;
    while (Date.now() < end && !throughLink) {
      for (let i = 0; i < 200; i++) {
        const notices = loadPolicy(ctx).notices.join('\n');
        if (notices.includes(linkSha)) throughLink++;
      }
      await new Promise((r) => setTimeout(r, 1));
    }
    expect(throughLink).toBe(0);
  } finally {
    process.kill(-swapper.pid!, 'SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
  }
}, 20_000);
