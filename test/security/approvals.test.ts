/**
 * Approvals a person actually gave, attacked the way a model would: it gets a harmless command
 * approved "always", then asks for the same command with something riding along. Real olliesrv, real toolsrv
 * (Landlock), the mock LLM over HTTP scripting the tool calls; the person is this test, writing the session's
 * `bypass` file as the GUI does.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lines } from '../../src/ninep/index.js';
import type { BypassRequest } from '../../src/toolsrv/protocol.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { bypassCall, lastTool, prompt, resolve } from './approval-turns.js';
import { startEnv, type Env } from '../toolsrv/helpers.js';

describe('"always" rules', () => {
  it('an always rule for npm test never covers npm test with shell operators or expansions riding along, nor npm testx', async () => {
    const marker = '$PWD/pwned';
    const attacks = [
      `npm test; echo pwned >> ${marker}`,
      `npm test && echo pwned >> ${marker}`,
      `npm test || echo pwned >> ${marker}`,
      `npm test | sh -c 'echo pwned >> ${marker}'`,
      `npm test & echo pwned >> ${marker}`,
      `npm test $(echo pwned >> ${marker})`,
      `npm test \`echo pwned >> ${marker}\``,
      `npm test "$(echo pwned >> ${marker})"`,
      `npm test > ${marker}`,
      `npm test\necho pwned >> ${marker}`,
      `npm test ${'${X:=$(echo pwned >> pwned)}'}`,
      'npm testx',
      // An option npm itself reads: the script runs under a shell of the model's choosing.
      'npm test --script-shell=./evil.sh',
    ];
    const h = await testHarness({
      turns: [...bypassCall('npm test'), ...attacks.flatMap(bypassCall), ...bypassCall('npm test -- --watch')] as never,
    });
    writeFileSync(
      join(h.dir, 'package.json'),
      JSON.stringify({ name: 'x', version: '1.0.0', scripts: { test: 'echo ran-tests', testx: 'echo ran-testx' } }),
    );
    writeFileSync(join(h.dir, 'evil.sh'), '#!/bin/sh\necho pwned >> "$PWD/pwned"\n', { mode: 0o755 });
    const a = await h.agent();

    const first = await prompt(h, a);
    expect(first?.[4]).toBe('shell npm test');
    // A glob rule (what clients wrote before; no spaces, as the file splits on them) is not taken; the computed one is.
    const ended = h.daemon.agents
      .all()
      .find((x) => x.id === a.aid)!
      .nextTurn();
    const glob = await h.c.write(`session/${a.session}/bypass`, `${first![0]} approve always:shell*npm*test*`).then(
      () => undefined,
      (e: Error) => e,
    );
    if (glob) await h.c.write(`session/${a.session}/bypass`, `${first![0]} approve always`);
    await ended;
    expect(await lastTool(h, a)).toContain('ran-tests');

    for (const cmd of attacks) {
      const req = await prompt(h, a);
      // Asked again, never run on the strength of the rule; the person (this test) denies it.
      expect(req, `${JSON.stringify(cmd)} ran without asking`).toBeDefined();
      await resolve(h, a, `${req![0]} deny`);
      expect(await lastTool(h, a)).toMatch(/denied by user/);
    }
    expect(existsSync(join(h.dir, 'pwned'))).toBe(false);

    // More arguments on word boundaries are what the rule is for.
    expect(await prompt(h, a)).toBeUndefined();
    expect(await lastTool(h, a)).toContain('ran-tests');
    expect(glob?.message).toMatch(/a rule is not given, it is computed from the request/);
    // What the dialog offered the person: the rule computed from the request, shown before it was stored.
    expect(first?.slice(6)).toEqual(['prefix', 'npm test']);
  });

  it('a wildcard rule cannot be written: always:* is refused, nothing is stored, and the next request still asks', async () => {
    const h = await testHarness({
      turns: [...bypassCall('echo first'), ...bypassCall('echo second > pwned')] as never,
    });
    const a = await h.agent();
    const req = await prompt(h, a);
    for (const bad of ['always:*', 'always:shell *', 'always:*:*', 'forever']) {
      await expect(h.c.write(`session/${a.session}/bypass`, `${req![0]} approve ${bad}`), bad).rejects.toThrow(
        /computed from the request|remember must be once, session or always|expected: ID approve\|deny/,
      );
    }
    // The refused writes resolved nothing: it still waits for a person.
    expect((await h.c.readText(`session/${a.session}/bypass`)).split('\t')[0]).toBe(req![0]);
    await resolve(h, a, `${req![0]} approve once`);
    expect(await h.c.readText('bypassrules')).toBe('');
    // Nor can a rule be typed into the list.
    await expect(h.c.write('bypassrules', 'add shell *\n')).rejects.toThrow(/bypassrules line 1: expected "revoke ID"/);
    const next = await prompt(h, a);
    expect(next?.[4]).toBe('shell echo second > pwned');
    expect(next?.slice(6)).toEqual(['exact', 'echo second > pwned']);
    await resolve(h, a, `${next![0]} deny`);
    expect(existsSync(join(h.dir, 'pwned'))).toBe(false);
  });

  it('rules are listed in bypassrules and revoked there; the next identical request asks again', async () => {
    const h = await testHarness({
      turns: [
        ...bypassCall('echo hello world'),
        ...bypassCall('echo hello world'),
        ...bypassCall('echo hello world'),
        ...bypassCall('echo hello world'),
      ] as never,
    });
    const a = await h.agent();
    let req = await prompt(h, a);
    await resolve(h, a, `${req![0]} approve always`);
    const listed = (await h.c.readText('bypassrules')).trim().split('\t');
    expect(listed.slice(1, 5)).toEqual(['shell', 'prefix', 'echo hello world', 'global']);
    expect(Date.parse(listed[5]!)).toBeGreaterThan(Date.now() - 60_000);
    // Covered: no question.
    expect(await prompt(h, a)).toBeUndefined();
    expect(await lastTool(h, a)).toContain('hello world');

    await expect(h.c.write('bypassrules', 'revoke 999\n')).rejects.toThrow(/bypassrules: no rule 999/);
    await h.c.write('bypassrules', `revoke ${listed[0]}\n`);
    expect(await h.c.readText('bypassrules')).toBe('');
    req = await prompt(h, a);
    expect(req?.[4]).toBe('shell echo hello world');
    // For the session: listed with its scope, gone when the session is.
    await resolve(h, a, `${req![0]} approve session`);
    expect((await h.c.readText('bypassrules')).split('\t').slice(1, 5)).toEqual([
      'shell',
      'prefix',
      'echo hello world',
      `session ${a.session}`,
    ]);
    expect(await prompt(h, a)).toBeUndefined();
    await h.c.write(`session/${a.session}/ctl`, 'kill');
    expect(await h.c.readText('bypassrules')).toBe('');
  });
});

describe('what the person is shown', () => {
  let env: Env | undefined;
  afterEach(async () => {
    await env?.close();
    env = undefined;
  });

  it('a call with more than a command line is shown as all of its arguments, and no rule reads it as a command', async () => {
    // A user tool whose other argument changes what the command does: approving "echo hi" must not hide it.
    env = await startEnv(
      {
        run: {
          meta: {
            description: 'runs a command with a preload',
            args: {
              type: 'object',
              properties: { command: { type: 'string' }, preload: { type: 'string' } },
              required: ['command'],
            },
          },
          script: '#!/bin/sh\ncat\n',
        },
      },
      { yolo: false },
    );
    const c = await env.client();
    const ctl = await env.client('');
    await c.write('ctl', 'load run');
    const ac = new AbortController();
    const call = env
      .call(
        c,
        { tool: 'run', args: { command: 'echo hi', preload: '/tmp/evil.so' }, flags: { bypass: true } },
        ac.signal,
      )
      .catch(() => undefined);
    let first = '';
    for await (const line of lines(ctl.stream('bypass/pending', { signal: ac.signal }))) {
      first = line;
      break;
    }
    const req = JSON.parse(first) as BypassRequest;
    expect(req.cmd).toBe('run {"command":"echo hi","preload":"/tmp/evil.so"}');
    // Without a command line of its own, only an exact rule on these arguments can ever cover it (store/bypass.ts).
    expect(req.command).toBeUndefined();
    ac.abort();
    await call;
  });
});
