/**
 * `ollie serve --http` from the built CLI: it prints the gateway's URL (/api on the loopback front door) and a token,
 * the gateway answers with it and refuses without it, and SIGTERM still ends the daemon cleanly.
 */
import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { spawnServe } from '../helpers/serve.js';

async function serve(extra: string[]): Promise<{ p: ChildProcess; url: string; token: string }> {
  const { p } = spawnServe('ollie-http-', extra);
  let out = '';
  const m = await new Promise<RegExpExecArray>((resolve, reject) => {
    p.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const r = /HTTP gateway at (http:\/\/127\.0\.0\.1:\d+\/api)\/ \(token ([0-9a-f]{64});/.exec(out);
      if (r) resolve(r);
    });
    p.once('exit', (c) => reject(new Error(`ollie serve exited ${c}: ${out}`)));
  });
  return { p, url: m[1]!, token: m[2]! };
}

describe('ollie serve --http', () => {
  it('prints the URL and a fresh token; the gateway needs it; SIGTERM ends it all', async () => {
    const a = await serve(['--http']);
    const b = await serve(['--http', '0']);
    expect(a.token).not.toBe(b.token);
    expect((await fetch(`${a.url}/session/idx`)).status).toBe(401);
    const created = await fetch(`${a.url}/session/new`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}` },
      body: 'name=web',
    });
    expect(await created.text()).toBe('web\n');
    const idx = (await (await fetch(`${a.url}/session/idx?token=${a.token}`)).json()) as Array<{ name: string }>;
    expect(idx.map((s) => s.name)).toEqual(['web']);
    a.p.kill('SIGTERM');
    expect(await new Promise((r) => a.p.once('exit', r))).toBe(0);
    await expect(fetch(`${a.url}/session/idx?token=${a.token}`)).rejects.toThrow();
  });

  it('refuses two ports for the web UI and the gateway, which share one server', async () => {
    const { p } = spawnServe('ollie-http-', ['--ui-port', '0', '--http', '1']);
    let err = '';
    p.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    expect(await new Promise((r) => p.once('exit', r))).toBe(1);
    expect(err).toContain('--ui-port 0 and --http 1 name two ports; the web UI and the gateway share one');
  });
});
