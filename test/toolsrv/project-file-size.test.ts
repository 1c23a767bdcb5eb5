/**
 * A project policy file is read and hashed in toolsrv's one thread whenever its stamp changes (at a call, and at
 * every MCP server re-check: every call's end and every 2 s). The agent writes the workspace: grown to gigabytes
 * and touched in a loop, it would have toolsrv read and hash them again and again, or (past 2 GiB) fail every call.
 * One larger than a policy is ignored unread, and a trusted one that grew stops the tools, as any change does.
 */
import { mkdirSync, mkdtempSync, realpathSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPolicy, PolicyError } from '../../src/toolsrv/sandbox/policy.js';
import { sha256, trustFile } from '../../src/toolsrv/sandbox/trust.js';
import { policyContext } from './sandbox-helpers.js';

function setUp(): { ctx: ReturnType<typeof policyContext>; file: string } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'ollie-project-size-')));
  const ctx = policyContext(dir);
  for (const d of [ctx.configDir, ctx.cwd, ctx.home!]) mkdirSync(d, { recursive: true });
  return { ctx, file: join(ctx.cwd, '.ollie-sandbox.yaml') };
}

describe('a project policy file larger than a policy', () => {
  it('is ignored without being read (a sparse 3 GiB one too)', () => {
    const { ctx, file } = setUp();
    writeFileSync(file, 'network:\n  enabled: false\n');
    truncateSync(file, 3 * 2 ** 30);
    const p = loadPolicy(ctx);
    expect(p.notices.join('\n')).toMatch(/is larger than 1048576 bytes, so it was ignored/);
  });

  it('stops the tools when it was trusted', () => {
    const { ctx, file } = setUp();
    writeFileSync(file, 'network:\n  enabled: false\n');
    writeFileSync(trustFile(ctx.configDir), `${sha256(Buffer.from('network:\n  enabled: false\n'))}\t${file}\n`, {
      mode: 0o600,
    });
    expect(() => loadPolicy(ctx)).not.toThrow();
    truncateSync(file, 2 * 2 ** 20);
    expect(() => loadPolicy(ctx)).toThrow(PolicyError);
    expect(() => loadPolicy(ctx)).toThrow(/was trusted, but it is larger than 1048576 bytes now/);
  });
});
