/**
 * Attack on the launcher's fallback path through a launch that keeps stderr apart: prompt commands and hooks
 * (src/olliesrv/agent/promptcmd.ts run(), src/olliesrv/hooks/runner.ts) ran through Node's spawn, where a process
 * that leaves its group (setsid, a double fork) outlives the launch. A hook or prompt command the owner trusted
 * still runs what the agent can write (`npm test` runs the workspace's package.json scripts, git runs the
 * workspace's hooks): the agent's script starts a process in a session of its own, which lived on after the
 * command, the turn and the session. Where the spawner is built, those launches must be contained like any other.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { run } from '../../src/olliesrv/agent/promptcmd.js';
import { Launcher } from '../../src/platform/launcher.js';
import { alive, until } from '../toolsrv/helpers.js';

const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
const dirs: string[] = [];
const strays: number[] = [];

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  for (const pid of strays.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
});

/** What the agent's script does: a process in a session of its own, its pid written down, then a word on each stream. */
const escape = (dir: string): string =>
  `setsid sh -c 'echo $$ > ${dir}/pid; exec sleep 1017.3' >/dev/null 2>&1 </dev/null & while [ ! -s ${dir}/pid ]; do :; done; echo out; echo warn >&2`;

describe('a launch with stderr apart is contained where the spawner is built', () => {
  it('the launcher: a process that left the group dies with the launch; stderr still comes apart', async () => {
    expect(Launcher.create().native, 'native/build/ollie-spawner is built').toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'ollie-launch-attack-'));
    dirs.push(dir);
    const r = await run('/bin/sh', ['-c', escape(dir)], dir, ENV, 10_000, 1 << 20);
    expect(r).toMatchObject({ out: 'out\n', err: 'warn\n', code: 0 });
    const pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
    strays.push(pid);
    expect(await until(() => !alive(pid))).toBe(true);
  });
});
