/**
 * Unit tests of the renderer's model (no browser): the chat log from log.from's bytes (tail and older pages), the parsers of the
 * daemon's files and events, and the ollie-9p command lines of the 9P console. (They live under e2e/ because
 * vitest's include covers test/ and e2e/, and test/ belongs to the daemons.)
 */
import { describe, expect, it } from 'vitest';
import { Api, type ConsoleEntry } from '../src/renderer/src/lib/api.js';
import { appendEntry } from '../src/renderer/src/lib/consolelog.js';
import { ChatLog, isLong, looksLikeDiff, prettyArgs } from '../src/renderer/src/lib/chatlog.js';
import { AnsiText, applySgr, color256, segmentCss } from '../src/renderer/src/lib/ansi.js';
import {
  errorLine,
  groupHits,
  parseAgentIdx,
  parseEndedIdx,
  parseBypassRules,
  parseProcInterrupt,
  parseBackends,
  parseEvent,
  parseKv,
  parseModels,
  parsePending,
  parseProcIdx,
  parseSearch,
  parseSessionIdx,
  procCommand,
  snippetParts,
  treeOrder,
  unescapeField,
  visibleCommand,
  KEY_MASK,
  maskKeys,
  parseCheckedModels,
  parseProviders,
  setupRequest,
  unmaskKeys,
} from '../src/renderer/src/lib/parse.js';
import { CFG } from '../src/formats/olliesrv.js';
import type { Client } from '../src/ninep/index.js';

const line = (o: object): string => `${JSON.stringify(o)}\n`;

describe('ChatLog', () => {
  it('joins lines cut anywhere, appends partial deltas in place, and lets the final block replace them', () => {
    const log = new ChatLog();
    const text =
      line({ role: 'user', id: 'u', content: 'hi' }) +
      line({ role: 'assistant', id: 'a', content: 'Hel', partial: true });
    // Byte-by-byte: nothing shows until a line is complete.
    for (const ch of text.slice(0, 10)) expect(log.push(ch)).toBe(false);
    expect(log.push(text.slice(10))).toBe(true);
    expect(log.blocks.map((b) => b.id)).toEqual(['u', 'a']);
    log.push(line({ role: 'assistant', id: 'a', content: 'lo', partial: true }));
    expect(log.get('a')).toMatchObject({ content: 'Hello', partial: true });
    const before = log.get('a');
    log.push(line({ role: 'assistant', id: 'a', content: 'Hello, world' }));
    expect(log.get('a')).toMatchObject({ content: 'Hello, world', partial: false });
    // A new object for a changed block, so that memoized rows re-render, and only that one.
    expect(log.get('a')).not.toBe(before);
    expect(log.blocks).toHaveLength(2);
  });

  it('hides context blocks, counts bad lines instead of failing, and bumps its version on change only', () => {
    const log = new ChatLog();
    log.push(
      line({ role: 'context', id: 'c', content: 'for the model' }) +
        'not json\n' +
        line({ role: 'info', id: 'i', content: 'x' }) +
        line({ nope: 1 }),
    );
    expect(log.blocks.map((b) => b.role)).toEqual(['context', 'info']);
    expect(log.visible.map((i) => log.blocks[i]!.id)).toEqual(['i']);
    expect(log.bad).toBe(2);
    const v = log.version;
    log.push('\n\n');
    expect(log.version).toBe(v);
  });

  it('puts older pages in front: in order, never a block twice, context hidden, and knows when the log starts', () => {
    const log = new ChatLog();
    const b = (i: number) => line({ role: i % 3 === 2 ? 'context' : 'user', id: `b${i}`, content: `${i}` });
    log.push([7, 8, 9].map(b).join('') + line({ role: 'assistant', id: 'open', content: 'so far', partial: true }));
    expect(log.oldestFinal()?.id).toBe('b7');
    const v = log.version;
    // A page of 4 asked for, 4 came: there may be more. b7 again (a page that overlaps) is not shown twice.
    expect(log.prepend([3, 4, 5, 6].map(b).join(''), 4)).toBe(3);
    expect(log.version).toBeGreaterThan(v);
    expect(log.hasOlder).toBe(true);
    expect(log.prepend([6, 7].map(b).join(''), 2)).toBe(0);
    expect(log.blocks.map((x) => x.id)).toEqual(['b3', 'b4', 'b5', 'b6', 'b7', 'b8', 'b9', 'open']);
    expect(log.visible.map((i) => log.blocks[i]!.id)).toEqual(['b3', 'b4', 'b6', 'b7', 'b9', 'open']);
    expect(log.prepended).toBe(3);
    // Fewer than asked: the log's first block is here.
    expect(log.prepend([0, 1, 2].map(b).join(''), 4)).toBe(2);
    expect(log.hasOlder).toBe(false);
    // Positions were rebuilt: a live chunk still lands in its own block.
    log.push(line({ role: 'assistant', id: 'open', content: ', more', partial: true }));
    expect(log.get('open')).toMatchObject({ content: 'so far, more' });
    expect(log.get('b0')).toMatchObject({ content: '0' });
  });

  it('recognizes diffs, pretty-prints call arguments and collapses long results', () => {
    expect(looksLikeDiff({ role: 'tool', id: 'x', content: '--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b' })).toBe(true);
    expect(looksLikeDiff({ role: 'tool', id: 'x', content: 'plain\n+ not a diff' })).toBe(false);
    expect(looksLikeDiff({ role: 'tool', id: 'x', content: 'x', format: 'diff' })).toBe(true);
    expect(prettyArgs('{"a":1}')).toBe('{\n  "a": 1\n}');
    expect(prettyArgs('not json')).toBe('not json');
    expect(isLong('short')).toBe(false);
    expect(isLong('x\n'.repeat(13))).toBe(true);
    expect(isLong('x'.repeat(1501))).toBe(true);
  });
});

