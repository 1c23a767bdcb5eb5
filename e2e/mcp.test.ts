/**
 * MCP servers end to end: a real olliesrv, its real toolsrv and sandbox helper, the SDK-written fixture server over
 * stdio, and an agent scripted through the mock LLM. The agent finds a deferred MCP tool with tool_search and calls
 * it; calls another by name without loading it; the server's sandbox refuses a workspace write and the network,
 * and the bypass the model then asks for goes to the person; a crash restarts the server; resources and prompts
 * are reached through the session's namespace and /mcp.
 */
import { createServer, type Server } from 'node:net';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Turn } from '../src/devtools/mock-llm/server.js';
import { harness, type Harness } from '../test/olliesrv/agent-harness.js';
import { fixtureServer, writeMcpConfig } from '../test/toolsrv/mcp-helpers.js';
import { buildNative } from '../test/toolsrv/sandbox-helpers.js';

let h: Harness | undefined;
let port: Server | undefined;
afterEach(async () => {
  port?.close();
  port = undefined;
  await h?.close();
  h = undefined;
});
beforeAll(() => buildNative());

const call = (name: string, args: Record<string, unknown>): Turn => [{ toolCalls: [{ name, args }] }];
const done: Turn = [{ text: 'done' }];

interface OpenAiBody {
  messages: Array<{ role: string; content: string }>;
  tools?: Array<{ function: { name: string } }>;
}
const toolNames = (b: unknown): string[] => ((b as OpenAiBody).tools ?? []).map((t) => t.function.name);

