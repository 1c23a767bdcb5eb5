/**
 * The real toolsrv process (dist/toolsrv/main.js: `npm run build:node` first), spawned as olliesrv spawns it,
 * and the olliesrv side (ToolClient, ToolsrvKeeper, ToolsrvSessionTools) against it.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ToolClient } from '../../src/olliesrv/toolclient/client.js';
import type { BypassEvent } from '../../src/olliesrv/toolclient/host.js';
import { ToolsrvSessionTools } from '../../src/olliesrv/toolclient/session-tools.js';
import {
  spawnToolsrv,
  ToolsrvKeeper,
  TOOLSRV_ENTRY,
  type SpawnOptions,
  type ToolsrvProcess,
} from '../../src/olliesrv/toolclient/spawn.js';
import { BypassRuleStore } from '../../src/olliesrv/store/bypass.js';
import { openDatabase } from '../../src/olliesrv/store/db.js';
import { alive, BASIC, sleep, until, writeTools } from './helpers.js';

const dirs: string[] = [];
const procs: ToolsrvProcess[] = [];
const cleanups: Array<() => Promise<void> | void> = [];

function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'toolsrv-proc-'));
  dirs.push(d);
  return d;
}

/** Options for a toolsrv in a fresh directory with the test tools. */
function opts(extra: Partial<SpawnOptions> = {}): SpawnOptions {
  const d = tmp();
  writeTools(join(d, 'tools'), BASIC);
  return {
    runtimeDir: join(d, 'run'),
    name: 'test',
    toolDirs: [join(d, 'tools')],
    cwd: d,
    log: () => undefined,
    ...extra,
  };
}

async function start(extra: Partial<SpawnOptions> = {}): Promise<ToolsrvProcess> {
  const p = await spawnToolsrv(opts(extra));
  procs.push(p);
  return p;
}

beforeAll(() => {
  if (!existsSync(TOOLSRV_ENTRY)) throw new Error(`${TOOLSRV_ENTRY} is missing: run npm run build:node first`);
});

afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
  for (const p of procs.splice(0)) await p.stop(500);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('toolsrv process', () => {
  it('starts, serves an authenticated client, and keeps the secret out of argv and the environment', async () => {
    const p = await start({ yolo: true, sessionId: 's-1' });
    expect(readFileSync(p.pidFile, 'utf8').trim()).toBe(String(p.pid));
    expect(statSync(p.socket).mode & 0o777).toBe(0o600);
    expect(readFileSync(`/proc/${p.pid}/cmdline`, 'utf8')).not.toContain(p.secret);
    expect(readFileSync(`/proc/${p.pid}/environ`, 'utf8')).not.toContain(p.secret);
    await expect(ToolClient.connect({ socket: p.socket, secret: 'wrong' }, 'a')).rejects.toThrow(
      /authentication failed/,
    );
    const host = await ToolClient.connect(p, 'agent-x');
    cleanups.push(() => host.close());
    expect(await host.list()).toEqual({ rev: 1, tools: [] });
    await host.ctl('load sh');
    const { rev, tools } = await host.list();
    expect(rev).toBe(2);
    expect(tools.map((t) => t.name)).toEqual(['sh']);
    expect(await host.rev()).toBe(2);
    await expect(host.ctl('load nope')).rejects.toThrow(/no tool "nope"/);
    const r = await host.call({ tool: 'sh', args: { command: 'echo "$OLLIE_SESSION_ID $OLLIE_AGENT_ID"' } });
    expect(r).toMatchObject({ status: 'exited', exit: 0, output: 's-1 agent-x\n' });
    const info = await host.info();
    expect(info.pid).toBe(p.pid);
    // Abort flushes the call, which kills the tool.
    const ac = new AbortController();
    const call = host.call({ tool: 'sh', args: { command: 'sleep 30' } }, ac.signal);
    call.catch(() => undefined);
    await until(async () => (await host.stat(r.pid + 1)).state === 'running', 'the call to run');
    ac.abort();
    await expect(call).rejects.toThrow();
    const pid = r.pid + 1;
    await until(async () => (await host.stat(pid)).status === 'killed');
    // Background: start, output, wait, interrupt.
    const bgPid = await host.start({ tool: 'sh', args: { command: 'echo bg; exit 5' } });
    expect(await host.wait(bgPid)).toBe(5);
    const chunks: string[] = [];
    for await (const c of host.output(bgPid)) chunks.push(new TextDecoder().decode(c));
    expect(chunks.join('')).toBe('bg\n');
    const ic = new AbortController();
    for await (const n of host.interrupts(ic.signal)) {
      expect(n).toMatchObject({ pid: bgPid, status: 'exited', exit: 5 });
      ic.abort();
    }
  });

  it('exits when its parent dies, killing the tools it runs', async () => {
    const o = opts({ yolo: true });
    const spawnUrl = pathToFileURL(join(TOOLSRV_ENTRY, '..', '..', 'olliesrv', 'toolclient', 'spawn.js')).href;
    // A parent that spawns toolsrv as olliesrv does, reports it, and then just lives until it is killed.
    const script = `
      const { spawnToolsrv } = await import(${JSON.stringify(spawnUrl)});
      const p = await spawnToolsrv(${JSON.stringify({ ...o, log: undefined })});
      process.stdout.write(JSON.stringify({ pid: p.pid, socket: p.socket, secret: p.secret }) + '\\n');
      setInterval(() => {}, 1000);
    `;
    const parent = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    cleanups.push(() => void parent.kill('SIGKILL'));
    const line = await new Promise<string>((resolve) => {
      let buf = '';
      parent.stdout!.on('data', (d: Buffer) => {
        buf += d.toString();
        if (buf.includes('\n')) resolve(buf.slice(0, buf.indexOf('\n')));
      });
    });
    const child = JSON.parse(line) as { pid: number; socket: string; secret: string };
    const host = await ToolClient.connect(child, 'a');
    cleanups.push(() => host.close());
    await host.ctl('load sh');
    const bgPid = await host.start({ tool: 'sh', args: { command: 'sleep 60' } });
    const toolPid = Number((await host.stat(bgPid)).os_pid);
    expect(alive(toolPid)).toBe(true);
    parent.kill('SIGKILL');
    await until(() => !alive(child.pid), 'toolsrv to exit');
    await until(() => !alive(toolPid), 'the tool process to exit');
    expect(existsSync(join(o.runtimeDir, 'toolsrv-test.pid'))).toBe(false);
  });

  it('exits after the start grace with no connection, and after the idle time once connections are gone', async () => {
    const lonely = await start({ yolo: true, graceMs: 300, idleMs: 60_000 });
    const t = Date.now();
    await lonely.exited;
    expect(Date.now() - t).toBeLessThan(3000);

    const idle = await start({ yolo: true, graceMs: 300, idleMs: 400 });
    const host = await ToolClient.connect(idle, 'a');
    await sleep(800); // past the grace: an open connection keeps it
    expect(idle.alive).toBe(true);
    await host.close();
    const t2 = Date.now();
    await idle.exited;
    expect(Date.now() - t2).toBeGreaterThanOrEqual(300);
    expect(Date.now() - t2).toBeLessThan(3000);
  });

  it('kills a stale toolsrv named by the pid file before starting its replacement', async () => {
    const o = opts({ yolo: true });
    const first = await spawnToolsrv(o);
    procs.push(first);
    // As if its olliesrv had died without closing the pipe: the replacement finds the pid file.
    const second = await spawnToolsrv(o);
    procs.push(second);
    await first.exited;
    expect(alive(first.pid)).toBe(false);
    const host = await ToolClient.connect(second, 'a');
    cleanups.push(() => host.close());
    expect(await host.rev()).toBe(1);
    expect(readFileSync(second.pidFile, 'utf8').trim()).toBe(String(second.pid));
  });

  it('keeper: one toolsrv per session, or one shared by all; a dead one is replaced', async () => {
    const base = opts({ yolo: true });
    const perSession = new ToolsrvKeeper(base);
    cleanups.push(() => perSession.close());
    const a = await perSession.acquire('sa');
    const b = await perSession.acquire('sb');
    expect(a.proc.pid).not.toBe(b.proc.pid);
    await a.release();
    await a.proc.exited;
    const shared = new ToolsrvKeeper({ ...opts({ yolo: true }), shared: true });
    cleanups.push(() => shared.close());
    const s1 = await shared.acquire('sa');
    const s2 = await shared.acquire('sb');
    expect(s1.proc.pid).toBe(s2.proc.pid);
    await s1.release();
    expect(s2.proc.alive).toBe(true);
    process.kill(s2.proc.pid, 'SIGKILL');
    await s2.proc.exited;
    const s3 = await shared.acquire('sc');
    expect(s3.proc.pid).not.toBe(s2.proc.pid);
    expect(s3.proc.alive).toBe(true);
  });
});

