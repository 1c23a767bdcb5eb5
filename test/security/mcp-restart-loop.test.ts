/**
 * An agent against the cost of re-checking its session's MCP servers (src/toolsrv/mcp/connection.ts, recheck):
 * every call that changes what the policy depends on (here a new `.git/worktrees` entry, which a workspace-writable
 * server's sandbox pins) made toolsrv kill the server and start a new process at that call's end, with no bound, so
 * quick calls made servers start as fast as the agent liked, each a process of their own outside the agent's limits.
 * Restarts for the policy that follow one another within a minute now wait, doubling; the server's rights are taken
 * back at once all the same, and it serves again once the agent stops.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { testHarness } from '../olliesrv/agent-harness.js';
import { fixtureServer, writeMcpConfig } from '../toolsrv/mcp-helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';
import { until } from '../wait.js';
import { attackerProfile, results, script, sh } from './scripted-calls.js';

beforeAll(() => buildNative());

describe('an agent that changes the policy its MCP server depends on at every call', () => {
  it('makes a new .git/worktrees entry in 16 calls in a row: the server is not restarted 16 times', async () => {
    const h = await testHarness({ profiles: { attacker: attackerProfile(['shell'], 40) } });
    writeMcpConfig(h.configDir, { fx: fixtureServer({ ollie: { workspace: 'rw' } }) });
    const ws = join(h.dir, 'ws');
    mkdirSync(ws);
    execFileSync('git', ['init', '-q'], { cwd: ws });
    const a = await h.agent({ profile: 'attacker', session: (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim() });
    const status = async (): Promise<Record<string, string>> =>
      Object.fromEntries(
        (await h.c.readText(`session/${a.session}/mcp/fx/status`))
          .split('\n')
          .filter(Boolean)
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      );
    await until(async () => (await status()).state === 'ready', 'the server to be ready', 20_000);
    const calls = Array.from({ length: 16 }, (_, i) => sh(`mkdir -p .git/worktrees/w${i} && echo made ${i}`));
    h.mock.script(...script(...calls));
    const made = results(await h.turn(a.path, 'flip', 60_000));
    expect(made.at(-1), made.join('\n')).toContain('made 15');
    const restarts = Number((await status()).restarts);
    expect(restarts).toBeGreaterThan(0);
    expect(restarts).toBeLessThanOrEqual(5);
    // It serves again, under the policy in force.
    h.mock.script(...script({ name: 'mcp__fx__pid', args: {} }));
    expect(results(await h.turn(a.path, 'use it', 90_000)).at(-1)).toMatch(/^\d+/);
    expect((await status()).state).toBe('ready');
  }, 180_000);
});