describe('parsers', () => {
  it('reads session/idx, agent/idx (tree order) and pending bypass requests in both forms', () => {
    expect(parseSessionIdx('s1\twork\t1\t0\t-\t/home/me\n')).toEqual([
      { id: 's1', name: 'work', paused: true, connected: false, remote: '', cwd: '/home/me' },
    ]);
    expect(parseSessionIdx('s2\tsrv\t0\t1\tme@build:2222\t/srv/app\n')).toEqual([
      { id: 's2', name: 'srv', paused: false, connected: true, remote: 'me@build:2222', cwd: '/srv/app' },
    ]);
    // A line that does not parse as declared (a column missing) is left out, not the whole file.
    const agents = parseAgentIdx(
      's\tc\tchild\tp\t1\tthinking\tok\ns\tp\tparent\t-\t0\tidle\terror\ns\tg\tgrand\tc\t2\tcalling\t-\ns\to\tother\t-\t0\tidle\t-\ns\tx\tbroken\n',
    );
    expect(agents[1]).toEqual({
      session: 's',
      id: 'p',
      name: 'parent',
      parent: '',
      depth: 0,
      state: 'idle',
      last: 'error',
    });
    expect(agents[2]!.last).toBe('-');
    expect(parseEndedIdx('s\tk\tsub-1\tp\t1\t1700000000000\tfinished\tok\n')).toEqual([
      { session: 's', id: 'k', name: 'sub-1', parent: 'p', depth: 1, state: 'ended', last: 'ok', ended: 'finished' },
    ]);
    expect(treeOrder(agents).map((a) => a.name)).toEqual(['parent', 'child', 'grand', 'other']);
    expect(parsePending('b1\ta1\tshell\t/w\trm -rf x\t\tonce\t\n', 's')).toEqual([
      {
        id: 'b1',
        session: 's',
        agent: 'a1',
        tool: 'shell',
        cwd: '/w',
        cmd: 'rm -rf x',
        reason: undefined,
        remember: 'once',
        rule: '',
      },
    ]);
    expect(
      parsePending('{"id":"b2","agent":"a","tool":"t","cmd":"c","cwd":"/","reason":"net"}\n', 's')[0],
    ).toMatchObject({ id: 'b2', reason: 'net' });
  });

  it('reads the escaped command and the rule of a bypass line, and shows what would not show for itself', () => {
    const [p] = parsePending('7\ta1\tshell\t/w\tshell npm test\\necho \\\\n \\u{202e}x\treason\tonce\t\n', 's');
    expect(p).toMatchObject({
      id: '7',
      cmd: 'shell npm test\necho \\n \u202ex',
      reason: 'reason',
      remember: 'once',
      rule: '',
    });
    expect(parsePending('8\ta\tshell\t/w\tshell npm test\tr\tprefix\tnpm test\n', 's')[0]).toMatchObject({
      remember: 'prefix',
      rule: 'npm test',
    });
    expect(unescapeField('a\\tb\\\\c\\u{1F600}')).toBe('a\tb\\c\u{1F600}');
    expect(visibleCommand('npm test\nrm -rf ~\u202e')).toEqual([
      'npm test',
      { mark: '↵', title: 'newline: a second command' },
      '\nrm -rf ~',
      { mark: '⟨U+202E⟩', title: 'invisible character U+202E' },
    ]);
    expect(parseBypassRules('3\tshell\tprefix\tnpm test\tsession work\t2026-01-01T00:00:00.000Z\n')).toEqual([
      {
        id: '3',
        tool: 'shell',
        kind: 'prefix',
        rule: 'npm test',
        scope: 'session work',
        created: '2026-01-01T00:00:00.000Z',
      },
    ]);
  });

  it('reads events, key=value files, backends and models', () => {
    expect(parseEvent('session.S.agent.A.bypass.request b1\tls -l\\nx\t/w\tshell')).toEqual({
      topic: 'session.S.agent.A.bypass.request',
      payload: 'b1\tls -l\\nx\t/w\tshell',
      session: 'S',
      agent: 'A',
      kind: 'bypass.request',
      fields: { id: 'b1', cmd: 'ls -l\nx', cwd: '/w', tool: 'shell' },
    });
    expect(parseEvent('session.S.rename old\tnew')).toMatchObject({
      session: 'S',
      kind: 'rename',
      fields: { old: 'old', new: 'new' },
    });
    expect(parseEvent('session.S.kill')).toMatchObject({ session: 'S', kind: 'kill', payload: '' });
    const overflow = parseEvent('ollie.overflow 12');
    expect([overflow.kind, overflow.payload, overflow.session]).toEqual(['ollie.overflow', '12', undefined]);
    expect(parseKv(CFG, "model=m1\ncwd='/a dir/x=y'\n")).toEqual({ model: 'm1', cwd: '/a dir/x=y' });
    expect(parseKv(CFG, 'junk\n')).toEqual({});
    expect(parseBackends('mock*\topenai\thttp://x/v1\tgpt-4o\nclaude\tanthropic\thttp://y\tsonnet\n')).toEqual([
      { name: 'mock', type: 'openai', url: 'http://x/v1', model: 'gpt-4o', isDefault: true },
      { name: 'claude', type: 'anthropic', url: 'http://y', model: 'sonnet', isDefault: false },
    ]);
    expect(parseModels('mock\tgpt-4o\t128000\t-\nbad\t-\t-\tconnection refused\n')).toEqual([
      { backend: 'mock', model: 'gpt-4o', context: 128000 },
    ]);
  });
});

