/**
 * `o`, the built CLI (dist/cli/o.js, run as a child process like a person runs it) against a real olliesrv with the
 * mock LLM: every command, the context from flags and from the environment, and the errors when it is missing.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { harness, type Harness } from '../olliesrv/agent-harness.js';
import { until } from '../wait.js';

const O = new URL('../../dist/cli/o.js', import.meta.url).pathname;
let h: Harness;

beforeAll(async () => {
  h = await harness();
});
afterAll(async () => {
  await h.close();
});

interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** Runs `o` with the daemon's address and only the context variables given. */
function o(
  args: string[],
  opts: {
    env?: Record<string, string>;
    input?: string;
    until?: (out: string) => boolean;
    interruptAfterMs?: number;
  } = {},
): Promise<Run> {
  const env: Record<string, string | undefined> = { ...process.env, OLLIE_ADDR: `unix!${h.socket}`, ...opts.env };
  for (const k of ['OLLIE_SESSION', 'OLLIE_AGENT', 'OLLIE_SESSION_ID', 'OLLIE_UNAME'])
    if (!opts.env?.[k]) delete env[k];
  const p = spawn(process.execPath, [O, ...args], { env, cwd: h.dir });
  let out = '';
  let err = '';
  p.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (opts.until?.(out)) p.kill('SIGINT');
  });
  p.stderr.on('data', (d: Buffer) => (err += d.toString()));
  p.stdin.end(opts.input ?? '');
  if (opts.interruptAfterMs !== undefined) setTimeout(() => p.kill('SIGINT'), opts.interruptAfterMs);
  return new Promise((resolve) => p.on('close', (code) => resolve({ code, out, err })));
}

describe('sessions', () => {
  it('sess new, ls, rename, kill', async () => {
    expect(await o(['sess', 'new', 'one'])).toMatchObject({ code: 0, out: 'one\n' });
    const ls = await o(['sess', 'ls']);
    expect(ls.code).toBe(0);
    expect(ls.out.split('\n')[0]).toMatch(/^NAME\s+ID\s+PAUSED\s+CWD$/);
    const id = (await h.c.readText('session/one/id')).trim();
    expect(ls.out).toMatch(new RegExp(`^one\\s+${id}\\s+no\\s+${h.dir}$`, 'm'));
    expect(await o(['-s', 'one', 'sess', 'rename', 'two'])).toMatchObject({ code: 0, out: 'two\n' });
    expect(await o(['sess', 'rename', 'two', 'three'])).toMatchObject({ code: 0, out: 'three\n' });
    expect(h.daemon.sessions.has('three')).toBe(true);
    expect(await o(['sess', 'ctl', 'pause'], { env: { OLLIE_SESSION: 'three' } })).toMatchObject({
      code: 0,
      out: 'paused\n',
    });
    expect(await o(['sess', 'kill', 'three'])).toMatchObject({ code: 0, out: 'killed\n' });
    expect(h.daemon.sessions.has('three')).toBe(false);
  });

  it('says exactly which context is missing, and never guesses one', async () => {
    await o(['sess', 'new', 'lonely']);
    const noSession = await o(['agent', 'ls']);
    expect(noSession.code).toBe(2);
    expect(noSession.err).toBe(
      'o: no session given: use -s NAME, or set OLLIE_SESSION (a name) or OLLIE_SESSION_ID (an id; see `o env`)\n',
    );
    const noAgent = await o(['-s', 'lonely', 'prompt', 'hi']);
    expect(noAgent.code).toBe(2);
    expect(noAgent.err).toBe(
      'o: no agent given (session lonely): use -g NAME, or set OLLIE_AGENT (a name) or OLLIE_UNAME (an agent id; see `o env`)\n',
    );
    const badId = await o(['agent', 'ls'], { env: { OLLIE_SESSION_ID: 'no-such-id' } });
    expect(badId.err).toBe('o: no session has the id in $OLLIE_SESSION_ID (no-such-id)\n');
    const gone = await o(['-s', 'nope', 'agent', 'ls']);
    expect(gone.code).toBe(1);
    expect(gone.err).toMatch(/^o: .*nope.*not found/);
  });
});

