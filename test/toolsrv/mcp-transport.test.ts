/**
 * The stdio MCP transport of ours (src/toolsrv/mcp/spawned-transport.ts) on its own: the SDK's Client over it to
 * the real fixture server (e2e/fixtures/mcp-server.mjs) started by the real spawner — messages both ways, the
 * server's stderr apart, its pid, close ending it — and a "server" that never reads its requests, whose stdin the
 * spawner closes past 16 MiB: the transport says so and ends it.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { readFileSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { Launcher } from '../../src/platform/launcher.js';
import { SpawnedTransport } from '../../src/toolsrv/mcp/spawned-transport.js';
import { until } from './helpers.js';
import { FIXTURE } from './mcp-helpers.js';
import { buildNative } from './sandbox-helpers.js';

const ENV = { PATH: '/usr/local/bin:/usr/bin:/bin' };

const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

let launcher: Launcher | undefined;
beforeAll(() => buildNative());
afterEach(() => {
  launcher?.close();
  launcher = undefined;
});

function native(): Launcher {
  launcher = Launcher.create();
  if (!launcher.native) throw new Error('native/build/ollie-spawner is not built: run node scripts/build-native.mjs');
  return launcher;
}

describe('SpawnedTransport', () => {
  test('the SDK client talks to a real server through the spawner; stderr comes apart; close ends the server', async () => {
    let stderr = '';
    const t = new SpawnedTransport(
      native(),
      { file: process.execPath, args: [FIXTURE], env: ENV },
      '/',
      (s) => (stderr += s),
    );
    const client = new Client({ name: 'test', version: '1' }, { capabilities: {} });
    await client.connect(t);
    expect(t.pid).toBeGreaterThan(0);
    // Its parent is the spawner, not this process: it was not started with Node's spawn.
    const ppid = Number(
      readFileSync(`/proc/${t.pid}/stat`, 'utf8')
        .replace(/^.*\) /, '')
        .split(' ')[1],
    );
    expect(ppid).not.toBe(process.pid);
    const r = await client.callTool({ name: 'echo', arguments: { text: 'abc' } });
    expect(r.content).toEqual([{ type: 'text', text: 'echo: CBA' }]);
    // Many requests at once, answered each to its own id.
    const many = await Promise.all(
      Array.from({ length: 50 }, (_, i) => client.callTool({ name: 'add', arguments: { a: i, b: 1 } })),
    );
    expect(many.map((m) => (m.content as Array<{ text: string }>)[0]!.text)).toEqual(
      Array.from({ length: 50 }, (_, i) => String(i + 1)),
    );
    await until(() => stderr.includes(`fixture: serving on stdio, pid ${t.pid}`), 'the server to log on stderr', 5000);
    const pid = t.pid;
    let closed = false;
    client.onclose = () => (closed = true);
    await client.close();
    expect(closed).toBe(true);
    expect(alive(pid)).toBe(false);
    expect(t.ended).toBe('the server exited with status 0');
    await expect(t.send({ jsonrpc: '2.0', method: 'ping', id: 1 })).rejects.toThrow('Not connected');
  });

  test('a server that cannot start fails the connect with the reason', async () => {
    const t = new SpawnedTransport(native(), { file: '/nonexistent/mcp-server', args: [], env: ENV }, '/', () => {});
    const client = new Client({ name: 'test', version: '1' }, { capabilities: {} });
    await expect(client.connect(t)).rejects.toThrow(/cannot start \/nonexistent\/mcp-server: exec: ENOENT/);
  });

  test('a server that reads none of its requests: past 16 MiB its stdin is closed, the error said, and it is ended', async () => {
    const errors: string[] = [];
    // /bin/sleep stands for a server stuck before reading (a hung event loop).
    const t = new SpawnedTransport(native(), { file: '/bin/sleep', args: ['1000'], env: ENV }, '/', () => {});
    let closed = false;
    t.onerror = (e) => errors.push(e.message);
    t.onclose = () => (closed = true);
    await t.start();
    const big = 'x'.repeat(1024 * 1024);
    for (let i = 0; i < 20; i++) await t.send({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { big } });
    await until(() => closed, 'the stuck server to be ended', 10_000);
    expect(errors).toEqual(['the server left 16 MiB of requests unread; its stdin was closed']);
    expect(t.ended).toBe('the server was killed by SIGTERM');
  });
});
