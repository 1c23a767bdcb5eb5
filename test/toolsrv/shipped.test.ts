/**
 * toolsrv with the shipped tools (data/tools, built by `node scripts/build-native.mjs`) and the real sandbox:
 * every .meta loads, calls run confined, and what the sandbox refuses runs after an approved bypass.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import type { BypassRequest, CatalogEntry, ToolsrvInfo } from '../../src/toolsrv/protocol.js';
import { startEnv, until, type Env } from './helpers.js';

let env: Env | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await env?.close();
  env = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('shipped tools under toolsrv', () => {
  it('all load; calls run sandboxed; an approved bypass does what the sandbox refused', async () => {
    env = await startEnv({}, { yolo: false, toolDirs: [SHIPPED_TOOLS] });
    const c = await env.client();
    const cat = JSON.parse(await c.readText('catalog')) as CatalogEntry[];
    expect(cat.filter((e) => e.error)).toEqual([]);
    expect(cat.map((e) => e.name)).toEqual(
      expect.arrayContaining(['shell', 'file_read', 'file_write', 'file_edit', 'file_grep', 'file_glob']),
    );
    const info = JSON.parse(await c.readText('info')) as ToolsrvInfo;
    expect(info.unavailable).toBeUndefined();
    expect(info.landlockAbi).toBeGreaterThan(0);

    const project = join(env.dir, 'proj');
    mkdirSync(project);
    writeFileSync(join(project, 'a.txt'), 'alpha\nbeta\n');
    await c.write('ctl', `cwd ${project}\nload shell file_read`);
    const read = await env.call(c, { tool: 'file_read', args: { path: 'a.txt' } });
    expect(read.status).toBe('exited');
    expect(read.output).toMatch(/1\talpha\n\s*2\tbeta/);

    const outside = mkdtempSync(join(tmpdir(), 'toolsrv-outside-'));
    dirs.push(outside);
    const escape = { tool: 'shell', args: { command: `echo secret > ${outside}/f && echo wrote` } };
    const confined = await env.call(c, escape);
    expect(confined.status).toBe('exited');
    expect(confined.exit).not.toBe(0);
    expect(confined.output).not.toContain('wrote');

    const ctl = await env.client('');
    const ac = new AbortController();
    const it = ctl.stream('bypass/pending', { signal: ac.signal });
    const call = env.call(c, { ...escape, flags: { bypass: true } });
    const req = JSON.parse(new TextDecoder().decode((await it.next()).value as Uint8Array)) as BypassRequest;
    expect(req.cmd).toBe(`shell echo secret > ${outside}/f && echo wrote`);
    await ctl.write('bypass/resolve', `${req.id} approve`);
    const r = await call;
    expect(r).toMatchObject({ status: 'exited', exit: 0, output: 'wrote\n', bypassed: true });
    expect(readFileSync(join(outside, 'f'), 'utf8')).toBe('secret\n');
    ac.abort();
    await it.return(undefined);
    await until(() => env!.ts.core.bypass.pending().length === 0);
  });
});
