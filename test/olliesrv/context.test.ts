/**
 * Context economy against the real daemon, toolsrv and the mock LLM enforcing a window the way a
 * served model does (a prompt over it is refused with the provider's real context-length error).
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { promptTokens, type RecordedRequest } from '../../src/devtools/mock-llm/server.js';
import { testHarness, type Harness } from './agent-harness.js';

const chats = (hh: Harness): RecordedRequest[] =>
  hh.mock.requests.filter((r) => r.protocol === 'openai' && r.method === 'POST');
const tokensOf = (r: RecordedRequest): number => promptTokens(r.body as Record<string, unknown>);
const isSummaryRequest = (r: RecordedRequest): boolean => JSON.stringify(r.body).includes('You are compacting');
/** A command whose output is about `kib` KiB of varied text (~1 token per 3 bytes). */
const bigOutput = (kib: number, tag = 'line'): string =>
  `for i in $(seq 1 ${Math.round((kib * 1024) / 24)}); do echo "${tag} $i of the output"; done`;

describe('the first request', () => {
  it('a default agent sends at most 3,000 tokens: hot tools with schemas, the others in an index, flags described once', async () => {
    const h = await testHarness({ turns: [[{ text: 'hi' }]] });
    const a = await h.agent({ profile: 'default' });
    await h.turn(a.path, 'hello');
    const first = chats(h)[0]!;
    expect(tokensOf(first)).toBeLessThanOrEqual(3000);
    const body = first.body as {
      tools: Array<{ function: { name: string; parameters: { properties: Record<string, unknown> } } }>;
      messages: Array<{ content: string }>;
    };
    const names = body.tools.map((t) => t.function.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'shell',
        'file_read',
        'file_write',
        'file_edit',
        'file_grep',
        'file_glob',
        'tool_search',
      ]),
    );
    expect(names).not.toContain('lsp_hover');
    for (const t of body.tools) expect(Object.keys(t.function.parameters.properties)).not.toContain('bypass');
    const system = body.messages[0]!.content;
    expect(system.match(/`bypass: true`/g)).toHaveLength(1);
    // warm tools are listed, cold ones are not
    expect(system).toMatch(/- lsp_hover: /);
    expect(system).not.toMatch(/- skill_load: /);
  });

  it('a listed tool called by name runs and is sent from then on; tool_search loads by words', async () => {
    const h = await testHarness({
      profiles: {
        lean: { prompt: 'You are lean.', autoLoad: ['shell', 'reasoning_think', 'subagent_spawn'], maxSteps: 10 },
      },
      turns: [
        [{ toolCalls: [{ name: 'reasoning_think', args: { thought: 'plan first' } }] }],
        [{ toolCalls: [{ name: 'tool_search', args: { query: 'spawn a sub-agent' } }] }],
        [{ text: 'done' }],
      ],
    });
    const a = await h.agent({ profile: 'lean' });
    const blocks = await h.turn(a.path, 'go');
    expect(blocks.filter((b) => b.role === 'tool').map((b) => b.content)).toEqual([
      'Thought recorded.\n',
      expect.stringMatching(/^loaded subagent_spawn: /),
    ]);
    const sent = chats(h).map((r) =>
      (r.body as { tools: Array<{ function: { name: string } }> }).tools.map((t) => t.function.name),
    );
    expect(sent[0]).toEqual(['shell', 'tool_search']);
    expect(sent[1]).toEqual(['shell', 'tool_search', 'reasoning_think']);
    expect(sent[2]).toEqual(['shell', 'tool_search', 'reasoning_think', 'subagent_spawn']);
  });

  it('larger than the window: the turn ends with an error naming what takes the room, and nothing is sent', async () => {
    const h = await testHarness({
      profiles: { wordy: { prompt: 'Be careful. '.repeat(800), autoLoad: ['shell'], maxSteps: 5 } },
    });
    const a = await h.agent({ profile: 'wordy', backend: 'tiny' });
    const blocks = await h.turn(a.path, 'hello');
    const err = blocks.find((b) => b.role === 'error')!;
    expect(err.content).toMatch(/does not fit gpt-4o-mini's window of 1000 tokens/);
    expect(err.content).toMatch(/system prompt \d+, tool schemas \d+/);
    expect(err.content).toMatch(/shorter prompt or fewer tools/);
    expect(err.content).toMatch(/context= for backend tiny in backends\.conf/);
    expect(chats(h)).toHaveLength(0);
  });
});

