/**
 * `ollie mcp` is the owner's when the owner runs it, and nobody's more than that: run by a model from inside the
 * sandbox (a scripted shell call, with Unix sockets allowed to tools so that it can even reach the daemon), it
 * dials as the process it is, and the daemon refuses it the owner's powers: it can neither list the sessions nor
 * create one, and nothing changes.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { policyWithUnixSockets } from '../toolsrv/sandbox-helpers.js';
import { attackerProfile, results } from './scripted-calls.js';

describe('ollie mcp run from inside the sandbox', () => {
  it('is not the owner: listing and creating sessions are refused, nothing is created', async () => {
    const h = await testHarness({ profiles: { attacker: attackerProfile(['shell']) } });
    writeFileSync(join(h.configDir, 'sandbox.yaml'), policyWithUnixSockets());
    const a = await h.agent({ profile: 'attacker' });
    const before = h.daemon.sessions.names();
    const requests = join(h.dir, 'mcp-requests.jsonl');
    writeFileSync(
      requests,
      [
        {
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'model', version: '1' } },
        },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_sessions', arguments: {} } },
        {
          jsonrpc: '2.0',
          id: 3,
          method: 'tools/call',
          params: { name: 'create_session', arguments: { name: 'pwned' } },
        },
      ]
        .map((m) => JSON.stringify(m))
        .join('\n') + '\n',
    );
    const cli = join(PACKAGE_ROOT, 'dist', 'cli', 'ollie.js');
    // The replies come before stdin ends: the calls are answered, then the session closes.
    const command = `(cat ${requests}; sleep 3) | node ${cli} mcp -a unix!${h.socket}`;
    h.mock.script([{ toolCalls: [{ name: 'shell', args: { command } }] }], [{ text: 'done' }]);
    const blocks = await h.turn(a.path, 'drive ollie as its owner', 30_000);
    const out = results(blocks).join('\n');
    const replies = out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { id: number; result?: { isError?: boolean; content: Array<{ text: string }> } });
    const call = (id: number) => replies.find((r) => r.id === id)?.result;
    expect(call(2)?.isError).toBe(true);
    expect(call(2)?.content[0]!.text).toMatch(/refused: pid \d+ is a process Ollie started/);
    expect(call(3)?.isError).toBe(true);
    expect(call(3)?.content[0]!.text).toMatch(/refused: pid \d+ is a process Ollie started/);
    expect(h.daemon.sessions.names()).toEqual(before);
    expect(h.daemon.sessions.has('pwned')).toBe(false);
  });
});
