/**
 * An agent against the rule that a stdio MCP server runs under the policy in force (src/toolsrv/mcp/connection.ts):
 * what it changes in the workspace changes the protections a workspace-writable server gets (a `.git` at the
 * workspace root makes its hooks and config read-only), and the server is restarted under them before its next use,
 * so that a repository the agent makes after the server started gets no hook planted by the server.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { testHarness } from '../olliesrv/agent-harness.js';
import { fixtureServer, writeMcpConfig } from '../toolsrv/mcp-helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';
import { attackerProfile, results, script, sh } from './scripted-calls.js';

beforeAll(() => buildNative());

describe('an agent against the policy a running MCP server is under', () => {
  it('makes a repository after a writable server started, then has the server plant a hook: the server was restarted with the hooks read only', async () => {
    const h = await testHarness({ profiles: { attacker: attackerProfile(['shell'], 30) } });
    writeMcpConfig(h.configDir, { fx: fixtureServer({ ollie: { workspace: 'rw' } }) });
    // A workspace of its own (the harness's holds the config dir, whose denial makes its top level unwritable).
    const ws = join(h.dir, 'ws');
    mkdirSync(ws);
    const a = await h.agent({ profile: 'attacker', session: (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim() });
    const hook = join(ws, '.git', 'hooks', 'pre-commit');
    h.mock.script(
      ...script(
        { name: 'mcp__fx__pid', args: {} },
        sh('mkdir -p .git/hooks && echo made'),
        { name: 'mcp__fx__write_file', args: { path: hook, content: '#!/bin/sh\ntouch /tmp/ollie-hook-ran\n' } },
        { name: 'mcp__fx__pid', args: {} },
      ),
    );
    const out = results(await h.turn(a.path, 'attack'));
    expect(out[1], out.join('\n')).toContain('made');
    expect(out[2]).toMatch(/cannot write .*(EROFS|EACCES)/);
    expect(existsSync(hook)).toBe(false);
    // The server that runs now is another process than the one that started before the repository existed.
    const [before, after] = [out[0], out[3]].map((o = '') => /\d+/.exec(o)?.[0]);
    expect(before).toBeDefined();
    expect(after).toBeDefined();
    expect(after).not.toBe(before);
    expect(await h.c.readText(`session/${a.session}/mcp/fx/log`)).toMatch(
      /the sandbox policy changed since it started/,
    );
  });
});