async function until<T>(fn: () => Promise<T | undefined | false>, ms = 15000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > end) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('an agent with MCP servers', () => {
  it('finds a deferred MCP tool with tool_search, calls it, and calls another by name without loading it', async () => {
    h = await harness({
      turns: [
        call('tool_search', { query: 'echoes text reversed upper-cased' }),
        call('mcp__fx__echo', { text: 'abc' }),
        done,
        call('mcp__fx__add', { a: 2, b: 3 }),
        done,
      ],
    });
    writeMcpConfig(h.configDir, { fx: fixtureServer() });
    const a = await h.agent();
    let blocks = await h.turn(a.path, 'reverse abc');
    const first = h.mock.requests.find((r) => r.path.includes('/chat/completions'))!.body as OpenAiBody;
    // Deferred: no MCP schema in the first request; the system prompt names the server and its tool count only.
    expect(toolNames(first).filter((n) => n.startsWith('mcp__'))).toEqual([]);
    expect(toolNames(first)).toContain('tool_search');
    expect(first.messages[0]!.content).toMatch(/MCP servers, tools named mcp__SERVER__TOOL .*: fx \(9 tools\)/);
    expect(blocks.find((b) => b.role === 'tool' && b.name === 'tool_search')!.content).toMatch(
      /loaded mcp__fx__echo: Echoes the text/,
    );
    // Loaded: its schema goes out from the next request on, and the call ran on the server.
    const chat = h.mock.requests.filter((r) => r.path.includes('/chat/completions'));
    expect(toolNames(chat[1]!.body)).toContain('mcp__fx__echo');
    expect(blocks.filter((b) => b.role === 'tool').at(-1)!.content).toContain('echo: CBA');

    blocks = await h.turn(a.path, 'add 2 and 3');
    expect(blocks.filter((b) => b.role === 'tool').at(-1)!.content).toContain('5');
    const last = h.mock.requests.filter((r) => r.path.includes('/chat/completions')).at(-1)!.body;
    expect(toolNames(last)).toContain('mcp__fx__add');
  });

  it("config/mcp.json: a bad write is refused naming the server and field; a good one restarts the running session's servers", async () => {
    h = await harness({ turns: [done] });
    writeMcpConfig(h.configDir, { fx: fixtureServer() });
    const a = await h.agent();
    await h.turn(a.path, 'start');
    const dir = `session/${a.session}/mcp`;
    await until(async () => /state=ready/.test(await h!.c.readText(`${dir}/fx/status`)));
    const file = join(h.configDir, 'mcp.json');
    await expect(
      h.c.write(
        'config/mcp.json',
        JSON.stringify({ mcpServers: { fx: fixtureServer(), bad: { type: 'http', url: 'ftp://x' } } }),
      ),
    ).rejects.toThrow(`${file}: mcpServers.bad: url: ftp: is not http: or https:`);
    await expect(h.c.write('config/mcp.json', '{"mcpServers": [')).rejects.toThrow(`${file}: not valid JSON`);
    await h.c.write('config/mcp.json', JSON.stringify({ mcpServers: { fx: fixtureServer(), fx2: fixtureServer() } }));
    await until(
      async () =>
        JSON.parse(await h!.c.readText(`${dir}/status`)).servers.filter((s: { state: string }) => s.state === 'ready')
          .length === 2,
    );
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('the server runs sandboxed: a workspace write and the network are refused; the bypass the model asks for waits for the person', async () => {
    port = createServer((s) => s.end('hello from the port'));
    await new Promise<void>((r) => port!.listen(0, '127.0.0.1', r));
    const p = (port.address() as { port: number }).port;
    h = await harness({
      turns: [
        call('mcp__fx__write_file', { path: 'pwned.txt', content: 'x' }),
        done,
        call('mcp__fx__connect_port', { port: p }),
        call('mcp__fx__connect_port', { port: p, bypass: true }),
        done,
      ],
    });
    writeMcpConfig(h.configDir, { fx: fixtureServer() });
    const a = await h.agent();
    let blocks = await h.turn(a.path, 'write');
    expect(blocks.filter((b) => b.role === 'tool').at(-1)!.content).toMatch(/cannot write pwned\.txt: EACCES/);
    expect(existsSync(join(h.dir, 'pwned.txt'))).toBe(false);

    const agent = h.daemon.agents.all().find((x) => x.id === a.aid)!;
    const ended = agent.nextTurn();
    await h.c.write(`${a.path}/prompt`, 'connect');
    const req = await until(async () => (await h!.c.readText(`session/${a.session}/bypass`)).split('\n').find(Boolean));
    const cols = req.split('\t');
    expect(cols[2]).toBe('mcp__fx__connect_port');
    expect(cols[4]).toBe(`mcp__fx__connect_port {"port":${p}}`);
    await h.c.write(`session/${a.session}/bypass`, `${cols[0]} approve once`);
    await ended;
    blocks = await h.blocks(a.path);
    const tools = blocks.filter((b) => b.role === 'tool');
    expect(tools.at(-2)!.content).toMatch(/cannot connect to port \d+: EACCES/);
    expect(tools.at(-1)!.content).toContain('connected: hello from the port');
  });

  it('a crashing server is restarted and the agent carries on; status, resources and prompts through session/S/mcp', async () => {
    h = await harness({ turns: [call('mcp__fx__crash', {}), done, call('mcp__fx__add', { a: 1, b: 1 }), done, done] });
    writeMcpConfig(h.configDir, { fx: fixtureServer() });
    const a = await h.agent();
    let blocks = await h.turn(a.path, 'crash it');
    expect(blocks.filter((b) => b.role === 'tool').at(-1)!.content).toMatch(/MCP server fx: /);
    const dir = `session/${a.session}/mcp`;
    await until(
      async () =>
        /state=ready/.test(await h!.c.readText(`${dir}/fx/status`)) &&
        /restarts=1/.test(await h!.c.readText(`${dir}/fx/status`)),
    );
    blocks = await h.turn(a.path, 'add');
    expect(blocks.filter((b) => b.role === 'tool').at(-1)!.content).toContain('2');

    expect(JSON.parse(await h.c.readText(`${dir}/status`)).servers[0]).toMatchObject({
      name: 'fx',
      state: 'ready',
      tools: 9,
    });
    expect(await h.c.readText(`${dir}/fx/tools`)).toContain('mcp__fx__echo\n');
    expect(await h.c.readText(`${dir}/fx/log`)).toMatch(/crashing on request/);
    const files = await until(
      async () =>
        (await h!.c.ls(`${dir}/fx/resources`))
          .map((d) => d.name)
          .sort()
          .join(' ') || undefined,
    );
    expect(files).toBe('fixture%3A%2F%2Fcwd fixture%3A%2F%2Fgreeting');
    expect(await h.c.readText(`${dir}/fx/resources/fixture%3A%2F%2Fgreeting`)).toBe('hello from an MCP resource\n');
    // The prompts, listed by /mcp; one as a slash command: its text goes to the model as the next prompt.
    await h.c.write(`${a.path}/prompt`, '/mcp');
    expect((await h.blocks(a.path)).filter((b) => b.role === 'info').at(-1)!.content).toBe(
      '/mcp fx review file=…\tAsks for a review of a file.',
    );
    const agent = h.daemon.agents.all().find((x) => x.id === a.aid)!;
    const next = agent.nextTurn();
    await h.c.write(`${a.path}/prompt`, '/mcp fx review file=src/a.ts');
    await next;
    const sent = h.mock.requests.filter((r) => r.path.includes('/chat/completions')).at(-1)!.body as OpenAiBody;
    expect(sent.messages.at(-1)!.content).toContain('Please review src/a.ts for bugs.');
    await h.c.write(`${dir}/ctl`, 'stop fx');
    expect(await h.c.readText(`${dir}/fx/status`)).toMatch(/state=stopped/);
  });
});
