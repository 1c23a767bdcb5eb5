/**
 * Resident tool hosts (src/toolsrv/exec/hosts.ts) through a real, sandboxed toolsrv: one host process serves
 * many calls and loads once; calls run concurrently; a flush, a kill or a timeout ends one call and not the
 * others; a crash fails the calls in flight with the reason and the next call gets a new host; idle hosts
 * stop; hosts are keyed by cwd and run under the caller's Landlock rules; ctl reload retires them.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import type { ProcResult } from '../../src/toolsrv/protocol.js';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { startEnv, until, type Env } from './helpers.js';
import { buildNative } from './sandbox-helpers.js';

/** A host with tools that sleep, stream, crash, read and connect, built on the real host runtime. */
const HOST = `
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { serveHost } from ${JSON.stringify(join(PACKAGE_ROOT, 'dist', 'tools', 'hosts', 'runtime.js'))};
// Work done once per process (what a grammar load is for codeintel).
const loads = { heavy: 1 };
let cancelled = 0;
const wait = (ms, signal) => new Promise((resolve, reject) => {
  const t = setTimeout(resolve, ms);
  signal?.addEventListener('abort', () => { clearTimeout(t); cancelled++; reject(signal.reason); }, { once: true });
});
await serveHost({
  name: 'testhost',
  stats: () => ({ loads, cancelled }),
  tools: {
    echo: (args, ctx) => JSON.stringify({ args, cwd: ctx.cwd, agent: ctx.env.OLLIE_AGENT_ID }) + '\\n',
    sleep: async (args, ctx) => { await wait(args.ms, ctx.signal); return 'slept\\n'; },
    stubborn: async (args) => { await wait(args.ms); return 'done anyway\\n'; },
    stream: async (_a, ctx) => { ctx.write('a\\n'); await wait(50); return 'b\\n'; },
    fail: () => { throw new Error('it went wrong'); },
    crash: () => { setTimeout(() => process.exit(3), 50); return new Promise(() => {}); },
    read: (args) => readFileSync(args.path, 'utf8'),
    connect: (args) => new Promise((resolve) => {
      const s = net.connect(args.port, '127.0.0.1');
      s.on('connect', () => { s.destroy(); resolve('connected\\n'); });
      s.on('error', (e) => resolve('error ' + e.code + '\\n'));
    }),
  },
});
`;

const TOOL_NAMES = ['echo', 'sleep', 'stubborn', 'stream', 'fail', 'crash', 'read', 'connect'];

