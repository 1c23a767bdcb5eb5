#!/usr/bin/env node
/**
 * The context cost of MCP servers (issue 18): an agent of the default profile in a session with 0, then 10 MCP
 * servers of 20 tools each (the SDK-written fixture, e2e/fixtures/mcp-server.mjs, stdio, sandboxed), against the
 * mock LLM. Prints, per case, the tokens of the first request (o200k estimate of what is sent: system prompt, tool
 * schemas, messages) and of its tool schemas alone; then what loading one MCP tool with tool_search adds to the
 * next request, the tokens all 200 schemas would have cost sent up front, and how long a new session's first
 * request waits while its toolsrv and servers start (the tool list cached by an earlier session, as in use).
 *
 *   node bench/mcp.mjs      (after npm run build:node)
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { countTokens } from '../dist/olliesrv/backend/tokens.js';
import { promptTokens, startMockLlm } from '../dist/devtools/mock-llm/server.js';
import { writeMockBackend } from './lib/backend.mjs';
import { letSandboxReadModules } from './lib/policy.mjs';
import { newAgent, startBenchDaemon } from './lib/daemon.mjs';

const ROOT = realpathSync(join(new URL('.', import.meta.url).pathname, '..'));
const FIXTURE = join(ROOT, 'e2e', 'fixtures', 'mcp-server.mjs');
const SERVERS = 10;
const TOOLS = 20;

async function run(servers) {
  const dir = mkdtempSync(join(tmpdir(), 'ollie-bench-mcp-'));
  const config = join(dir, 'config');
  const work = join(dir, 'work');
  mkdirSync(join(config, 'agents'), { recursive: true });
  mkdirSync(work);
  const mock = await startMockLlm();
  writeMockBackend(config, mock.url, 128000);
  const mcpServers = {};
  // The fixture's own tools are 9; TOOLS - 9 generated ones make each server TOOLS.
  for (let i = 0; i < servers; i++)
    mcpServers[`svc${i}`] = { command: process.execPath, args: [FIXTURE, '--tools', String(TOOLS - 9), `svc${i}`] };
  writeFileSync(join(config, 'mcp.json'), JSON.stringify({ mcpServers }));
  letSandboxReadModules(ROOT, config);
  const { daemon, client: c } = await startBenchDaemon(dir, {
    configDir: config,
    toolsrv: {},
    toolCacheFile: join(dir, 'tools.json'),
  });
  try {
    // A first session fills the tool cache (as any earlier run would have); the one measured is the second.
    const uncached = await firstRequest(c, mock, daemon, work);
    mock.requests.length = 0;
    const { session, path, agent } = await newAgent(c, daemon, work);
    mock.script(
      [{ toolCalls: [{ name: 'tool_search', args: { query: 'mcp__svc3__svc3_operation_7' } }] }],
      [{ text: 'done' }],
    );
    const done = agent.nextTurn();
    const t0 = performance.now();
    await c.write(`${path}/prompt`, 'Look up record 7 of svc3.');
    await done;
    const firstAt = mock.requests.find((r) => r.path.includes('/chat/completions')).time;
    const chats = mock.requests.filter((r) => r.path.includes('/chat/completions')).map((r) => r.body);
    const tools = (b) => countTokens(JSON.stringify(b.tools ?? []));
    const status = servers ? JSON.parse(await c.readText(`session/${session}/mcp/status`)) : { servers: [] };
    // The agent's runtime holds every tool toolsrv listed (JS reaches the TypeScript-private field).
    const mcpTools = [...(agent.runtime?.tools?.values() ?? [])].filter((t) => t.name.startsWith('mcp__'));
    const upFront = countTokens(
      JSON.stringify(
        mcpTools.map((t) => ({
          type: 'function',
          function: { name: t.name, description: t.description, parameters: t.parameters },
        })),
      ),
    );
    return {
      first: promptTokens(chats[0]),
      firstTools: tools(chats[0]),
      second: promptTokens(chats[1]),
      secondTools: tools(chats[1]),
      ready: status.servers.filter((s) => s.state === 'ready').length,
      all: mcpTools.length,
      upFront,
      waitMs: Math.round(firstAt - (performance.timeOrigin + t0)),
      uncached,
    };
  } finally {
    c.close();
    await daemon.close();
    await mock.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A session's agent up to its first answered prompt. */
async function firstRequest(c, mock, daemon, work) {
  const { path, agent } = await newAgent(c, daemon, work);
  mock.script([{ text: 'ok' }]);
  const done = agent.nextTurn();
  const t0 = performance.now();
  await c.write(`${path}/prompt`, 'hello');
  await done;
  return Math.round(
    mock.requests.find((r) => r.path.includes('/chat/completions')).time - (performance.timeOrigin + t0),
  );
}

const base = await run(0);
const mcp = await run(SERVERS);
console.log(`MCP context cost: default profile, ${SERVERS} stdio servers x ${TOOLS} tools (o200k estimate, tokens)`);
console.log(`  servers ready before the first request: ${mcp.ready}/${SERVERS}; MCP tools available: ${mcp.all}`);
console.log(`  first request, no MCP servers:      ${base.first} (tool schemas ${base.firstTools})`);
console.log(`  first request, ${SERVERS} servers / ${mcp.all} tools: ${mcp.first} (tool schemas ${mcp.firstTools})`);
console.log(`  cost of the MCP servers to the first request: ${mcp.first - base.first}`);
console.log(
  `  the first session's prompt to its first request (nothing cached: it waits for the servers, at most 10 s): ${base.uncached} ms without MCP, ${mcp.uncached} ms with ${SERVERS} servers`,
);
console.log(
  `  a new session's prompt to its first request (toolsrv and servers starting, tool list cached): ${base.waitMs} ms without MCP, ${mcp.waitMs} ms with ${SERVERS} servers`,
);
console.log(
  `  tool_search loading one MCP tool adds its schema to the next request: ${mcp.secondTools - mcp.firstTools}`,
);
console.log(`  all ${mcp.all} MCP schemas sent up front would have cost: ${mcp.upFront}`);
