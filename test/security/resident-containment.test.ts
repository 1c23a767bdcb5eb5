/**
 * Long-lived sandboxed processes — stdio MCP servers and resident tool hosts — attacked the way a compromised
 * one would: it leaves a process behind in a session of its own (setsid, double fork) to outlive its server,
 * and it takes more memory than the policy allows by spreading it over processes each under the per-process
 * limit. Through the real toolsrv, sandbox helper and spawner: the process left behind is gone once the server
 * is stopped, or its session (toolsrv) ends; the hog is killed for the memory limit and the server's status and
 * log, or the hosted call's error, say so.
 *
 * Who may reach what: the servers and hosts are started by toolsrv for the owner's configuration (mcp.json) or
 * the tool's .meta; a model reaches them only through tool calls, which is how these tests drive them.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { alive, withArg } from '../helpers/processes.js';
import { until, type Env } from '../toolsrv/helpers.js';
import { ROOT, writeMcpConfig } from '../toolsrv/mcp-helpers.js';
import { buildNative, shippedPolicyText } from '../toolsrv/sandbox-helpers.js';
import { startWorkspace } from '../toolsrv/workspace-env.js';

const SERVER = join(ROOT, 'test', 'security', 'fixtures', 'mcp-escaping-server.mjs');

/** Waits until `pid` runs the sleep of `m` (the shell that started it may answer before it has exec'd). */
const running = async (m: string, pid: number): Promise<void> => {
  await until(() => withArg(m).join() === String(pid), `${pid} to run the sleep of ${m}`, 5000);
};

let seq = 0;
/** A sleep's seconds that no other process uses: how its processes are found (an argument of each). */
const marker = (): string => `2${String(process.pid % 100000).padStart(5, '0')}.${++seq}`;

const cleanup: Array<() => Promise<void> | void> = [];
const markers: string[] = [];
beforeAll(() => buildNative());
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
  // Nothing of a failed test may stay behind (on the old code the escaped sleeps would).
  for (const m of markers.splice(0))
    for (const pid of withArg(m)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
});

/** A config dir with the servers and a policy whose memory limit is 256 MiB (the shipped one is 2 GiB). */
function configWith(configDir: string, servers: Record<string, unknown>): void {
  writeMcpConfig(configDir, servers);
  const policy = join(configDir, 'sandbox.yaml');
  // writeMcpConfig wrote one only where node_modules lies outside the package root (it grants reading it).
  const base = existsSync(policy) ? readFileSync(policy, 'utf8') : shippedPolicyText();
  const lowered = base.replace(/memory: 2 GiB/, 'memory: 256 MiB');
  if (lowered === base) throw new Error('the shipped policy no longer says memory: 2 GiB');
  writeFileSync(policy, lowered);
}

async function mcpEnv(): Promise<{ env: Env; c: Client; close(): Promise<void> }> {
  const w = await startWorkspace('resident-mcp-', cleanup, {
    prepare: (d) => configWith(d.configDir, { esc: { command: process.execPath, args: [SERVER] } }),
  });
  await w.c.write('ctl', 'mcp-wait 15000');
  return w;
}

const status = async (c: Client, server: string): Promise<Record<string, string>> =>
  Object.fromEntries(
    (await c.readText(`mcp/${server}/status`))
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );

