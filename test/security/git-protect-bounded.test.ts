/**
 * An agent against the cost of keeping its repository's hooks and configuration read-only (sandbox/protected.ts),
 * which toolsrv looks up at every command and every MCP server re-check, in its one thread. `.git/worktrees` stays
 * writable in a protected repository (git writes there), so an agent fills it with thousands of entries, each of
 * which would be looked at, pinned and its `commondir` kept read-only: every later call paid for each, and with long
 * names the sandbox helper's argv grew past what the kernel starts. Past a repository's count the directory is kept
 * read-only as a whole instead, and calls still run.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { testHarness } from '../olliesrv/agent-harness.js';
import { plant, repo, sandboxReady } from './git-workspace.js';

describe.skipIf(!sandboxReady)('an agent that fills .git/worktrees of a protected repository', () => {
  it('makes 4000 entries with long names: its next calls run, and .git/worktrees is then read only', async () => {
    const h = await testHarness();
    const ws = repo(h.dir, 'ws');
    const long = 'w'.repeat(200);
    const r = await plant(
      h,
      ws,
      `i=0; while [ $i -lt 4000 ]; do mkdir .git/worktrees/${long}$i 2>/dev/null || mkdir -p .git/worktrees/${long}$i; echo ../.. > .git/worktrees/${long}$i/commondir; i=$((i+1)); done; echo made $(ls .git/worktrees | wc -l)`,
      'echo alive',
      'mkdir .git/worktrees/more; echo more=$?; echo x > f && git add f && git -c user.name=a -c user.email=a@x commit -qm work && echo committed',
    );
    expect(r[0], r.join('\n')).toContain('made 4000');
    expect(r[1], r.join('\n')).toContain('alive');
    expect(r[2], r.join('\n')).toMatch(/Read-only file system[\s\S]*more=1/);
    expect(r[2]).toContain('committed');
    expect(existsSync(join(ws, '.git', 'worktrees', 'more'))).toBe(false);
    expect(readFileSync(join(ws, '.git', 'worktrees', `${long}0`, 'commondir'), 'utf8')).toBe('../..\n');
  }, 120_000);
});