describe('SessionTools against a real toolsrv', () => {
  async function session(p: ToolsrvProcess, sessionId: string, rules?: BypassRuleStore) {
    const st = await ToolsrvSessionTools.open({ toolsrv: p, sessionId, log: () => undefined, ...(rules && { rules }) });
    cleanups.push(() => st.close());
    const events: BypassEvent[] = [];
    st.onBypass((e) => events.push(e));
    return { st, events };
  }

  it('forAgent sets the cwd and env of the agent scope', async () => {
    const p = await start({ yolo: true });
    const { st } = await session(p, 'sess-9');
    const d = tmp();
    const host = await st.forAgent('agent-1', d, { FOO: 'bar baz' });
    await host.ctl('load sh');
    const r = await host.call({ tool: 'sh', args: { command: 'echo "$(pwd) $FOO $OLLIE_SESSION_ID $OLLIE_UNAME"' } });
    expect(r.output).toBe(`${d} bar baz sess-9 agent-1\n`);
    await expect(st.forAgent('agent-2', d, { BAD: 'a\nb' })).rejects.toThrow(/newlines/);
  });

  it('approve and deny, remembered for the session and always by the rule computed from the request', async () => {
    // Not yolo: the real sandbox (Landlock) confines the calls that are not approved bypasses.
    const p = await start({ yolo: false });
    const db = openDatabase(':memory:');
    const rules = new BypassRuleStore(db);
    const { st, events } = await session(p, 'S', rules);
    const host = await st.forAgent('ag', tmp(), {});
    await host.ctl('load sh');
    const outside = tmp();
    const escape = `echo x > ${outside}/f && echo wrote`;
    const sandboxedCall = await host.call({ tool: 'sh', args: { command: escape } });
    expect(sandboxedCall).toMatchObject({ status: 'exited' });
    expect(sandboxedCall.exit).not.toBe(0);
    expect(sandboxedCall.output).not.toContain('wrote');
    expect(sandboxedCall.bypassed).toBeUndefined();
    const approved = host.call({ tool: 'sh', args: { command: escape }, flags: { bypass: true } });
    await until(() => st.pending().length === 1);
    await st.resolve(st.pending()[0]!.id, 'approve');
    expect(await approved).toMatchObject({ status: 'exited', exit: 0, output: 'wrote\n', bypassed: true });
    events.splice(0);

    const bypass = (command: string) => host.call({ tool: 'sh', args: { command }, flags: { bypass: true } });
    // Deny.
    let call = bypass('echo one');
    await until(() => st.pending().length === 1);
    const r1 = st.pending()[0]!;
    expect(r1).toMatchObject({ agent: 'ag', tool: 'sh', cmd: 'sh echo one', command: 'echo one', session: 'S' });
    await st.resolve(r1.id, 'deny');
    expect(await call).toMatchObject({ status: 'refused', error: 'denied by user' });
    await until(() => events.length === 2);
    expect(events).toEqual([
      { kind: 'request', req: r1 },
      { kind: 'resolved', id: r1.id, agent: 'ag', approved: false },
    ]);

    // Approve for the session: the same command (and with more arguments) then runs without asking, another one still asks.
    call = bypass('echo one');
    await until(() => st.pending().length === 1);
    const r2 = st.pending()[0]!;
    await st.resolve(r2.id, 'approve', 'session');
    expect(await call).toMatchObject({ status: 'exited', output: 'one\n', bypassed: true });
    expect(await bypass('echo one more')).toMatchObject({ status: 'exited', output: 'one more\n', bypassed: true });
    await until(() => events.filter((e) => e.kind === 'resolved').length === 3);
    expect(events.at(-1)).toMatchObject({ kind: 'resolved', approved: true, remembered: 'session:prefix echo one' });
    expect(rules.list()).toMatchObject([{ tool: 'sh', kind: 'prefix', rule: 'echo one', session: 'S' }]);
    call = bypass('echo two');
    await until(() => st.pending().length === 1);
    const r3 = st.pending()[0]!;
    expect(r3.cmd).toBe('sh echo two');
    // A rule is never taken from the caller.
    await expect(st.resolve(r3.id, 'approve', 'always:sh echo t*')).rejects.toThrow(
      /a rule is not given, it is computed from the request/,
    );

    // Always: persisted, so another SessionTools (after a restart) honours it; the session rule is gone with its session.
    await st.resolve(r3.id, 'approve', 'always');
    expect(await call).toMatchObject({ output: 'two\n', bypassed: true });
    await st.close();
    expect(rules.list()).toMatchObject([{ tool: 'sh', kind: 'prefix', rule: 'echo two', session: null }]);
    const again = await session(p, 'S', new BypassRuleStore(db));
    const host2 = await again.st.forAgent('ag2', tmp(), {});
    await host2.ctl('load sh');
    expect(
      await host2.call({ tool: 'sh', args: { command: 'echo two three' }, flags: { bypass: true } }),
    ).toMatchObject({ output: 'two three\n', bypassed: true });
    await until(() => again.events.length === 2);
    expect(again.events[1]).toMatchObject({ kind: 'resolved', approved: true, remembered: 'always:prefix echo two' });
    // Revoked: it asks again.
    expect(rules.remove(rules.list()[0]!.id)).toBe(true);
    const asked = host2.call({ tool: 'sh', args: { command: 'echo two' }, flags: { bypass: true } });
    await until(() => again.st.pending().length === 1);
    await again.st.resolve(again.st.pending()[0]!.id, 'approve');
    expect(await asked).toMatchObject({ output: 'two\n' });
    await expect(again.st.resolve('999', 'approve')).rejects.toThrow(/no pending bypass request 999/);
    await again.st.close();
    db.close();
  });

  it('replaces a toolsrv that died: hosts reconnect with their cwd, env and tools, and the bypass queue is followed again', async () => {
    const keeper = new ToolsrvKeeper(opts({ yolo: false }));
    cleanups.push(() => keeper.close());
    const lease = keeper.lease('S');
    const st = await ToolsrvSessionTools.open({
      toolsrv: lease.address,
      sessionId: 'S',
      onClose: lease.release,
      log: () => undefined,
    });
    cleanups.push(() => st.close());
    const cwd = tmp();
    // Variables the sandbox policy passes through (it drops the others).
    const host = await st.forAgent('ag', cwd, { EDITOR: 'one' });
    await host.ctl('load sh');
    await host.ctl('env PAGER=two');
    const first = await lease.address();
    expect((await host.call({ tool: 'sh', args: { command: 'echo "$(pwd) $EDITOR $PAGER"' } })).output).toBe(
      `${cwd} one two\n`,
    );
    process.kill(first.pid, 'SIGKILL');
    await first.exited;
    const r = await host.call({ tool: 'sh', args: { command: 'echo "$(pwd) $EDITOR $PAGER $OLLIE_SESSION_ID"' } });
    expect(r).toMatchObject({ status: 'exited', output: `${cwd} one two S\n` });
    const second = await lease.address();
    expect(second.pid).not.toBe(first.pid);
    expect((await host.list()).tools.map((t) => t.name)).toEqual(['sh']);
    // The new toolsrv's bypass queue reaches this SessionTools.
    const call = host.call({ tool: 'sh', args: { command: 'echo approved' }, flags: { bypass: true } });
    await until(() => st.pending().length === 1, 'one pending bypass request', 8000);
    await st.resolve(st.pending()[0]!.id, 'approve');
    expect(await call).toMatchObject({ output: 'approved\n', bypassed: true });
    await st.close();
    await second.exited; // the lease was the last user: its toolsrv stops
  });

  it('on a shared toolsrv, each session sees only its own requests', async () => {
    const p = await start({ yolo: false });
    const a = await session(p, 'A');
    const b = await session(p, 'B');
    const host = await a.st.forAgent('agA', tmp(), {});
    await host.ctl('load sh');
    const call = host.call({ tool: 'sh', args: { command: 'echo a' }, flags: { bypass: true } });
    await until(() => a.st.pending().length === 1 && a.events.length > 0, 'the request at session A');
    expect(b.st.pending()).toEqual([]);
    expect(b.events).toEqual([]);
    await a.st.resolve(a.st.pending()[0]!.id, 'approve');
    expect(await call).toMatchObject({ output: 'a\n' });
  });
});
