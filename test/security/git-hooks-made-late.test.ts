/**
 * An agent against the rule that a writable repository's `.git/hooks` and `.git/config` stay read-only to tools
 * (src/toolsrv/sandbox/protected.ts) when the repository is one it made itself, after its session's toolsrv had
 * already run calls in that workspace: the protection is looked up at every call (sandbox/index.ts, protectArgs),
 * not cached with the policy's other flags, so the call after the one that made `.git` cannot plant a hook.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { testHarness } from '../olliesrv/agent-harness.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';
import { attackerProfile, results, script, sh } from './scripted-calls.js';

beforeAll(() => buildNative());

describe('an agent against the hooks of a repository it makes during its session', () => {
  it('runs a call, makes .git, then writes a hook and the config in the next call: both are read only', async () => {
    const h = await testHarness({ profiles: { attacker: attackerProfile(['shell'], 30) } });
    // A workspace of its own (the harness's holds the config dir, whose denial makes its top level unwritable).
    const ws = join(h.dir, 'ws');
    mkdirSync(ws);
    const a = await h.agent({ profile: 'attacker', session: (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim() });
    h.mock.script(
      ...script(
        // A first call: the policy of this cwd is loaded and its flags made, before any repository exists.
        sh('echo first'),
        sh('mkdir -p .git/hooks && touch .git/config && echo made'),
        sh('echo "#!/bin/sh" > .git/hooks/pre-commit; echo hook=$?; echo "[core]" >> .git/config; echo config=$?'),
      ),
    );
    const out = results(await h.turn(a.path, 'attack'));
    expect(out[1], out.join('\n')).toContain('made');
    expect(out[2]).toMatch(/Read-only file system[\s\S]*hook=1/);
    expect(out[2]).toMatch(/config=1/);
    expect(existsSync(join(ws, '.git', 'hooks', 'pre-commit'))).toBe(false);
  }, 60_000);
});
