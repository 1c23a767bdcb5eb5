/**
 * The shipped workflows (data/workflows/conductor and consensus) end to end: a real olliesrv started as a daemon
 * is, a real toolsrv (client_9p and subagent_spawn run sandboxed and talk back over the socket), the built `o` and
 * `ollie-9p` the daemon puts on the workflows' PATH, and the mock LLM. Agents of several roles run at once, so the
 * mock does not replay a fixed list: each request is answered by a router that looks at who asks (the role in the
 * system prompt) and where it stands (its last message).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startMockLlm, type MockLlm, type Turn } from '../../src/devtools/mock-llm/server.js';
import type { Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { startDaemon, type Daemon } from '../../src/olliesrv/daemon.js';
import { writeConfig } from '../olliesrv/agent-harness.js';
import { until } from '../wait.js';

interface Msg {
  role: string;
  content?: unknown;
  tool_calls?: unknown[];
}

/** What the router sees of a request. */
interface Ask {
  role: 'conductor' | 'foreman' | 'panelist' | 'default' | 'other';
  /** The last user message (the prompt of the current turn). */
  prompt: string;
  /** Tool rounds of the current turn so far. */
  rounds: number;
  messages: Msg[];
}

const text = (c: unknown): string =>
  typeof c === 'string' ? c : Array.isArray(c) ? c.map((p: { text?: string }) => p.text ?? '').join('') : '';

function ask(body: { messages?: Msg[] }): Ask {
  const messages = body.messages ?? [];
  const system = text(messages.find((m) => m.role === 'system')?.content);
  const role = /You are the conductor/.test(system)
    ? 'conductor'
    : /You are the foreman/.test(system)
      ? 'foreman'
      : /You are a panelist/.test(system)
        ? 'panelist'
        : /general-purpose coding agent/.test(system)
          ? 'default'
          : 'other';
  // The prompt is the last user message that is not context the loop added (skill hints, nudges: <context>…).
  let last = messages.length - 1;
  while (last >= 0 && !(messages[last]!.role === 'user' && !text(messages[last]!.content).startsWith('<context>')))
    last--;
  const rounds = messages.slice(last + 1).filter((m) => m.role === 'assistant').length;
  return { role, prompt: last >= 0 ? text(messages[last]!.content) : '', rounds, messages };
}

interface World {
  dir: string;
  mock: MockLlm;
  daemon: Daemon;
  c: Client;
  asks: Ask[];
  close(): Promise<void>;
}

let w: World | undefined;
afterEach(async () => {
  await w?.close();
  w = undefined;
});