describe('compaction by budget', () => {
  it('one tool result larger than the window is cut to an excerpt that names the file holding all of it', async () => {
    const h = await testHarness({
      mock: { window: 4000 },
      turns: [[{ toolCalls: [{ name: 'shell', args: { command: bigOutput(30) } }] }], [{ text: 'done' }]],
    });
    const a = await h.agent({ backend: 'small' });
    const blocks = await h.turn(a.path, 'run it');
    expect(blocks.at(-1)).toMatchObject({ role: 'assistant', content: 'done' });
    expect(blocks.filter((b) => b.role === 'error')).toHaveLength(0);
    for (const r of chats(h)) expect(tokensOf(r)).toBeLessThanOrEqual(4000);
    const last = JSON.stringify(chats(h).at(-1)!.body);
    const path = /the whole (?:text|output) is in (\/[^\s\\]+\.txt)/.exec(last)![1]!;
    expect(readFileSync(path, 'utf8')).toContain('line 1280 of the output');
    // The next prompt still works: the agent is not stuck.
    h.mock.script([{ text: 'still here' }]);
    expect((await h.turn(a.path, 'next')).at(-1)).toMatchObject({ role: 'assistant', content: 'still here' });
  });

  it('a tail made of huge results: the oldest turns are summarized, then the results cut, within the window', async () => {
    const h = await testHarness({
      mock: {
        window: 4000,
        respond: (b) =>
          JSON.stringify(b).includes('You are compacting') ? [{ text: '## Goal\nthe summary' }] : undefined,
      },
    });
    const a = await h.agent({ backend: 'small' });
    for (let i = 0; i < 3; i++) {
      h.mock.script([{ text: `answer ${i} `.repeat(40) }]);
      await h.turn(a.path, `question ${i} `.repeat(40));
    }
    h.mock.script(
      ...[1, 2, 3].map((i) => [{ toolCalls: [{ name: 'shell', args: { command: bigOutput(6, `r${i}`) } }] }]),
      [{ text: 'finished' }],
    );
    const blocks = await h.turn(a.path, 'read three big outputs');
    expect(blocks.at(-1)).toMatchObject({ role: 'assistant', content: 'finished' });
    for (const r of chats(h)) expect(tokensOf(r)).toBeLessThanOrEqual(4000);
    expect(chats(h).some(isSummaryRequest)).toBe(true);
    expect(
      blocks.some((b) => b.role === 'info' && b.name === 'compaction' && /Compacted \d+ messages/.test(b.content)),
    ).toBe(true);
    expect(JSON.stringify(chats(h).at(-1)!.body)).toMatch(/cut to save context/);
  });

  it('repeated overflows: each retry is smaller than the one refused, and too many end in a clear error', async () => {
    const h = await testHarness({
      mock: {
        respond: (b) => (JSON.stringify(b).includes('You are compacting') ? [{ text: '## Goal\nsummary' }] : undefined),
      },
    });
    const a = await h.agent();
    for (let i = 0; i < 4; i++) {
      h.mock.script(
        [{ toolCalls: [{ name: 'shell', args: { command: bigOutput(4, `t${i}`) } }] }],
        [{ text: `answer ${i}` }],
      );
      await h.turn(a.path, `question ${i}`);
    }
    const before = chats(h).length;
    h.mock.script([{ contextOverflow: true }], [{ contextOverflow: true }], [{ text: 'made it' }]);
    const blocks = await h.turn(a.path, 'once more');
    expect(blocks.at(-1)).toMatchObject({ role: 'assistant', content: 'made it' });
    const asked = chats(h)
      .slice(before)
      .filter((r) => !isSummaryRequest(r))
      .map(tokensOf);
    expect(asked).toHaveLength(3);
    for (let i = 1; i < asked.length; i++) expect(asked[i]).toBeLessThan(asked[i - 1]!);
    expect(blocks.filter((b) => b.role === 'info' && b.name === 'overflow')).toHaveLength(2);

    // A model that refuses everything: the turn ends with an error, not a loop.
    for (let i = 0; i < 12; i++) h.mock.script([{ contextOverflow: true }]);
    const end = await h.turn(a.path, 'and again');
    expect(end.at(-1)!.role).toBe('error');
    expect(end.at(-1)!.content).toMatch(
      /^the model refused a request of ~\d+ tokens as too long \(.*maximum context length is 32768 tokens.*\), and nothing is left to shrink: the request does not fit/,
    );
    expect(end.at(-1)!.content).toMatch(/system prompt \d+/);
  });

  it('ctl compact shrinks a history of one huge result instead of saying there is nothing to compact', async () => {
    const h = await testHarness({
      turns: [[{ toolCalls: [{ name: 'shell', args: { command: bigOutput(20) } }] }], [{ text: 'ok' }]],
    });
    const a = await h.agent();
    await h.turn(a.path, 'x');
    h.mock.script([{ text: '## Goal\nsmall' }]);
    expect(await h.c.rdwrText(`${a.path}/ctl`, 'compact')).toMatch(
      /^Compacted 4 messages into a summary \(request ~\d+ → ~\d+ tokens/,
    );
    expect(await h.c.rdwrText(`${a.path}/ctl`, 'compact')).toMatch(/^nothing to compact: the history is 1 message/);
  });
});

describe('the account', () => {
  it('stats splits the next request by part, corrected by the usage the provider reports', async () => {
    const h = await testHarness({ turns: [[{ text: 'hi' }, { usage: { input: 2000, output: 5 } }]] });
    const a = await h.agent();
    await h.turn(a.path, 'hello');
    const kv = Object.fromEntries(
      (await h.c.readText(`${a.path}/stats`))
        .trim()
        .split('\n')
        .map((l) => l.split('=') as [string, string]),
    );
    const parts = ['context_system', 'context_tools', 'context_history', 'context_skills', 'context_attachments'].map(
      (k) => Number(kv[k]),
    );
    expect(parts[0]).toBeGreaterThan(0);
    expect(parts[1]).toBeGreaterThan(0);
    expect(parts[2]).toBeGreaterThan(0);
    const factor = Number(kv.estimate_factor);
    expect(factor).toBeGreaterThan(1);
    expect(Number(kv.context_estimate) / parts.reduce((x, y) => x + y, 0)).toBeCloseTo(factor, 2);
    expect(existsSync(h.dir)).toBe(true);
  });
});
