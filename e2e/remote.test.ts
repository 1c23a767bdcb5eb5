/**
 * Sessions whose tools run on another host, against a real OpenSSH server on a loopback port (src/devtools/sshd.ts:
 * throwaway keys, its own client config given as $OLLIE_SSH_CONFIG, never ~/.ssh). The "remote" user has its own
 * HOME and workspace, so what happened there is told apart from here. The daemon is real, toolsrv is real (copied
 * there on first use), the model is the mock LLM scripting tool calls.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { sshdAvailable, useRemoteRig } from '../test/helpers/sshd.js';
import { until } from './helpers.js';

/** The remote toolsrv processes of this test's sshd (their cache dir is under its remote HOME). */
function remoteToolsrvs(home: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        const cmd = readFileSync(`/proc/${p}/cmdline`, 'latin1').split('\0');
        return cmd.some((a) => a.startsWith(home) && a.endsWith('toolsrv/main.js'));
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe.skipIf(!sshdAvailable())('remote sessions over SSH (real sshd on loopback)', () => {
  const r = useRemoteRig({ prefix: 'ollie-e2e-remote-' });
  let work: string;

  beforeAll(() => {
    work = join(r.sshd.remoteHome, 'work');
    mkdirSync(work);
  });

  /** Sends a prompt and waits for the turn to end; the tool blocks' texts. */
  const turn = async (path: string, prompt: string, ms = 60_000): Promise<string[]> => {
    const agent = await r.agent(path);
    const done = agent.nextTurn();
    await r.c.write(`${path}/prompt`, prompt);
    await Promise.race([
      done,
      new Promise((_, rej) => setTimeout(() => rej(new Error(`turn did not end within ${ms} ms`)), ms)),
    ]);
    if (process.env.OLLIE_TEST_LOG)
      console.log(
        agent.log
          .blocks()
          .map((b) => JSON.stringify(b))
          .join('\n'),
      );
    return agent.log
      .blocks()
      .filter((b) => b.role === 'tool')
      .map((b) => JSON.stringify(b));
  };
  const idx = async (name: string): Promise<string[]> =>
    (await r.c.readText('session/idx'))
      .split('\n')
      .find((l) => l.split('\t')[1] === name)!
      .split('\t');

  it("runs a remote session's tools there, sandboxed, copying toolsrv on first use", async () => {
    await r.remoteSession('r1', work);
    expect((await idx('r1'))[4]).toBe(r.sshd.host);
    r.mock.script(
      [
        {
          toolCalls: [
            {
              name: 'shell',
              args: {
                command:
                  'echo made-there > there.txt; echo "home=$HOME pwd=$(pwd)"; env | grep -c "^OLLIE_TOKEN=" || true',
              },
            },
          ],
        },
      ],
      [
        {
          toolCalls: [{ name: 'shell', args: { command: `touch ${join(r.sshd.remoteHome, 'escaped')}; echo rc=$?` } }],
        },
      ],
      [{ text: 'done' }],
    );
    const tools = await turn('session/r1/agent/coder', 'go');
    expect(readFileSync(join(work, 'there.txt'), 'utf8')).toBe('made-there\n');
    expect(existsSync(join(r.local, 'there.txt'))).toBe(false);
    expect(tools[0]).toContain(`home=${r.sshd.remoteHome} pwd=${work}`);
    // No credential for the local daemon went there.
    expect(tools[0]).toMatch(/\\n0\\n/);
    // The sandbox there refused the write outside the workspace.
    expect(existsSync(join(r.sshd.remoteHome, 'escaped'))).toBe(false);
    expect(tools[1]).toMatch(/rc=1|Permission denied/);
    const [connected, remote] = (await idx('r1')).slice(3, 5);
    expect([connected, remote]).toEqual(['1', r.sshd.host]);
    // The versioned cache dir there, private.
    const cache = join(r.sshd.remoteHome, '.cache', 'ollie', 'remote');
    expect(statSync(cache).mode & 0o777).toBe(0o700);
    expect(readdirSync(cache).filter((d) => !d.includes('.tmp.'))).toHaveLength(1);
  }, 120_000);

  it('a bypass approved here runs there', async () => {
    const target = join(r.sshd.remoteHome, 'bypassed');
    r.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: `touch ${target} && echo bypass-ran`, bypass: true } }] }],
      [{ text: 'ok' }],
    );
    const agent = await r.agent('session/r1/agent/coder');
    const done = agent.nextTurn();
    await r.c.write('session/r1/agent/coder/prompt', 'bypass');
    const line = await until(
      async () => (await r.c.readText('session/r1/bypass')).split('\n').find(Boolean),
      'the bypass request',
      30_000,
    );
    await r.c.write('session/r1/bypass', `${line!.split('\t')[0]} approve`);
    await done;
    expect(existsSync(target)).toBe(true);
  }, 60_000);

  it('a connection cut mid-call fails that call naming the host, and the session reconnects', async () => {
    const events: string[] = [];
    const life = new AbortController();
    void (async () => {
      for await (const e of r.daemon.bus.subscribe(() => true, life.signal)) events.push(e);
    })().catch(() => undefined);
    // Only the call is scripted: whether the turn goes on after the failed call depends on when the agent next
    // reaches the host (while it is away the turn ends with that error); a reply it may ask for is the mock's default.
    r.mock.script([{ toolCalls: [{ name: 'shell', args: { command: 'touch started; sleep 30; echo slept' } }] }]);
    const agent = await r.agent('session/r1/agent/coder');
    const done = agent.nextTurn();
    await r.c.write('session/r1/agent/coder/prompt', 'sleep');
    await until(() => existsSync(join(work, 'started')), 'the remote call to start', 30_000);
    // The host stays away for a while (new connections hang) while the connection is cut.
    r.sshd.pause();
    expect(r.sshd.cutConnections()).toBeGreaterThan(0);
    await Promise.race([
      done,
      new Promise((_, rej) => setTimeout(() => rej(new Error('the call hung after the cut')), 20_000)),
    ]);
    const cut = agent.log
      .blocks()
      .filter((b) => b.role === 'tool')
      .map((b) => JSON.stringify(b))
      .at(-1)!;
    expect(cut).toContain(`connection to the tool server on ${r.sshd.host}`);
    await until(
      () => events.some((e) => e.includes('.tools') && e.includes(`disconnected ${r.sshd.host}`)),
      'a disconnected event',
      10_000,
    );
    expect((await idx('r1'))[3]).toBe('0');
    // The remote toolsrv ended with its connection (and the call's process with it): nothing is left there.
    await until(() => remoteToolsrvs(r.sshd.remoteHome).length === 0, 'the remote toolsrv to end', 10_000);
    r.sshd.resume();
    // The session reconnects by itself (retrying with backoff), before any call asks for it.
    await until(async () => (await idx('r1'))[3] === '1', 'session/idx to say connected again', 60_000);
    expect(r.mock.pending()).toBe(0);
    r.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo again > again.txt; echo again-ran' } }] }],
      [{ text: 'recovered' }],
    );
    const tools = await turn('session/r1/agent/coder', 'again');
    expect(tools.at(-1)).toContain('again-ran');
    expect(readFileSync(join(work, 'again.txt'), 'utf8')).toBe('again\n');
    expect(events.some((e) => e.includes('.tools') && e.includes(`connected ${r.sshd.host}`))).toBe(true);
    life.abort();
  }, 120_000);

  it("two sessions on one host share one toolsrv, and one session's global lock does not stop the other", async () => {
    const work2 = join(r.sshd.remoteHome, 'work2');
    mkdirSync(work2);
    await r.remoteSession('r2', work2);
    // r1's shell holds toolsrv's global lock (shell's scope) until the test lets it go; r2's shell, asked for
    // meanwhile, runs at once: a global lock is its session's (path locks hold across sessions: locks.test.ts),
    // else one session's long call, as long as its agent asks, would stop every other session on the host.
    r.mock.script([
      {
        toolCalls: [
          { name: 'shell', args: { command: 'while [ ! -e go ]; do sleep 0.05; done; date +%s%N > r1-end' } },
        ],
      },
    ]);
    const a1 = await r.agent('session/r1/agent/coder');
    const d1 = a1.nextTurn();
    await r.c.write('session/r1/agent/coder/prompt', 'hold');
    await until(
      () =>
        readdirSync('/proc').some((p) => {
          try {
            return readFileSync(`/proc/${p}/cmdline`, 'latin1').includes('while [ ! -e go ]');
          } catch {
            return false;
          }
        }),
      "r1's call to run",
      30_000,
    );
    r.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'date +%s%N > r2-start; echo second > s.txt' } }] }],
      [{ text: 'ok' }],
      [{ text: 'ok' }],
    );
    const a2 = await r.agent('session/r2/agent/coder');
    const d2 = a2.nextTurn();
    await r.c.write('session/r2/agent/coder/prompt', 'go');
    await until(
      () => existsSync(join(work2, 's.txt')) || undefined,
      "r2's call to run while r1's holds its lock",
      30_000,
    );
    writeFileSync(join(work, 'go'), '');
    await Promise.all([d1, d2]);
    expect(readFileSync(join(work2, 's.txt'), 'utf8')).toBe('second\n');
    expect(BigInt(readFileSync(join(work2, 'r2-start'), 'utf8').trim())).toBeLessThan(
      BigInt(readFileSync(join(work, 'r1-end'), 'utf8').trim()),
    );
    expect(remoteToolsrvs(r.sshd.remoteHome)).toHaveLength(1);
  }, 60_000);

  it('a long result is saved on the host the tools run on, where the next tool call reads it', async () => {
    await r.remoteSession('spill', work);
    r.mock.script([{ toolCalls: [{ name: 'shell', args: { command: 'seq 1 20000' } }] }], [{ text: 'done' }]);
    await turn('session/spill/agent/coder', 'go');
    // What the model was given: the head and tail, and where the whole is.
    const agent = await r.agent('session/spill/agent/coder');
    const content = agent.history.messages.findLast((m) => m.role === 'tool')?.content ?? '';
    const path = /The whole output is in (\S+) —/.exec(content)?.[1];
    // On the remote side (the remote user's data dir), not in this daemon's.
    expect(path?.startsWith(`${r.sshd.remoteHome}/`), content.slice(-400)).toBe(true);
    expect(readFileSync(path!, 'utf8').split('\n').length).toBe(20001);
    // The agent's tools there may read it, as they read a local spill file.
    r.mock.script([{ toolCalls: [{ name: 'shell', args: { command: `wc -l < ${path}` } }] }], [{ text: 'done' }]);
    const second = await turn('session/spill/agent/coder', 'count');
    expect(second.at(-1)).toContain('20000');
  });

  it("ctl remote moves a session's tools to the host and back", async () => {
    const work3 = join(r.sshd.remoteHome, 'work3');
    mkdirSync(work3);
    // On loopback the directory is both here and there; HOME tells the sides apart.
    await r.c.rdwrText('session/new', `name=mover cwd=${work3}`);
    await r.c.rdwrText('session/mover/agent/new', 'name=coder agent=e2e backend=mock');
    const where = async (): Promise<string> => {
      r.mock.script([{ toolCalls: [{ name: 'shell', args: { command: 'echo "home=$HOME"' } }] }], [{ text: 'ok' }]);
      return (await turn('session/mover/agent/coder', 'where')).at(-1)!;
    };
    expect(await where()).toContain(`home=${r.local}`);
    expect((await idx('mover'))[4]).toBe('-');
    expect(await r.c.rdwrText('session/mover/ctl', `remote ${r.sshd.host}`)).toBe(`remote ${r.sshd.host}\n`);
    expect((await idx('mover'))[4]).toBe(r.sshd.host);
    expect(await where()).toContain(`home=${r.sshd.remoteHome}`);
    expect(await r.c.rdwrText('session/mover/ctl', 'remote -')).toBe('remote -\n');
    expect(await where()).toContain(`home=${r.local}`);
  }, 90_000);

  it('a session keeps its host across a daemon restart', async () => {
    await r.restart();
    expect((await idx('r1'))[4]).toBe(r.sshd.host);
    expect((await idx('mover'))[4]).toBe('-');
    r.mock.script([{ toolCalls: [{ name: 'shell', args: { command: 'echo "home=$HOME"' } }] }], [{ text: 'ok' }]);
    expect((await turn('session/r1/agent/coder', 'still there?')).at(-1)).toContain(`home=${r.sshd.remoteHome}`);
  }, 90_000);
});