async function world(route: (a: Ask) => Turn): Promise<World> {
  const dir = mkdtempSync(join(tmpdir(), 'ollie-workflows-'));
  const asks: Ask[] = [];
  // The reply is chosen as the request arrives (onRequest runs before the mock takes the next scripted turn).
  const mock: MockLlm = await startMockLlm({
    onRequest: (r) => {
      if (r.path !== '/v1/chat/completions') return;
      const a = ask(r.body as { messages?: Msg[] });
      asks.push(a);
      mock.script(route(a));
    },
  });
  const configDir = join(dir, 'config');
  writeConfig(configDir, mock.url);
  const socket = join(dir, 'run', 'ollie.sock');
  const daemon = await startDaemon({ socket, dataDir: join(dir, 'data'), configDir, log: () => undefined });
  const c = await dial(`unix!${socket}`, { uname: userInfo().username });
  return {
    dir,
    mock,
    daemon,
    c,
    asks,
    async close() {
      c.close();
      await daemon.close();
      await mock.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Sets the goal and waits for the workflow's verdict, then for the workflow script to end. */
async function goal(c: Client, session: string, text: string, timeoutMs = 45000): Promise<string> {
  await c.write(`session/${session}/goal`, text);
  return until(
    async () => {
      const st = await c.readText(`session/${session}/goalstatus`);
      if (st.startsWith('running') || (await c.rdwrText(`session/${session}/ctl`, 'workflow')).includes('(running)'))
        return undefined;
      return st;
    },
    'the workflow to settle the goal',
    timeoutMs,
  );
}

const call = (name: string, args: Record<string, unknown>): Turn => [{ toolCalls: [{ name, args }] }];

describe('conductor', () => {
  it('a conductor agent plans, delegates to sub-agents, checks, and writes its verdict', async () => {
    let idxDuringTask = '';
    w = await world((a) => {
      if (/^Do task \w\.$/.test(a.prompt)) {
        // A sub-agent at work: the agent index shows it under its parent, one level down.
        idxDuringTask ||= w!.daemon.agents.idx('proj');
        return [{ text: `Result of ${/task (\w)/.exec(a.prompt)![1]}: done.` }];
      }
      if (a.role !== 'conductor') return [{ text: 'unexpected' }];
      if (a.rounds === 0) {
        return call('client_9p', { op: 'write', path: 'session/proj/plan', data: '- [ ] task A\n- [ ] task B\n' });
      }
      if (a.rounds === 1) {
        return [
          {
            toolCalls: [
              {
                name: 'client_9p',
                args: { op: 'rdwr', path: 'session/proj/agent/new', data: 'parent=conductor prompt=Do task A.' },
              },
              {
                name: 'client_9p',
                args: { op: 'rdwr', path: 'session/proj/agent/new', data: 'parent=conductor prompt=Do task B.' },
              },
            ],
          },
        ];
      }
      if (a.rounds === 2)
        return call('client_9p', {
          op: 'write',
          path: 'session/proj/goalstatus',
          data: 'complete\nBoth tasks are done and checked.',
        });
      return [{ text: 'All done.' }];
    });
    await w.c.rdwrText('session/new', `name=proj cwd=${w.dir}`);
    const st = await goal(w.c, 'proj', 'Make the widget faster.');
    expect(st).toBe('complete\nBoth tasks are done and checked.\n');

    const first = w.asks.find((a) => a.role === 'conductor')!;
    expect(first.prompt).toContain('Make the widget faster.');
    expect(first.prompt).toContain('path session/proj/goalstatus');
    expect(await w.c.readText('session/proj/plan')).toBe('- [ ] task A\n- [ ] task B\n');
    // Both sub-agents ran, under the conductor, and their replies came back to it.
    expect(
      w.asks
        .filter((a) => /^Do task/.test(a.prompt))
        .map((a) => a.prompt)
        .sort(),
    ).toEqual(['Do task A.', 'Do task B.']);
    const conductorId = (await w.c.readText('session/proj/agent/conductor/id')).trim();
    // agent/idx: …, parent, depth, state, last (how its last turn ended).
    expect(idxDuringTask).toMatch(new RegExp(`\\t${conductorId}\\t1\\t\\w+\\t[^\\t\\n]+\\n`));
    const blocks = w.daemon.agents
      .all()
      .find((a) => a.name === 'conductor')!
      .log.blocks();
    const tools = blocks
      .filter((b) => b.role === 'tool')
      .map((b) => b.content)
      .join('\n');
    expect(tools).toContain('Result of A: done.');
    expect(tools).toContain('Result of B: done.');
    // The sub-agents are gone; the conductor stays, with its profile.
    const idx = (await w.c.readText('session/proj/agent/idx'))
      .trim()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(idx.map((r) => r[2])).toEqual(['conductor']);
    expect(await w.c.readText('session/proj/agent/conductor/cfg')).toContain('profile=conductor');

    // A second goal gets a fresh conductor.
    const st2 = await goal(w.c, 'proj', 'And now the gadget.');
    expect(st2).toMatch(/^complete\n/);
    expect(
      (await w.c.ls('session/proj/agent'))
        .map((s) => s.name)
        .filter((n) => n.startsWith('conductor'))
        .sort(),
    ).toEqual(['conductor', 'conductor-2']);
  }, 60000);

  it('a conductor that ends without a verdict leaves the goal blocked, with its last reply', async () => {
    w = await world((a) =>
      a.role === 'conductor' ? [{ text: 'I could not find the widget anywhere.' }] : [{ text: 'unexpected' }],
    );
    await w.c.rdwrText('session/new', `name=lost cwd=${w.dir}`);
    const st = await goal(w.c, 'lost', 'Fix the widget.');
    expect(st).toBe(
      'blocked\nthe conductor (conductor) ended without a verdict. Its last reply:\nI could not find the widget anywhere.\n',
    );
  }, 60000);

  it('a conductor whose turn fails sets the goal to error, with the reason', async () => {
    w = await world(() => [{ status: 401, message: 'invalid api key' }]);
    await w.c.rdwrText('session/new', `name=broken cwd=${w.dir}`);
    const st = await goal(w.c, 'broken', 'Fix the widget.');
    expect(st).toMatch(/^error\nthe conductor \(conductor\) stopped with an error:\n[\s\S]*invalid api key/);
  }, 60000);
});

describe('consensus', () => {
  it('panelists peered with the foreman only report to it; after all reports the foreman writes the synthesis and completes', async () => {
    const path = (prompt: string): string => /path\s+(session\/\S+\/peer\/[^\s,]+)/.exec(prompt)![1]!;
    w = await world((a) => {
      if (a.role === 'panelist') {
        const angle = /one angle, ([\w ]+?):/.exec(a.prompt)![1]!;
        if (a.rounds > 0) return [{ text: 'Reported.' }];
        // The edge-cases panelist forgets to send its report: the workflow sends its last answer for it.
        if (angle === 'edge cases') return [{ text: 'Edge cases: the empty input crashes.' }];
        return call('client_9p', { op: 'write', path: path(a.prompt), data: `Report on ${angle}: looks fine.` });
      }
      if (a.role === 'foreman') {
        if (a.prompt.includes('You lead a panel of 3')) return [{ text: 'Ready.' }];
        if (a.prompt.startsWith('<peer-message')) return [{ text: 'Noted.' }];
        if (a.prompt.includes('All 3 reports are in')) {
          return a.rounds === 0
            ? call('client_9p', {
                op: 'write',
                path: 'session/panel/goalstatus',
                data: 'complete\nSynthesis: ship it after fixing the empty input.',
              })
            : [{ text: 'Synthesis: ship it after fixing the empty input.' }];
        }
      }
      return [{ text: 'unexpected' }];
    });
    await w.c.rdwrText('session/new', `name=panel cwd=${w.dir}`);
    await w.c.rdwrText('session/panel/ctl', 'workflow consensus');
    const st = await goal(w.c, 'panel', 'Should we ship the parser?');
    expect(st).toBe('complete\nSynthesis: ship it after fixing the empty input.\n');

    const names = (await w.c.ls('session/panel/agent')).map((s) => s.name).sort();
    expect(names).toEqual([
      'foreman',
      'idx',
      'new',
      'panelist-correctness',
      'panelist-edge-cases',
      'panelist-simplicity',
    ]);
    expect(await w.c.readText('session/panel/agent/foreman/cfg')).toContain('profile=foreman');
    expect(await w.c.readText('session/panel/agent/panelist-simplicity/cfg')).toContain('profile=panelist');
    // The topology: the foreman talks to every panelist, each panelist to the foreman only.
    expect((await w.c.rdwrText('session/panel/agent/foreman/ctl', 'peers')).split('\n').filter(Boolean).sort()).toEqual(
      ['panelist-correctness', 'panelist-edge-cases', 'panelist-simplicity'],
    );
    for (const p of ['panelist-correctness', 'panelist-edge-cases', 'panelist-simplicity']) {
      expect((await w.c.ls(`session/panel/agent/${p}/peer`)).map((s) => s.name)).toEqual(['foreman']);
    }
    // Three reports reached the foreman, marked with their senders, before it was asked for the synthesis.
    const foreman = w.daemon.agents
      .all()
      .find((a) => a.name === 'foreman')!
      .log.blocks()
      .filter((b) => b.role === 'user')
      .map((b) => b.content);
    const reports = foreman.filter((c) => c.startsWith('<peer-message'));
    expect(reports.sort()).toEqual([
      '<peer-message from="panelist-correctness">\nReport on correctness: looks fine.\n</peer-message>',
      '<peer-message from="panelist-edge-cases">\nEdge cases: the empty input crashes.\n</peer-message>',
      '<peer-message from="panelist-simplicity">\nReport on simplicity: looks fine.\n</peer-message>',
    ]);
    expect(foreman.at(-1)).toContain('All 3 reports are in');
    // Each panelist studied its own angle.
    const angles = w.asks
      .filter((a) => a.role === 'panelist' && a.rounds === 0)
      .map((a) => /one angle, ([\w ]+?):/.exec(a.prompt)![1])
      .sort();
    expect(angles).toEqual(['correctness', 'edge cases', 'simplicity']);
  }, 90000);

  it('takes the panel size from OLLIE_PANEL in the session env', async () => {
    w = await world((a) => {
      if (a.role === 'panelist') {
        return a.rounds === 0
          ? call('client_9p', {
              op: 'write',
              path: /path\s+(session\/\S+\/peer\/[^\s,]+)/.exec(a.prompt)![1]!,
              data: 'my report',
            })
          : [{ text: 'sent' }];
      }
      if (a.role === 'foreman' && a.prompt.startsWith('All ')) return [{ text: 'No verdict from me.' }];
      return [{ text: 'ok' }];
    });
    await w.c.rdwrText('session/new', `name=duo cwd=${w.dir}`);
    await w.c.write('session/duo/env', 'OLLIE_PANEL=2\n');
    await w.c.rdwrText('session/duo/ctl', 'workflow consensus');
    const st = await goal(w.c, 'duo', 'Tabs or spaces?');
    // The foreman did not give its verdict: blocked, with its last reply.
    expect(st).toBe('blocked\nthe foreman (foreman) ended without a verdict. Its last reply:\nNo verdict from me.\n');
    expect(await w.c.rdwrText('session/duo/agent/foreman/ctl', 'peers')).toBe(
      'panelist-correctness\npanelist-simplicity\n',
    );
    expect(w.asks.find((a) => a.role === 'foreman' && a.prompt.startsWith('All '))!.prompt).toContain(
      'All 2 reports are in',
    );
  }, 90000);
});
