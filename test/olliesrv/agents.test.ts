/**
 * The agent loop end to end: a real daemon, the mock LLM over HTTP, a real toolsrv running the core tools, all
 * driven through the 9P namespace.
 */
import { STATS } from '../../src/formats/olliesrv.js';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { userInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { dial } from '../../src/ninep/node.js';
import { startDaemon } from '../../src/olliesrv/daemon.js';
import { parseProfile } from '../../src/olliesrv/agent/profiles.js';
import { shippedDataDir } from '../../src/platform/paths.js';
import { until } from '../wait.js';
import { testHarness, parseBlocks } from './agent-harness.js';

const roles = (bs: { role: string }[]) => bs.map((b) => b.role);

describe('a turn', () => {
  it('a prompt is everything one open writes, however the client splits it: 20,000 bytes in 4 KiB writes are one user block', async () => {
    const h = await testHarness({ turns: [[{ text: 'got it' }]] });
    const a = await h.agent();
    const c = await dial(`unix!${h.socket}`, { uname: userInfo().username, msize: 4096 + 24 });
    try {
      const aid = (await c.readText(`${a.path}/id`)).trim();
      const done = h.daemon.agents
        .all()
        .find((x) => x.id === aid)!
        .nextTurn();
      const prompt = `${'lorem ipsum '.repeat(1700)}end`;
      expect(prompt.length).toBeGreaterThan(20000);
      await c.write(`${a.path}/prompt`, prompt);
      await done;
      const blocks = await h.blocks(a.path);
      expect(roles(blocks)).toEqual(['user', 'assistant']);
      expect(blocks[0]!.content).toBe(prompt);
    } finally {
      c.close();
    }
  });

  it('streams the reply as partial blocks closed by a final block, and accounts usage and cost', async () => {
    const h = await testHarness({
      turns: [[{ text: 'Hello there, friend.' }, { usage: { input: 1000, output: 20, cached: 400 } }]],
    });
    const a = await h.agent();
    const subs = h.daemon.bus.subscribers;
    const events = h.c.stream('event', { request: `session.${a.sid}.agent.${a.aid}.state` });
    const it0 = events[Symbol.asyncIterator]();
    const firstEvent = it0.next();
    await until(() => h.daemon.bus.subscribers > subs, 'the event subscription');
    const log = h.c.stream(`${a.path}/log.raw`);
    const blocks = await h.turn(a.path, 'hi');
    expect(roles(blocks)).toEqual(['user', 'assistant']);
    expect(blocks[1]!.content).toBe('Hello there, friend.');

    // log.raw from the start: the final blocks (partials of finished blocks are not replayed).
    let raw = '';
    for await (const chunk of log) {
      raw += new TextDecoder().decode(chunk);
      if (raw.includes('friend."')) break;
    }
    const lines = parseBlocks(raw);
    expect(lines.at(-1)).toMatchObject({ role: 'assistant', content: 'Hello there, friend.' });
    expect(lines.every((b) => !b.partial)).toBe(true);

    const ev = new TextDecoder().decode((await firstEvent).value as Uint8Array);
    expect(ev).toContain(`session.${a.sid}.agent.${a.aid}.state thinking`);
    await it0.return?.(undefined);

    const stats = await h.c.readText(`${a.path}/stats`);
    expect(stats).toContain('input_tokens=1000');
    expect(stats).toContain('output_tokens=20');
    expect(stats).toContain('cached_tokens=400');
    expect(stats).toContain('requests=1');
    // gpt-4o: 600 uncached input at $2.50/M, 400 cached at half, 20 output at $10/M.
    const cost = Number(/cost_session=([\d.]+)/.exec(stats)![1]);
    expect(cost).toBeCloseTo((600 * 2.5 + 400 * 1.25 + 20 * 10) / 1e6, 8);
    expect(stats).toContain('context_length=100000');
    expect((await h.c.readText(`${a.path}/state`)).trim()).toBe('idle');
    expect(await h.c.readText(`${a.path}/log`)).toBe('> hi\n\nHello there, friend.\n\n');
  });

  it('sends partial blocks to a reader while the reply streams', async () => {
    const h = await testHarness({ turns: [[{ delayMs: 30 }, { text: 'one two three four' }]] });
    const a = await h.agent();
    const got: string[] = [];
    const reader = (async () => {
      for await (const chunk of h.c.stream(`${a.path}/log.raw`)) {
        got.push(...new TextDecoder().decode(chunk).split('\n').filter(Boolean));
        if (got.some((l) => l.includes('"content":"one two three four"'))) return;
      }
    })();
    await until(() => h.daemon.agents.all().find((x) => x.id === a.aid)!.log.readerCount > 0, 'the log.raw reader');
    await h.turn(a.path, 'count');
    await reader;
    const bs = got.map((l) => JSON.parse(l) as { role: string; id: string; content: string; partial?: boolean });
    const partials = bs.filter((b) => b.partial && b.role === 'assistant');
    expect(partials.length).toBeGreaterThan(1);
    const final = bs.find((b) => b.role === 'assistant' && !b.partial)!;
    expect(partials.every((p) => p.id === final.id)).toBe(true);
    expect(partials.map((p) => p.content).join('')).toBe(final.content);
  });

  it('runs tool calls through toolsrv (parallel calls in one round) and sends the results back', async () => {
    const h = await testHarness();
    writeFileSync(join(h.dir, 'a.txt'), 'alpha\n');
    writeFileSync(join(h.dir, 'b.txt'), 'beta\n');
    h.mock.script(
      [
        {
          toolCalls: [
            { name: 'file_read', args: { path: join(h.dir, 'a.txt') } },
            { name: 'file_read', args: { path: join(h.dir, 'b.txt') } },
          ],
        },
      ],
      [{ text: 'Both read.' }],
    );
    const a = await h.agent();
    const blocks = await h.turn(a.path, 'read both');
    expect(roles(blocks)).toEqual(['user', 'call', 'call', 'tool', 'tool', 'assistant']);
    const tools = blocks.filter((b) => b.role === 'tool');
    expect(tools.map((t) => t.name)).toEqual(['file_read', 'file_read']);
    expect(tools.map((t) => t.content).join('\n')).toContain('alpha');
    expect(tools.map((t) => t.content).join('\n')).toContain('beta');
    // The second request carried both results, after the assistant message with both calls.
    const body = h.mock.requests.filter((r) => r.protocol === 'openai').at(-1)!.body as {
      messages: Array<{ role: string; content?: unknown; tool_calls?: unknown[] }>;
    };
    const toolMsgs = body.messages.filter((m) => m.role === 'tool');
    expect(toolMsgs).toHaveLength(2);
    expect(JSON.stringify(toolMsgs)).toContain('alpha');
    expect(body.messages.find((m) => m.role === 'assistant')!.tool_calls).toHaveLength(2);
    // The model saw the tools' own schemas; the dispatch flags are described once, in the system prompt.
    const first = h.mock.requests.find((r) => r.protocol === 'openai')!.body as {
      tools: Array<{ function: { name: string; parameters: { properties: Record<string, unknown> } } }>;
      messages: Array<{ content: string }>;
    };
    const fr = first.tools.find((t) => t.function.name === 'file_read')!;
    expect(Object.keys(fr.function.parameters.properties)).toEqual(['path', 'offset', 'limit']);
    expect(first.messages[0]!.content).toMatch(/Every tool also takes these optional arguments: `background: true`/);
  });

  it('answers a call of an unknown tool or with broken JSON arguments with an error the model can act on', async () => {
    const h = await testHarness({ turns: [[{ toolCalls: [{ name: 'no_such_tool', args: {} }] }], [{ text: 'ok' }]] });
    const a = await h.agent();
    const blocks = await h.turn(a.path, 'x');
    const tool = blocks.find((b) => b.role === 'tool')!;
    expect(tool.content).toMatch(/no tool named no_such_tool is loaded; loaded tools: .*file_read/);
  });

  it('runs /cmd prompts as ctl commands and !cmd through the shell tool', async () => {
    const h = await testHarness();
    const a = await h.agent();
    await h.c.write(`${a.path}/prompt`, '/model gpt-4.1');
    expect(await h.c.readText(`${a.path}/cfg`)).toContain('model=gpt-4.1');
    await expect(h.c.rdwrText(`${a.path}/ctl`, 'frobnicate')).rejects.toThrow(
      /unknown command "frobnicate"; known commands: stop, compact/,
    );
    const blocks = await h.turn(a.path, '!echo from-the-shell');
    const tool = blocks.find((b) => b.role === 'tool')!;
    expect(tool).toMatchObject({ name: 'shell' });
    expect(tool.content).toContain('from-the-shell');
    expect(h.mock.requests.filter((r) => r.protocol === 'openai')).toHaveLength(0);
    // The output joins the history, so the next prompt's request carries it.
    await h.turn(a.path, 'what did it print?');
    expect(JSON.stringify(h.mock.requests.at(-1)!.body)).toContain('from-the-shell');
  });
});

describe('retries and errors', () => {
  it('retries a 429 (honouring Retry-After) and a 500, logging retry blocks, then succeeds', async () => {
    const h = await testHarness({
      turns: [[{ status: 429, retryAfter: 1 }], [{ status: 500 }], [{ text: 'finally' }]],
    });
    const a = await h.agent();
    const t0 = Date.now();
    const blocks = await h.turn(a.path, 'x');
    expect(roles(blocks)).toEqual(['user', 'retry', 'retry', 'assistant']);
    expect(blocks[1]).toMatchObject({ name: 'limitretry' });
    expect(blocks[2]).toMatchObject({ name: 'retry' });
    expect(blocks[3]!.content).toBe('finally');
    // Retry-After 1 s, divided by the harness's factor of 100, is still waited.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(10);
  });

  it('retries a stream cut mid-response', async () => {
    const h = await testHarness({
      turns: [[{ text: 'a b c d e f g h' }, { cutAfterChunks: 2 }], [{ text: 'whole answer' }]],
    });
    const a = await h.agent();
    const blocks = await h.turn(a.path, 'x');
    expect(roles(blocks)).toContain('retry');
    expect(blocks.at(-1)).toMatchObject({ role: 'assistant', content: 'whole answer' });
  });

  it('gives up after the retry bound with an error block, and the agent stays usable', async () => {
    const h = await testHarness({ turns: Array.from({ length: 12 }, () => [{ status: 503 }]) });
    const a = await h.agent();
    const blocks = await h.turn(a.path, 'x');
    expect(blocks.at(-1)!.role).toBe('error');
    expect(blocks.filter((b) => b.role === 'retry').length).toBeGreaterThanOrEqual(3);
    expect((await h.c.readText(`${a.path}/state`)).trim()).toBe('idle');
  });

  it('does not retry a 401 and says why', async () => {
    const h = await testHarness({ turns: [[{ status: 401, message: 'invalid api key' }]] });
    const a = await h.agent();
    const blocks = await h.turn(a.path, 'x');
    expect(roles(blocks)).toEqual(['user', 'error']);
    expect(blocks[1]!.content).toMatch(/401|invalid api key/);
  });

  it("says how the last turn ended: agent/idx's last column and a turn event before the state goes idle", async () => {
    const h = await testHarness({ turns: [[{ status: 401, message: 'invalid api key' }], [{ text: 'fine now' }]] });
    const a = await h.agent();
    const idx = async () => (await h.c.readText(`session/${a.session}/agent/idx`)).trim().split('\t');
    expect((await idx())[6]).toBe('-');
    const subs = h.daemon.bus.subscribers;
    const events = h.c.stream('event', { request: `session.${a.sid}.agent.${a.aid}.>` });
    let seen = '';
    const reading = (async () => {
      for await (const chunk of events) {
        seen += new TextDecoder().decode(chunk);
        if (seen.includes('.turn ok\t-')) break;
      }
    })();
    await until(() => h.daemon.bus.subscribers > subs, 'the event subscription');
    await h.turn(a.path, 'x');
    expect(await idx()).toEqual([a.sid, a.aid, a.name, '-', '0', 'idle', 'error']);
    await h.turn(a.path, 'y');
    expect((await idx())[6]).toBe('ok');
    await reading;
    // The outcome comes before the idle state, so that a client never shows a failed turn as a good one.
    const lines = seen.split('\n').map((l) => l.replace(/^\S+\.agent\.[^.]+\./, ''));
    // The payload as declared (formats/olliesrv.ts EVENTS): how, then why when it is an error.
    const failed = lines.findIndex((l) => l.startsWith('turn error\t'));
    expect(lines[failed]).toMatch(/turn error\t.*(401|invalid api key)/);
    expect(lines.slice(failed + 1)).toContain('state idle');
    expect(lines.indexOf('turn ok\t-')).toBeGreaterThan(failed);
  });

  it('compacts and retries once when the context overflows', async () => {
    const h = await testHarness({
      turns: [
        ...['one', 'two', 'three', 'four', 'five'].map((n) => [{ text: `answer ${n}` }]),
        [{ contextOverflow: true }],
        [{ text: '## Goal\nsummary' }],
        [{ text: 'after compaction' }],
      ],
    });
    const a = await h.agent();
    for (const n of ['one', 'two', 'three', 'four', 'five']) await h.turn(a.path, n);
    const blocks = await h.turn(a.path, 'four');
    expect(blocks.at(-1)).toMatchObject({ role: 'assistant', content: 'after compaction' });
    expect(blocks.filter((b) => b.role === 'info' && b.name === 'compaction')).toHaveLength(2);
    const ctx = await h.c.rdwrText(`${a.path}/ctl`, 'context');
    expect(ctx).toContain('epoch=1');
  });
});

describe('control', () => {
  it('queues prompts while a turn runs and drains them in order; the queue file shows and edits them', async () => {
    const h = await testHarness({
      turns: [[{ delayMs: 40 }, { text: 'slow one two three' }], [{ text: 'second' }], [{ text: 'third' }]],
    });
    const a = await h.agent();
    await h.c.write(`${a.path}/prompt`, 'first');
    await h.waitState(a.path, 'thinking');
    await h.c.write(`${a.path}/prompt`, 'second');
    await h.c.write(`${a.path}/fifo`, 'third');
    expect(JSON.parse(await h.c.readText(`${a.path}/queue`))).toEqual(['second', 'third']);
    // A fifo read pops the oldest; the queue file replaces the whole queue.
    expect(await h.c.readText(`${a.path}/fifo`)).toBe('second');
    await h.c.write(`${a.path}/queue`, JSON.stringify(['second', 'third']));
    const agent = h.daemon.agents.all()[0]!;
    while (agent.busy || agent.queue.length) await agent.nextTurn();
    const users = (await h.blocks(a.path)).filter((b) => b.role === 'user').map((b) => b.content);
    expect(users).toEqual(['first', 'second', 'third']);
  });

  it('ctl stop cancels the stream; the turn ends stopped and the agent is idle', async () => {
    const h = await testHarness({ turns: [[{ delayMs: 200 }, { text: 'a b c d e f g h i j k l m n o p' }]] });
    const a = await h.agent();
    await h.c.write(`${a.path}/prompt`, 'go');
    await h.waitState(a.path, 'thinking');
    // The request is out: the model (200 ms before its first chunk) is streaming when the stop comes.
    await until(() => h.mock.requests.length === 1, 'the request to reach the model');
    expect(await h.c.rdwrText(`${a.path}/ctl`, 'stop')).toBe('stopping\n');
    await h.waitState(a.path, 'idle');
    const blocks = await h.blocks(a.path);
    expect(blocks.at(-1)).toMatchObject({ role: 'info', name: 'stopped' });
  });

  it('cfg applies when idle and refuses while a turn runs', async () => {
    const h = await testHarness({ turns: [[{ delayMs: 100 }, { text: 'a b c d' }]] });
    const a = await h.agent();
    await h.c.write(`${a.path}/cfg`, 'temperature=0.3\nmodel=gpt-4.1-mini');
    const cfg = await h.c.readText(`${a.path}/cfg`);
    expect(cfg).toContain('temperature=0.3');
    expect(cfg).toContain('model=gpt-4.1-mini');
    await h.c.write(`${a.path}/prompt`, 'go');
    await h.waitState(a.path, 'thinking');
    await expect(h.c.write(`${a.path}/cfg`, 'model=x')).rejects.toThrow(/running a turn; cfg changes are refused/);
    await h.waitState(a.path, 'idle');
    const req = h.mock.requests.at(-1)!.body as { model: string; temperature: number };
    expect(req.model).toBe('gpt-4.1-mini');
    expect(req.temperature).toBe(0.3);
  });

  it('ctl compact replaces the history with a summary and keeps the old one for ctl restore', async () => {
    const h = await testHarness();
    const a = await h.agent();
    for (let i = 0; i < 6; i++) {
      h.mock.script([{ text: `answer ${i}` }]);
      await h.turn(a.path, `question ${i}`);
    }
    h.mock.script([{ text: '## Goal\nthe summary' }]);
    expect(await h.c.rdwrText(`${a.path}/ctl`, 'compact')).toMatch(/Compacted \d+ messages into a summary/);
    const agent = h.daemon.agents.all()[0]!;
    expect(agent.history.messages[0]!.content).toContain('the summary');
    expect(agent.history.length).toBeLessThan(12);
    // The summarizer got the flattened history.
    expect(JSON.stringify(h.mock.requests.at(-1)!.body)).toContain('question 0');
    expect(await h.c.rdwrText(`${a.path}/ctl`, 'restore')).toBe('restored 12 messages\n');
    expect(agent.history.length).toBe(12);
  });

  it('the safety net: five failing rounds bring a nudge, five identical rounds a stall block, ten failing rounds end the turn', async () => {
    const h = await testHarness({
      turns: Array.from({ length: 12 }, () => [{ toolCalls: [{ name: 'nope', args: { x: 1 } }] }]),
    });
    const a = await h.agent();
    const blocks = await h.turn(a.path, 'x');
    expect(blocks.filter((b) => b.role === 'context' && b.name === 'nudge')).toHaveLength(1);
    expect(blocks.filter((b) => b.role === 'stalled')).toHaveLength(1);
    expect(blocks.at(-1)).toMatchObject({ role: 'error', name: 'errors' });
    expect(blocks.filter((b) => b.role === 'call')).toHaveLength(10);
  });

  it('max steps: after the last step the model is asked for a final answer without tools', async () => {
    const h = await testHarness({
      turns: [
        ...Array.from({ length: 2 }, () => [{ toolCalls: [{ name: 'shell', args: { command: 'true' } }] }]),
        [{ text: 'summary of work' }],
      ],
    });
    const a = await h.agent();
    await h.c.write(`${a.path}/cfg`, 'maxSteps=2');
    const blocks = await h.turn(a.path, 'x');
    expect(blocks.find((b) => b.role === 'context' && b.name === 'maxsteps')).toBeDefined();
    expect(blocks.at(-1)).toMatchObject({ role: 'assistant', content: 'summary of work' });
    const last = h.mock.requests.at(-1)!.body as { tools?: unknown[] };
    expect(last.tools ?? []).toHaveLength(0);
  });
});

describe('sub-agents', () => {
  it('run in parallel, return their replies, show in agent/idx with parent and depth, and are removed', async () => {
    const h = await testHarness({
      turns: [
        [{ delayMs: 60 }, { text: 'reply one' }],
        [{ delayMs: 60 }, { text: 'reply two' }],
      ],
    });
    const parent = await h.agent();
    const spawn = (p: string) =>
      h.c.rdwrText(`session/${parent.session}/agent/new`, `agent=test parent=${parent.name} prompt=${p}`);
    const both = Promise.all([spawn('task one'), spawn('task two')]);
    const idx = await until(async () => {
      const rows = (await h.c.readText(`session/${parent.session}/agent/idx`))
        .trim()
        .split('\n')
        .map((l) => l.split('\t'));
      return rows.length === 3 ? rows : undefined;
    }, 'both sub-agents in agent/idx');
    const subs = idx.filter((l) => l[3] === parent.aid);
    expect(subs).toHaveLength(2);
    expect(subs.every((l) => l[4] === '1')).toBe(true);
    const replies = (await both).map((r) => r.trim()).sort();
    expect(replies).toEqual(['reply one', 'reply two']);
    expect((await h.c.readText(`session/${parent.session}/agent/idx`)).trim().split('\n')).toHaveLength(1);

    // They leave a read-only record: listed as finished under session/S/ended, their logs readable and searchable.
    const ended = (await h.c.readText(`session/${parent.session}/ended/idx`))
      .trim()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(ended.map((l) => l[1]).sort()).toEqual(subs.map((l) => l[1]).sort());
    expect(ended.every((l) => l[3] === parent.aid && l[4] === '1' && l[6] === 'finished' && l[7] === 'ok')).toBe(true);
    const one = ended.find((l) => l[2] === subs.find((x) => x[1] === l[1])![2])!;
    const log = parseBlocks(await h.c.readText(`session/${parent.session}/ended/${one[1]}/log.raw`));
    expect(log.map((b) => b.role)).toEqual(['user', 'assistant']);
    expect((await h.c.readText(`session/${parent.session}/ended/${one[1]}/name`)).trim()).toBe(one[2]);
    const hit = (await h.c.rdwrText('search', 'reply one'))
      .trim()
      .split('\n')
      .map((l) => l.split('\t'))
      .find((l) => l[3] === 'assistant')!;
    expect(hit[6]).toBe('finished');
    const block = JSON.parse(await h.c.rdwrText(`session/${parent.session}/ended/${hit[5]}/block`, hit[2]!)) as {
      content: string;
    };
    expect(block.content).toBe('reply one');
    // The name is free again, and rm forgets the record (its log and search entries go with it).
    await h.c.remove(`session/${parent.session}/ended/${hit[5]}`);
    expect(await h.c.rdwrText('search', 'reply one')).toBe('');
    expect((await h.c.readText(`session/${parent.session}/ended/idx`)).trim().split('\n')).toHaveLength(1);
  });

  it('leave records that outlive a restart; one whose caller died with the daemon is kept as interrupted', async () => {
    const h = await testHarness({ tools: false, turns: [[{ text: 'finished work' }]] });
    const parent = await h.agent();
    expect(
      (await h.c.rdwrText(`session/${parent.session}/agent/new`, `agent=test parent=${parent.name} prompt=go`)).trim(),
    ).toBe('finished work');
    // A sub-agent still running when the daemon stops (as after a kill -9: nothing ends it).
    const cut = h.daemon.agents.create(parent.session, { agent: 'test', parent: parent.name, transient: true });
    await h.daemon.close();
    const again = await startDaemon({
      socket: h.socket,
      dataDir: h.dataDir,
      configDir: h.configDir,
      toolsrv: false,
      skills: false,
      log: () => undefined,
    });
    const c = await dial(`unix!${h.socket}`, { uname: userInfo().username });
    try {
      const ended = (await c.readText(`session/${parent.session}/ended/idx`))
        .trim()
        .split('\n')
        .map((l) => l.split('\t'));
      expect(ended.map((l) => [l[3], l[6], l[7]])).toEqual([
        [parent.aid, 'finished', 'ok'],
        [parent.aid, 'interrupted', '-'],
      ]);
      expect(ended[1]![1]).toBe(cut.id);
      expect((await c.readText(`session/${parent.session}/agent/idx`)).trim().split('\n')).toHaveLength(1);
      expect(await c.rdwrText('search', 'finished work')).toMatch(/\tfinished\n$/);
    } finally {
      c.close();
      await again.close();
    }
  });

  it("roll their tokens and cost up into the caller's stats, one line per sub-agent, after they are removed", async () => {
    const h = await testHarness({
      turns: [
        [{ text: 'parent reply' }, { usage: { input: 1000, output: 10, cost: 0.5 } }],
        [{ text: 'sub one' }, { usage: { input: 200, output: 20, cached: 50, cost: 0.25 } }],
        [{ text: 'sub two' }, { usage: { input: 300, output: 30, cost: 0.125 } }],
      ],
    });
    const parent = await h.agent();
    await h.turn(parent.path, 'hello');
    const spawn = (name: string, p: string) =>
      h.c.rdwrText(`session/${parent.session}/agent/new`, `agent=test name=${name} parent=${parent.name} prompt=${p}`);
    expect((await spawn('first', 'task one')).trim()).toBe('sub one');
    expect((await spawn('second', 'task two')).trim()).toBe('sub two');
    // Both are gone from the tree, and their usage is in the caller's stats.
    expect((await h.c.readText(`session/${parent.session}/agent/idx`)).trim().split('\n')).toHaveLength(1);
    const stats = await h.c.readText(`${parent.path}/stats`);
    const kv = STATS.parse(stats);
    expect(kv).toMatchObject({
      input_tokens: '1000', // the caller's own requests only
      cost_session: '0.500000',
      subagents: '2',
      subagents_input_tokens: '500',
      subagents_output_tokens: '50',
      subagents_cached_tokens: '50',
      subagents_requests: '2',
      subagents_cost: '0.375000',
      cost_total: '0.875000',
    });
    const lines = Object.entries(kv)
      .filter(([k]) => k.startsWith('subagent.'))
      .map(([, v]) => v);
    expect(lines).toEqual([
      'name=first input_tokens=200 output_tokens=20 cached_tokens=50 requests=1 cost=0.250000',
      'name=second input_tokens=300 output_tokens=30 cached_tokens=0 requests=1 cost=0.125000',
    ]);
  });

  it("inherit a snapshot of the caller's history", async () => {
    const h = await testHarness({ turns: [[{ text: 'the secret is 42' }], [{ text: 'it is 42' }]] });
    const parent = await h.agent();
    await h.turn(parent.path, 'remember the secret');
    const reply = await h.c.rdwrText(
      `session/${parent.session}/agent/new`,
      `agent=test parent=${parent.name} prompt=what is the secret?`,
    );
    expect(reply.trim()).toBe('it is 42');
    expect(JSON.stringify(h.mock.requests.at(-1)!.body)).toContain('the secret is 42');
  });

  it('refuse to nest deeper than the limit, and stop at their step budget', async () => {
    const h = await testHarness({
      turns: [[{ toolCalls: [{ name: 'shell', args: { command: 'true' } }] }], [{ text: 'budget summary' }]],
    });
    const top = await h.agent();
    let parentName = top.name;
    // Build a chain of transient-free agents at depths 1..3 by hand, then ask for depth 4.
    for (let d = 1; d <= 3; d++) {
      parentName = (await h.c.rdwrText(`session/${top.session}/agent/new`, `agent=test parent=${parentName}`)).trim();
    }
    await expect(
      h.c.rdwrText(`session/${top.session}/agent/new`, `agent=test parent=${parentName} prompt=hi`),
    ).rejects.toThrow(/depth limit/);
    const reply = await h.c.rdwrText(
      `session/${top.session}/agent/new`,
      `agent=test parent=${top.name} steps=1 prompt=do it`,
    );
    expect(reply.trim()).toBe('budget summary');
    await expect(h.c.rdwrText(`session/${top.session}/agent/new`, 'agent=test steps=2')).rejects.toThrow(
      /budgets of sub-agents/,
    );
  });
});

describe('root files', () => {
  it('generate and complete make one request with no history', async () => {
    const h = await testHarness({ turns: [[{ text: 'generated text' }], [{ text: 'x + 1' }]] });
    expect(await h.c.rdwrText('generate', 'temperature=0.1\n\nwrite something')).toBe('generated text\n');
    const g = h.mock.requests.at(-1)!.body as { messages: Array<{ content: string }>; temperature: number };
    expect(g.temperature).toBe(0.1);
    expect(g.messages.at(-1)!.content).toBe('write something');
    expect(await h.c.rdwrText('complete', 'suffix=)\n\nreturn (')).toBe('x + 1\n');
    expect(JSON.stringify(h.mock.requests.at(-1)!.body)).toContain('before-cursor');
    await expect(h.c.rdwrText('generate', 'backend=nope\n\nhi')).rejects.toThrow(/unknown backend "nope"/);
  });

  it('lists backends, models and profiles', async () => {
    const h = await testHarness();
    expect(await h.c.readText('backends')).toMatch(/^mock\*\topenai\t.*\tgpt-4o\nclaude\tanthropic/);
    expect(await h.c.readText('models')).toContain('mock\tmock-model');
    const agents = (await h.c.readText('agents')).split('\n');
    for (const p of [
      'default',
      'conductor',
      'reviewer',
      'foreman',
      'panelist',
      'writer',
      'researcher',
      'planner',
      'debugger',
      'tester',
      'refactorer',
      'test',
    ]) {
      expect(agents).toContain(p);
    }
  });

  it('an agent on the Anthropic backend runs a tool round through the same loop', async () => {
    const h = await testHarness({
      turns: [
        [{ reasoning: 'thinking hard' }, { toolCalls: [{ name: 'shell', args: { command: 'echo via-claude' } }] }],
        [{ text: 'done' }],
      ],
    });
    const a = await h.agent({ backend: 'claude' });
    const blocks = await h.turn(a.path, 'go');
    expect(roles(blocks)).toEqual(['user', 'reasoning', 'call', 'tool', 'assistant']);
    expect(blocks[3]!.content).toContain('via-claude');
    expect(h.mock.requests.at(-1)!.protocol).toBe('anthropic');
    // The thinking block goes back with its signature, or the real API refuses the tool continuation.
    const replay = (
      h.mock.requests.at(-1)!.body as {
        messages: Array<{ role: string; content: Array<{ type: string; signature?: string; thinking?: string }> }>;
      }
    ).messages;
    const thinking = replay.find((m) => m.role === 'assistant')!.content.find((c) => c.type === 'thinking')!;
    expect(thinking.thinking).toBe('thinking hard');
    expect(thinking.signature).toBeTruthy();
  });
});

describe('events', () => {
  it('a subscriber that never reads does not stall the agents or the other subscribers; it gets an overflow marker', async () => {
    const h = await testHarness({ tools: false });
    const a = await h.agent();
    // Opened and filtered, then never read while thousands of events go by.
    const slow = await h.c.open('event', 2 /* ORDWR */);
    await slow.writeAll(new TextEncoder().encode('>'));
    const seen: string[] = [];
    const subs = h.daemon.bus.subscribers;
    const fast = (async () => {
      for await (const chunk of h.c.stream('event', { request: `session.${a.sid}.agent.${a.aid}.state` })) {
        seen.push(...new TextDecoder().decode(chunk).split('\n').filter(Boolean));
        if (seen.filter((l) => l.endsWith(' idle')).length >= 3) return;
      }
    })();
    await until(() => h.daemon.bus.subscribers > subs, 'the event subscription');
    for (let i = 0; i < 6000; i++) h.daemon.bus.publish(`session.${a.sid}.noise`, String(i));
    for (let i = 0; i < 3; i++) {
      h.mock.script([{ text: `reply ${i}` }]);
      await h.turn(a.path, `prompt ${i}`);
    }
    await fast;
    expect(seen.filter((l) => l.endsWith(' thinking'))).toHaveLength(3);
    const first = new TextDecoder().decode(await slow.read(0, 8192));
    expect(first.split('\n')[0]).toMatch(/^ollie\.overflow \d+$/);
    await slow.clunk();
  });
});

describe('lifecycle', () => {
  it('compacts on its own before a request that would pass compactAt of the window', async () => {
    const h = await testHarness({
      mock: {
        respond: (b) =>
          JSON.stringify(b).includes('You are compacting') ? [{ text: '## Goal\nsummary of it all' }] : undefined,
      },
    });
    const a = await h.agent({ backend: 'small' });
    for (let i = 0; i < 5; i++) {
      h.mock.script([{ text: `answer ${i} `.repeat(60) }]);
      await h.turn(a.path, `question ${i}`);
    }
    // 4000 tokens of window, compaction at 30 %: the history of five long answers no longer fits.
    await h.c.write(`${a.path}/cfg`, 'compactAt=0.3');
    h.mock.script([{ text: 'continuing after compaction' }]);
    const blocks = await h.turn(a.path, 'go on');
    expect(blocks.filter((b) => b.role === 'info' && b.name === 'compaction').map((b) => b.content)[0]).toMatch(
      /Compacting \d+ messages \(~\d+ tokens; the request would be ~\d+ tokens, over the budget of 1200\)/,
    );
    expect(blocks.at(-1)).toMatchObject({ role: 'assistant', content: 'continuing after compaction' });
    const last = JSON.stringify(h.mock.requests.at(-1)!.body);
    expect(last).toContain('summary of it all');
    expect(last).not.toContain('answer 0');
  });

  it('inject adds text to the running turn before its next request', async () => {
    const h = await testHarness({
      turns: [[{ delayMs: 60 }, { toolCalls: [{ name: 'shell', args: { command: 'true' } }] }], [{ text: 'noted' }]],
    });
    const a = await h.agent();
    await h.c.write(`${a.path}/prompt`, 'work');
    await h.waitState(a.path, 'thinking');
    await h.c.rdwrText(`${a.path}/ctl`, 'inject first thought');
    expect(await h.c.rdwrText(`${a.path}/ctl`, 'inject also use tabs')).toBe('injected\n');
    await h.waitState(a.path, 'idle');
    const last = JSON.stringify(h.mock.requests.at(-1)!.body);
    expect(last).toContain('also use tabs');
    expect(last).not.toContain('first thought');
  });

  it('a paused session holds prompts (agents show paused) and runs them on resume', async () => {
    const h = await testHarness({ turns: [[{ text: 'ran after resume' }]] });
    const a = await h.agent();
    await h.c.rdwrText(`session/${a.session}/ctl`, 'pause');
    expect((await h.c.readText(`${a.path}/state`)).trim()).toBe('paused');
    await h.c.write(`${a.path}/prompt`, 'wait for it');
    // Held: the prompt is in the queue, and no request went out for it.
    expect(JSON.parse(await h.c.readText(`${a.path}/queue`))).toEqual(['wait for it']);
    expect(h.mock.requests).toHaveLength(0);
    const agent = h.daemon.agents.all()[0]!;
    const done = agent.nextTurn();
    await h.c.rdwrText(`session/${a.session}/ctl`, 'resume');
    await done;
    expect((await h.blocks(a.path)).at(-1)).toMatchObject({ content: 'ran after resume' });
  });

  it('ctl agent switches profile with a fresh history; rename and rm announce themselves; log.raw ends when the agent dies', async () => {
    const h = await testHarness({ turns: [[{ text: 'one' }], [{ text: 'two' }]] });
    const a = await h.agent();
    await h.turn(a.path, 'zanzibar');
    expect(await h.c.rdwrText(`${a.path}/ctl`, 'agent reviewer')).toBe('profile reviewer\n');
    expect(await h.c.readText(`${a.path}/cfg`)).toContain('profile=reviewer');
    await h.turn(a.path, 'second');
    const body = h.mock.requests.at(-1)!.body as { messages: Array<{ role: string; content: string }> };
    expect(JSON.stringify(body)).not.toContain('zanzibar');
    expect(body.messages[0]!.content).toContain('You are a code reviewer');
    // Exactly the reviewer's tools: the test profile's are unloaded. Hot ones are sent, the others listed.
    const sent = (body as unknown as { tools: Array<{ function: { name: string } }> }).tools
      .map((t) => t.function.name)
      .filter((n) => n !== 'tool_search');
    const listed = [...body.messages[0]!.content.split('## More tools')[1]!.matchAll(/^- (\w+): /gm)].map((m) => m[1]!);
    const reviewer = JSON.parse(readFileSync(join(shippedDataDir(), 'agents', 'reviewer.json'), 'utf8')) as {
      autoLoad: string[];
    };
    const loaded = (await h.c.rdwrText(`${a.path}/ctl`, 'tools'))
      .trim()
      .split('\n')
      .map((l) => l.split('\t')[0]!);
    expect(loaded.sort()).toEqual([...reviewer.autoLoad].sort());
    expect(sent.every((n) => reviewer.autoLoad.includes(n))).toBe(true);
    expect(listed.every((n) => reviewer.autoLoad.includes(n))).toBe(true);
    expect(sent).toContain('file_read');

    const subs = h.daemon.bus.subscribers;
    const ev = h.c.stream('event', { request: `session.${a.sid}.agent.${a.aid}.>` })[Symbol.asyncIterator]();
    const evs = (async () => {
      let t = '';
      while (!t.includes('.kill')) t += new TextDecoder().decode((await ev.next()).value as Uint8Array);
      return t;
    })();
    await until(() => h.daemon.bus.subscribers > subs, 'the event subscription');
    await h.c.rename(a.path, 'renamed');
    const path = `session/${a.session}/agent/renamed`;
    const reader = (async () => {
      let n = 0;
      for await (const chunk of h.c.stream(`${path}/log.raw`)) n += chunk.length;
      return n;
    })();
    await until(() => h.daemon.agents.all().find((x) => x.id === a.aid)!.log.readerCount > 0, 'the log.raw reader');
    await h.c.remove(path);
    expect(await reader).toBeGreaterThan(0);
    const text = await evs;
    expect(text).toContain(`session.${a.sid}.agent.${a.aid}.rename ${a.name}\trenamed`);
    expect(text).toContain(`session.${a.sid}.agent.${a.aid}.kill`);
    expect(await h.c.readText(`session/${a.session}/agent/idx`)).toBe('');
    // A killed agent's history stays searchable, marked killed, and readable under ended/.
    expect(
      (await h.c.readText(`session/${a.session}/ended/idx`))
        .trim()
        .split('\t')
        .slice(1, 3)
        .concat((await h.c.readText(`session/${a.session}/ended/idx`)).trim().split('\t')[6]!),
    ).toEqual([a.aid, 'renamed', 'killed']);
    expect((await h.c.readText(`session/${a.session}/ended/${a.aid}/log.raw`)).length).toBeGreaterThan(0);
    // Its name is free for a new agent.
    expect((await h.c.rdwrText(`session/${a.session}/agent/new`, 'name=renamed agent=test')).trim()).toBe('renamed');
  });
});

describe('bypass', () => {
  it('a call asking to leave the sandbox waits for a person: the request shows as an event and in session/bypass; approve runs it, deny refuses it', async () => {
    const h = await testHarness({
      turns: [
        [{ toolCalls: [{ name: 'shell', args: { command: 'echo outside-the-box', bypass: true } }] }],
        [{ text: 'ran it' }],
        [{ toolCalls: [{ name: 'shell', args: { command: 'echo second-try', bypass: true } }] }],
        [{ text: 'was refused' }],
      ],
    });
    const a = await h.agent();
    const subs = h.daemon.bus.subscribers;
    const events = h.c.stream('event', { request: `session.${a.sid}.agent.${a.aid}.bypass.>` })[Symbol.asyncIterator]();
    const next = async (): Promise<string> => new TextDecoder().decode((await events.next()).value as Uint8Array);
    const first = next();
    await until(() => h.daemon.bus.subscribers > subs, 'the event subscription');

    await h.c.write(`${a.path}/prompt`, 'do it');
    const req = await first;
    expect(req).toMatch(
      new RegExp(
        `^session\\.${a.sid}\\.agent\\.${a.aid}\\.bypass\\.request (\\S+)\\t.*echo outside-the-box.*\\t${h.dir}`,
      ),
    );
    const id = /bypass\.request (\S+)\t/.exec(req)![1]!;
    const pending = await h.c.readText(`session/${a.session}/bypass`);
    expect(pending).toMatch(new RegExp(`^${id}\\t${a.aid}\\tshell\\t`));
    await h.c.write(`session/${a.session}/bypass`, `${id} approve once`);
    expect(await next()).toContain(`bypass.resolved ${id}\tapproved`);
    await h.waitState(a.path, 'idle');
    let blocks = await h.blocks(a.path);
    expect(blocks.find((b) => b.role === 'tool')!.content).toContain('outside-the-box');

    await h.c.write(`${a.path}/prompt`, 'again');
    const id2 = /bypass\.request (\S+)\t/.exec(await next())![1]!;
    await h.c.write(`session/${a.session}/bypass`, `${id2} deny`);
    await h.waitState(a.path, 'idle');
    blocks = await h.blocks(a.path);
    expect(blocks.filter((b) => b.role === 'tool').at(-1)!.content).toMatch(/denied by user/);
    expect(await h.c.readText(`session/${a.session}/bypass`)).toBe('');
    await events.return?.(undefined);
  });
});

describe('background processes', () => {
  it("show under the agent's proc/ (idx, live out, wait, stat), and their exit comes back as the next prompt", async () => {
    const h = await testHarness({
      turns: [
        [
          {
            toolCalls: [
              { name: 'shell', args: { command: 'echo started; sleep 0.4; echo finished', background: true } },
            ],
          },
        ],
        [{ text: 'it runs in the background' }],
        [{ text: 'it finished' }],
      ],
    });
    const a = await h.agent();
    const blocks = await h.turn(a.path, 'start it');
    expect(blocks.find((b) => b.role === 'tool')!.content).toMatch(/started in the background as process (\d+)/);
    const idx = (await h.c.readText(`${a.path}/proc/idx`)).trim().split('\t');
    expect(idx[1]).toBe('shell');
    expect(idx[2]).toBe('running');
    const pid = idx[0]!;
    let out = '';
    for await (const chunk of h.c.stream(`${a.path}/proc/${pid}/out`)) out += new TextDecoder().decode(chunk);
    expect(out).toBe('started\nfinished\n');
    expect((await h.c.readText(`${a.path}/proc/${pid}/wait`)).trim()).toBe('0');
    expect(await h.c.readText(`${a.path}/proc/${pid}/stat`)).toMatch(/exit=0/);
    // The exit notice is queued as a prompt and runs as the next turn.
    const agent = h.daemon.agents.all()[0]!;
    while (!(await h.blocks(a.path)).some((b) => b.role === 'assistant' && b.content === 'it finished'))
      await agent.nextTurn();
    const users = (await h.blocks(a.path)).filter((b) => b.role === 'user');
    expect(users.at(-1)!.content).toMatch(
      /^<system-proc-interrupt id="\d+".*status="exited".*exit="0"[^>]*>[\s\S]*finished/,
    );
    expect((await h.c.readText(`${a.path}/proc/idx`)).split('\t')[2]).toBe('exited');
  });
});

describe('search', () => {
  it("finds past messages of every session by their words, a killed agent's too, and forgets an agent whose record is removed", async () => {
    const h = await testHarness({
      tools: false,
      turns: [[{ text: 'The flux capacitor needs 1.21 gigawatts.' }], [{ text: 'Nothing about that here.' }]],
    });
    const a = await h.agent();
    const b = await h.agent();
    await h.turn(a.path, 'what does the capacitor need?');
    await h.turn(b.path, 'something else entirely');
    const hits = (await h.c.rdwrText('search', 'gigawatts capacitor'))
      .trim()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(hits).toHaveLength(1);
    expect(hits[0]!.slice(0, 2)).toEqual([a.session, a.name]);
    expect(hits[0]![3]).toBe('assistant');
    expect(hits[0]![4]).toContain('[gigawatts]');
    const block = JSON.parse(await h.c.rdwrText(`${a.path}/block`, hits[0]![2]!)) as { content: string };
    expect(block.content).toBe('The flux capacitor needs 1.21 gigawatts.');
    // Words that are FTS5 syntax are only words here.
    expect(await h.c.rdwrText('search', 'capacitor AND OR NOT "(')).toBe('');
    expect((await h.c.rdwrText('search', 'capacitor')).split('\n').filter(Boolean)).toHaveLength(2);
    // A killed agent is still found, marked killed; forgetting its record (rm ended/ID) removes it from the index.
    await h.c.remove(a.path);
    const after = (await h.c.rdwrText('search', 'capacitor'))
      .trim()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(after.map((l) => [l[1], l[5], l[6]])).toEqual([
      [a.name, a.aid, 'killed'],
      [a.name, a.aid, 'killed'],
    ]);
    await h.c.remove(`session/${a.session}/ended/${a.aid}`);
    expect(await h.c.rdwrText('search', 'capacitor')).toBe('');
  });
});

describe('config files', () => {
  it("a write is checked by the file's own parser: a bad one is refused with file:line and changes nothing, a good one applies", async () => {
    const h = await testHarness({ tools: false });
    const before = await h.c.readText('config/backends.conf');
    expect(before).toContain('[mock]');
    await expect(h.c.write('config/backends.conf', '[x]\ntype = nonsense\n')).rejects.toThrow(
      /backends\.conf:2: .*nonsense/,
    );
    expect(await h.c.readText('config/backends.conf')).toBe(before);
    await h.c.write(
      'config/backends.conf',
      `${before}\n[other]\ntype = openai\nurl = ${h.mock.url}/v1\nkey = k\nmodel = m2\n`,
    );
    expect(await h.c.readText('backends')).toMatch(/^other\topenai/m);

    await expect(h.c.write('config/sandbox.yaml', 'filesystem:\n  rw: /tmp\n')).rejects.toThrow(
      /sandbox\.yaml:2: filesystem\.rw: must be a list/,
    );
    await h.c.write('config/sandbox.yaml', 'network:\n  enabled: false\n');
    expect(await h.c.readText('config/sandbox.yaml')).toBe('network:\n  enabled: false\n');

    await expect(h.c.write('config/profile', 'nobody')).rejects.toThrow(/no agent profile named "nobody"/);
    await h.c.write('config/profile', 'reviewer');
    const name = (
      await h.c.rdwrText(`session/${(await h.c.rdwrText('session/new', `cwd=${h.dir}`)).trim()}/agent/new`, '')
    ).trim();
    expect(name).toBe('reviewer');
  });
});

describe('plan', () => {
  it('the session plan is re-injected every 10 tool rounds', async () => {
    const h = await testHarness({
      turns: [
        ...Array.from({ length: 10 }, (_, i) => [{ toolCalls: [{ name: 'shell', args: { command: `echo ${i}` } }] }]),
        [{ text: 'done' }],
      ],
    });
    const a = await h.agent();
    await h.c.write(`session/${a.session}/plan`, '- [x] step one\n- [ ] step two\n');
    const blocks = await h.turn(a.path, 'go');
    const plans = blocks.filter((b) => b.role === 'context' && b.name === 'plan');
    expect(plans).toHaveLength(1);
    expect(plans[0]!.content).toContain('- [ ] step two');
    // It came after the tenth round, before the last request.
    expect(blocks.findIndex((b) => b === plans[0])).toBeGreaterThan(blocks.map((b) => b.role).lastIndexOf('tool'));
    expect(JSON.stringify(h.mock.requests.at(-1)!.body)).toContain('step two');
  });
});

describe('subagent_spawn', () => {
  it('an agent runs a sub-agent through the tool (sandboxed, over the Ollie socket) and gets its reply as the result', async () => {
    const h = await testHarness({
      turns: [
        [{ toolCalls: [{ name: 'subagent_spawn', args: { prompt: 'count the files', profile: 'test' } }] }],
        [{ text: 'there are 3 files' }],
        [{ text: 'the sub-agent says 3' }],
      ],
    });
    const a = await h.agent();
    await h.c.rdwrText(`${a.path}/ctl`, 'tool_load subagent_spawn');
    const blocks = await h.turn(a.path, 'delegate it');
    const tool = blocks.find((b) => b.role === 'tool')!;
    expect(tool).toMatchObject({ name: 'subagent_spawn', content: 'there are 3 files\n' });
    expect(blocks.at(-1)).toMatchObject({ role: 'assistant', content: 'the sub-agent says 3' });
    // The sub-agent's request carried the parent's history (its prompt) and its own task.
    const sub = JSON.stringify(h.mock.requests[1]!.body);
    expect(sub).toContain('delegate it');
    expect(sub).toContain('count the files');
    expect((await h.c.readText(`session/${a.session}/agent/idx`)).trim().split('\n')).toHaveLength(1);
  });
});

describe('tool_load', () => {
  it("finds a tool added to the config's tools directory while the session runs, and the model can call it", async () => {
    const h = await testHarness({
      turns: [[{ toolCalls: [{ name: 'added_later', args: {} }] }], [{ text: 'ran it' }]],
    });
    const a = await h.agent();
    // The session's toolsrv is up and has scanned its directories before the tool exists.
    await h.c.rdwrText(`${a.path}/ctl`, 'tool_load reasoning_think');
    await expect(h.c.rdwrText(`${a.path}/ctl`, 'tool_load added_later')).rejects.toThrow(/no tool "added_later"/);
    mkdirSync(join(h.configDir, 'tools'), { recursive: true });
    writeFileSync(
      join(h.configDir, 'tools', 'added_later.meta'),
      JSON.stringify({
        description: 'A tool added while the session runs.',
        cmd: 'echo from the new tool',
        scope: 'read',
      }),
    );
    await h.c.rdwrText(`${a.path}/ctl`, 'tool_load added_later');
    const blocks = await h.turn(a.path, 'use the new tool');
    expect(blocks.find((b) => b.role === 'tool')).toMatchObject({
      name: 'added_later',
      content: 'from the new tool\n',
    });
  });
});

describe('extra tool directories', () => {
  it("come before the config's tools and the shipped ones, not instead of them", async () => {
    const extra = mkdtempSync(join(tmpdir(), 'ollie-extra-tools-'));
    try {
      writeFileSync(
        join(extra, 'extra_tool.meta'),
        JSON.stringify({ description: 'From the extra directory.', cmd: 'echo extra', scope: 'read' }),
      );
      const h = await testHarness({
        toolDirs: [extra],
        turns: [[{ toolCalls: [{ name: 'config_tool', args: {} }] }], [{ text: 'ok' }]],
      });
      mkdirSync(join(h.configDir, 'tools'), { recursive: true });
      writeFileSync(
        join(h.configDir, 'tools', 'config_tool.meta'),
        JSON.stringify({ description: 'From the config directory.', cmd: 'echo config', scope: 'read' }),
      );
      const a = await h.agent();
      for (const t of ['extra_tool', 'reasoning_think', 'config_tool'])
        await h.c.rdwrText(`${a.path}/ctl`, `tool_load ${t}`);
      const blocks = await h.turn(a.path, 'go');
      expect(blocks.find((b) => b.role === 'tool')).toMatchObject({ name: 'config_tool', content: 'config\n' });
    } finally {
      rmSync(extra, { recursive: true, force: true });
    }
  });
});

describe('shipped profiles', () => {
  it('parse, and load only tools that exist; the default profile has every tool', () => {
    const tools = new Set(
      readdirSync(join(shippedDataDir(), 'tools'))
        .filter((f) => f.endsWith('.meta'))
        .map((f) => f.slice(0, -5)),
    );
    const dir = join(shippedDataDir(), 'agents');
    for (const f of readdirSync(dir)) {
      const p = parseProfile(f.slice(0, -5), join(dir, f), readFileSync(join(dir, f), 'utf8'));
      for (const t of p.autoLoad) expect(tools, `${f} loads ${t}`).toContain(t);
    }
    const def = parseProfile('default', 'default.json', readFileSync(join(dir, 'default.json'), 'utf8'));
    expect([...def.autoLoad].sort()).toEqual([...tools].sort());
  });
});

describe('tool schema cache', () => {
  it("a new session's first request uses the schemas toolsrv gave before, and its calls still run through toolsrv", async () => {
    const h = await testHarness({
      turns: [
        [{ toolCalls: [{ name: 'shell', args: { command: 'echo first' } }] }],
        [{ text: 'one' }],
        [{ toolCalls: [{ name: 'shell', args: { command: 'echo second' } }] }],
        [{ text: 'two' }],
      ],
    });
    const a = await h.agent();
    await h.turn(a.path, 'go');
    const cache = JSON.parse(readFileSync(join(h.dir, 'cache', 'tools.json'), 'utf8')) as Record<
      string,
      Array<{ name: string }>
    >;
    expect(Object.values(cache).map((ts) => ts.map((t) => t.name).sort())).toContainEqual(['file_read', 'shell']);
    // Another session: its own toolsrv, which has to start; the agent does not wait for it to send its request.
    const b = await h.agent({ session: (await h.c.rdwrText('session/new', `cwd=${h.dir}`)).trim() });
    const blocks = await h.turn(b.path, 'go');
    expect(blocks.find((x) => x.role === 'tool')!.content).toBe('second\n');
    const first = h.mock.requests.filter((r) => r.protocol === 'openai')[2]!.body as {
      tools: Array<{ function: { name: string } }>;
    };
    expect(first.tools.map((t) => t.function.name).sort()).toEqual(['file_read', 'shell']);
  });
});
