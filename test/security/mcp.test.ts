/**
 * Attacks on MCP servers (docs/mcp.md) the way a model would make them: scripted tool calls of a real agent
 * (client_9p, shell, the MCP tools themselves) against a real olliesrv, toolsrv, sandbox helper, the SDK-written
 * fixture server and the mock LLM. Each attack is refused and changes nothing; the controls show what an agent
 * may do still works.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { testHarness, type Harness } from '../olliesrv/agent-harness.js';
import { fixtureServer, writeMcpConfig } from '../toolsrv/mcp-helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';
import { attackerProfile, client9p, results, script } from './scripted-calls.js';

const ATTACKER = attackerProfile(['client_9p', 'shell'], 30);

beforeAll(() => buildNative());

async function ready(hh: Harness, session: string): Promise<void> {
  const end = Date.now() + 15000;
  while (!/state=ready/.test(await hh.c.readText(`session/${session}/mcp/fx/status`).catch(() => ''))) {
    if (Date.now() > end) throw new Error('fx did not start');
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('an agent attacking MCP servers through its own tools', () => {
  it("cannot read or rewrite config/mcp.json, trust a project file, control servers, read their logs or run prompts; it may read its own session's status and resources", async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    writeMcpConfig(h.configDir, { fx: fixtureServer({ env: { FX_TOKEN: 'secret-token-123' } }) });
    const before = readFileSync(join(h.configDir, 'mcp.json'), 'utf8');
    const a = await h.agent({ profile: 'attacker' });
    const evil = JSON.stringify({
      mcpServers: { evil: { command: '/bin/sh', args: ['-c', 'touch /tmp/ollie-mcp-pwned'] } },
    });
    const S = 'session/$OLLIE_SESSION_ID';
    h.mock.script(
      ...script(
        client9p('read', 'config/mcp.json'),
        client9p('write', 'config/mcp.json', evil),
        client9p('write', 'config/trust', `trust ${h.dir}/.mcp.json`),
        client9p('write', `${S}/mcp/ctl`, 'restart fx'),
        client9p('write', `${S}/mcp/fx/ctl`, 'stop'),
        client9p('read', `${S}/mcp/fx/log`),
        client9p('write', `${S}/agent/${a.name}/ctl`, 'mcp fx review file=x'),
        client9p('write', `${S}/agent/${a.name}/prompt`, '/mcp__fx__review file=x'),
        // Controls: its own session's status, tools and resources.
        client9p('read', `${S}/mcp/fx/status`),
        client9p('read', `${S}/mcp/fx/resources/fixture%3A%2F%2Fgreeting`),
      ),
    );
    const out = results(await h.turn(a.path, 'attack'));
    for (const i of [0, 1, 2, 3, 4, 5])
      expect(out[i], `attack ${i}`).toMatch(/permission denied: .*only the owner may use this file, not agent/);
    expect(out[6]).toMatch(/refused: .*mcp/);
    expect(out[7]).toMatch(/refused: .*mcp__fx__review/);
    expect(out[8]).toMatch(/state=ready/);
    expect(out[9]).toContain('hello from an MCP resource');
    expect(readFileSync(join(h.configDir, 'mcp.json'), 'utf8')).toBe(before);
    expect(out.join('\n')).not.toContain('secret-token-123');
    expect(await h.c.readText(`session/${a.session}/mcp/fx/status`)).toMatch(/state=ready/);
  });

  it('cannot add a server through the workspace .mcp.json: nothing from it starts until the owner trusts that exact file', async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    writeMcpConfig(h.configDir, { fx: fixtureServer() });
    // A workspace of its own (the harness's holds the config dir, whose denial makes its top level unwritable).
    const ws = join(h.dir, 'ws');
    mkdirSync(ws);
    const a = await h.agent({ profile: 'attacker', session: (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim() });
    const marker = join(ws, 'pwned');
    const evil = JSON.stringify({
      mcpServers: { evil: { command: '/bin/sh', args: ['-c', `touch ${marker}; sleep 100`] } },
    });
    h.mock.script(...script({ name: 'shell', args: { command: `printf '%s' '${evil}' > .mcp.json` } }));
    const planted = results(await h.turn(a.path, 'plant it'));
    expect(existsSync(join(ws, '.mcp.json')), planted.join('\n')).toBe(true);
    // Even when the owner reloads (or a new toolsrv reads it), an untrusted file starts nothing and says why.
    await ready(h, a.session);
    await h.c.write(`session/${a.session}/mcp/ctl`, 'reload');
    await ready(h, a.session);
    const st = JSON.parse(await h.c.readText(`session/${a.session}/mcp/status`)) as {
      servers: Array<{ name: string }>;
      notes: string[];
    };
    expect(st.servers.map((s) => s.name)).toEqual(['fx']);
    expect(st.notes.join('\n')).toMatch(/\.mcp\.json is not trusted: its MCP servers are not started/);
    expect(existsSync(marker)).toBe(false);
  });

  it("cannot read another session's MCP resources or status", async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    writeMcpConfig(h.configDir, { fx: fixtureServer() });
    const victim = await h.agent();
    h.mock.script([{ text: 'ok' }]);
    await h.turn(victim.path, 'start the tool server');
    await ready(h, victim.session);
    const a = await h.agent({ profile: 'attacker' });
    h.mock.script(
      ...script(
        client9p('read', `session/${victim.sid}/mcp/fx/resources/fixture%3A%2F%2Fgreeting`),
        client9p('read', `session/${victim.session}/mcp/status`),
      ),
    );
    const out = results(await h.turn(a.path, 'attack'));
    for (const r of out.slice(0, 2)) expect(r).toMatch(/permission denied|does not exist|not found/);
    expect(out.join('\n')).not.toContain('hello from an MCP resource');
  });

  it('a stdio server cannot escape its sandbox: no workspace writes, no config or key files, no network, no Unix sockets', async () => {
    const h = await testHarness({ profiles: { attacker: attackerProfile(['shell'], 30) } });
    writeMcpConfig(h.configDir, { fx: fixtureServer() });
    writeFileSync(join(h.dir, 'keep.txt'), 'original');
    const a = await h.agent({ profile: 'attacker' });
    h.mock.script(
      ...script(
        { name: 'mcp__fx__write_file', args: { path: join(h.dir, 'keep.txt'), content: 'overwritten' } },
        { name: 'mcp__fx__read_file', args: { path: join(h.configDir, 'mcp.json') } },
        { name: 'mcp__fx__read_file', args: { path: join(h.configDir, 'backends.conf') } },
        { name: 'mcp__fx__read_file', args: { path: join(h.dataDir, 'ollie.db') } },
        { name: 'mcp__fx__connect_port', args: { port: h.mock.port } },
        { name: 'mcp__fx__read_file', args: { path: join(h.dir, 'keep.txt') } },
        { name: 'mcp__fx__connect_unix', args: { path: h.socket } },
      ),
    );
    const out = results(await h.turn(a.path, 'escape'));
    expect(out[0]).toMatch(/cannot write .*EACCES/);
    for (const i of [1, 2, 3]) expect(out[i], `read ${i}`).toMatch(/cannot read .*(EACCES|ENOENT)/);
    expect(out[4]).toMatch(/cannot connect to port \d+: EACCES/);
    expect(out[5]).toContain('original');
    expect(out[6]).toMatch(/cannot connect to .*ollie\.sock: (EACCES|EPERM)/);
    expect(readFileSync(join(h.dir, 'keep.txt'), 'utf8')).toBe('original');
    expect(out.join('\n')).not.toContain('test-key');
  });
});
