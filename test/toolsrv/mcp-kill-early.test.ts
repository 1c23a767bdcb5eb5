/**
 * A stdio MCP server whose rights the policy takes back right after it was started (connection.ts, recheck: a
 * re-check that follows a start before the spawner has said the server's pid) is killed as it starts, not left to
 * close()'s grace: a server that ignores the end of its stdin and SIGTERM would otherwise run for 4 s more under
 * the policy it was started with.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Launcher } from '../../src/platform/launcher.js';
import { SpawnedTransport } from '../../src/toolsrv/mcp/spawned-transport.js';
import { until } from '../wait.js';

const launcher = Launcher.create();
afterAll(() => launcher.close());

describe.skipIf(!launcher.native)('SpawnedTransport.kill before the server runs', () => {
  it('kills a server that ignores stdin EOF and SIGTERM as soon as it starts', async () => {
    const t = new SpawnedTransport(
      launcher,
      {
        file: '/bin/sh',
        args: ['-c', 'trap "" TERM; while :; do sleep 1; done'],
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      },
      '/',
      () => undefined,
    );
    const started = t.start();
    expect(t.pid).toBe(0);
    t.kill();
    await started;
    try {
      expect(await until(() => t.ended, 'the server to be killed')).toMatch(/SIGKILL/);
    } finally {
      await t.close();
    }
  });
});
