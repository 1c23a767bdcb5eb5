/**
 * Review of the resident hosts started through the spawner: a host serves many calls, so which calls it may serve
 * is decided by its key (hosts.ts). Since hosts carry the policy's limits, the limits are part of what a host must
 * match: the owner who lowers a limit (a trusted project file, which takes effect on the next call) must not see
 * hosted calls keep running in a host started under the old, higher one — a model would keep the old host busy,
 * and so its old limits, for as long as it likes (every call resets the idle timer).
 *
 * Through the real toolsrv, sandbox helper and spawner; the calls are scripted the way a model makes them.
 * Who may reach what: the host is started by toolsrv for the tool's .meta; a model reaches it only through calls.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { Launcher } from '../../src/platform/launcher.js';
import { SPAWNER, Spawner } from '../../src/platform/spawner.js';
import { SpawnedTransport } from '../../src/toolsrv/mcp/spawned-transport.js';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { PROJECT_POLICY_NAME, trust } from '../../src/toolsrv/sandbox/trust.js';
import { alive, withArg } from '../helpers/processes.js';
import { until, type Env } from '../toolsrv/helpers.js';
import { buildNative, shippedPolicyText } from '../toolsrv/sandbox-helpers.js';
import { startWorkspace, type Workspace } from '../toolsrv/workspace-env.js';

const MiB = 1024 * 1024;

/** A host whose one tool says its process id and the memory rlimit it runs under (the policy's memory limit). */
const HOST = `
import { readFileSync } from 'node:fs';
import { serveHost } from ${JSON.stringify(join(PACKAGE_ROOT, 'dist', 'tools', 'hosts', 'runtime.js'))};
await serveHost({
  name: 'limhost',
  tools: {
    busy: () => {
      // Holds the event loop, as a long synchronous parse would: nothing is read from stdin meanwhile.
      const end = Date.now() + 3000;
      while (Date.now() < end);
      return String(process.pid);
    },
    size: (args) => process.pid + ' ' + args.s.length,
    limits: () => {
      const data = /^Max data size\\s+(\\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))[1];
      return process.pid + ' ' + data;
    },
  },
});
`;

const cleanup: Array<() => Promise<void> | void> = [];
beforeAll(() => buildNative());
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function hostEnv(policy = shippedPolicyText()): Promise<Workspace> {
  const w = await startWorkspace('resident-review-', cleanup, {
    ownTools: true,
    prepare: ({ configDir, tools }) => {
      mkdirSync(configDir);
      writeFileSync(join(configDir, 'sandbox.yaml'), policy);
      writeFileSync(join(tools, 'hosts', 'limhost.mjs'), HOST);
      for (const n of ['limits', 'busy', 'size'])
        writeFileSync(
          join(tools, `${n}.meta`),
          JSON.stringify({ description: n, scope: 'read', host: 'limhost', args: { type: 'object' } }),
        );
    },
  });
  await w.c.write('ctl', 'load limits busy size shell');
  return w;
}

const limits = async (env: Env, c: Client): Promise<{ pid: number; data: number }> => {
  const r = await env.call(c, { tool: 'limits', args: {} });
  expect(r, r.output).toMatchObject({ status: 'exited', exit: 0 });
  const [pid, data] = r.output.trim().split(' ');
  return { pid: Number(pid), data: Number(data) };
};

describe('a resident host serves only calls whose limits are its own', () => {
  test('after the owner lowers the memory limit (a trusted project file), the next hosted call runs under it', async () => {
    const { env, c, cwd, configDir } = await hostEnv();
    const before = await limits(env, c);
    expect(before.data).toBe(2048 * MiB); // the shipped policy's 2 GiB
    // Only a limit changes: the Landlock rules, and so the wrapped command, stay the same.
    writeFileSync(join(cwd, PROJECT_POLICY_NAME), 'limits:\n  memory: 256 MiB\n');
    trust(configDir, cwd);
    const after = await limits(env, c);
    expect(after.data).toBe(256 * MiB);
    expect(after.pid).not.toBe(before.pid);
  });
});

/**
 * clone(CLONE_PARENT) makes the new process a child of the caller's parent. Made by a call's own process (the
 * spawner's child: `exec` in the shell), it is the spawner's child, outside the tree the spawner counts for the
 * call's process and memory limits: it is killed as a stray within 50 ms, but the call that made it is never
 * charged, so it can make them without end (measured on the old code: 1133 in 3 s under a limit of 8 processes,
 * 283 MiB at once under a limit of 256 MiB, and the call exited 0). The sandbox refuses the flag.
 */