describe('9P console', () => {
  it('logs each operation as the ollie-9p command that replays it, quoted for the shell', async () => {
    const entries: ConsoleEntry[] = [];
    const fake = {
      readText: async () => 'x',
      write: async () => undefined,
      rdwrText: async (_path: string, data: string) => {
        if (data.startsWith('bogus')) throw new Error('bad request');
        return 'ok';
      },
      remove: async () => undefined,
    } as unknown as Client;
    const api = new Api(fake, (e) => entries.push(e));
    await api.read('session/idx');
    await api.write("session/it's/name", 'new name\n');
    await api.rdwr('session/new', 'name=a\ncwd=/tmp');
    await expect(api.rdwr('session/s/ctl', 'bogus\n')).rejects.toThrow('bad request');
    await api.remove('session/s/agent/a');
    expect(entries.map((e) => e.command)).toEqual([
      'ollie-9p read session/idx',
      `echo 'new name' | ollie-9p write 'session/it'\\''s/name'`,
      `printf '%s' 'name=a\ncwd=/tmp' | ollie-9p rdwr session/new`,
      'echo bogus | ollie-9p rdwr session/s/ctl',
      'ollie-9p rm session/s/agent/a',
    ]);
    expect(entries[3]!.error).toBe('bad request');
  });

  it('shows a repeated read once, moved to the end with its count, and never merges writes', () => {
    const e = (seq: number, command: string, error?: string): ConsoleEntry => ({ seq, time: seq, command, error });
    let list: ConsoleEntry[] = [];
    for (const [i, c] of [
      'ollie-9p read a/stats',
      'ollie-9p read a/queue',
      'echo x | ollie-9p write a/prompt',
      'ollie-9p read a/stats',
      'echo x | ollie-9p write a/prompt',
      'ollie-9p read a/stats',
    ].entries()) {
      list = appendEntry(list, e(i + 1, c));
    }
    expect(list.map((x) => [x.command, x.count ?? 1])).toEqual([
      ['ollie-9p read a/queue', 1],
      ['echo x | ollie-9p write a/prompt', 1],
      ['echo x | ollie-9p write a/prompt', 1],
      ['ollie-9p read a/stats', 3],
    ]);
    // A failed read is its own line; the log keeps the newest lines up to its bound.
    list = appendEntry(list, e(9, 'ollie-9p read a/stats', 'gone'));
    expect(list.at(-1)).toMatchObject({ command: 'ollie-9p read a/stats', error: 'gone' });
    expect(list.at(-1)!.count).toBeUndefined();
    let many: ConsoleEntry[] = [];
    for (let i = 0; i < 30; i++) many = appendEntry(many, e(i, `echo ${i} | ollie-9p write p`), 10);
    expect(many.map((x) => x.seq)).toEqual([20, 21, 22, 23, 24, 25, 26, 27, 28, 29]);
  });
});

