/** The pure parts of the context economy: the token estimate, the view that is sent, overflow figures, windows. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { overflowFigures } from '../../src/olliesrv/agent/agent.js';
import { flattenWithin } from '../../src/olliesrv/agent/compaction.js';
import { Correction, measure, view } from '../../src/olliesrv/agent/context.js';
import { countTokens, MESSAGE_OVERHEAD, messageTokens, preciseCounting } from '../../src/olliesrv/backend/tokens.js';
import type { Message } from '../../src/olliesrv/backend/types.js';
import { knownWindow } from '../../src/olliesrv/backend/windows.js';
import { testDir } from '../helpers/temp-dir.js';

describe('countTokens', () => {
  it('counts prose near 4 characters a token and code and JSON denser, as o200k does', () => {
    const prose = 'The quick brown fox jumps over the lazy dog while the farmer watches from the porch. '.repeat(20);
    const ratio = prose.length / countTokens(prose);
    expect(ratio).toBeGreaterThan(4);
    expect(ratio).toBeLessThan(6);
    const code =
      'export function computeTotal(items: Item[]): number { return items.reduce((s, i) => s + i.price * i.qty, 0); }\n'.repeat(
        20,
      );
    expect(code.length / countTokens(code)).toBeLessThan(ratio);
    expect(countTokens('')).toBe(0);
    expect(countTokens('12345678')).toBe(3);
  });
});

const round = (i: number, size: number): Message[] => [
  {
    role: 'assistant',
    content: '',
    toolCalls: [{ id: `c${i}`, name: 'shell', args: JSON.stringify({ command: `cat f${i}` }) }],
  },
  {
    role: 'tool',
    toolCallId: `c${i}`,
    name: 'shell',
    content: Array.from({ length: size }, (_, k) => `row ${k} of file ${i}`).join('\n'),
  },
];

describe('view', () => {
  it('cuts the output of rounds older than the recent ones to an excerpt naming a file with all of it, and leaves the history alone', () => {
    const dir = testDir('ollie-view-');
    const msgs: Message[] = [{ role: 'user', content: 'go' }, ...[1, 2, 3, 4, 5].flatMap((i) => round(i, 400))];
    const v = view(msgs, { spillDir: dir, recentRounds: 3 });
    expect(v).toHaveLength(msgs.length);
    const results = v.filter((m) => m.role === 'tool').map((m) => m.content);
    expect(results[0]).toMatch(/\[this output cut to save context: \d+ bytes, 400 lines; the whole text is in (\S+)/);
    expect(results[1]).toMatch(/cut to save context/);
    expect(results.slice(2)).toEqual(
      msgs
        .filter((m) => m.role === 'tool')
        .slice(2)
        .map((m) => m.content),
    );
    // Unchanged messages are the history's own objects (their counts stay cached, the prefix stays identical).
    expect(v[0]).toBe(msgs[0]);
    expect(v.at(-1)).toBe(msgs.at(-1));
    const path = /the whole text is in (\S+) —/.exec(results[0]!)![1]!;
    expect(readFileSync(path, 'utf8')).toBe(msgs[2]!.content);
    expect(measure('', [], v).history).toBeLessThan(measure('', [], msgs).history * 0.7);
  });

  it('cuts large string arguments inside valid JSON, and with maxTokens anything large whatever its age; drops hints when asked', () => {
    const dir = testDir('ollie-view-');
    const content = 'x = 1\n'.repeat(3000);
    const msgs: Message[] = [
      { role: 'user', kind: 'skill', content: '<context>\nSkill "s" matches</context>' },
      { role: 'user', content: 'write it' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 'w1', name: 'file_write', args: JSON.stringify({ path: 'a.py', content }) }],
      },
      { role: 'tool', toolCallId: 'w1', name: 'file_write', content: 'ok' },
    ];
    expect(view(msgs, { spillDir: dir, recentRounds: 3 })).toEqual(msgs);
    const v = view(msgs, { spillDir: dir, recentRounds: 3, maxTokens: 500, dropHints: true });
    expect(v).toHaveLength(3);
    const call = (v[1] as Extract<Message, { role: 'assistant' }>).toolCalls![0]!;
    const args = JSON.parse(call.args) as { path: string; content: string };
    expect(args.path).toBe('a.py');
    expect(args.content).toMatch(/\[argument "content" cut to save context: 18000 bytes/);
  });
});

describe('overflow figures and the correction', () => {
  it("reads the provider's count and limit from each provider's wording", () => {
    expect(
      overflowFigures(
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9023 tokens. Please reduce",
      ),
    ).toEqual({ limit: 8192, actual: 9023 });
    expect(overflowFigures('prompt is too long: 210000 tokens > 200000 maximum')).toEqual({
      actual: 210000,
      limit: 200000,
    });
    expect(
      overflowFigures('The input token count (1100000) exceeds the maximum number of tokens allowed (1048576).'),
    ).toEqual({ actual: 1100000, limit: 1048576 });
    expect(overflowFigures('the input length exceeds the context length (9000 > 8192)')).toEqual({
      actual: 9000,
      limit: 8192,
    });
    expect(overflowFigures('context window exceeded')).toEqual({});
  });

  it('moves halfway to each report, within bounds, and only grows on an overflow', () => {
    const c = new Correction();
    c.observe(1200, 1000);
    expect(c.factor).toBeCloseTo(1.1);
    c.observe(1_000_000, 10);
    expect(c.factor).toBe(3);
    const d = new Correction();
    d.overflow(1000, 1300);
    expect(d.factor).toBeCloseTo(1.3);
    d.overflow(1000, 500);
    expect(d.factor).toBeCloseTo(1.365);
    d.overflow(1000);
    expect(d.factor).toBeGreaterThan(1.365);
  });
});

describe('the summarizer input', () => {
  it('fits the given size: results cut shorter, then the middle left out', () => {
    const msgs: Message[] = [
      { role: 'user', content: 'THE GOAL' },
      ...[1, 2, 3, 4, 5, 6].flatMap((i) => round(i, 2000)),
      { role: 'assistant', content: 'THE LATEST' },
    ];
    const text = flattenWithin(msgs, 600);
    expect(countTokens(text)).toBeLessThanOrEqual(700);
    expect(text).toContain('THE GOAL');
    expect(text).toContain('THE LATEST');
    expect(flattenWithin(msgs, 100_000)).toContain('row 1 of file 1');
  });
});

describe('known windows', () => {
  it('matches the longest prefix, ignoring a router prefix and an Ollama tag', () => {
    expect(knownWindow('gpt-4o-mini')).toBe(128_000);
    expect(knownWindow('gpt-4')).toBe(8_192);
    expect(knownWindow('openai/gpt-4.1-mini')).toBe(1_047_576);
    expect(knownWindow('llama3.1:8b')).toBe(131_072);
    expect(knownWindow('qwen3-coder:30b')).toBe(262_144);
    expect(knownWindow('my-own-model')).toBeUndefined();
  });
});

describe('exact counting near the window', () => {
  it('counts with the o200k tokenizer once loaded, and recounts what was cached before', async () => {
    const m: Message = {
      role: 'user',
      content: 'The quick brown fox jumps over the lazy dog, twice: the quick brown fox.',
    };
    const before = messageTokens(m);
    await preciseCounting();
    const { countTokens: o200k } = await import('gpt-tokenizer/encoding/o200k_base');
    expect(countTokens(m.content)).toBe(o200k(m.content));
    expect(messageTokens(m)).toBe(MESSAGE_OVERHEAD + o200k(m.content));
    // The estimate it replaced was close (the loop relies on it until a request nears its window).
    expect(Math.abs(before - messageTokens(m))).toBeLessThanOrEqual(Math.ceil(messageTokens(m) * 0.15));
  });
});