function writeHostTools(dir: string, hostSource = HOST, hostName = 'testhost'): void {
  mkdirSync(join(dir, 'hosts'), { recursive: true });
  writeFileSync(join(dir, 'hosts', `${hostName}.mjs`), hostSource);
  for (const n of TOOL_NAMES) {
    writeFileSync(
      join(dir, `${n}.meta`),
      JSON.stringify({ description: n, scope: 'read', host: hostName, args: { type: 'object' } }),
    );
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

interface HostEnv {
  env: Env;
  c: Client;
  cwd: string;
  call(
    tool: string,
    args?: Record<string, unknown>,
    o?: { signal?: AbortSignal; flags?: Record<string, unknown>; client?: Client },
  ): Promise<ProcResult>;
  host(): { pid: number; calls: number; inflight: number; cwd: string };
  stats(): Promise<Record<string, unknown>>;
}

const opened: Array<{ env: Env; dirs: string[] }> = [];

async function hostEnv(o: { hostIdleMs?: number; hostSource?: string } = {}): Promise<HostEnv> {
  const tools = mkdtempSync(join(tmpdir(), 'hosts-tools-'));
  const cwd = mkdtempSync(join(tmpdir(), 'hosts-cwd-'));
  writeHostTools(tools, o.hostSource);
  const env = await startEnv(
    {},
    {
      yolo: false,
      toolDirs: [tools, SHIPPED_TOOLS],
      cwd,
      ...(o.hostIdleMs !== undefined && { hostIdleMs: o.hostIdleMs }),
    },
  );
  opened.push({ env, dirs: [tools, cwd] });
  const c = await env.client('agent1');
  await c.write('ctl', `load ${TOOL_NAMES.join(' ')}`);
  const host = () => {
    const h = env.ts.core.hosts.list();
    expect(h).toHaveLength(1);
    return h[0]!;
  };
  return {
    env,
    c,
    cwd,
    host,
    call: (tool, args = {}, x = {}) =>
      env.call(x.client ?? c, { tool, args, ...(x.flags && { flags: x.flags }) }, x.signal),
    stats: async () => (await env.ts.core.hosts.stats(host().pid)) as Record<string, unknown>,
  };
}

beforeAll(() => buildNative());
afterEach(async () => {
  for (const o of opened.splice(0)) {
    await o.env.close();
    for (const d of o.dirs) rmSync(d, { recursive: true, force: true });
  }
});

describe('resident tool hosts', () => {
  test('one host serves many calls: started once, loaded once, its calls counted', async () => {
    const h = await hostEnv();
    const a = await h.call('echo', { n: 1 });
    expect(a).toMatchObject({ status: 'exited', exit: 0 });
    expect(JSON.parse(a.output)).toEqual({ args: { n: 1 }, cwd: h.cwd, agent: 'agent1' });
    const pid = h.host().pid;
    for (let i = 0; i < 5; i++) expect((await h.call('echo', { n: i })).exit).toBe(0);
    expect(h.host()).toMatchObject({ pid, calls: 6, inflight: 0 });
    expect(await h.stats()).toMatchObject({ name: 'testhost', pid, calls: 6, loads: { heavy: 1 } });
  });

  test('the codeintel host loads a grammar once for all calls', async () => {
    const h = await hostEnv();
    writeFileSync(join(h.cwd, 'a.ts'), 'export function a() {}\n');
    writeFileSync(join(h.cwd, 'b.ts'), 'export class B {}\n');
    await h.c.write('ctl', 'load code_outline');
    for (const p of ['a.ts', 'b.ts', 'a.ts']) expect((await h.call('code_outline', { path: p })).exit).toBe(0);
    const ci = h.env.ts.core.hosts.list().find((x) => x.name === 'codeintel')!;
    const st = (await h.env.ts.core.hosts.stats(ci.pid)) as {
      calls: number;
      loads: Record<string, number>;
      outlines: { parsed: number; cached: number };
    };
    expect(st).toMatchObject({ calls: 3, loads: { runtime: 1, typescript: 1 }, outlines: { parsed: 2, cached: 1 } });
  });

  test('calls run concurrently in one host; output streams into the proc record', async () => {
    const h = await hostEnv();
    await h.call('echo');
    const t = Date.now();
    const rs = await Promise.all([
      h.call('sleep', { ms: 400 }),
      h.call('sleep', { ms: 400 }),
      h.call('sleep', { ms: 400 }),
    ]);
    expect(rs.map((r) => r.output)).toEqual(['slept\n', 'slept\n', 'slept\n']);
    expect(Date.now() - t).toBeLessThan(1100);
    const s = await h.call('stream');
    expect(s).toMatchObject({ status: 'exited', exit: 0, output: 'a\nb\n', outputBytes: 4 });
    const stat = await h.c.readText(`proc/${s.pid}/stat`);
    expect(stat).toContain('tool=stream');
    expect(stat).toContain(`os_pid=${h.host().pid}`);
    expect(await h.c.readText(`proc/${s.pid}/out`)).toBe('a\nb\n');
    const f = await h.call('fail');
    expect(f).toMatchObject({ status: 'exited', exit: 1, output: 'fail: it went wrong\n' });
  });

  test('path locks hold for hosted calls: writes to one path wait for each other, not for other paths', async () => {
    const h = await hostEnv();
    const dir = h.env.ts.core.catalog.dirs[0]!;
    writeFileSync(
      join(dir, 'hold.meta'),
      JSON.stringify({
        description: 'hold a path',
        scope: 'write',
        pathArg: 'path',
        host: 'testhost',
        args: { type: 'object', properties: { path: { type: 'string' }, ms: { type: 'number' } }, required: ['path'] },
      }),
    );
    // The host serves it under its own name: an alias of sleep.
    writeFileSync(
      join(dir, 'hosts', 'testhost.mjs'),
      HOST.replace(
        'sleep: async',
        "hold: async (args, ctx) => { await wait(args.ms, ctx.signal); return 'held\\n'; },\n    sleep: async",
      ),
    );
    await h.c.write('ctl', 'reload\nload hold');
    await h.call('echo');
    let t = Date.now();
    await Promise.all([h.call('hold', { path: 'a', ms: 400 }), h.call('hold', { path: 'a', ms: 400 })]);
    expect(Date.now() - t).toBeGreaterThanOrEqual(790);
    t = Date.now();
    const rs = await Promise.all([h.call('hold', { path: 'a', ms: 400 }), h.call('hold', { path: 'b', ms: 400 })]);
    expect(rs.map((r) => r.output)).toEqual(['held\n', 'held\n']);
    expect(Date.now() - t).toBeLessThan(780);
  });

  test('a flushed call is cancelled in the host; the others go on in the same process', async () => {
    const h = await hostEnv();
    await h.call('echo');
    const pid = h.host().pid;
    const ac = new AbortController();
    const doomed = h.call('sleep', { ms: 10_000 }, { signal: ac.signal });
    doomed.catch(() => undefined);
    const other = h.call('sleep', { ms: 600 });
    await until(() => h.host().inflight === 2);
    const t = Date.now();
    ac.abort();
    await expect(doomed).rejects.toThrow();
    const p = [...h.env.ts.core.procs.values()].find((x) => x.meta.tool === 'sleep')!;
    await p.done;
    expect(p.status).toBe('killed');
    expect(Date.now() - t).toBeLessThan(500);
    expect(await other).toMatchObject({ status: 'exited', exit: 0, output: 'slept\n' });
    expect(h.host().pid).toBe(pid);
    await until(async () => (await h.stats()).cancelled === 1);
  });

  test('ctl kill and a timeout end one call; a call that ignores the cancel is given up on', async () => {
    const h = await hostEnv();
    const bg = await h.call('sleep', { ms: 10_000 }, { flags: { background: true } });
    expect(bg.status).toBe('background');
    await h.c.write(`proc/${bg.pid}/ctl`, 'kill');
    const p = h.env.ts.core.procs.get(bg.pid)!;
    await p.done;
    expect(p.status).toBe('killed');
    const t = Date.now();
    const slow = await h.call('stubborn', { ms: 5000 }, { flags: { timeout: 0.3 } });
    expect(slow.status).toBe('timeout');
    expect(slow.error).toMatch(/timed out/);
    // SIGTERM becomes a cancel the tool ignores; a second later the call ends anyway (SIGKILL's place).
    expect(Date.now() - t).toBeLessThan(2500);
    expect((await h.call('echo')).exit).toBe(0);
    expect(h.host().calls).toBe(3);
  });

  test('a crashed host fails the calls in flight with the reason; the next call starts a new one', async () => {
    const h = await hostEnv();
    await h.call('echo');
    const pid = h.host().pid;
    const waiting = h.call('sleep', { ms: 10_000 });
    const crash = await h.call('crash');
    expect(crash.status).toBe('killed');
    expect(crash.error).toMatch(
      /^the testhost tool host died during the call \(exit code 3\).*; it is started again on the next call$/,
    );
    expect((await waiting).error).toBe(crash.error);
    await until(() => !alive(pid));
    expect(await h.call('echo')).toMatchObject({ status: 'exited', exit: 0 });
    expect(h.host().pid).not.toBe(pid);
  });

  test('a host that cannot start says why', async () => {
    const h = await hostEnv({ hostSource: "throw new Error('boom at start');\n" });
    const r = await h.call('echo');
    expect(r.status).toBe('killed');
    expect(r.error).toMatch(
      /^the testhost tool host could not start \(exit code 1\): .*boom at start.*; it is started again on the next call$/,
    );
  });

  test('an idle host stops; the next call starts another', async () => {
    const h = await hostEnv({ hostIdleMs: 300 });
    await h.call('echo');
    const pid = h.host().pid;
    await until(() => !alive(pid) && h.env.ts.core.hosts.list().length === 0, 'the idle host to stop');
    expect((await h.call('echo')).exit).toBe(0);
    expect(h.host().pid).not.toBe(pid);
  });

  test('hosts are per cwd, and run under the caller’s sandbox rules', async () => {
    const h = await hostEnv();
    writeFileSync(join(h.cwd, 'inside.txt'), 'inside\n');
    const outside = mkdtempSync(join(tmpdir(), 'hosts-outside-'));
    opened[opened.length - 1]!.dirs.push(outside);
    writeFileSync(join(outside, 'secret.txt'), 'secret\n');
    expect((await h.call('read', { path: join(h.cwd, 'inside.txt') })).output).toBe('inside\n');
    const denied = await h.call('read', { path: join(outside, 'secret.txt') });
    expect(denied).toMatchObject({ exit: 1 });
    expect(denied.output).toMatch(/EACCES/);
    const srv = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    try {
      const port = (srv.address() as net.AddressInfo).port;
      expect((await h.call('connect', { port })).output).toBe('error EACCES\n');
    } finally {
      srv.close();
    }
    // Another agent in another cwd gets a host of its own, with that cwd's rules.
    const c2 = await h.env.client('agent2');
    await c2.write('ctl', `cwd ${outside}\nload read`);
    expect((await h.call('read', { path: join(outside, 'secret.txt') }, { client: c2 })).output).toBe('secret\n');
    const hosts = h.env.ts.core.hosts.list();
    expect(hosts.map((x) => x.cwd).sort()).toEqual([h.cwd, outside].sort());
    expect(new Set(hosts.map((x) => x.pid)).size).toBe(2);
  });

  test('an approved bypass runs in an unconfined host of its own', async () => {
    const h = await hostEnv();
    const outside = mkdtempSync(join(tmpdir(), 'hosts-outside-'));
    opened[opened.length - 1]!.dirs.push(outside);
    writeFileSync(join(outside, 'secret.txt'), 'secret\n');
    expect((await h.call('read', { path: join(outside, 'secret.txt') })).output).toMatch(/EACCES/);
    const ctl = await h.env.client('');
    const ac = new AbortController();
    const pending = ctl.stream('bypass/pending', { signal: ac.signal });
    const call = h.call('read', { path: join(outside, 'secret.txt') }, { flags: { bypass: true } });
    const req = JSON.parse(new TextDecoder().decode((await pending.next()).value as Uint8Array)) as { id: string };
    await ctl.write('bypass/resolve', `${req.id} approve`);
    expect(await call).toMatchObject({ status: 'exited', exit: 0, output: 'secret\n', bypassed: true });
    ac.abort();
    await pending.return(undefined);
    // The sandboxed host is untouched and still refuses.
    expect((await h.call('read', { path: join(outside, 'secret.txt') })).output).toMatch(/EACCES/);
    expect(h.env.ts.core.hosts.list()).toHaveLength(2);
  });

  test('ctl reload retires the hosts: running calls finish, new calls get a new host', async () => {
    const h = await hostEnv();
    await h.call('echo');
    const pid = h.host().pid;
    const running = h.call('sleep', { ms: 500 });
    await until(() => h.host().inflight === 1);
    await h.c.write('ctl', 'reload');
    expect((await h.call('echo')).exit).toBe(0);
    expect(h.host().pid).not.toBe(pid);
    expect(await running).toMatchObject({ exit: 0, output: 'slept\n' });
    await until(() => !alive(pid));
  });

  test('registry: a host tool needs its host program, and has no cmd or tty of its own', async () => {
    const h = await hostEnv();
    const dir = h.env.ts.core.catalog.dirs[0]!;
    writeFileSync(join(dir, 'orphan.meta'), JSON.stringify({ description: 'x', host: 'nohost' }));
    writeFileSync(join(dir, 'both.meta'), JSON.stringify({ description: 'x', host: 'testhost', cmd: 'true' }));
    writeFileSync(join(dir, 'badname.meta'), JSON.stringify({ description: 'x', host: '../x' }));
    await h.c.write('ctl', 'reload');
    const cat = JSON.parse(await h.c.readText('catalog')) as Array<{ name: string; error?: string }>;
    const err = (n: string): string | undefined => cat.find((e) => e.name === n)?.error;
    expect(err('orphan')).toMatch(/^host nohost: no hosts\/nohost\.mjs in /);
    expect(err('both')).toBe('host and cmd exclude each other (a hosted tool runs in its host)');
    expect(err('badname')).toBe('host: "../x" is not a host name (letters, digits, _ . -)');
    expect(err('echo')).toBeUndefined();
  });
});

afterAll(async () => {
  for (const o of opened.splice(0)) await o.env.close();
});
