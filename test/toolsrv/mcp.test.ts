/**
 * MCP servers in toolsrv: a real stdio server (the SDK-written fixture) under the real sandbox helper, a real
 * Streamable HTTP server on loopback, their tools called through proc/new like any tool.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { lines, type Client } from '../../src/ninep/index.js';
import type { ToolInfo } from '../../src/toolsrv/protocol.js';
import { trust, untrust } from '../../src/toolsrv/sandbox/trust.js';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { askOwner, keyValues, startEnv, until, type Env } from './helpers.js';
import { fixtureServer, ROOT, startHttpFixture, writeMcpConfig } from './mcp-helpers.js';
import { buildNative } from './sandbox-helpers.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});
beforeAll(() => buildNative());

async function mcpEnv(
  servers: Record<string, unknown>,
  o: { project?: Record<string, unknown> } = {},
): Promise<{ env: Env; c: Client; cwd: string; configDir: string }> {
  const base = mkdtempSync(join(tmpdir(), 'mcp-test-'));
  const cwd = join(base, 'ws');
  const configDir = join(base, 'config');
  mkdirSync(cwd);
  writeMcpConfig(configDir, servers);
  if (o.project) writeFileSync(join(cwd, '.mcp.json'), JSON.stringify({ mcpServers: o.project }));
  const env = await startEnv(
    {},
    { yolo: false, toolDirs: [SHIPPED_TOOLS], cwd, configDir, dataDir: join(base, 'data') },
  );
  cleanup.push(async () => {
    await env.close();
    rmSync(base, { recursive: true, force: true });
  });
  const c = await env.client('agent1');
  await c.write('ctl', 'mcp-wait 15000');
  return { env, c, cwd, configDir };
}

const status = async (c: Client, server: string): Promise<Record<string, string>> =>
  keyValues(await c.readText(`mcp/${server}/status`));

describe('MCP servers in toolsrv', () => {
  test("a stdio server's tools are in every scope as mcp__SERVER__TOOL (cold), validated and run", async () => {
    const { env, c } = await mcpEnv({ fx: fixtureServer() });
    expect((await status(c, 'fx')).state).toBe('ready');
    const tools = JSON.parse(await c.readText('tools')) as ToolInfo[];
    const echo = tools.find((t) => t.name === 'mcp__fx__echo')!;
    expect(echo).toMatchObject({ tier: 'cold', scope: 'read' });
    expect(echo.description).toMatch(/Echoes the text.*\(MCP server fx\)/);
    const r = await env.call(c, { tool: 'mcp__fx__echo', args: { text: 'abc' } });
    expect(r).toMatchObject({ status: 'exited', exit: 0, output: 'echo: CBA\n' });
    // Validated by toolsrv against the server's schema before the server sees it.
    const bad = await env.call(c, { tool: 'mcp__fx__add', args: { a: 'x', b: 2 } });
    expect(bad.status).toBe('refused');
    expect(bad.error).toMatch(/invalid arguments for mcp__fx__add: argument a must be number/);
    // Another agent's scope has them too, without a load.
    const c2 = await env.client('agent2');
    expect((await env.call(c2, { tool: 'mcp__fx__add', args: { a: 2, b: 3 } })).output).toBe('5\n');
    // An unknown tool of a known server, and an unknown server, are refused in words.
    expect((await env.call(c, { tool: 'mcp__fx__nope', args: {} })).error).toMatch(/MCP server fx has no tool "nope"/);
    expect((await env.call(c, { tool: 'mcp__other__x', args: {} })).error).toMatch(
      /no MCP server "other" is configured/,
    );
  });

  test('the server is sandboxed: the workspace is read only, secrets are out of reach, the network is off; a bypass runs the call outside', async () => {
    const { env, c, cwd } = await mcpEnv({ fx: fixtureServer() });
    const w = await env.call(c, { tool: 'mcp__fx__write_file', args: { path: join(cwd, 'x.txt'), content: 'x' } });
    expect(w).toMatchObject({ exit: 1 });
    expect(w.output).toMatch(/cannot write .*EACCES/);
    expect(existsSync(join(cwd, 'x.txt'))).toBe(false);
    // It may read the workspace.
    writeFileSync(join(cwd, 'in.txt'), 'readable');
    expect((await env.call(c, { tool: 'mcp__fx__read_file', args: { path: join(cwd, 'in.txt') } })).output).toBe(
      'readable\n',
    );
    const sock: Server = createServer((s) => s.end('hello from the port'));
    await new Promise<void>((r) => sock.listen(0, '127.0.0.1', r));
    cleanup.push(() => void sock.close());
    const port = (sock.address() as { port: number }).port;
    const n = await env.call(c, { tool: 'mcp__fx__connect_port', args: { port } });
    expect(n.output).toMatch(/cannot connect to port \d+: EACCES/);

    // The same call with the bypass flag asks a person; approved, it runs in an unsandboxed instance.
    const { ctl, req, call } = await askOwner(env, () =>
      env.call(c, { tool: 'mcp__fx__connect_port', args: { port, bypass: true } }),
    );
    expect(req).toMatchObject({
      agent: 'agent1',
      tool: 'mcp__fx__connect_port',
      cmd: `mcp__fx__connect_port {"port":${port}}`,
    });
    await ctl.write('bypass/resolve', `${req.id} approve`);
    const r = await call;
    expect(r).toMatchObject({ exit: 0, bypassed: true, output: 'connected: hello from the port\n' });
    // The resident server kept its sandbox.
    expect((await env.call(c, { tool: 'mcp__fx__connect_port', args: { port } })).output).toMatch(/EACCES/);
  });

  test('a server that crashes is restarted with backoff; its call in flight fails in words; ctl stop and restart', async () => {
    const { env, c } = await mcpEnv({ fx: fixtureServer() });
    const pid = (await env.call(c, { tool: 'mcp__fx__pid', args: {} })).output.trim();
    const r = await env.call(c, { tool: 'mcp__fx__crash', args: {} });
    expect(r.status).toBe('killed');
    expect(r.error).toMatch(/MCP server fx: /);
    await until(
      async () => (await status(c, 'fx')).state === 'ready' && (await status(c, 'fx')).restarts === '1',
      'the crashed server to restart',
      15000,
    );
    const pid2 = (await env.call(c, { tool: 'mcp__fx__pid', args: {} })).output.trim();
    expect(pid2).not.toBe(pid);
    expect(await c.readText('mcp/fx/log')).toMatch(
      /fixture: crashing on request[\s\S]*lost: .*starting again in 1000 ms[\s\S]*ready/,
    );

    await c.write('mcp/fx/ctl', 'stop');
    expect((await status(c, 'fx')).state).toBe('stopped');
    expect((await env.call(c, { tool: 'mcp__fx__pid', args: {} })).error).toMatch(/MCP server fx is stopped/);
    await c.write('mcp/fx/ctl', 'restart');
    await until(async () => (await status(c, 'fx')).state === 'ready', 'the server to be ready', 15000);
    expect((await env.call(c, { tool: 'mcp__fx__add', args: { a: 1, b: 1 } })).output).toBe('2\n');
  });

  test('a scope that names its session starts the servers (as olliesrv does on every connection); a call meanwhile waits for them', async () => {
    const base = mkdtempSync(join(tmpdir(), 'mcp-test-'));
    const cwd = join(base, 'ws');
    mkdirSync(cwd);
    writeMcpConfig(join(base, 'config'), { fx: fixtureServer() });
    const env = await startEnv(
      {},
      {
        yolo: false,
        toolDirs: [SHIPPED_TOOLS],
        cwd: base,
        configDir: join(base, 'config'),
        dataDir: join(base, 'data'),
      },
    );
    cleanup.push(async () => {
      await env.close();
      rmSync(base, { recursive: true, force: true });
    });
    const c = await env.client('agent1');
    expect(JSON.parse(await c.readText('mcp/status'))).toMatchObject({ session: null, servers: [] });
    await c.write('ctl', `cwd ${cwd}\nenv OLLIE_SESSION_ID=s1\n`);
    expect((await env.call(c, { tool: 'mcp__fx__add', args: { a: 20, b: 22 } })).output).toBe('42\n');
    expect(JSON.parse(await c.readText('mcp/status'))).toMatchObject({ session: 's1', workspace: cwd });
    expect((await env.call(c, { tool: 'mcp__fx__read_file', args: { path: 'nope' } })).output).toContain(
      `cannot read nope`,
    );
    // Another session's scope of the same (shared) toolsrv has none of them.
    const other = await env.client('agent2');
    await other.write('ctl', `cwd ${cwd}\nenv OLLIE_SESSION_ID=s2\n`);
    expect((JSON.parse(await other.readText('tools')) as ToolInfo[]).filter((t) => t.name.startsWith('mcp__'))).toEqual(
      [],
    );
    expect((await env.call(other, { tool: 'mcp__fx__add', args: { a: 1, b: 1 } })).status).toBe('refused');
  });

  test('the dispatch flags: a timeout ends the call, a background call reports like any background proc', async () => {
    const { env, c } = await mcpEnv({ fx: fixtureServer() });
    const t = await env.call(c, { tool: 'mcp__fx__sleep', args: { seconds: 30, timeout: 0.3 } });
    expect(t.status).toBe('timeout');
    // The server lives on and answers the next call.
    expect((await env.call(c, { tool: 'mcp__fx__add', args: { a: 1, b: 2 } })).output).toBe('3\n');
    const bg = await env.call(c, { tool: 'mcp__fx__sleep', args: { seconds: 0.2 }, flags: { background: true } });
    expect(bg.status).toBe('background');
    const ac = new AbortController();
    cleanup.push(() => ac.abort());
    for await (const line of lines(c.stream('proc/interrupts', { signal: ac.signal }))) {
      expect(JSON.parse(line)).toMatchObject({
        pid: bg.pid,
        tool: 'mcp__fx__sleep',
        status: 'exited',
        exit: 0,
        tail: 'slept\n',
      });
      break;
    }
    expect(await c.readText(`proc/${bg.pid}/stat`)).toMatch(/tool=mcp__fx__sleep/);
  });

  test('resources and prompts are read through mcp/SERVER', async () => {
    const { c, cwd } = await mcpEnv({
      fx: fixtureServer(),
      inws: fixtureServer({ ollie: { cwd: 'workspace' } }),
      there: fixtureServer({ ollie: { cwd: '/tmp' } }),
    });
    expect(await c.readText('mcp/fx/resources')).toContain('fixture://greeting\tgreeting\ttext/plain\n');
    expect(await c.rdwrText('mcp/fx/resource', 'fixture://greeting')).toBe('hello from an MCP resource\n');
    // A server starts outside the workspace unless its declaration asks for it (or for another directory).
    expect(await c.rdwrText('mcp/fx/resource', 'fixture://cwd')).toBe('/\n');
    expect(await c.rdwrText('mcp/inws/resource', 'fixture://cwd')).toBe(`${cwd}\n`);
    expect(await c.rdwrText('mcp/there/resource', 'fixture://cwd')).toBe('/tmp\n');
    expect(JSON.parse(await c.readText('mcp/fx/prompts'))[0]).toMatchObject({ name: 'review' });
    expect(await c.rdwrText('mcp/fx/prompt', JSON.stringify({ name: 'review', arguments: { file: 'a.ts' } }))).toBe(
      'Please review a.ts for bugs.',
    );
  });

  test('a Streamable HTTP server on loopback is dialled by toolsrv', async () => {
    const http = await startHttpFixture();
    cleanup.push(() => void http.child.kill());
    const { env, c } = await mcpEnv({ web: { type: 'http', url: http.url } });
    expect((await status(c, 'web')).state).toBe('ready');
    expect((await env.call(c, { tool: 'mcp__web__echo', args: { text: 'hi' } })).output).toBe('echo: IH\n');
  });

  test('an SSE server (the older transport) on loopback', async () => {
    const sse = await startHttpFixture('sse');
    cleanup.push(() => void sse.child.kill());
    const { env, c } = await mcpEnv({ old: { type: 'sse', url: sse.url } });
    expect((await status(c, 'old')).state).toBe('ready');
    expect((await env.call(c, { tool: 'mcp__old__add', args: { a: 20, b: 22 } })).output).toBe('42\n');
  });

  test("the SDK's own example server (simpleSseServer, fixed port 3000), where the port is free", async (ctx) => {
    const free = await new Promise<boolean>((r) => {
      const probe = createServer()
        .once('error', () => r(false))
        .listen(3000, () => probe.close(() => r(true)));
    });
    if (!free) {
      // Loud, not silent: the example's port is taken on this machine, so the SDK's own server is not tried.
      console.error(
        "\n*** test/toolsrv/mcp.test.ts: the SDK's simpleSseServer test SKIPPED: port 3000 is in use ***\n",
      );
      return ctx.skip();
    }
    const example = spawn(
      process.execPath,
      [
        join(
          ROOT,
          'node_modules',
          '@modelcontextprotocol',
          'sdk',
          'dist',
          'esm',
          'examples',
          'server',
          'simpleSseServer.js',
        ),
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    cleanup.push(() => void example.kill());
    await new Promise<void>((r, j) => {
      example.stdout!.on('data', (d: Buffer) => /listening on port 3000/.test(d.toString()) && r());
      example.once('exit', (code) => j(new Error(`the SDK example exited (${code})`)));
    });
    const { env, c } = await mcpEnv({ sdk: { type: 'sse', url: 'http://127.0.0.1:3000/mcp' } });
    expect((await status(c, 'sdk')).state).toBe('ready');
    expect(await c.readText('mcp/sdk/tools')).toContain('mcp__sdk__start-notification-stream\n');
    const r = await env.call(c, { tool: 'mcp__sdk__start-notification-stream', args: { interval: 10, count: 2 } });
    expect(r).toMatchObject({ status: 'exited', exit: 0 });
    expect(r.output).toBe('Completed sending 2 notifications every 10ms\n');
  });

  test('bad configuration: each problem names the file, server and field; the other servers work', async () => {
    const { env, c, configDir } = await mcpEnv({
      fx: fixtureServer(),
      broken: { command: 'x', args: 'not-a-list' },
      net: { command: 'x', ollie: { sandbox: { network: { connect_tcp: [99999] } } } },
      'bad name': { command: 'x' },
    });
    const st = JSON.parse(await c.readText('mcp/status')) as {
      servers: Array<{ name: string; state: string; error: string }>;
    };
    const file = join(configDir, 'mcp.json');
    expect(st.servers.find((s) => s.name === 'broken')).toMatchObject({
      state: 'invalid',
      error: `${file}: mcpServers.broken: args: must be a list of strings`,
    });
    expect(st.servers.find((s) => s.name === 'net')!.error).toMatch(
      /mcpServers\.net: ollie\.sandbox\.network\.connect_tcp: must be a list of TCP ports/,
    );
    expect(st.servers.find((s) => s.name === 'bad name')!.error).toMatch(
      /mcpServers\.bad name: the name must be letters/,
    );
    expect((await env.call(c, { tool: 'mcp__fx__add', args: { a: 1, b: 2 } })).output).toBe('3\n');
    // A file that is not JSON: said with its name; the (empty) rest goes on.
    writeFileSync(file, '{"mcpServers": ');
    await c.write('mcp/ctl', 'reload');
    expect(JSON.parse(await c.readText('mcp/status')).notes[0]).toMatch(new RegExp(`^${file}: not valid JSON`));
  });

  test("a project's .mcp.json starts nothing until the owner trusts it as it is; an edit untrusts it", async () => {
    const { env, c, cwd, configDir } = await mcpEnv({}, { project: { proj: fixtureServer() } });
    expect(JSON.parse(await c.readText('mcp/status'))).toMatchObject({
      servers: [],
      notes: [expect.stringMatching(/\.mcp\.json is not trusted: its MCP servers are not started/)],
    });
    trust(configDir, join(cwd, '.mcp.json'));
    await c.write('mcp/ctl', 'reload');
    await c.write('ctl', 'mcp-wait 15000');
    expect((await env.call(c, { tool: 'mcp__proj__add', args: { a: 2, b: 2 } })).output).toBe('4\n');
    // The agent edits the trusted file: untrusted again.
    writeFileSync(
      join(cwd, '.mcp.json'),
      JSON.stringify({
        mcpServers: { proj: fixtureServer(), evil: { command: '/bin/sh', args: ['-c', 'touch pwned'] } },
      }),
    );
    await c.write('mcp/ctl', 'reload');
    expect(JSON.parse(await c.readText('mcp/status'))).toMatchObject({
      servers: [],
      notes: [expect.stringMatching(/not trusted as it is now \(it changed since it was trusted\)/)],
    });
    // Trusted again as it is now, then untrusted by naming the file: gone again.
    trust(configDir, join(cwd, '.mcp.json'));
    await c.write('mcp/ctl', 'reload');
    expect(JSON.parse(await c.readText('mcp/status')).servers.map((s: { name: string }) => s.name)).toEqual([
      'evil',
      'proj',
    ]);
    await c.write('ctl', 'mcp-wait 15000');
    expect(untrust(configDir, join(cwd, '.mcp.json'))).toBe(true);
    await c.write('mcp/ctl', 'reload');
    expect(JSON.parse(await c.readText('mcp/status')).servers).toEqual([]);
  });

  test('a server runs under the policy in force: narrowed by a trusted project file, it is restarted before its next use', async () => {
    const { env, c, cwd, configDir } = await mcpEnv({ fx: fixtureServer() });
    mkdirSync(join(cwd, 'secret'));
    writeFileSync(join(cwd, 'secret', 'key'), 'TOP-SECRET\n');
    const read = async (): Promise<string> =>
      (await env.call(c, { tool: 'mcp__fx__read_file', args: { path: join(cwd, 'secret', 'key') } })).output ?? '';
    expect(await read()).toBe('TOP-SECRET\n');
    const pid = (await status(c, 'fx')).pid;
    // The owner narrows the project's policy and trusts it: tool calls are under it at once, and so is the server.
    writeFileSync(join(cwd, '.ollie-sandbox.yaml'), 'filesystem:\n  deny: ["{CWD}/secret"]\n');
    trust(configDir, cwd);
    const after = await read();
    expect(after).not.toContain('TOP-SECRET');
    expect(after).toMatch(/EACCES/);
    expect((await status(c, 'fx')).pid).not.toBe(pid);
    expect(await c.readText('mcp/fx/log')).toMatch(/the sandbox policy changed since it started: restarting it/);
  });

  test('a call in flight when the trusted project file is changed from outside: the server is killed at once, the call says why, it starts again once trusted', async () => {
    const { env, c, cwd, configDir } = await mcpEnv({ fx: fixtureServer() });
    writeFileSync(join(cwd, '.ollie-sandbox.yaml'), 'network:\n  enabled: false\n');
    trust(configDir, cwd);
    // A tool call of any kind re-checks the server at its end: it is restarted under the project's policy.
    await env.call(c, { tool: 'mcp__fx__add', args: { a: 1, b: 2 } });
    await until(async () => (await status(c, 'fx')).state === 'ready', 'the server under the project policy');
    const pid = Number((await status(c, 'fx')).pid);
    const call = env.call(c, { tool: 'mcp__fx__sleep', args: { seconds: 60 } });
    await until(async () => /tool=mcp__fx__sleep/.test(await c.readText('proc/2/stat').catch(() => '')), 'the call');
    // No call of this toolsrv changes it: the periodic check finds it.
    writeFileSync(join(cwd, '.ollie-sandbox.yaml'), 'network:\n  enabled: false\n# changed\n');
    const r = await call;
    expect(r.error).toMatch(/MCP server fx: the sandbox policy in force refuses it: .*was trusted, but.*: stopped/);
    const st = await status(c, 'fx');
    expect(st).toMatchObject({ state: 'stopped', pid: '0' });
    expect(st.error).toMatch(/^the sandbox policy in force refuses it: /);
    await until(() => !existsSync(`/proc/${pid}`) || /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8')));
    // Its tools stay listed, and a call says why.
    expect((await env.call(c, { tool: 'mcp__fx__add', args: { a: 1, b: 2 } })).error).toMatch(
      /MCP server fx is stopped \(the sandbox policy in force refuses it: /,
    );
    trust(configDir, cwd);
    await until(async () => (await status(c, 'fx')).state === 'ready', 'the server to start again', 10_000);
    expect((await env.call(c, { tool: 'mcp__fx__add', args: { a: 1, b: 2 } })).output).toBe('3\n');
  });

  test('a resource or prompt read while the server restarts under the policy in force waits for it', async () => {
    const { env, c, cwd, configDir } = await mcpEnv({ fx: fixtureServer() });
    mkdirSync(join(cwd, 'secret'));
    writeFileSync(join(cwd, 'secret', 'key'), 'TOP-SECRET\n');
    writeFileSync(join(cwd, '.ollie-sandbox.yaml'), 'filesystem:\n  deny: ["{CWD}/secret"]\n');
    trust(configDir, cwd);
    // A tool call finds the policy narrowed and restarts the server; the owner reads a resource and a prompt meanwhile.
    const call = env.call(c, { tool: 'mcp__fx__read_file', args: { path: join(cwd, 'secret', 'key') } });
    void call.catch(() => undefined);
    await until(async () => /the sandbox policy changed/.test(await c.readText('mcp/fx/log')), 'the restart');
    const [resource, prompt] = await Promise.all([
      c.rdwrText('mcp/fx/resource', 'fixture://greeting'),
      c.rdwrText('mcp/fx/prompt', JSON.stringify({ name: 'review', arguments: { file: 'a.ts' } })),
    ]);
    expect(resource).toBe('hello from an MCP resource\n');
    expect(prompt).toContain('a.ts');
    expect((await call).output).toMatch(/EACCES/);
  });
});