describe('ANSI output', () => {
  const styled = (t: AnsiText) => t.segments.map((s) => [s.text, s.style]);

  it('turns SGR colours and attributes into styled segments and drops every other escape', () => {
    const t = new AnsiText();
    t.push('plain \x1b[31mred\x1b[0m \x1b[1;4;92mbold\x1b[22m under\x1b[m\x1b[2K\x1b]0;title\x07 end\n');
    expect(styled(t)).toEqual([
      ['plain ', {}],
      ['red', { fg: '#ef2929' }],
      [' ', {}],
      ['bold', { bold: true, underline: true, fg: '#8ae234' }],
      [' under', { bold: false, dim: false, underline: true, fg: '#8ae234' }],
      [' end\n', {}],
    ]);
    expect(t.toString()).toBe('plain red bold under end\n');
  });

  it('reads 256-colour and true-colour forms, inverse and backgrounds', () => {
    expect(applySgr({}, [38, 5, 196])).toEqual({ fg: color256(196) });
    expect(color256(196)).toBe('#ff0000');
    expect(color256(244)).toBe('#808080');
    expect(applySgr({}, [48, 2, 1, 2, 3])).toEqual({ bg: '#010203' });
    expect(applySgr({ fg: '#111111' }, [7, 44])).toMatchObject({ inverse: true, bg: '#3465a4' });
    expect(segmentCss({ fg: '#111111', bg: '#222222', inverse: true, bold: true })).toEqual({
      color: '#222222',
      backgroundColor: '#111111',
      fontWeight: '700',
    });
  });

  it('keeps an escape sequence or a CR cut by a chunk boundary for the next chunk', () => {
    const t = new AnsiText();
    for (const ch of 'a\x1b[3') t.push(ch);
    t.push('2mgreen\r');
    t.push('\nnext');
    expect(styled(t)).toEqual([
      ['a', {}],
      ['green\nnext', { fg: '#4e9a06' }],
    ]);
  });

  it('lets a lone carriage return overwrite the line (progress bars) and a backspace erase', () => {
    const t = new AnsiText();
    t.push('done\n 10%\r 50%\r\x1b[32m100%\x1b[0m\nab\bc\n');
    expect(t.toString()).toBe('done\n100%\nac\n');
  });

  it('keeps only the newest text past its cap, counting what it dropped', () => {
    const t = new AnsiText(10);
    t.push('0123456789');
    t.push('\x1b[31mabcde');
    expect(t.toString()).toBe('56789abcde');
    expect(t.dropped).toBe(5);
  });
});

