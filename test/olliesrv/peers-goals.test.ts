/** Peers (links, delivery, access control, persistence) and goals (status, goalwait, workflow scripts). */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dial } from '../../src/ninep/node.js';
import { startDaemon } from '../../src/olliesrv/daemon.js';
import { until } from '../wait.js';
import { testHarness, type Harness } from './agent-harness.js';

describe('peers', () => {
  it('links both ways; a write to peer/NAME reaches that agent as a prompt marked with the sender, logged on both sides', async () => {
    const h = await testHarness({ tools: false, turns: [[{ text: 'got it' }]] });
    const alice = await h.agent();
    const bob = await h.agent({ session: alice.session });
    await expect(h.c.write(`${alice.path}/peer/${bob.name}`, 'hi')).rejects.toThrow(/not found/);
    expect(await h.c.rdwrText(`${alice.path}/ctl`, `peeradd ${bob.name}`)).toBe(`peer ${bob.name} added\n`);
    expect(await h.c.rdwrText(`${bob.path}/ctl`, 'peers')).toBe(`${alice.name}\n`);
    expect((await h.c.ls(`${bob.path}/peer`)).map((s) => s.name)).toEqual([alice.name]);

    const subs = h.daemon.bus.subscribers;
    const events = h.c
      .stream('event', { request: `session.${bob.sid}.agent.${bob.aid}.peer.message` })
      [Symbol.asyncIterator]();
    const ev = events.next();
    await until(() => h.daemon.bus.subscribers > subs, 'the event subscription');
    const done = h.daemon.agents
      .all()
      .find((a) => a.id === bob.aid)!
      .nextTurn();
    await h.c.write(`${alice.path}/peer/${bob.name}`, 'please review src/x.ts');
    await done;
    expect(new TextDecoder().decode((await ev).value as Uint8Array)).toBe(
      `session.${bob.sid}.agent.${bob.aid}.peer.message ${alice.name}\n`,
    );
    await events.return?.(undefined);
    const bobLog = await h.blocks(bob.path);
    expect(bobLog[0]).toMatchObject({
      role: 'user',
      content: `<peer-message from="${alice.name}">\nplease review src/x.ts\n</peer-message>`,
    });
    expect((await h.blocks(alice.path)).at(-1)).toMatchObject({
      role: 'info',
      name: 'peer',
      content: `→ ${bob.name}: please review src/x.ts`,
    });

    await h.c.rdwrText(`${bob.path}/ctl`, `peerdel ${alice.name}`);
    expect(await h.c.rdwrText(`${alice.path}/ctl`, 'peers')).toBe('');
    await expect(h.c.write(`${alice.path}/peer/${bob.name}`, 'again')).rejects.toThrow(/not found/);
    await expect(h.c.rdwrText(`${alice.path}/ctl`, `peeradd ${alice.name}`)).rejects.toThrow(/own peer/);
  });

  it('a removed agent leaves every peer set; links persist across a restart', async () => {
    const h = await testHarness({ tools: false });
    const a = await h.agent();
    const b = await h.agent({ session: a.session });
    const c = await h.agent({ session: a.session });
    await h.c.rdwrText(`${a.path}/ctl`, `peeradd ${b.name}`);
    await h.c.rdwrText(`${a.path}/ctl`, `peeradd ${c.name}`);
    await h.c.remove(c.path);
    expect(await h.c.rdwrText(`${a.path}/ctl`, 'peers')).toBe(`${b.name}\n`);

    h.c.close();
    await h.daemon.close();
    const d2 = await startDaemon({
      socket: h.socket,
      dataDir: h.dataDir,
      configDir: h.configDir,
      toolsrv: false,
      log: () => undefined,
    });
    const c2 = await dial(`unix!${h.socket}`, { uname: userInfo().username });
    try {
      expect(await c2.rdwrText(`${a.path}/ctl`, 'peers')).toBe(`${b.name}\n`);
      expect(await c2.rdwrText(`${b.path}/ctl`, 'peers')).toBe(`${a.name}\n`);
    } finally {
      c2.close();
      await d2.close();
    }
    h.daemon = { close: async () => undefined } as never;
    h.c = { close: () => undefined } as never;
  });
});

describe('goals', () => {
  function workflow(h: Harness, name: string, body: string): void {
    const dir = join(h.configDir, 'workflows');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, name), `#!/bin/sh\nset -e\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  }

  it('writing a goal starts the workflow, which drives the namespace like any client; goalwait returns the new status', async () => {
    const h = await testHarness({ tools: false });
    workflow(
      h,
      'echo-done',
      'goal=$(ollie-9p read "$OLLIE_GOAL_FILE")\nprintf "complete\\ndid: %s\\n" "$goal" | ollie-9p write "session/$OLLIE_SESSION/goalstatus"',
    );
    const a = await h.agent();
    expect(await h.c.rdwrText(`session/${a.session}/ctl`, 'workflow echo-done')).toBe('workflow echo-done\n');
    await expect(h.c.rdwrText(`session/${a.session}/ctl`, 'workflow nope')).rejects.toThrow(
      /no workflow named "nope".*workflows: .*echo-done/,
    );
    const wait = h.c.readText(`session/${a.session}/goalwait`);
    await until(() => h.daemon.sessions.goalReaders(a.session) > 0, 'the goalwait reader');
    await h.c.write(`session/${a.session}/goal`, 'make it fast');
    expect(await h.c.readText(`session/${a.session}/goalstatus`)).toMatch(/^(running|complete)/);
    let status = await wait;
    // goalwait may wake on "running" first; the workflow's verdict follows.
    while (status.startsWith('running')) status = await h.c.readText(`session/${a.session}/goalwait`);
    expect(status).toBe('complete\ndid: make it fast\n');
    expect(await h.c.readText(`session/${a.session}/goal`)).toBe('make it fast\n');
    await expect(h.c.write(`session/${a.session}/goalstatus`, 'finished')).rejects.toThrow(
      /must start with running, complete, blocked, error/,
    );
  });

  it('a workflow that fails sets error with its output; one that ends without a verdict leaves the goal blocked', async () => {
    const h = await testHarness({ tools: false });
    workflow(h, 'broken', 'echo "cannot reach the planner" >&2\nexit 3');
    workflow(h, 'silent', 'echo "I looked and gave up"');
    const a = await h.agent();
    await h.c.rdwrText(`session/${a.session}/ctl`, 'workflow broken');
    await h.c.write(`session/${a.session}/goal`, 'x');
    // goalwait wakes on the next change only: a workflow that ends between a read of goalstatus and the
    // goalwait would leave it waiting, so the status is polled.
    const settled = (): Promise<string> =>
      until(
        async () => {
          const now = await h.c.readText(`session/${a.session}/goalstatus`);
          return now.startsWith('running') ? undefined : now;
        },
        'the workflow to settle the goal',
        20_000,
      );
    let st = await settled();
    expect(st).toMatch(/^error\nworkflow broken exited with code 3:\ncannot reach the planner/);
    await h.c.rdwrText(`session/${a.session}/ctl`, 'workflow silent');
    await h.c.write(`session/${a.session}/goal`, 'y');
    st = await settled();
    expect(st).toMatch(/^blocked\nworkflow silent ended without setting the goal status:\nI looked and gave up/);
  });
});
