/**
 * A running stdio MCP server against the rule that it never keeps rights the policy in force no longer gives it,
 * not even between uses or in the middle of one (src/toolsrv/mcp/connection.ts, recheck): toolsrv re-checks its
 * servers at every tool call's end and every RECHECK_MS, and restarts or stops them at once.
 *
 * - An agent has a workspace-writable server wait, in a background call, to plant a hook in a repository the agent
 *   makes meanwhile: the call ends with the reason when the shell call that made `.git` ends, and no hook is written.
 * - The owner narrows sandbox.yaml while a server is idle: it is restarted without any use, under the narrower policy.
 * - A trusted project file is tampered with while a server runs: the server is stopped at once and says why.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { testHarness, type Harness } from '../olliesrv/agent-harness.js';
import { fixtureServer, ROOT, writeMcpConfig } from '../toolsrv/mcp-helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';
import { until } from '../wait.js';
import { attackerProfile, results, script, sh } from './scripted-calls.js';

beforeAll(() => buildNative());

/** A session in a workspace of its own (the harness's dir holds the config dir, whose denial makes it unwritable). */
async function setup(server: Record<string, unknown>, before?: (h: Harness, ws: string) => void | Promise<void>) {
  const h = await testHarness({ profiles: { attacker: attackerProfile(['shell'], 30) } });
  writeMcpConfig(h.configDir, { fx: fixtureServer(server) });
  const ws = join(h.dir, 'ws');
  mkdirSync(ws);
  await before?.(h, ws);
  const a = await h.agent({ profile: 'attacker', session: (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim() });
  const status = async (): Promise<Record<string, string>> =>
    Object.fromEntries(
      (await h.c.readText(`session/${a.session}/mcp/fx/status`))
        .split('\n')
        .filter(Boolean)
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
  await until(async () => (await status()).state === 'ready', 'the server to be ready', 20_000);
  return { h, ws, a, status };
}

describe('a running MCP server against a policy that changed under it', () => {
  it('waits in a background call to plant a hook in the repository the agent makes meanwhile: the call ends with the reason, no hook', async () => {
    const { h, ws, a } = await setup({ ollie: { workspace: 'rw' } });
    const hook = join(ws, '.git', 'hooks', 'pre-commit');
    h.mock.script(
      ...script(
        // Started before any repository exists: the server then has no protected .git.
        {
          name: 'mcp__fx__write_file',
          args: {
            path: hook,
            content: '#!/bin/sh\ntouch /tmp/ollie-hook-ran\n',
            after: join(ws, 'go'),
            background: true,
          },
        },
        sh('mkdir -p .git/hooks && echo made'),
        sh('touch go && echo go'),
      ),
      // The background call's end comes back as a prompt.
      [{ text: 'noted' }],
    );
    const out = results(await h.turn(a.path, 'attack'));
    expect(out[0], out.join('\n')).toMatch(/started in the background/);
    expect(out[1]).toContain('made');
    expect(out[2]).toContain('go');
    // However the call ended, it has ended: its interrupt came back (or, on a server left running, the hook is there).
    const interrupt = await until(
      async () =>
        existsSync(hook) ||
        (await h.blocks(a.path)).find((b) => b.role === 'user' && b.content.startsWith('<system-proc-interrupt'))
          ?.content,
      'the background call to end',
      20_000,
    );
    expect(existsSync(hook)).toBe(false);
    expect(interrupt).toContain('the sandbox policy changed while it ran: restarted under the policy in force');
    expect(await h.c.readText(`session/${a.session}/mcp/fx/log`)).toMatch(
      /the sandbox policy changed since it started/,
    );
  }, 60_000);

  it('is idle when the owner denies a path in sandbox.yaml: it restarts without a use, and the path is denied to it', async () => {
    let secret = '';
    const { h, a, status } = await setup({}, (_h, ws) => {
      mkdirSync(join(ws, 'secrets'));
      secret = join(ws, 'secrets', 'key.txt');
      writeFileSync(secret, 'owner-secret\n');
    });
    h.mock.script(...script({ name: 'mcp__fx__read_file', args: { path: secret } }));
    expect(results(await h.turn(a.path, 'read'))[0]).toContain('owner-secret');
    const pid = (await status()).pid;
    expect(Number(pid)).toBeGreaterThan(0);
    // The owner narrows the policy: no tool call, no use of the server follows.
    const file = join(h.configDir, 'sandbox.yaml');
    const before = readFileSync(existsSync(file) ? file : join(ROOT, 'data', 'sandbox.yaml'), 'utf8');
    const narrowed = before.replace(/^ {2}deny:\n/m, '  deny:\n    - "{CWD}/secrets"\n');
    expect(narrowed).not.toBe(before);
    writeFileSync(file, narrowed);
    await until(
      async () => {
        const s = await status();
        return s.state === 'ready' && s.pid !== pid && Number(s.pid) > 0;
      },
      'the server to be restarted under the narrower policy',
      15_000,
    );
    expect(await h.c.readText(`session/${a.session}/mcp/fx/log`)).toMatch(
      /the sandbox policy changed since it started: restarting it/,
    );
    h.mock.script(...script({ name: 'mcp__fx__read_file', args: { path: secret } }));
    expect(results(await h.turn(a.path, 'read again')).at(-1)).toMatch(/cannot read .*(EACCES|EPERM|ENOENT)/);
  }, 60_000);

  it('runs when the trusted project file is tampered with: it is stopped at once, says why, and is not used again', async () => {
    const { h, ws, a, status } = await setup({}, async (h, ws) => {
      writeFileSync(join(ws, '.ollie-sandbox.yaml'), 'network:\n  enabled: false\n');
      await h.c.write('config/trust', `trust ${join(ws, '.ollie-sandbox.yaml')}\n`);
    });
    const pid = Number((await status()).pid);
    expect(pid).toBeGreaterThan(0);
    expect(await h.c.readText(`session/${a.session}/mcp/fx/log`)).not.toMatch(/refuses/);
    // Changed from outside any tool call (an editor, a process the agent left behind): the periodic check sees it.
    writeFileSync(join(ws, '.ollie-sandbox.yaml'), 'network:\n  enabled: false\n# changed\n');
    const stopped = await until(
      async () => {
        const s = await status();
        return s.state === 'stopped' ? s : undefined;
      },
      'the server to be stopped',
      15_000,
    );
    expect(stopped.error).toMatch(/the sandbox policy in force refuses it: .*was trusted, but/);
    expect(stopped.pid).toBe('0');
    // Its process is gone, not only disowned.
    await until(() => !existsSync(`/proc/${pid}`) || /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8')));
    h.mock.script(...script({ name: 'mcp__fx__pid', args: {} }));
    expect(results(await h.turn(a.path, 'use it')).at(-1)).toMatch(
      /MCP server fx is stopped \(the sandbox policy in force refuses it: .*was trusted, but/,
    );
    expect((await status()).state).toBe('stopped');
    // The owner trusts the file as it is now: the server starts again under it, without a reload.
    await h.c.write('config/trust', `trust ${join(ws, '.ollie-sandbox.yaml')}\n`);
    await until(async () => (await status()).state === 'ready', 'the server to start again', 15_000);
    expect(Number((await status()).pid)).not.toBe(pid);
    expect(await h.c.readText(`session/${a.session}/mcp/fx/log`)).toMatch(/allows it again: starting it/);
  }, 60_000);
});