describe('agents and prompts', () => {
  it("agent kill removes the named agent, or the context's", async () => {
    await o(['sess', 'new', 'doomed']);
    await o(['-s', 'doomed', 'agent', 'new', 'a1', '-p', 'test']);
    await o(['-s', 'doomed', 'agent', 'new', 'a2', '-p', 'test']);
    expect(await o(['-s', 'doomed', 'agent', 'kill', 'a1'])).toMatchObject({ code: 0, out: 'killed\n' });
    expect(await o(['agent', 'kill'], { env: { OLLIE_SESSION: 'doomed', OLLIE_AGENT: 'a2' } })).toMatchObject({
      code: 0,
      out: 'killed\n',
    });
    expect(await h.c.readText('session/doomed/agent/idx')).toBe('');
    const gone = await o(['-s', 'doomed', 'agent', 'kill', 'a1']);
    expect(gone.code).not.toBe(0);
    expect(gone.err).toContain('a1');
  });

  it('agent new and ls; env prints the ids, which are a context of their own', async () => {
    await o(['sess', 'new', 'work']);
    expect(await o(['-s', 'work', 'agent', 'new', 'ann', '-p', 'test'])).toMatchObject({ code: 0, out: 'ann\n' });
    const ls = await o(['agent', 'ls'], { env: { OLLIE_SESSION: 'work' } });
    expect(ls.out).toMatch(/^NAME\s+STATE\s+DEPTH\s+PARENT\s+ID\nann\s+idle\s+0\s+-\s+[0-9a-f-]+\n$/);
    const sid = (await h.c.readText('session/work/id')).trim();
    const aid = (await h.c.readText('session/work/agent/ann/id')).trim();
    expect(await o(['-s', 'work', 'env'])).toMatchObject({ code: 0, out: `export OLLIE_SESSION_ID=${sid}\n` });
    expect(await o(['-s', 'work', '-g', 'ann', 'env'])).toMatchObject({
      code: 0,
      out: `export OLLIE_SESSION_ID=${sid} OLLIE_UNAME=${aid}\n`,
    });
    const viaIds = await o(['ctl', 'peers'], { env: { OLLIE_SESSION_ID: sid, OLLIE_UNAME: aid } });
    expect(viaIds).toMatchObject({ code: 0, out: '' });
    expect((await o(['ctl', 'help'], { env: { OLLIE_SESSION_ID: sid, OLLIE_UNAME: aid } })).out).toContain('peeradd');
  });

  it("prompt streams this turn's answer only (not the history), also for a prompt sent before", async () => {
    const ctx = { env: { OLLIE_SESSION: 'work', OLLIE_AGENT: 'ann' } };
    h.mock.script([{ text: 'First answer.' }]);
    expect(await o(['prompt', 'hello', 'there'], ctx)).toMatchObject({ code: 0, out: 'First answer.\n', err: '' });
    h.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo tool-output' } }] }],
      [{ text: 'Second answer.' }],
    );
    const second = await o(['prompt', 'hello', 'there'], ctx);
    expect(second.code).toBe(0);
    expect(second.out).not.toContain('First answer.');
    expect(second.out).toMatch(/^→ shell \{"command":"echo tool-output"\}\ntool-output\n\nSecond answer\.\n$/);
    // stdin when no words are given
    h.mock.script([{ text: 'From stdin.' }]);
    expect(await o(['prompt'], { ...ctx, input: 'a prompt\non two lines\n' })).toMatchObject({
      code: 0,
      out: 'From stdin.\n',
    });
    const last = h.mock.requests.filter((r) => r.protocol === 'openai').at(-1)!.body as {
      messages: Array<{ role: string; content: unknown }>;
    };
    expect(last.messages.at(-1)).toMatchObject({ role: 'user', content: 'a prompt\non two lines' });
  });

  it('prompt to a busy agent waits its turn and prints its own answer only', async () => {
    h.mock.script([{ delayMs: 60 }, { text: 'the slow first answer' }], [{ text: 'The queued answer.' }]);
    await h.c.write('session/work/agent/ann/prompt', 'take your time');
    await h.waitState('session/work/agent/ann', 'thinking');
    const r = await o(['-s', 'work', '-g', 'ann', 'prompt', 'then this']);
    expect(r).toMatchObject({ code: 0, out: 'The queued answer.\n' });
    const log = await h.c.readText('session/work/agent/ann/log');
    expect(log.indexOf('the slow first answer')).toBeLessThan(log.indexOf('The queued answer.'));
  });

  it("Ctrl-C during prompt stops the agent's turn and exits 130", async () => {
    h.mock.script([{ text: 'streaming slowly and on and on' }, { delayMs: 400 }]);
    const r = await o(['-s', 'work', '-g', 'ann', 'prompt', 'interrupt me'], { until: (out) => out.length > 0 });
    expect(r.code).toBe(130);
    expect(r.err).toContain("o: interrupted: stopped the agent's turn");
    await h.waitState('session/work/agent/ann', 'idle', 3000);
    // The stream was cut: the rest of the answer never arrived.
    expect(await h.c.readText('session/work/agent/ann/log')).not.toContain('on and on');
  });

  it('Ctrl-C on a prompt queued behind another turn leaves that turn alone and the prompt queued', async () => {
    h.mock.script([{ text: 'the long first answer' }, { delayMs: 150 }], [{ text: 'The queued answer.' }]);
    await h.c.write('session/work/agent/ann/prompt', 'keep busy');
    await h.waitState('session/work/agent/ann', 'thinking');
    const r = await o(['-s', 'work', '-g', 'ann', 'prompt', 'wait for me'], { interruptAfterMs: 500 });
    expect(r.code).toBe(130);
    expect(r.err).toContain('the prompt is queued behind another turn and stays queued');
    // The other turn was not stopped, and the queued prompt then ran.
    await h.waitState('session/work/agent/ann', 'idle', 10000);
    const log = await h.c.readText('session/work/agent/ann/log');
    expect(log).toContain('the long first answer');
    expect(log).toContain('The queued answer.');
  });

  it('prompt ends with its own turn when the next queued prompt follows without the agent going idle', async () => {
    h.mock.script(
      [{ text: 'busy answer' }, { delayMs: 100 }],
      [{ text: 'Mine.' }],
      [{ text: 'theirs, slowly' }, { delayMs: 400 }],
    );
    await h.c.write('session/work/agent/ann/prompt', 'be busy');
    await h.waitState('session/work/agent/ann', 'thinking');
    const mine = o(['-s', 'work', '-g', 'ann', 'prompt', 'my question']);
    // Queued behind ours (once ours is in the queue), so it starts the moment ours ends.
    await until(
      async () => (await h.c.rdwrText('session/work/agent/ann/ctl', 'queue')).includes('my question'),
      'o prompt to queue its prompt',
    );
    await h.c.write('session/work/agent/ann/prompt', 'their question');
    const r = await mine;
    expect(r).toMatchObject({ code: 0, out: 'Mine.\n' });
    await h.waitState('session/work/agent/ann', 'idle', 10000);
  });

  it('prompt exits 1 when the turn ends in an error', async () => {
    h.mock.script([{ status: 400, message: 'bad request from the mock' }]);
    const r = await o(['-s', 'work', '-g', 'ann', 'prompt', 'fail please']);
    expect(r.code).toBe(1);
    expect(r.out).toContain('[error]');
    expect(r.err).toContain('o: the turn ended in an error');
  });

  it('read prints the log; read -l follows log.raw rendered', async () => {
    const r = await o(['-s', 'work', '-g', 'ann', 'read']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('> hello there\n\nFirst answer.\n\n');
    const f = await o(['-s', 'work', '-g', 'ann', 'read', '-l'], { until: (out) => out.includes('From stdin.') });
    expect(f.out.startsWith('> hello there\n\nFirst answer.\n\n')).toBe(true);
    expect(f.out).toContain('→ shell');
  });
});

