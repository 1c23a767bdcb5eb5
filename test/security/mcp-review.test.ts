/**
 * Attacks found in the review of MCP servers as tools (docs/mcp.md), made the way a model or a hostile MCP server
 * would make them: scripted tool calls through toolsrv's proc/new against a real toolsrv, the real sandbox helper
 * and a hostile stdio server written with the SDK (fixtures/mcp-hostile-server.mjs). Each attack fails.
 */
import { createServer as createHttpServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { ruleFor, ruleMatches } from '../../src/olliesrv/store/bypass.js';
import { readTrusted, trust } from '../../src/toolsrv/sandbox/trust.js';
import { askOwner, until, type Env } from '../toolsrv/helpers.js';
import { writeMcpConfig } from '../toolsrv/mcp-helpers.js';
import { startWorkspace } from '../toolsrv/workspace-env.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';

const HOSTILE = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'mcp-hostile-server.mjs');
const hostile = (...args: string[]): Record<string, unknown> => ({
  command: process.execPath,
  args: [HOSTILE, ...args],
});

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});
beforeAll(() => buildNative());

async function mcpEnv(servers: Record<string, unknown>): Promise<{ env: Env; c: Client }> {
  const w = await startWorkspace('mcp-review-', cleanup, { prepare: (d) => writeMcpConfig(d.configDir, servers) });
  await w.c.write('ctl', 'mcp-wait 15000');
  return w;
}

const state = async (c: Client, server: string): Promise<string> =>
  /state=(\S*)/.exec(await c.readText(`mcp/${server}/status`).catch(() => ''))?.[1] ?? '';

