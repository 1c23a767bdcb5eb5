import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { Ename, type Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import type { BypassRequest, BypassResolution, ToolsrvInfo } from '../../src/toolsrv/protocol.js';
import { BASIC, startEnv, until, type Env } from './helpers.js';

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/**
 * A stand-in for src/toolsrv/sandbox with the agreed API, so the wrapping and the refusals are tested
 * whatever state the real module is in: it marks sandboxed runs with OLLIE_SANDBOXED=1, and a cwd named
 * `weak` makes the "helper" fail as ollie-sandbox does when Landlock is too weak, `nopolicy` makes
 * loadPolicy throw.
 */
const FAKE_SANDBOX = `
export function loadPolicy(o) {
  if (o.cwd.endsWith('nopolicy')) throw new Error('sandbox.yaml:3: filesystem.rw must be a list');
  return { cwd: o.cwd };
}
export function landlockStatus() { return { abi: 6, enforces: ['filesystem', 'TCP bind/connect'] }; }
export function sandboxCommand(policy, argv) {
  if (policy.cwd.endsWith('weak')) return { file: '/bin/sh', args: ['-c', 'echo "ollie-sandbox: Landlock ABI 3 has no network rules; the policy needs ABI 4" >&2; exit 121'] };
  return { file: '/usr/bin/env', args: ['OLLIE_SANDBOXED=1', ...argv] };
}
`;

async function sandboxed(): Promise<Env> {
  const { mkdtempSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const d = mkdtempSync(join(tmpdir(), 'fake-sandbox-'));
  writeFileSync(join(d, 'sandbox.mjs'), FAKE_SANDBOX);
  return startEnv(BASIC, { yolo: false, sandboxModule: pathToFileURL(join(d, 'sandbox.mjs')).href });
}

async function follow(c: Client, into: Array<BypassRequest | BypassResolution>, signal: AbortSignal): Promise<void> {
  let buf = '';
  try {
    for await (const chunk of c.stream('bypass/pending', { signal })) {
      buf += new TextDecoder().decode(chunk);
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        into.push(JSON.parse(buf.slice(0, nl)) as BypassRequest);
        buf = buf.slice(nl + 1);
      }
    }
  } catch {
    // aborted
  }
}

describe('auth', () => {
  it('refuses an attach without the secret or with a wrong one, and serves a 0600 socket in a 0700 dir', async () => {
    env = await startEnv();
    const addr = { kind: 'unix' as const, path: env.ts.socket };
    await expect(dial(addr, { uname: 'x', aname: 'a' })).rejects.toThrow(Ename.authFailed);
    await expect(env.client('a', 'not-the-secret')).rejects.toThrow(Ename.authFailed);
    await expect(env.client('a', `${env.secret}x`)).rejects.toThrow(Ename.authFailed);
    const c = await env.client('a');
    expect(JSON.parse(await c.readText('tools'))).toEqual([]);
    expect(statSync(env.ts.socket).mode & 0o777).toBe(0o600);
    expect(statSync(join(env.ts.socket, '..')).mode & 0o777).toBe(0o700);
  });
});

describe('sandbox wrapping', () => {
  it('runs every call through the sandbox module, and reports its status in info', async () => {
    env = await sandboxed();
    const c = await env.client();
    await c.write('ctl', 'load sh');
    const r = await env.call(c, { tool: 'sh', args: { command: 'echo "sandboxed=${OLLIE_SANDBOXED:-no}"' } });
    expect(r.output).toBe('sandboxed=1\n');
    expect(r.bypassed).toBeUndefined();
    const info = JSON.parse(await c.readText('info')) as ToolsrvInfo;
    expect(info).toMatchObject({
      landlockAbi: 6,
      enforces: ['filesystem', 'TCP bind/connect'],
      platform: process.platform,
      pid: process.pid,
    });
  });

  it('fails closed: a policy that does not load, or a helper that finds Landlock too weak, refuses the call', async () => {
    env = await sandboxed();
    const c = await env.client();
    for (const d of ['nopolicy', 'weak']) mkdirSync(join(env.dir, d));
    await c.write('ctl', `load sh\ncwd ${join(env.dir, 'nopolicy')}`);
    let r = await env.call(c, { tool: 'sh', args: { command: 'echo ran' } });
    expect(r).toMatchObject({
      status: 'refused',
      error: 'sandbox unavailable: sandbox.yaml:3: filesystem.rw must be a list',
    });
    await c.write('ctl', `cwd ${join(env.dir, 'weak')}`);
    r = await env.call(c, { tool: 'sh', args: { command: 'echo ran' } });
    expect(r.status).toBe('refused');
    expect(r.error).toBe(
      'sandbox unavailable: ollie-sandbox: Landlock ABI 3 has no network rules; the policy needs ABI 4',
    );
  });

  it('without the sandbox module every sandboxed call is refused, saying why', async () => {
    env = await startEnv(BASIC, { yolo: false, sandboxModule: pathToFileURL('/nonexistent/sandbox.mjs').href });
    const c = await env.client();
    await c.write('ctl', 'load sh');
    const r = await env.call(c, { tool: 'sh', args: { command: 'echo ran' } });
    expect(r.status).toBe('refused');
    expect(r.error).toMatch(
      /^sandbox unavailable: the sandbox module file:\/\/\/nonexistent\/sandbox.mjs could not be loaded/,
    );
    expect(r.output).toBe('');
  });
});

describe('bypass', () => {
  it('queues a bypass call until approved, then runs it unsandboxed', async () => {
    env = await sandboxed();
    const c = await env.client();
    const ctl = await env.client('');
    await c.write('ctl', 'load sh\nenv OLLIE_SESSION_ID=s1');
    const seen: Array<BypassRequest | BypassResolution> = [];
    const ac = new AbortController();
    const following = follow(ctl, seen, ac.signal);
    const call = env.call(c, {
      tool: 'sh',
      args: { command: 'echo "sandboxed=${OLLIE_SANDBOXED:-no}"', bypass: true },
    });
    await until(() => seen.length === 1);
    const req = seen[0] as BypassRequest;
    expect(req).toMatchObject({
      agent: 'agent1',
      tool: 'sh',
      cmd: 'sh echo "sandboxed=${OLLIE_SANDBOXED:-no}"',
      cwd: env.dir,
      session: 's1',
    });
    // Nothing runs while it waits, and nothing times out.
    await new Promise((r) => setTimeout(r, 200));
    expect(env.ts.core.procs.size).toBe(0);
    // A follower that comes late still sees it (the stream starts with every pending request).
    const late: Array<BypassRequest | BypassResolution> = [];
    const ac2 = new AbortController();
    const following2 = follow(ctl, late, ac2.signal);
    await until(() => late.length === 1);
    expect((late[0] as BypassRequest).id).toBe(req.id);
    await ctl.write('bypass/resolve', `${req.id} approve once`);
    const r = await call;
    expect(r).toMatchObject({ status: 'exited', output: 'sandboxed=no\n', bypassed: true });
    await until(() => seen.length === 2);
    expect(seen[1]).toEqual({ id: req.id, agent: 'agent1', resolved: 'approve' });
    await expect(ctl.write('bypass/resolve', `${req.id} approve`)).rejects.toThrow(/no pending bypass request/);
    await expect(ctl.write('bypass/resolve', 'x maybe')).rejects.toThrow(/expected "ID approve\|deny/);
    ac.abort();
    ac2.abort();
    await Promise.all([following, following2]);
  });

  it('a denied bypass returns "denied by user"; a cancelled one leaves the queue', async () => {
    env = await sandboxed();
    const c = await env.client();
    const ctl = await env.client('');
    await c.write('ctl', 'load sh');
    const seen: Array<BypassRequest | BypassResolution> = [];
    const ac = new AbortController();
    const following = follow(ctl, seen, ac.signal);
    const call = env.call(c, { tool: 'sh', args: { command: 'echo ran' }, flags: { bypass: true } });
    await until(() => seen.length === 1);
    await ctl.write('bypass/resolve', `${(seen[0] as BypassRequest).id} deny`);
    expect(await call).toMatchObject({ status: 'refused', error: 'denied by user', pid: 0 });
    expect(env.ts.core.procs.size).toBe(0);

    const abort = new AbortController();
    const cancelled = env.call(c, { tool: 'sh', args: { command: 'echo ran' }, flags: { bypass: true } }, abort.signal);
    cancelled.catch(() => undefined);
    await until(() => seen.length === 3);
    abort.abort();
    await until(() => seen.length === 4);
    expect(seen[3]).toMatchObject({ id: (seen[2] as BypassRequest).id, resolved: 'cancelled' });
    expect(env.ts.core.bypass.pending()).toEqual([]);
    ac.abort();
    await following;
  });
});