describe('a stdio MCP server cannot outlive its server or take more memory than the policy allows', () => {
  test('a setsid, double-forked process it leaves behind is gone once the server is stopped (ctl stop)', async () => {
    const { env, c } = await mcpEnv();
    expect((await status(c, 'esc')).state).toBe('ready');
    const m = marker();
    markers.push(m);
    const r = await env.call(c, { tool: 'mcp__esc__escape', args: { marker: m } });
    const pid = Number(r.output.trim());
    expect(pid, r.output).toBeGreaterThan(0);
    await running(m, pid);
    // It left the server's process group and session: killing the group alone would miss it.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /, '')
      .split(' ');
    expect(Number(stat[3])).toBe(pid); // its own session
    await c.write('mcp/esc/ctl', 'stop');
    expect((await status(c, 'esc')).state).toBe('stopped');
    await until(() => !alive(pid), 'the escaped process to die with its server', 10_000);
  });

  test('the same when the session ends (toolsrv closes)', async () => {
    const { env, c, close } = await mcpEnv();
    const m = marker();
    markers.push(m);
    const pid = Number((await env.call(c, { tool: 'mcp__esc__escape', args: { marker: m } })).output.trim());
    await running(m, pid);
    await close();
    await until(() => !alive(pid), 'the escaped process to die with the session', 10_000);
  });

  test('memory spread over processes past the policy limit kills the server, and its status says why', async () => {
    const { env, c } = await mcpEnv();
    const m = marker();
    markers.push(m);
    const before = (await status(c, 'esc')).pid;
    expect((await env.call(c, { tool: 'mcp__esc__hog', args: { marker: m } })).output).toBe('hogging\n');
    // Read while it waits to be started again (a second, the first backoff).
    let st: Record<string, string> = {};
    await until(
      async () => /memory limit/.test((st = await status(c, 'esc')).error ?? ''),
      'the server to be killed for its memory',
      15_000,
    );
    expect(st).toMatchObject({
      state: 'restarting',
      error: 'the server was killed for going over its memory limit',
      pid: '0',
    });
    expect(alive(Number(before))).toBe(false);
    expect(await c.readText('mcp/esc/log')).toMatch(/lost: the server was killed for going over its memory limit/);
    // Its hogs went with it.
    expect(withArg(m)).toEqual([]);
  });

  test('thousands of idle threads kill the server at the thread limit, and its status names that limit', async () => {
    const { env, c } = await mcpEnv();
    const m = marker();
    markers.push(m);
    expect((await env.call(c, { tool: 'mcp__esc__threads', args: { marker: m } })).output).toBe('threading\n');
    let st: Record<string, string> = {};
    await until(
      async () => /limit/.test((st = await status(c, 'esc')).error ?? ''),
      'the server to be killed for its threads',
      15_000,
    );
    // There is no `threads` setting: the words say which one bounds them.
    expect(st.error).toBe(
      'the server was killed for going over its thread limit (16 per process of the process limit)',
    );
    expect(withArg(m)).toEqual([]);
  });
});

/** A resident host that leaves a process behind, or hogs memory, on request; built on the real host runtime. */
const HOST = `
import { spawn } from 'node:child_process';
import { serveHost } from ${JSON.stringify(join(PACKAGE_ROOT, 'dist', 'tools', 'hosts', 'runtime.js'))};
await serveHost({
  name: 'eschost',
  tools: {
    escape: (args) => new Promise((resolve) => {
      const sh = spawn('/bin/sh', ['-c', 'setsid /bin/sleep ' + args.marker + ' </dev/null >/dev/null 2>&1 & echo $!'], {
        stdio: ['ignore', 'pipe', 'ignore'], detached: true,
      });
      let out = '';
      sh.stdout.on('data', (d) => (out += d));
      sh.on('close', () => resolve(out));
    }),
    hog: (args) => {
      for (let i = 0; i < 3; i++)
        spawn(process.execPath, ['-e', 'globalThis.b = Buffer.alloc(120 * 1024 * 1024, 1); setTimeout(() => {}, 600000)', args.marker], { stdio: 'ignore' });
      return new Promise(() => {});
    },
  },
});
`;

async function hostEnv(): Promise<{ env: Env; c: Client }> {
  const w = await startWorkspace('resident-host-', cleanup, {
    ownTools: true,
    prepare: ({ configDir, tools }) => {
      configWith(configDir, {});
      writeFileSync(join(tools, 'hosts', 'eschost.mjs'), HOST);
      for (const n of ['escape', 'hog'])
        writeFileSync(
          join(tools, `${n}.meta`),
          JSON.stringify({ description: n, scope: 'read', host: 'eschost', args: { type: 'object' } }),
        );
    },
  });
  await w.c.write('ctl', 'load escape hog');
  return w;
}

describe('a resident tool host is contained and limited the same way', () => {
  test('a process it leaves behind is gone once the host is stopped (ctl reload retires it)', async () => {
    const { env, c } = await hostEnv();
    const m = marker();
    markers.push(m);
    const r = await env.call(c, { tool: 'escape', args: { marker: m } });
    expect(r).toMatchObject({ status: 'exited', exit: 0 });
    const pid = Number(r.output.trim());
    await running(m, pid);
    const host = env.ts.core.hosts.list()[0]!.pid;
    await c.write('ctl', 'reload');
    await until(() => !alive(host), 'the retired host to exit', 10_000);
    await until(() => !alive(pid), 'the escaped process to die with its host', 10_000);
  });

  test('memory spread over processes past the policy limit kills the host; the call says why', async () => {
    const { env, c } = await hostEnv();
    const m = marker();
    markers.push(m);
    const r = await env.call(c, { tool: 'hog', args: { marker: m } });
    expect(r.status).toBe('killed');
    expect(r.error).toMatch(/the eschost tool host died during the call \(killed for going over its memory limit\)/);
    expect(withArg(m)).toEqual([]);
  });
});