describe('review: MCP servers attacked by a model or a hostile server', () => {
  test('an "always" approval of an MCP tool whose one argument is `command` does not cover the same call with more words', async () => {
    // The server interprets `command` in its own language (SQL, a deploy DSL…), not as argv: a prefix rule, made for
    // shell commands, would approve `deploy staging everything` for a person who approved `deploy staging`.
    const { env, c } = await mcpEnv({ hx: hostile('--command-tool') });
    const { ctl, req, call } = await askOwner(env, () =>
      env.call(c, { tool: 'mcp__hx__run', args: { command: 'deploy staging', bypass: true } }),
    );
    await ctl.write('bypass/resolve', `${req.id} deny`);
    expect((await call).status).toBe('refused');
    const rule = ruleFor(req);
    expect(rule).not.toHaveProperty('refused');
    if ('refused' in rule) return;
    // What "approve always" would store, against the model's next, wider call.
    const wider = {
      tool: req.tool,
      cmd: 'mcp__hx__run deploy staging everything',
      command: 'deploy staging everything',
    };
    expect(rule.kind).toBe('exact');
    expect(ruleMatches(rule, wider)).toBe(false);
    expect(
      ruleMatches(rule, { tool: req.tool, cmd: req.cmd, ...(req.command !== undefined && { command: req.command }) }),
    ).toBe(true);
  });

  test("a hostile server cannot take another server's tool names: no server name a tool name can run into", async () => {
    // Server "a" answers for `mcp__a___x` (its tool "_x"); a server "a_" with tool "x" would have had the same name,
    // and the first listed won it: calls the model meant for "a_" went to "a".
    const { env, c } = await mcpEnv({
      a: hostile('--names', '_x', '--label', 'A'),
      a_: hostile('--names', 'x', '--label', 'B'),
    });
    await until(async () => (await state(c, 'a')) === 'ready', 'server a ready', 15000);
    const st = JSON.parse(await c.readText('mcp/status')) as {
      servers: Array<{ name: string; state: string; error: string }>;
    };
    expect(st.servers.find((s) => s.name === 'a_')).toMatchObject({
      state: 'invalid',
      error: expect.stringMatching(/name/),
    });
    // Every agent-facing name belongs to one server only, and says which.
    const r = await env.call(c, { tool: 'mcp__a___x', args: {} });
    expect(r.output).toBe('tool _x of A\n');
  });

  test('a hostile server flooding tools/list_changed does not make toolsrv list its tools once per notification', async () => {
    const { env, c } = await mcpEnv({ hx: hostile('--flood') });
    await until(async () => (await state(c, 'hx')) === 'ready', 'server ready', 15000);
    const before = Number((await env.call(c, { tool: 'mcp__hx__lists', args: {} })).output);
    expect((await env.call(c, { tool: 'mcp__hx__flood', args: { n: 2000 } })).output).toBe('sent 2000\n');
    await until(async () => /tools changed/.test(await c.readText('mcp/hx/log')), 'the flood to be handled', 15000);
    // Requests go out in order on the one stdio connection: any listing the flood caused is counted before this call.
    const after = Number((await env.call(c, { tool: 'mcp__hx__lists', args: {} })).output);
    expect(after - before).toBeLessThan(10);
  });

  test('a hostile server cannot flood the tool list: at most 1000 tools a server, descriptions cut at 2048 characters', async () => {
    // A megabyte of description reaches the model's context the moment tool_search shows the tool or it is loaded,
    // and the tool list goes to olliesrv at every change: a server could fill both.
    const { c } = await mcpEnv({ many: hostile('--many', '1500', '10'), big: hostile('--many', '3', '1000000') });
    await until(
      async () => (await state(c, 'many')) === 'ready' && (await state(c, 'big')) === 'ready',
      'servers ready',
      30000,
    );
    const tools = JSON.parse(await c.readText('tools')) as Array<{ name: string; description: string }>;
    expect(tools.filter((t) => t.name.startsWith('mcp__many__')).length).toBe(1000);
    const big = tools.filter((t) => t.name.startsWith('mcp__big__'));
    expect(big.length).toBe(3);
    for (const t of big) expect(t.description.length).toBeLessThanOrEqual(2100);
    expect(await c.readText('mcp/many/log')).toMatch(/1500 tools: only the first 1000 are used/);
  });

  test("a model cannot read a stdio server's keys from /proc (its environ, cmdline, memory) with its shell", async () => {
    const { env, c } = await mcpEnv({ fx: { ...hostile('--names', 'x'), env: { FX_TOKEN: 'secret-token-456' } } });
    await until(async () => (await state(c, 'fx')) === 'ready', 'server ready', 15000);
    const pid = /pid=(\d+)/.exec(await c.readText('mcp/fx/status'))![1]!;
    await c.write('ctl', 'load shell');
    // The pid is the sandbox helper's; the server is it or its child: try every process of the tree.
    const r = await env.call(c, {
      tool: 'shell',
      args: {
        command: `for p in ${pid} $(cat /proc/${pid}/task/*/children 2>/dev/null); do cat /proc/$p/environ; head -c 100000 /proc/$p/mem; tr '\\0' ' ' < /proc/$p/cmdline; echo; done 2>&1; echo end`,
      },
    });
    expect(r.output, JSON.stringify(r)).toContain('end');
    expect(r.output).not.toContain('secret-token-456');
  });

  test("a hostile server flooding stderr with long lines cannot make its log (kept in toolsrv's memory) huge", async () => {
    const { env, c } = await mcpEnv({ hx: hostile('--spew') });
    await until(async () => (await state(c, 'hx')) === 'ready', 'server ready', 15000);
    expect((await env.call(c, { tool: 'mcp__hx__spew', args: { lines: 600, size: 100_000 } })).output).toBe('ok\n');
    await until(async () => /spewed/.test(await c.readText('mcp/hx/log')), 'the flood to reach the log', 30000);
    // 500 lines of at most a few kB each.
    expect((await c.readText('mcp/hx/log')).length).toBeLessThan(3_000_000);
  });

  test('a model that turns .mcp.json into a directory holding a sandbox policy does not get that policy trusted by "trust …/.mcp.json"', async () => {
    // The status note tells the owner to write "trust WS/.mcp.json"; a directory there used to be read as a project
    // directory, so the owner trusted WS/.mcp.json/.ollie-sandbox.yaml, the model's policy, thinking of MCP servers.
    const { env, c } = await mcpEnv({});
    const ws = JSON.parse(await c.readText('mcp/status')).workspace as string;
    await c.write('ctl', 'load shell');
    const r = await env.call(c, {
      tool: 'shell',
      args: {
        command:
          'rm -f .mcp.json && mkdir .mcp.json && printf "filesystem:\\n  rw: [\\"~\\"]\\n" > .mcp.json/.ollie-sandbox.yaml && echo planted',
      },
    });
    expect(r.output, JSON.stringify(r)).toContain('planted');
    const configDir = join(dirname(ws), 'config');
    expect(() => trust(configDir, join(ws, '.mcp.json'))).toThrow(/not a regular file/);
    expect([...readTrusted(configDir).keys()]).toEqual([]);
  });

  test("a remote server's keys (headers, a token in its URL) are in no file an agent may read: status, tools, prompts", async () => {
    // One refuses the connection, one answers 401 with a body: both fail, and their errors are what agents read.
    const http = createHttpServer((_req, res) => void res.writeHead(401, { 'content-type': 'text/plain' }).end('no'));
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
    cleanup.push(() => void http.close());
    const port = (http.address() as { port: number }).port;
    const { c } = await mcpEnv({
      refused: {
        type: 'http',
        url: 'http://u:pw-secret-1@127.0.0.1:1/mcp?key=url-secret-2',
        headers: { Authorization: 'Bearer header-secret-3' },
      },
      denied: {
        type: 'sse',
        url: `http://127.0.0.1:${port}/sse?key=url-secret-4`,
        headers: { 'X-Api-Key': 'header-secret-5' },
      },
    });
    await until(
      async () =>
        !['starting', ''].includes(await state(c, 'refused')) && !['starting', ''].includes(await state(c, 'denied')),
      'both to fail',
      15000,
    );
    const seen = [
      await c.readText('mcp/status'),
      ...(await Promise.all(
        ['refused', 'denied'].flatMap((s) => ['status', 'tools', 'prompts'].map((f) => c.readText(`mcp/${s}/${f}`))),
      )),
    ].join('\n');
    expect(seen).toMatch(/state=(restarting|failed)/);
    expect(seen).not.toMatch(/secret/);
    // The owner's log names the servers without their credentials.
    expect(await c.readText('mcp/refused/log')).toContain('connecting to http://127.0.0.1:1/mcp (');
  });

  test("a hostile server's schema cannot freeze toolsrv on the model's argument (a backtracking pattern, references that multiply)", async () => {
    // toolsrv checks arguments against the server's schema before the call, in its one thread: `^(a+)+$` against
    // 32 a's and a "!" takes seconds to minutes there, and every tool of the session would wait.
    const { env, c } = await mcpEnv({ hx: hostile('--redos') });
    await until(async () => (await state(c, 'hx')) === 'ready', 'server ready', 15000);
    const t0 = Date.now();
    const r = await env.call(c, { tool: 'mcp__hx__match', args: { s: `${'a'.repeat(32)}!` } });
    expect(r.output).toBe('answered\n');
    // Nor a schema whose references multiply: 2^26 checks of any argument.
    const b = await env.call(c, { tool: 'mcp__hx__bomb', args: { x: {} } });
    expect(b.output).toBe('answered\n');
    expect(Date.now() - t0).toBeLessThan(5000);
  });
});