describe('proc, search and config parsers', () => {
  it('reads proc/idx with running and finished processes, and the command out of JSON arguments', () => {
    const ps = parseProcIdx(
      '3\tshell\trunning\t-\t{"command":"sleep 9","background":true}\n4\tshell\tkilled\t-\tx\n5\tshell\texited\t0\ty\n',
    );
    expect(ps).toEqual([
      { pid: 3, tool: 'shell', status: 'running', exit: undefined, args: '{"command":"sleep 9","background":true}' },
      { pid: 4, tool: 'shell', status: 'killed', exit: undefined, args: 'x' },
      { pid: 5, tool: 'shell', status: 'exited', exit: '0', args: 'y' },
    ]);
    expect(procCommand(ps[0]!.args)).toBe('sleep 9');
    expect(procCommand('not json')).toBe('not json');
  });

  it('reads search hits, groups them by session and agent in rank order, and finds the [matched] words', () => {
    // Agent id and ended: a killed agent and a live one of the same name are two groups.
    const hits = parseSearch(
      's1\ta\tb1\tuser\tthe [flux] thing\tA1\t-\ns2\tc\tb2\tassistant\t[flux]\tC1\t-\ns1\ta\tb3\ttool\tmore [flux]\tA1\t-\ns1\td\tb4\tuser\tx\tD1\t-\ns1\ta\tb5\tuser\told [flux]\tA0\tkilled\n',
    );
    expect(hits[0]).toEqual({
      session: 's1',
      agent: 'a',
      block: 'b1',
      role: 'user',
      snippet: 'the [flux] thing',
      agentId: 'A1',
      ended: '',
    });
    expect(hits[4]).toMatchObject({ agentId: 'A0', ended: 'killed' });
    expect(
      groupHits(hits).map((g) => [g.session, g.agents.map((a) => [a.agent, a.ended, a.hits.map((h) => h.block)])]),
    ).toEqual([
      [
        's1',
        [
          ['a', '', ['b1', 'b3']],
          ['d', '', ['b4']],
          ['a', 'killed', ['b5']],
        ],
      ],
      ['s2', [['c', '', ['b2']]]],
    ]);
    expect(snippetParts('…the [flux] and [capacitor]!')).toEqual([
      { text: '…the ', hit: false },
      { text: 'flux', hit: true },
      { text: ' and ', hit: false },
      { text: 'capacitor', hit: true },
      { text: '!', hit: false },
    ]);
  });

  it("reads a background process's exit notice, attributes unescaped, output kept as written", () => {
    const text =
      '<system-proc-interrupt id="7" cmd="shell echo &quot;a&lt;b&quot; &amp;&amp; x" status="exited" exit="2">\n\x1b[31mred\x1b[0m\nlast\n</system-proc-interrupt>\n';
    expect(parseProcInterrupt(text)).toEqual({
      pid: 7,
      cmd: 'shell echo "a<b" && x',
      status: 'exited',
      exit: '2',
      output: '\x1b[31mred\x1b[0m\nlast\n',
    });
    expect(
      parseProcInterrupt('<system-proc-interrupt id="8" cmd="sleep 9" status="killed">\n</system-proc-interrupt>\n'),
    ).toMatchObject({ pid: 8, status: 'killed', exit: undefined, output: '' });
    expect(parseProcInterrupt('a prompt that mentions <system-proc-interrupt id="1">')).toBeUndefined();
  });

  it('finds the line a config parser named', () => {
    expect(errorLine('/home/u/.config/ollie/backends.conf:12: unknown type "x"')).toBe(12);
    expect(errorLine('no such profile')).toBeUndefined();
  });
});

