/**
 * The built CLIs as a user runs them: `ollie serve` killed with SIGKILL mid-turn and restarted (every agent comes
 * back with its history and log, the interrupted turn marked), and `ollie run` end to end.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startMockLlm, type MockLlm } from '../src/devtools/mock-llm/server.js';
import { dial } from '../src/ninep/node.js';
import { writeConfig } from '../test/olliesrv/agent-harness.js';
import { until } from '../test/wait.js';

const OLLIE = join(import.meta.dirname, '..', 'dist', 'cli', 'ollie.js');

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.reverse()) await f();
  cleanup = [];
});

async function setup(): Promise<{ dir: string; mock: MockLlm; socket: string; config: string; data: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'ollie-e2e-agents-'));
  const mock = await startMockLlm();
  cleanup.push(
    () => mock.close(),
    () => rmSync(dir, { recursive: true, force: true }),
  );
  const config = join(dir, 'config');
  writeConfig(config, mock.url);
  return { dir, mock, socket: join(dir, 'run', 'ollie.sock'), config, data: join(dir, 'data') };
}

function serve(socket: string, config: string, data: string): Promise<ChildProcess> {
  const p = spawn(process.execPath, [OLLIE, 'serve', '--socket', socket, '--config', config, '--data', data], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanup.push(() => void p.kill('SIGKILL'));
  return new Promise((resolve, reject) => {
    let out = '';
    p.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('serving 9P')) resolve(p);
    });
    p.on('exit', (code) => reject(new Error(`ollie serve exited with ${code}`)));
  });
}

describe('persistence', () => {
  it('after kill -9 mid-turn and a restart, every agent comes back with its history and log; the turn is marked interrupted', async () => {
    const { dir, mock, socket, config, data } = await setup();
    mock.script(
      [{ text: 'first reply' }],
      [{ delayMs: 300 }, { text: 'this reply never finishes streaming' }],
      [{ text: 'after restart' }],
    );
    let p = await serve(socket, config, data);
    let c = await dial(`unix!${socket}`, { uname: userInfo().username });
    await c.rdwrText('session/new', `name=keep cwd=${dir}`);
    expect((await c.rdwrText('session/keep/agent/new', 'name=alice agent=test')).trim()).toBe('alice');
    expect((await c.rdwrText('session/keep/agent/new', 'name=bob agent=test')).trim()).toBe('bob');
    await c.write('session/keep/agent/alice/prompt', 'hello');
    await until(
      async () =>
        (await c.readText('session/keep/agent/alice/state')).trim() === 'idle' &&
        (await c.readText('session/keep/agent/alice/log')).includes('first reply'),
      'the first reply',
    );
    await c.write('session/keep/agent/alice/prompt', 'tell me more');
    await until(() => mock.requests.some((r) => JSON.stringify(r.body).includes('tell me more')), 'the second request');
    c.close();
    p.kill('SIGKILL');
    await new Promise((r) => p.once('exit', r));

    p = await serve(socket, config, data);
    c = await dial(`unix!${socket}`, { uname: userInfo().username });
    const idx = (await c.readText('session/keep/agent/idx'))
      .trim()
      .split('\n')
      .map((l) => l.split('\t')[2]);
    expect(idx.sort()).toEqual(['alice', 'bob']);
    const log = await c.readText('session/keep/agent/alice/log');
    expect(log).toContain('> hello');
    expect(log).toContain('first reply');
    expect(log).toContain('> tell me more');
    expect(log).toMatch(/\[info\] The previous turn was interrupted/);
    // The history came back too: the next request carries the first exchange.
    await c.write('session/keep/agent/alice/prompt', 'again');
    await until(
      async () => (await c.readText('session/keep/agent/alice/log')).includes('after restart'),
      'the reply after the restart',
    );
    const body = JSON.stringify(mock.requests.at(-1)!.body);
    expect(body).toContain('first reply');
    expect(body).toContain('tell me more');
    c.close();
  });
});

describe('ollie run', () => {
  function run(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
    return new Promise((resolve) => {
      const p = spawn(process.execPath, [OLLIE, 'run', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      p.stdout.on('data', (d: Buffer) => (out += d.toString()));
      p.stderr.on('data', (d: Buffer) => (err += d.toString()));
      p.on('exit', (code) => resolve({ code, out, err }));
    });
  }

  it('streams the reply to stdout, summarizes tool calls on stderr, exits 0', async () => {
    const { dir, mock, config } = await setup();
    mock.script(
      [{ text: 'Checking.' }, { toolCalls: [{ name: 'shell', args: { command: 'echo tool-output-here' } }] }],
      [{ text: 'All done.' }],
    );
    const r = await run(['--config', config, '--agent', 'test', '--cwd', dir, 'do', 'the', 'thing']);
    expect(r.code).toBe(0);
    expect(r.out).toBe('Checking.\nAll done.\n');
    expect(r.err).toContain('→ shell {"command":"echo tool-output-here"}');
    expect(r.err).toContain('shell: tool-output-here');
    expect(JSON.stringify(mock.requests[0]!.body)).toContain('do the thing');
  });

  it('exits non-zero with the error when the turn fails', async () => {
    const { dir, mock, config } = await setup();
    mock.script([{ status: 401, message: 'bad key' }]);
    const r = await run(['--config', config, '--agent', 'test', '--cwd', dir, 'hi']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/error: .*(401|bad key)/);
  });

  it('uses a running daemon with -a', async () => {
    const { dir, mock, socket, config, data } = await setup();
    await serve(socket, config, data);
    mock.script([{ text: 'via the running daemon' }]);
    const r = await run(['-a', `unix!${socket}`, '--agent', 'test', '--cwd', dir, 'hi']);
    expect(r.code).toBe(0);
    expect(r.out).toBe('via the running daemon\n');
    expect(r.err).toMatch(/ollie run: session \S+, agent test/);
  });
});
