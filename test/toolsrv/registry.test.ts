import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CatalogEntry, ToolInfo } from '../../src/toolsrv/protocol.js';
import { startEnv, writeTools, type Env } from './helpers.js';

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const other = process.platform === 'linux' ? 'darwin' : 'linux';

describe('registry', () => {
  it('picks the first variant whose conditions all hold', async () => {
    env = await startEnv({
      v: {
        meta: {
          description: 'variants',
          cmd: 'echo base',
          variants: [
            { os: other, cmd: 'echo other-os' },
            { binary: 'no-such-binary-xyz', cmd: 'echo missing-binary' },
            { arch: process.arch, env: 'VARIANT_TEST=on', cmd: 'echo env-on' },
            { nenv: 'VARIANT_TEST', file: '/etc/passwd', binary: 'sh', cmd: 'echo nenv', description: 'nenv variant' },
          ],
        },
      },
    });
    const c = await env.client();
    await c.write('ctl', 'load v');
    let r = await env.call(c, { tool: 'v', args: {} });
    expect(r.output).toBe('nenv\n');
    const tools = JSON.parse(await c.readText('tools')) as ToolInfo[];
    expect(tools[0]!.description).toBe('nenv variant');
    // The scope's env is part of the host facts: setting it switches the variant and bumps rev.
    const rev = Number(await c.readText('rev'));
    await c.write('ctl', 'env VARIANT_TEST=on');
    expect(Number(await c.readText('rev'))).toBeGreaterThan(rev);
    r = await env.call(c, { tool: 'v', args: {} });
    expect(r.output).toBe('env-on\n');
    await c.write('ctl', 'env VARIANT_TEST=off');
    r = await env.call(c, { tool: 'v', args: {} });
    expect(r.output).toBe('base\n');
  });

  it('reports an invalid .meta with its file and reason, and loads the others', async () => {
    env = await startEnv({
      good: { meta: { description: 'fine', cmd: 'echo ok' } },
      badjson: { meta: '{"description": ' },
      noexec: { meta: { description: 'nothing to run' } },
      badscope: { meta: { description: 'x', cmd: 'true', scope: 'sometimes' } },
      nopath: { meta: { description: 'x', cmd: 'true', scope: 'write' } },
      badschema: {
        meta: { description: 'x', cmd: 'true', args: { type: 'object', properties: { a: { type: 'strng' } } } },
      },
      badvariant: { meta: { description: 'x', cmd: 'true', variants: [{ os: 'linux', colour: 'red' }] } },
    });
    const c = await env.client();
    const cat = JSON.parse(await c.readText('catalog')) as CatalogEntry[];
    const byName = Object.fromEntries(cat.map((e) => [e.name, e]));
    expect(byName.good!.error).toBeUndefined();
    expect(byName.badjson!.error).toMatch(/not valid JSON/);
    expect(byName.badjson!.file).toBe(join(env.toolsDir, 'badjson.meta'));
    expect(byName.noexec!.error).toMatch(/no cmd and no executable noexec/);
    expect(byName.badscope!.error).toMatch(/scope: "sometimes" is not one of/);
    expect(byName.nopath!.error).toMatch(/scope write needs pathArg/);
    expect(byName.badschema!.error).toMatch(/args: not a valid JSON Schema/);
    expect(byName.badvariant!.error).toMatch(/variants\[0\]\.colour: unknown field/);
    await c.write('ctl', 'load good');
    await expect(c.write('ctl', 'load badjson')).rejects.toThrow(/badjson\.meta: not valid JSON/);
    await expect(c.write('ctl', 'load nosuch')).rejects.toThrow(/no tool "nosuch"/);
    expect((await env.call(c, { tool: 'good', args: {} })).output).toBe('ok\n');
  });

  it('lets user tools override shipped ones, and reload picks up edits', async () => {
    env = await startEnv(
      {
        t: { meta: { description: 'shipped', cmd: 'echo shipped' } },
        gone: { meta: { description: 'x', cmd: 'true' } },
      },
      {},
      { t: { meta: { description: 'user', scope: 'read' }, script: '#!/bin/sh\necho user\n' } },
    );
    const userDir = join(env.dir, 'user-tools');
    const shipped = env.toolsDir;
    const c = await env.client();
    await c.write('ctl', 'load t gone');
    expect((await env.call(c, { tool: 't', args: {} })).output).toBe('user\n');
    // An invalid override hides the shipped tool instead of silently falling back to it.
    writeFileSync(join(userDir, 't.meta'), '{"description": 3}');
    const rev = Number(await c.readText('rev'));
    rmSync(join(shipped, 'gone.meta'));
    await c.write('ctl', 'reload');
    expect(Number(await c.readText('rev'))).toBeGreaterThan(rev);
    const loaded = (JSON.parse(await c.readText('tools')) as ToolInfo[]).map((t) => t.name);
    expect(loaded).toEqual([]); // t's new definition is invalid, gone is gone
    const cat = JSON.parse(await c.readText('catalog')) as CatalogEntry[];
    expect(cat.find((e) => e.name === 't')!.error).toMatch(/description: must be a string/);
    // Fix the override: reload, load, and the user's version runs.
    writeFileSync(join(userDir, 't.meta'), JSON.stringify({ description: 'user 2', cmd: 'echo user2' }));
    await c.write('ctl', 'reload');
    await c.write('ctl', 'load t');
    expect((await env.call(c, { tool: 't', args: {} })).output).toBe('user2\n');
    // The tools directories are on PATH while a tool runs.
    writeTools(userDir, {
      helper: { meta: { description: 'h', scope: 'read' }, script: '#!/bin/sh\necho helped\n' },
      usehelper: { meta: { description: 'u', cmd: 'helper' } },
    });
    await c.write('ctl', 'reload\nload usehelper');
    expect((await env.call(c, { tool: 'usehelper', args: {} })).output).toBe('helped\n');
  });

  it('load of a name it does not know rescans the directories: a tool added while the scope runs is found', async () => {
    env = await startEnv({ t: { meta: { description: 'first', cmd: 'echo first' } } }, {}, {});
    const c = await env.client();
    await c.write('ctl', 'load t');
    await expect(c.write('ctl', 'load later')).rejects.toThrow(/no tool "later"/);
    // Added after toolsrv started, with no "reload" written: the next load finds it.
    writeTools(join(env.dir, 'user-tools'), { later: { meta: { description: 'added later', cmd: 'echo later' } } });
    await c.write('ctl', 'load later');
    expect((await env.call(c, { tool: 'later', args: {} })).output).toBe('later\n');
    expect((await env.call(c, { tool: 't', args: {} })).output).toBe('first\n');
  });

  it('lifts the dispatch flags out of the arguments (they are not in the schemas: clients describe them once), and validates before running', async () => {
    env = await startEnv();
    const c = await env.client();
    await c.write('tools', 'sh echoargs');
    const tools = JSON.parse(await c.readText('tools')) as ToolInfo[];
    const sh = tools.find((t) => t.name === 'sh')!;
    expect(Object.keys(sh.parameters.properties as object)).toEqual(['command']);
    expect(sh.scope).toBe('global');
    expect(tools.find((t) => t.name === 'echoargs')!.scope).toBe('read');
    // additionalProperties: false in sh's own schema does not reject the flags the model put among the arguments.
    const r = await env.call(c, { tool: 'sh', args: { command: 'sleep 5', timeout: 0.3 } });
    expect(r.status).toBe('timeout');
    const bad = await env.call(c, { tool: 'sh', args: { cmd: 'true' } });
    expect(bad.status).toBe('refused');
    expect(bad.error).toMatch(/invalid arguments for sh: missing required argument "command"; unknown argument "cmd"/);
    expect(bad.pid).toBe(0);
    const bad2 = await env.call(c, { tool: 'echoargs', args: { x: 'one' } });
    expect(bad2.error).toMatch(/argument x must be number, not string/);
    const ok = await env.call(c, { tool: 'echoargs', args: { x: 1, background: false } });
    expect(JSON.parse(ok.output)).toEqual({ x: 1 });
    const notLoaded = await env.call(c, { tool: 'writer', args: { path: 'a' } });
    expect(notLoaded.error).toMatch(/not loaded/);
  });

  it('keeps loaded tools, env, cwd and rev per scope', async () => {
    env = await startEnv();
    const a = await env.client('agent-a');
    const b = await env.client('agent-b');
    await a.write('ctl', `load sh\nenv GREETING=hi\ncwd /tmp\nenv PATH=/usr/bin:/bin`);
    expect(JSON.parse(await b.readText('tools'))).toEqual([]);
    await b.write('ctl', 'load sh');
    const ra = await env.call(a, {
      tool: 'sh',
      args: { command: 'echo "$GREETING $(pwd) $OLLIE_AGENT_ID $OLLIE_UNAME $PATH"' },
    });
    const rb = await env.call(b, { tool: 'sh', args: { command: 'echo "${GREETING:-none} $(pwd) $OLLIE_AGENT_ID"' } });
    expect(ra.output).toBe(`hi /tmp agent-a tester ${env.toolsDir}:/usr/bin:/bin\n`); // the tools dir stays first on PATH
    expect(rb.output).toBe(`none ${env.dir} agent-b\n`);
    await expect(a.write('ctl', 'cwd relative/path')).rejects.toThrow(/absolute/);
    await expect(a.write('ctl', 'frobnicate')).rejects.toThrow(/unknown command/);
    expect(await a.readText('ctl')).toBe('cwd /tmp\nenv GREETING=hi\nenv PATH=/usr/bin:/bin\nloaded sh\n');
  });
});