describe('backends.conf keys in the GUI', () => {
  const file =
    '[default]\nbackend = a\n\n[a]\ntype = openai\nkey = sk-aaa\nmodel = m\n\n[b]\ntype = anthropic\nkey = env:ANTHROPIC_API_KEY\n\n[c]\ntype = openai\n  KEY =  sk-ccc  \n';

  it('masks literal keys, not env: references', () => {
    const shown = maskKeys(file);
    expect(shown).not.toMatch(/sk-aaa|sk-ccc/);
    expect(shown).toContain(`[a]\ntype = openai\nkey = ${KEY_MASK}\n`);
    expect(shown).toContain('key = env:ANTHROPIC_API_KEY');
    expect(shown).toContain(`  KEY =  ${KEY_MASK}\n`);
  });

  it("puts each section's key back for a masked line, keeps typed keys, and refuses a mask with no key behind it", () => {
    const edited = maskKeys(file)
      .replace('model = m', 'model = other')
      .replace(`[c]\ntype = openai\n  KEY =  ${KEY_MASK}`, '[c]\ntype = openai\nkey = sk-new');
    expect(unmaskKeys(edited, file)).toBe(
      file.replace('model = m', 'model = other').replace('  KEY =  sk-ccc  ', 'key = sk-new'),
    );
    const moved = `${maskKeys(file)}\n[d]\ntype = openai\nkey = ${KEY_MASK}\n`;
    expect(() => unmaskKeys(moved, file)).toThrow(
      `backends.conf:19: the key of [d] is hidden (${KEY_MASK}) but [d] had no key to keep`,
    );
    expect(errorLine(`backends.conf:19: the key of [d] is hidden`)).toBe(19);
  });

  it('sends the key to config/check but shows it masked in the 9P console', async () => {
    const r = setupRequest({ provider: 'openai', url: undefined, key: 'sk-secret', model: '' });
    expect(r.data).toBe('provider=openai\nkey=sk-secret\n');
    expect(r.shown).toBe(`provider=openai\nkey=${KEY_MASK}\n`);
    const entries: ConsoleEntry[] = [];
    const sent: string[] = [];
    const api = new Api(
      { rdwrText: async (_p: string, d: string) => (sent.push(d), 'm\t-\n') } as unknown as Client,
      (e) => entries.push(e),
    );
    await api.rdwr('config/check', r.data, r.shown);
    expect(sent).toEqual([r.data]);
    expect(entries[0]!.command).not.toContain('sk-secret');
    expect(entries[0]!.command).toContain(`key=${KEY_MASK}`);
  });

  it('parses config/providers and config/check', () => {
    expect(
      parseProviders(
        'openai\tOpenAI\topenai\thttps://api.openai.com/v1\tOPENAI_API_KEY\tneeded\ncompatible\tAny\topenai\t-\t-\toptional\n',
      ),
    ).toEqual([
      {
        id: 'openai',
        label: 'OpenAI',
        type: 'openai',
        url: 'https://api.openai.com/v1',
        keyEnv: 'OPENAI_API_KEY',
        needsKey: true,
      },
      { id: 'compatible', label: 'Any', type: 'openai', needsKey: false },
    ]);
    expect(parseCheckedModels('a\t131072\nb\t-\n')).toEqual([{ id: 'a', context: 131072 }, { id: 'b' }]);
  });
});
