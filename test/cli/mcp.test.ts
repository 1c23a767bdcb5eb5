/**
 * `ollie mcp` (the built CLI) driven by the MCP SDK's own Client over stdio, against a real `ollie serve` (its own
 * process, its own socket) with the mock LLM: the tools it lists, a session and an agent created through it, a
 * prompt answered after the turn ends, the agent's log, approvals, and errors that say what is wrong.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm, type MockLlm } from '../../src/devtools/mock-llm/server.js';
import { writeConfig } from '../olliesrv/agent-harness.js';

const OLLIE = new URL('../../dist/cli/ollie.js', import.meta.url).pathname;

let dir: string;
let mock: MockLlm;
let serve: ChildProcess;
let socket: string;
let client: Client;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ollie-mcp-'));
  mock = await startMockLlm();
  writeConfig(join(dir, 'config'), mock.url);
  mkdirSync(join(dir, 'run'), { mode: 0o700 });
  socket = join(dir, 'run', 'ollie.sock');
  serve = spawn(
    process.execPath,
    [OLLIE, 'serve', '--socket', socket, '--config', join(dir, 'config'), '--data', join(dir, 'data'), '--no-tools'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let err = '';
  serve.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    serve.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('serving 9P on')) resolve();
    });
    serve.once('exit', (code) => reject(new Error(`ollie serve exited (${code}): ${err}`)));
  });
  client = new Client({ name: 'ollie-mcp-test', version: '1' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [OLLIE, 'mcp', '-a', `unix!${socket}`],
      stderr: 'pipe',
    }),
  );
}, 30_000);

afterAll(async () => {
  await client?.close();
  serve?.kill('SIGTERM');
  if (serve && serve.exitCode === null) await new Promise((r) => serve.once('exit', r));
  await mock?.close();
  rmSync(dir, { recursive: true, force: true });
});

type Result = Awaited<ReturnType<Client['callTool']>>;
const textOf = (r: Result): string => (r.content as Array<{ type: string; text: string }>).map((c) => c.text).join('');
/** Calls a tool and returns the text of its result. */
const callText = async (name: string, args: Record<string, unknown>): Promise<string> =>
  textOf(await client.callTool({ name, arguments: args }));

describe('ollie mcp', () => {
  it('lists its tools, each with a description and an input schema', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'create_agent',
      'create_session',
      'list_agents',
      'list_approvals',
      'list_sessions',
      'prompt_agent',
      'read_agent_log',
    ]);
    for (const t of tools) {
      expect(t.description).toBeTruthy();
      expect(t.inputSchema.type).toBe('object');
    }
    expect(tools.find((t) => t.name === 'prompt_agent')!.inputSchema.required).toEqual(['session', 'agent', 'prompt']);
  });

  it('creates a session and an agent, prompts it and returns its reply once the turn is over, reads its log', async () => {
    expect(await callText('create_session', { name: 'work', cwd: dir })).toBe('work');
    const sessions = JSON.parse(await callText('list_sessions', {})) as Array<{
      name: string;
      cwd: string;
    }>;
    expect(sessions).toEqual([expect.objectContaining({ name: 'work', cwd: dir })]);

    expect(await callText('create_agent', { session: 'work', name: 'helper', profile: 'test' })).toBe('helper');
    const agents = JSON.parse(await callText('list_agents', { session: 'work' })) as Array<{
      name: string;
      state: string;
    }>;
    expect(agents).toEqual([expect.objectContaining({ name: 'helper', state: 'idle', parent: null, depth: 0 })]);

    mock.script([{ text: 'The answer is 42.' }]);
    const r = await client.callTool({
      name: 'prompt_agent',
      arguments: { session: 'work', agent: 'helper', prompt: 'What is the answer?' },
    });
    expect(r.isError).toBeFalsy();
    expect(textOf(r)).toBe('The answer is 42.');

    const log = await callText('read_agent_log', { session: 'work', agent: 'helper' });
    expect(log).toContain('What is the answer?');
    expect(log).toContain('The answer is 42.');
    expect(JSON.parse(await callText('list_approvals', { session: 'work' }))).toEqual([]);

    // A second turn: the reply is that turn's, not the first's.
    mock.script([{ text: 'Still 42.' }]);
    expect(await callText('prompt_agent', { session: 'work', agent: 'helper', prompt: 'Sure?' })).toBe('Still 42.');
  });

  it('a turn that ends in an error is an error result; unknown names and bad arguments say what is wrong', async () => {
    await client.callTool({ name: 'create_session', arguments: { name: 'errs', cwd: dir } });
    await client.callTool({ name: 'create_agent', arguments: { session: 'errs', name: 'a', profile: 'test' } });
    mock.script([{ status: 401, message: 'bad key' }]);
    const failed = await client.callTool({
      name: 'prompt_agent',
      arguments: { session: 'errs', agent: 'a', prompt: 'hello' },
    });
    expect(failed.isError).toBe(true);
    expect(textOf(failed)).toMatch(/the turn ended in an error: .*bad key/);

    const missing = await client.callTool({ name: 'list_agents', arguments: { session: 'nosuch' } });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toContain('nosuch');
    const bad = await client.callTool({ name: 'read_agent_log', arguments: { session: '../..', agent: 'a' } });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toContain('bad session name "../.."');
    const noPrompt = await client.callTool({ name: 'prompt_agent', arguments: { session: 'errs', agent: 'a' } });
    expect(noPrompt.isError).toBe(true);
    expect(textOf(noPrompt)).toMatch(/prompt/);
  });
});
