/**
 * Second review of "always" rules (store/bypass.ts, store/shellwords.ts): a prefix rule lets a request add
 * operands, never options or settings — but a `--` the request adds switched every later word to "operand",
 * and GNU make reads `NAME=value` after `--` as a variable all the same (`make test -- SHELL=./evil.sh` runs the
 * model's program, outside the sandbox, on the strength of an approved `make test`). Real olliesrv, real toolsrv,
 * the mock LLM scripting the calls; the person is this test, writing the session's `bypass` file.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkRule, ruleFor, ruleMatches } from '../../src/olliesrv/store/bypass.js';
import { shellWords } from '../../src/olliesrv/store/shellwords.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { bypassCall, lastTool, prompt, resolve } from './approval-turns.js';

describe('"always" rules, second review', () => {
  it('an always rule for make test does not cover make test -- SHELL=./evil.sh (make reads settings after --)', async () => {
    const attacks = [
      'make test -- SHELL=./evil.sh',
      "make test -- 'SHELL=./evil.sh'",
      'make test x -- SHELL=./evil.sh',
    ];
    const h = await testHarness({
      turns: [...bypassCall('make test'), ...attacks.flatMap(bypassCall), ...bypassCall('make test -- other')] as never,
    });
    writeFileSync(join(h.dir, 'Makefile'), 'test:\n\t@echo ran-tests\nother:\n\t@echo ran-other\nx:\n\t@true\n');
    writeFileSync(join(h.dir, 'evil.sh'), '#!/bin/sh\necho pwned >> "$PWD/pwned"\n', { mode: 0o755 });
    const a = await h.agent();

    const first = await prompt(h, a);
    expect(first?.[4]).toBe('shell make test');
    expect(first?.slice(6)).toEqual(['prefix', 'make test']);
    await resolve(h, a, `${first![0]} approve always`);
    expect(await lastTool(h, a)).toContain('ran-tests');

    for (const cmd of attacks) {
      const req = await prompt(h, a);
      expect(req, `${JSON.stringify(cmd)} ran without asking`).toBeDefined();
      await resolve(h, a, `${req![0]} deny`);
      expect(await lastTool(h, a)).toMatch(/denied by user/);
    }
    expect(existsSync(join(h.dir, 'pwned'))).toBe(false);
    // Operands after a -- are still what the rule is for.
    expect(await prompt(h, a)).toBeUndefined();
    expect(await lastTool(h, a)).toContain('ran-other');
  });

  it('NAME+=value before a command is a variable assignment to bash, as NAME=value is', () => {
    for (const cmd of ['LD_PRELOAD+=./x.so make test', 'PATH+=:. make test', 'A_1+=x npm test']) {
      expect(shellWords(cmd), cmd).toHaveProperty('refused');
      expect(ruleFor({ tool: 'shell', cmd: `shell ${cmd}`, command: cmd })).toMatchObject({ kind: 'exact' });
    }
    // As a command name (quoted) it is no assignment, to bash or to the tokenizer.
    expect(shellWords("'A+=1' x")).toEqual({ words: ['A+=1', 'x'] });
    // And a rule on make still takes operands.
    expect(
      ruleMatches(
        { tool: 'shell', kind: 'prefix', rule: 'make test' },
        { tool: 'shell', cmd: 'shell make test -- all', command: 'make test -- all' },
      ),
    ).toBe(true);
  });

  it('a program that joins its arguments into code gets an exact rule behind a wrapper too (timeout 30 ssh host uptime)', () => {
    const subject = (command: string) => ({ tool: 'shell', cmd: `shell ${command}`, command });
    for (const cmd of [
      'timeout 30 ssh host uptime',
      'env ssh host uptime',
      'nice -n 5 /usr/bin/ssh host uptime',
      'exec watch ls',
      'sudo -u me script -qc true /dev/null',
    ]) {
      expect(ruleFor(subject(cmd)), cmd).toEqual({ tool: 'shell', kind: 'exact', rule: cmd });
      // Nor can such a prefix rule be stored (one already in a database is dropped when it opens).
      expect(() => checkRule({ tool: 'shell', kind: 'prefix', rule: cmd }), cmd).toThrow(
        /joins its arguments into code/,
      );
    }
    // Before: the prefix rule covered the remote command with anything added.
    expect(
      ruleMatches(
        { tool: 'shell', kind: 'exact', rule: 'timeout 30 ssh host uptime' },
        subject("timeout 30 ssh host uptime ';' rm -rf /"),
      ),
    ).toBe(false);
    // An ordinary wrapped command keeps its prefix rule.
    expect(ruleFor(subject('timeout 30 npm test'))).toEqual({
      tool: 'shell',
      kind: 'prefix',
      rule: 'timeout 30 npm test',
    });
  });
});