describe('goals', () => {
  it('goal TEXT starts the workflow; goal wait waits for the verdict and prints it', async () => {
    const dir = join(h.configDir, 'workflows');
    mkdirSync(dir, { recursive: true });
    // A workflow that takes its time, so that `goal wait` really waits.
    writeFileSync(
      join(dir, 'slow-done'),
      '#!/bin/sh\nset -e\nsleep 0.5\ngoal=$(ollie-9p read "$OLLIE_GOAL_FILE")\nprintf "complete\\ndid: %s\\n" "$goal" | ollie-9p write "session/$OLLIE_SESSION/goalstatus"\n',
    );
    chmodSync(join(dir, 'slow-done'), 0o755);
    await o(['sess', 'new', 'goals']);
    const ctx = { env: { OLLIE_SESSION: 'goals' } };
    expect(await o(['sess', 'ctl', 'workflow', 'slow-done'], ctx)).toMatchObject({
      code: 0,
      out: 'workflow slow-done\n',
    });
    expect(await o(['goal'], ctx)).toMatchObject({ code: 0, out: '' });
    expect(await o(['goal', 'make', 'it', 'so'], ctx)).toMatchObject({ code: 0, out: 'goal set; status: running\n' });
    const t0 = Date.now();
    expect(await o(['goal', 'wait'], ctx)).toMatchObject({ code: 0, out: 'complete\ndid: make it so\n' });
    expect(Date.now() - t0).toBeGreaterThan(200);
    expect(await o(['goal'], ctx)).toMatchObject({ code: 0, out: 'complete\ndid: make it so\n' });
    // A goal that ends blocked: exit status 1.
    writeFileSync(
      join(dir, 'stuck'),
      '#!/bin/sh\nprintf "blocked\\nneed a human\\n" | ollie-9p write "session/$OLLIE_SESSION/goalstatus"\n',
    );
    chmodSync(join(dir, 'stuck'), 0o755);
    await o(['sess', 'ctl', 'workflow', 'stuck'], ctx);
    await o(['goal', 'another'], ctx);
    expect(await o(['goal', 'wait'], ctx)).toMatchObject({ code: 1, out: 'blocked\nneed a human\n' });
  });
});