describe('a call cannot put processes beside itself, outside the tree its limits count', () => {
  test("clone(CLONE_PARENT) from the call's own process is refused", async () => {
    const lowered = shippedPolicyText().replace(/processes: 256/, 'processes: 8');
    expect(lowered).not.toBe(shippedPolicyText());
    const { env, c } = await hostEnv(lowered);
    const nr = process.arch === 'arm64' ? 220 : 56;
    // CLONE_PARENT | SIGCHLD; the sibling sleeps (and is the spawner's stray), the caller counts what it made.
    const perl = `my ($n, $e) = (0, ""); for (1..40) { my $r = syscall(${nr}, 0x8000 | 17, 0, 0, 0, 0); if ($r == 0) { exec "/bin/sleep", "30"; exit 0 } if ($r < 0) { $e = $! + 0; last } $n++; select(undef, undef, undef, 0.01) } print "made $n errno $e\\n"`;
    const r = await env.call(c, { tool: 'shell', args: { command: `exec perl -e '${perl}'` } });
    expect(r.output, JSON.stringify(r)).toBe('made 0 errno 1\n'); // EPERM
  });
  test('nor can it clear its subreaper flag, which would hand its orphans to the spawner the same way', async () => {
    const { env, c } = await hostEnv();
    const nr = process.arch === 'arm64' ? 167 : 157;
    // prctl(PR_SET_CHILD_SUBREAPER, 0); then a child whose own child it leaves behind: that orphan would be the
    // spawner's (a stray, uncounted), not the call's.
    const perl = `my $r = syscall(${nr}, 36, 0, 0, 0, 0); print "prctl $r errno ", ($r < 0 ? $! + 0 : ""), "\\n"`;
    const r = await env.call(c, { tool: 'shell', args: { command: `exec perl -e '${perl}'` } });
    expect(r.output, JSON.stringify(r)).toBe('prctl -1 errno 1\n'); // EPERM
  });
});

/**
 * What the Node spawn did for a stdio server before the spawner and still does where there is none (no native
 * build, `spawner: false`): stopping it ends its whole process group, also when it ignores the end of its input
 * and SIGTERM. The same through the spawner.
 */
describe('stopping a stdio server that will not stop ends it and its process group', () => {
  for (const native of [false, true])
    test(native ? 'through the spawner' : 'through the Node fallback', async () => {
      const launcher = Launcher.create({ native });
      cleanup.push(() => launcher.close());
      expect(launcher.native).toBe(native);
      // A number of seconds no other process sleeps: how its child is found.
      const m = `3${String(process.pid % 100000).padStart(5, '0')}.${native ? 2 : 1}`;
      const server = `trap "" TERM; /bin/sleep ${m} & while :; do read -r l || sleep 1; done`;
      const t = new SpawnedTransport(
        launcher,
        { file: '/bin/sh', args: ['-c', server], env: { PATH: '/usr/bin:/bin' } },
        '/',
        () => undefined,
      );
      await t.start();
      await until(() => withArg(m).length === 1, 'the server to start its child', 5000);
      const child = withArg(m)[0]!;
      await t.close();
      expect(t.ended).toMatch(/killed by SIGKILL|exited/);
      expect(alive(t.pid)).toBe(false);
      await until(() => !alive(child), 'its child to be gone', 5000);
    });
});

/**
 * A host that reads none of its requests while calls keep coming (its event loop held by a long call): past
 * 16 MiB unread the spawner closes its stdin. The calls sent to it fail saying so, and the next call gets a new
 * host at once — before, the host went on taking calls it would never read until it happened to exit, and the
 * calls then failed as "died during the call (exit code 0)" with a request cut in two as the reason.
 */
describe('a host that leaves 16 MiB of requests unread', () => {
  test('is stopped: its calls say why, and the next call runs in a new host', async () => {
    const { env, c } = await hostEnv();
    const first = Number((await env.call(c, { tool: 'size', args: { s: 'x' } })).output.split(' ')[0]);
    const busy = env.call(c, { tool: 'busy', args: {} });
    await until(() => env.ts.core.hosts.list()[0]?.inflight === 1, 'the busy call to reach the host', 5000);
    // A call request is under 1 MiB (one 9P write): twenty of 900 KiB.
    const big = 'y'.repeat(900 * 1024);
    const calls = await Promise.all(Array.from({ length: 20 }, () => env.call(c, { tool: 'size', args: { s: big } })));
    const said =
      'the limhost tool host died during the call (it left 16 MiB of requests unread, so its input was closed)';
    for (const r of calls.filter((x) => x.status !== 'exited')) expect(r.error).toContain(said);
    expect(calls.filter((x) => x.status !== 'exited').length).toBeGreaterThan(0);
    expect((await busy).error).toContain(said);
    await until(() => !alive(first), 'the deaf host to be gone', 5000);
    const next = await env.call(c, { tool: 'size', args: { s: 'x' } });
    expect(next).toMatchObject({ status: 'exited', exit: 0 });
    expect(Number(next.output.split(' ')[0])).not.toBe(first);
  });
});

/** The pipes of one long-lived process (its stdin's write end among them) never cross into another. */
describe('a long-lived process is handed only its own stdin, stdout and stderr', () => {
  test('not the pipes of another one that runs', async () => {
    const s = Spawner.find(SPAWNER)!;
    cleanup.push(() => s.close());
    const env = { PATH: '/usr/bin:/bin' };
    const quiet = { errorOutput: () => undefined, exited: () => undefined, closed: () => undefined };
    const lost: string[] = [];
    const a = await s.spawnInteractive(
      { file: 'cat', args: [], cwd: '/', env, stdin: '' },
      { ...quiet, output: () => undefined, lost: (w) => lost.push(w) },
    );
    let out = '';
    let listed = false;
    await s.spawnInteractive(
      { file: 'ls', args: ['/proc/self/fd'], cwd: '/', env, stdin: '' },
      {
        ...quiet,
        output: (b) => (out += Buffer.from(b).toString()),
        closed: () => (listed = true),
        lost: (w) => lost.push(w),
      },
    );
    await until(() => listed, 'the listing', 5000);
    // ls's own handle on /proc/self/fd is the only one beyond 0-2.
    expect(out.trim().split('\n').map(Number).sort()).toEqual([0, 1, 2, 3]);
    a.endInput();
    expect(lost).toEqual([]);
  });
});
