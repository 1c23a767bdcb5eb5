/**
 * The trusted project file is found at the session's cwd, resolved. Where the agent may write the cwd's parent (a
 * cwd below a writable root: `rw: ["{HOME}"]` and a project in the home), it renames the project away and puts a
 * link to a directory of its own at its name: the resolved cwd is then elsewhere, no file trusted there, and the
 * trusted file's narrowing would be dropped for the broader base policy. A trusted file whose place no longer
 * resolves to where it was trusted stops the tools, as one that changed or went.
 */
import { mkdirSync, mkdtempSync, realpathSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPolicy, PolicyError } from '../../src/toolsrv/sandbox/policy.js';
import { sha256, trustFile } from '../../src/toolsrv/sandbox/trust.js';
import { policyContext } from '../toolsrv/sandbox-helpers.js';

describe('a trusted project file whose directory was renamed away and replaced by a link', () => {
  it('stops the tools rather than dropping its narrowing', () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'ollie-project-moved-')));
    const ctx = policyContext(dir);
    for (const d of [ctx.configDir, ctx.cwd, ctx.home!]) mkdirSync(d, { recursive: true });
    const text = 'network:\n  enabled: false\n';
    const file = join(ctx.cwd, '.ollie-sandbox.yaml');
    writeFileSync(file, text);
    writeFileSync(trustFile(ctx.configDir), `${sha256(Buffer.from(text))}\t${file}\n`, { mode: 0o600 });
    expect(loadPolicy(ctx).network.enabled).toBe(false);
    const elsewhere = join(dir, 'elsewhere');
    mkdirSync(elsewhere);
    renameSync(ctx.cwd, `${ctx.cwd}.old`);
    symlinkSync(elsewhere, ctx.cwd);
    expect(() => loadPolicy(ctx)).toThrow(PolicyError);
  });
});