describe('bypass approvals', () => {
  it('sess bypass lists pending requests; approve and deny resolve the only one, or the one named', async () => {
    await o(['sess', 'new', 'box']);
    await o(['-s', 'box', 'agent', 'new', 'runner', '-p', 'test']);
    const ctx = { env: { OLLIE_SESSION: 'box' } };
    expect(await o(['sess', 'approve'], ctx)).toMatchObject({
      code: 2,
      err: 'o: session box has no pending bypass request\n',
    });
    h.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo outside-the-box', bypass: true } }] }],
      [{ text: 'ran it' }],
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo second-try', bypass: true } }] }],
      [{ text: 'was refused' }],
    );
    const turn = o(['-s', 'box', '-g', 'runner', 'prompt', 'do it']);
    const waitPending = async (): Promise<string> => {
      for (let i = 0; i < 200; i++) {
        const r = await o(['sess', 'bypass'], ctx);
        if (r.out) return r.out;
        await new Promise((res) => setTimeout(res, 50));
      }
      throw new Error('no bypass request came');
    };
    const list = await waitPending();
    expect(list).toMatch(
      new RegExp(`^ID\\s+AGENT\\s+CWD\\s+COMMAND\\n(\\S+)\\s+runner\\s+${h.dir}\\s+.*echo outside-the-box.*\\n$`),
    );
    const id = /\n(\S+)/.exec(list)![1]!;
    expect(await o(['sess', 'approve'], ctx)).toMatchObject({ code: 0, out: `approved ${id}\n` });
    const first = await turn;
    expect(first.code).toBe(0);
    expect(first.out).toContain('outside-the-box');
    expect(first.out).toContain('ran it');

    const second = o(['-s', 'box', '-g', 'runner', 'prompt', 'again']);
    const id2 = /\n(\S+)/.exec(await waitPending())![1]!;
    expect((await o(['sess', 'deny', 'not-an-id'], ctx)).code).toBe(1);
    expect(await o(['sess', 'deny', id2], ctx)).toMatchObject({ code: 0, out: `denied ${id2}\n` });
    expect((await second).out).toMatch(/denied by user[\s\S]*was refused/);
    expect((await o(['sess', 'bypass'], ctx)).out).toBe('');
  });
});
