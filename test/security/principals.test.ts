/**
 * Attacks on the control plane from inside the sandbox, the way a model would make them: scripted tool calls
 * (client_9p, subagent_spawn, shell) of a real agent, against a real olliesrv, toolsrv, sandbox helper and mock
 * LLM. Each attack must be refused with the rule that refused it, and leave nothing changed; the controls show
 * that what an agent may do still works.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { dial } from '../../src/ninep/node.js';
import { startDaemon, type Daemon } from '../../src/olliesrv/daemon.js';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { testHarness, type Harness } from '../olliesrv/agent-harness.js';
import { policyWithUnixSockets } from '../toolsrv/sandbox-helpers.js';
import { until } from '../wait.js';
import { attackerProfile, client9p, results, script } from './scripted-calls.js';

const ATTACKER = attackerProfile(['client_9p', 'subagent_spawn', 'shell']);

async function attacker(
  h: Harness,
): Promise<{ session: string; sid: string; aid: string; name: string; path: string }> {
  return h.agent({ profile: 'attacker' });
}

describe('an agent attacking the control plane through its own tools', () => {
  it("cannot read or answer its session's bypass requests, by any path; only the owner can", async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const a = await attacker(h);
    const victim = (await h.c.rdwrText(`session/${a.session}/agent/new`, 'agent=attacker name=victim')).trim();
    const vpath = `session/${a.session}/agent/${victim}`;
    // The victim asks to leave the sandbox; its call waits for a person.
    h.mock.script([{ toolCalls: [{ name: 'shell', args: { command: 'echo escaped', bypass: true } }] }]);
    await h.c.write(`${vpath}/prompt`, 'go');
    const pending = await until(
      () => h.c.readText(`session/${a.session}/bypass`),
      "the victim's bypass request",
      10_000,
    );
    const id = pending.split('\t')[0]!;
    expect(id).toMatch(/\S/);
    // The attacker reads the queue and approves it, for now and for ever.
    h.mock.script(
      ...script(
        client9p('read', 'session/$OLLIE_SESSION_ID/bypass'),
        client9p('write', 'session/$OLLIE_SESSION_ID/bypass', `${id} approve always:*`),
        client9p('write', `session/${a.sid}/bypass`, `${id} approve once`),
        { name: 'subagent_spawn', args: { prompt: 'approve it' } },
      ),
    );
    // The sub-agent it spawns tries too.
    h.mock.script(...script(client9p('write', 'session/$OLLIE_SESSION_ID/bypass', `${id} approve session`)));
    const out = results(await h.turn(a.path, 'attack'));
    expect(out[0]).toMatch(
      /client_9p: read .*bypass: permission denied: .*only the owner may use this file, not agent /,
    );
    expect(out[1]).toMatch(/client_9p: write .*bypass: permission denied: .*only the owner may use this file/);
    expect(out[2]).toMatch(/permission denied: .*only the owner may use this file/);
    // The sub-agent's own attempt failed the same way (its reply is the mock's closing text).
    const sub = h.mock.requests.filter((r) => JSON.stringify(r.body).includes('approve session'));
    expect(sub.length).toBeGreaterThan(0);
    expect(JSON.stringify(h.mock.requests.at(-1)!.body)).toMatch(/only the owner may use this file/);
    // Still pending: nothing approved it, and no rule was stored.
    expect(await h.c.readText(`session/${a.session}/bypass`)).toContain(id);
    expect(h.daemon.agents.all().find((x) => x.name === victim)!.state).toBe('calling');
    await h.c.write(`session/${a.session}/bypass`, `${id} deny`);
    h.mock.script([{ text: 'ok' }]);
    await h.waitState(vpath, 'idle');
    expect(results(await h.blocks(vpath)).join('\n')).toMatch(/denied by user/);
    expect(results(await h.blocks(vpath)).join('\n')).not.toMatch(/^escaped/m);
  });

  it('cannot create an unconfined sibling: agent/new from an agent makes its sub-agent, inside its cwd, on its backend', async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const a = await attacker(h);
    const other = (await h.c.rdwrText(`session/${a.session}/agent/new`, 'agent=attacker name=other')).trim();
    h.mock.script(
      ...script(
        client9p('rdwr', 'session/$OLLIE_SESSION_ID/agent/new', 'name=x cwd=/'),
        client9p('rdwr', 'session/$OLLIE_SESSION_ID/agent/new', `name=y cwd=${dirname(h.dir)}`),
        client9p('rdwr', 'session/$OLLIE_SESSION_ID/agent/new', 'name=z backend=claude'),
        client9p('rdwr', 'session/$OLLIE_SESSION_ID/agent/new', `name=w parent=${other}`),
        client9p('rdwr', 'session/$OLLIE_SESSION_ID/agent/new', 'name=kid agent=attacker'),
      ),
    );
    const out = results(await h.turn(a.path, 'attack'));
    expect(out[0]).toMatch(/refused: cwd \/ is outside .*; an agent's sub-agents work inside its own directory/);
    expect(out[1]).toMatch(/refused: cwd .* is outside/);
    expect(out[2]).toMatch(/refused: an agent's sub-agents use its own backend \(mock\), not claude/);
    expect(out[3]).toMatch(/refused: parent=other is not this agent nor one of its sub-agents/);
    expect(out[4]!.trim()).toBe('kid');
    const names = h.daemon.agents
      .list(a.session)
      .map((x) => x.name)
      .sort();
    expect(names).toEqual(['attacker', 'kid', 'other'].sort());
    const kid = h.daemon.agents.get(a.session, 'kid');
    expect(kid.parent).toBe(a.aid);
    expect(kid.depth).toBe(1);
    expect(kid.cfg.cwd).toBe(h.dir);
    expect(kid.cfg.backend).toBe('mock');
  });

  it('cannot rewrite the policy, the configuration, the session environment, nor give root or session commands', async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const a = await attacker(h);
    const sandboxBefore = await h.c.readText('config/sandbox.yaml');
    h.mock.script(
      ...script(
        client9p('write', 'config/sandbox.yaml', 'filesystem:\n  rwx: [/]\nnetwork:\n  enabled: true\n'),
        client9p('write', 'config/profile', 'attacker'),
        client9p('read', 'config/backends.conf'),
        client9p('write', 'session/$OLLIE_SESSION_ID/env', 'OLLIE_DATA=/tmp/evil\n'),
        client9p('rdwr', 'ctl', 'reload'),
        client9p('rdwr', 'session/$OLLIE_SESSION_ID/ctl', 'kill'),
        client9p('write', 'session/$OLLIE_SESSION_ID/agent/attacker/cfg', 'cwd=/\n'),
        client9p('rdwr', 'session/$OLLIE_SESSION_ID/agent/attacker/ctl', 'cwd /'),
        client9p('write', 'session/$OLLIE_SESSION_ID/agent/attacker/prompt', '/cwd /'),
      ),
    );
    // A second turn: ten failing rounds in a row end a turn.
    h.mock.script(
      ...script(
        client9p('rdwr', 'session/$OLLIE_SESSION_ID/agent/attacker/ctl', 'backend claude'),
        client9p('read', 'backends'),
        client9p('read', 'event'),
      ),
    );
    const out = results(await h.turn(a.path, 'attack'));
    out.push(...results(await h.turn(a.path, 'attack again')).slice(out.length));
    for (const o of out.slice(0, 6))
      expect(o).toMatch(
        /permission denied: .*(only the owner may use this file, not agent |agent .* may not (reach|write) .*the owner's alone)/,
      );
    expect(out[6]).toMatch(/permission denied: .*cfg: agent .* may not write/);
    expect(out[7]).toMatch(/refused: an agent may not run "cwd …"/);
    expect(out[8]).toMatch(/refused: an agent may not run "cwd …"/);
    expect(out[9]).toMatch(/refused: an agent may not run "backend …"/);
    expect(out[10]).toMatch(/only the owner may use this file/);
    expect(out[11]).toMatch(/only the owner may use this file/);
    // Nothing changed.
    expect(await h.c.readText('config/sandbox.yaml')).toBe(sandboxBefore);
    expect(existsSync(join(h.configDir, 'sandbox.yaml'))).toBe(false);
    expect(await h.c.readText(`session/${a.session}/env`)).toBe('');
    expect(h.daemon.sessions.has(a.session)).toBe(true);
    expect(h.daemon.agents.get(a.session, 'attacker').cfg.cwd).toBe(h.dir);
    expect(h.daemon.agents.get(a.session, 'attacker').cfg.backend).toBe('mock');
  });

  it("cannot type into a process, not even its own tty one: proc/{pid}/in is the owner's; the owner's keystrokes reach the pty", async () => {
    // A tty tool that waits for a line typed at its terminal.
    const tools = mkdtempSync(join(tmpdir(), 'ollie-tty-tools-'));
    onTestFinished(() => rmSync(tools, { recursive: true, force: true }));
    writeFileSync(join(tools, 'asker'), '#!/bin/sh\nprintf "name? "\nread line\necho "GOT $line"\n');
    chmodSync(join(tools, 'asker'), 0o755);
    writeFileSync(
      join(tools, 'asker.meta'),
      JSON.stringify({ description: 'asks in a terminal', tty: true, args: { type: 'object', properties: {} } }),
    );
    const h = await testHarness({
      profiles: { attacker: { ...ATTACKER, autoLoad: [...ATTACKER.autoLoad, 'asker'] } },
      toolDirs: [tools],
    });
    const a = await attacker(h);
    h.mock.script([{ toolCalls: [{ name: 'asker', args: { background: true } }] }], [{ text: 'started' }]);
    expect(results(await h.turn(a.path, 'start it'))[0]).toMatch(/started in the background as process \d+/);
    const pid = (await h.c.readText(`${a.path}/proc/idx`)).trim().split('\t')[0]!;
    expect(pid).toMatch(/^\d+$/);
    const stat = await h.c.readText(`${a.path}/proc/${pid}/stat`);
    expect(stat).toMatch(/^tty=1$/m);
    expect(stat).toMatch(/^state=running$/m);
    // The agent types into it, by its own path and by the session's; its sub-agent would be refused the same way.
    h.mock.script(
      ...script(
        client9p('write', `session/$OLLIE_SESSION_ID/agent/${a.name}/proc/${pid}/in`, 'pwned\n'),
        client9p('write', `session/$OLLIE_SESSION_ID/agent/$OLLIE_UNAME/proc/${pid}/in`, 'pwned\n'),
        client9p('write', `session/${a.sid}/agent/${a.aid}/proc/${pid}/in`, 'pwned\n'),
      ),
    );
    const out = results(await h.turn(a.path, 'type into it'));
    expect(out).toHaveLength(4);
    for (const o of out.slice(1))
      expect(o).toMatch(/permission denied: .*only the owner may use this file, not agent /);
    // Still waiting for its line: nothing reached the pty.
    expect(await h.c.readText(`${a.path}/proc/${pid}/stat`)).toMatch(/^state=running$/m);
    // The owner may: the keystrokes reach the process through olliesrv and toolsrv.
    await h.c.write(`${a.path}/proc/${pid}/in`, 'hello\r');
    expect((await h.c.readText(`${a.path}/proc/${pid}/wait`)).trim()).toBe('0');
    const text = await h.c.readText(`${a.path}/proc/${pid}/out`);
    expect(text).toContain('GOT hello');
    expect(text).not.toContain('pwned');
  });

  it('cannot list providers, check a backend (a way to make the daemon fetch a URL) or store one', async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const a = await attacker(h);
    const before = readFileSync(join(h.configDir, 'backends.conf'), 'utf8');
    const requests = h.mock.requests.length;
    h.mock.script(
      ...script(
        client9p('read', 'config/providers'),
        client9p('rdwr', 'config/check', `provider=compatible\nurl=${h.mock.url}/v1\n`),
        client9p('rdwr', 'config/backend', `provider=compatible\nname=evil\nurl=${h.mock.url}/v1\n`),
      ),
    );
    const out = results(await h.turn(a.path, 'attack'));
    for (const o of out.slice(0, 3)) expect(o).toMatch(/permission denied: .*only the owner may use this file/);
    expect(readFileSync(join(h.configDir, 'backends.conf'), 'utf8')).toBe(before);
    // The only requests to the provider are the agent's own turn: no GET /v1/models on the agent's behalf.
    expect(h.mock.requests.slice(requests).filter((r) => r.path === '/v1/models')).toEqual([]);
    expect(await h.c.readText('backends')).not.toMatch(/^evil/m);
  });

  it('cannot reach another session: not its logs, its agents, its search hits, its ctl; listings show only its own', async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const secret = await h.agent();
    h.mock.script([{ text: 'the password is hunter2' }]);
    await h.turn(secret.path, 'what is the password');
    const a = await attacker(h);
    h.mock.script(
      ...script(
        client9p('read', `${secret.path}/log`),
        client9p('read', `session/${secret.sid}/agent/${secret.name}/log.raw`),
        client9p('rdwr', `${secret.path}/log.from`, 'tail 10'),
        client9p('write', `${secret.path}/prompt`, 'print your history'),
        client9p('rdwr', `session/${secret.session}/ctl`, 'kill'),
        client9p('rdwr', 'search', 'hunter2'),
        client9p('read', 'session/idx'),
        client9p('read', `session/${secret.session}/plan`),
      ),
    );
    const out = results(await h.turn(a.path, 'attack'));
    for (const o of out.slice(0, 5)) expect(o).toMatch(/permission denied: .*may reach only its own session/);
    // Its search finds its own call (the words it searched for), never the other session's reply.
    expect(out[5]).not.toMatch(/password is/);
    expect(
      out[5]!
        .split('\n')
        .filter(Boolean)
        .every((l) => l.startsWith(`${a.session}\t`)),
    ).toBe(true);
    expect(out[6]).toMatch(/only the owner may use this file/);
    expect(out[7]).toMatch(/may reach only its own session/);
    expect(h.daemon.sessions.has(secret.session)).toBe(true);
    // The agent's view of the tree: its own session only.
    const view = await dial(`unix!${h.socket}`, { uname: 'x', authData: h.daemon.principals.agentToken(a.sid, a.aid) });
    try {
      expect((await view.ls('session')).map((e) => e.name).sort()).toEqual([a.session]);
      expect((await view.ls('/')).map((e) => e.name).sort()).toEqual(['agents', 'help', 'search', 'session']);
      // The owner searches everything.
      expect(await h.c.rdwrText('search', 'hunter2')).toContain('hunter2');
    } finally {
      view.close();
    }
  });

  it('reaches its sub-agents and peers as the rules say, and not its siblings', async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const a = await attacker(h);
    const sibling = (await h.c.rdwrText(`session/${a.session}/agent/new`, 'agent=attacker name=sibling')).trim();
    const view = await dial(`unix!${h.socket}`, { uname: 'x', authData: h.daemon.principals.agentToken(a.sid, a.aid) });
    try {
      const kid = (await view.rdwrText(`session/${a.session}/agent/new`, 'name=kid')).trim();
      expect(kid).toBe('kid');
      // Its own files and its sub-agent's: readable; the sub-agent takes prompts and may be removed.
      expect((await view.readText(`session/${a.session}/agent/kid/state`)).trim()).toMatch(/idle|thinking/);
      expect(await view.readText(`session/${a.session}/agent/idx`)).toMatch(/\tkid\t/);
      expect(await view.readText(`session/${a.session}/agent/idx`)).not.toMatch(/\tsibling\t/);
      await expect(view.readText(`session/${a.session}/agent/${sibling}/log`)).rejects.toThrow(
        /may reach only itself, the sub-agents it started and its peers, not sibling/,
      );
      await expect(view.write(`session/${a.session}/agent/${sibling}/prompt`, 'hi')).rejects.toThrow(
        /may reach only itself/,
      );
      await expect(view.remove(`session/${a.session}/agent/${sibling}`)).rejects.toThrow(/may reach only itself/);
      await expect(view.remove(`session/${a.session}/agent/attacker`)).rejects.toThrow(/may not remove/);
      await view.remove(`session/${a.session}/agent/kid`);
      expect(h.daemon.agents.has(a.session, 'kid')).toBe(false);
      // The records of ended agents (its own killed kid's included) are the owner's and the workflow's, never an
      // agent's: it can neither list nor read nor forget them, nor find them by search.
      const kidId = (await h.c.readText(`session/${a.session}/ended/idx`)).split('\t')[1]!;
      await expect(view.readText(`session/${a.session}/ended/idx`)).rejects.toThrow(/may not reach/);
      await expect(view.readText(`session/${a.session}/ended/${kidId}/log.raw`)).rejects.toThrow(/may not reach/);
      await expect(view.remove(`session/${a.session}/ended/${kidId}`)).rejects.toThrow(/may not reach/);
      expect(await view.rdwrText('search', 'kid')).not.toContain(kidId);
      // Peering is the owner's (or the workflow's) to give.
      await expect(view.rdwrText(`session/${a.session}/agent/attacker/ctl`, `peeradd ${sibling}`)).rejects.toThrow(
        /may not run "peeradd …"/,
      );
      await h.c.rdwrText(`session/${a.session}/agent/attacker/ctl`, `peeradd ${sibling}`);
      expect(await view.readText(`session/${a.session}/agent/${sibling}/state`)).toMatch(/idle/);
      await expect(view.write(`session/${a.session}/agent/${sibling}/prompt`, 'hi')).rejects.toThrow(
        /may not reach .*its peer's file/,
      );
    } finally {
      view.close();
    }
  });

  it('still does what agents may: read its own log, update the plan and goal status, run a sub-agent', async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const a = await attacker(h);
    h.mock.script(
      ...script(
        client9p('write', 'session/$OLLIE_SESSION_ID/plan', '- [x] step one\n'),
        client9p('write', 'session/$OLLIE_SESSION_ID/goalstatus', 'complete\nall done\n'),
        client9p('read', 'session/$OLLIE_SESSION_ID/agent/$OLLIE_UNAME/state'),
        client9p('rdwr', 'session/$OLLIE_SESSION_ID/agent/$OLLIE_UNAME/ctl', 'help'),
      ).slice(0, -1),
    );
    // The sub-agent's turn, then the caller's last call and closing text.
    h.mock.script(
      [{ toolCalls: [{ name: 'subagent_spawn', args: { prompt: 'say hi' } }] }],
      [{ text: 'hi from the sub-agent' }],
      [{ text: 'done' }],
    );
    const out = results(await h.turn(a.path, 'work'));
    expect(out[0]).toMatch(/wrote 15 bytes/);
    expect(out[1]).toMatch(/wrote/);
    expect(out[2]!.trim()).toMatch(/calling|thinking/);
    expect(out[3]).toMatch(/^stop/m);
    expect(out[4]).toContain('hi from the sub-agent');
    expect(await h.c.readText(`session/${a.session}/plan`)).toBe('- [x] step one\n');
  });
});

describe('a workflow (session principal)', () => {
  it('drives its own session, and cannot approve, reconfigure, leave its directory or reach other sessions', async () => {
    const h = await testHarness();
    const a = await h.agent();
    const other = await h.agent();
    const wf = await dial(`unix!${h.socket}`, { uname: 'x', authData: h.daemon.principals.sessionToken(a.sid) });
    try {
      const s = `session/${a.session}`;
      // What workflows do.
      expect((await wf.rdwrText(`${s}/agent/new`, 'name=helper')).trim()).toBe('helper');
      await wf.write(`${s}/goalstatus`, 'complete\nok\n');
      expect(await wf.readText(`${s}/env`)).toBe('');
      await wf.rdwrText(`${s}/agent/${a.name}/ctl`, 'peeradd helper');
      // What they may not.
      await expect(wf.readText(`${s}/bypass`)).rejects.toThrow(
        /only the owner may use this file, not session .*'s workflow/,
      );
      await expect(wf.write(`${s}/env`, 'LD_PRELOAD=/tmp/x.so\n')).rejects.toThrow(/may not write/);
      await expect(wf.rdwrText(`${s}/ctl`, 'kill')).rejects.toThrow(/only the owner/);
      await expect(wf.readText('config/backends.conf')).rejects.toThrow(/only the owner/);
      await expect(wf.rdwrText(`${s}/agent/new`, 'name=out cwd=/')).rejects.toThrow(
        /refused: cwd \/ is outside the session's directory/,
      );
      await expect(wf.rdwrText(`${s}/agent/${a.name}/ctl`, 'cwd /')).rejects.toThrow(
        /refused: cwd \/ is outside the session's directory/,
      );
      await expect(wf.write(`${s}/agent/${a.name}/cfg`, 'cwd=/\n')).rejects.toThrow(
        /refused: cwd \/ is outside the session's directory/,
      );
      await expect(wf.readText(`${other.path}/log`)).rejects.toThrow(/may reach only its own session/);
      expect(h.daemon.agents.get(a.session, a.name).cfg.cwd).toBe(h.dir);
      // Its event stream carries its own session's events only, whatever filter it writes.
      const ac = new AbortController();
      const events = wf.stream('event', { request: '>', signal: ac.signal });
      const first = events.next();
      await h.c.write(`session/${other.session}/goalstatus`, 'blocked\nother\n');
      await h.c.write(`session/${a.session}/goalstatus`, 'blocked\nmine\n');
      const seen = new TextDecoder().decode((await first).value!);
      ac.abort();
      expect(seen).toContain(`session.${a.sid}.goal`);
      expect(seen).not.toContain(other.sid);
    } finally {
      wf.close();
    }
  });
});

describe('who connects: never the claimed name', () => {
  it('a sandboxed process that may open Unix sockets still cannot be the owner, whatever uname it claims or token it forges', async () => {
    // The owner lets tools reach local daemons: Unix sockets are allowed to every tool.
    const h = await testHarness({ profiles: { attacker: attackerProfile(['shell']) } });
    writeFileSync(join(h.configDir, 'sandbox.yaml'), policyWithUnixSockets());
    const a = await attacker(h);
    const probe = join(h.dir, 'probe.mjs');
    const ninep = join(PACKAGE_ROOT, 'dist', 'ninep', 'node.js');
    writeFileSync(
      probe,
      [
        `import { dial } from ${JSON.stringify(ninep)};`,
        'const [addr, uname, token] = process.argv.slice(2);',
        'try {',
        '  const c = await dial(addr, { uname, ...(token ? { authData: token } : {}) });',
        "  process.stdout.write('ATTACHED ' + (await c.readText('config/backends.conf')).length);",
        '} catch (e) { process.stdout.write(`REFUSED ${e.message}`); }',
        '',
      ].join('\n'),
    );
    const forged = `ollie-agent.${a.sid}.${a.aid}.${'0'.repeat(64)}`;
    const run = (args: string) => ({ name: 'shell', args: { command: `node ${probe} unix!${h.socket} ${args}` } });
    // A process that left the tool's tree: double-forked with setsid, it waits until its parent is gone (it is
    // reparented), then dials; the call waits for its answer.
    const orphan = join(h.dir, 'orphan.mjs');
    writeFileSync(
      orphan,
      [
        "import { spawnSync } from 'node:child_process';",
        'while (process.ppid === Number(process.env.PARENT)) spawnSync("sleep", ["0.02"]);',
        `await import(${JSON.stringify(probe)});`,
        '',
      ].join('\n'),
    );
    const escape = {
      name: 'shell',
      args: {
        command: `o=$TMPDIR/out; rm -f $o; (export PARENT=$BASHPID; setsid node ${orphan} unix!${h.socket} ${userInfo().username} > $o 2>&1 &); while [ ! -s $o ]; do sleep 0.02; done; sleep 0.1; cat $o`,
      },
    };
    h.mock.script(
      ...script(
        run(userInfo().username),
        run('root'),
        run(`${userInfo().username} ${forged}`),
        run(`${userInfo().username} ${h.daemon.principals.ownerToken.slice(0, -1)}x`),
        escape,
      ),
    );
    const out = results(await h.turn(a.path, 'attack'));
    expect(out[4]).toMatch(/REFUSED .*refused: pid \d+ is a process Ollie started/);
    expect(out[0]).toMatch(/REFUSED .*refused: pid \d+ is a process Ollie started for an agent or a workflow/);
    expect(out[1]).toMatch(/REFUSED .*refused: pid \d+ is a process Ollie started/);
    expect(out[2]).toMatch(/REFUSED .*authentication failed: the token is not valid/);
    expect(out[3]).toMatch(/REFUSED .*authentication failed: the token is not valid/);
    for (const o of out) expect(o).not.toMatch(/ATTACHED/);
  });

  it('over TCP, nobody is served without the owner token; with it, the owner is; another local user cannot read it', async () => {
    const h = await testHarness();
    await h.daemon.close();
    const socket = join(h.dir, 'run2', 'ollie.sock');
    const d: Daemon = await startDaemon({
      socket,
      dataDir: join(h.dir, 'data2'),
      configDir: h.configDir,
      toolsrv: false,
      skills: false,
      tcp: { kind: 'tcp', host: '127.0.0.1', port: 0 },
      log: () => undefined,
    });
    try {
      const tcp = d.addresses.find((x) => x.kind === 'tcp')!;
      const addr = `tcp!127.0.0.1!${(tcp as { port: number }).port}`;
      await expect(dial(addr, { uname: userInfo().username })).rejects.toThrow(
        /authentication required: 9P over TCP .* is served to the owner only/,
      );
      await expect(dial(addr, { uname: userInfo().username, authData: 'ollie-owner.guess' })).rejects.toThrow(
        /authentication failed/,
      );
      const tokenFile = join(dirname(socket), 'owner.token');
      expect(readFileSync(tokenFile, 'utf8').trim()).toBe(d.principals.ownerToken);
      expect(execFileSync('stat', ['-c', '%a', tokenFile], { encoding: 'utf8' }).trim()).toBe('600');
      const c = await dial(addr, { uname: 'anyone', authData: readFileSync(tokenFile, 'utf8') });
      expect(await c.readText('config/backends.conf')).toMatch(/\[mock\]/);
      c.close();
      // Another local user: neither the token file nor the socket can be opened.
      const nobody = await runAsNobody(tokenFile, socket, addr);
      expect(nobody).toMatch(/token: EACCES/);
      expect(nobody).toMatch(/socket: (EACCES|REFUSED)/);
      expect(nobody).toMatch(/tcp: REFUSED .*authentication required/);
    } finally {
      await d.close();
    }
  });
});

/** Runs a probe as `nobody` (setpriv) that tries the token file, the Unix socket and TCP without a token. */
async function runAsNobody(tokenFile: string, socket: string, tcp: string): Promise<string> {
  const dir = join(dirname(dirname(socket)), 'nobody');
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755);
  // The probe and the library it imports must be readable by nobody: the package is, the test dir is not.
  const probe = join(dir, 'probe.mjs');
  writeFileSync(
    probe,
    [
      "import { readFileSync } from 'node:fs';",
      `import { dial } from ${JSON.stringify(join(PACKAGE_ROOT, 'dist', 'ninep', 'node.js'))};`,
      'const out = [];',
      `try { readFileSync(${JSON.stringify(tokenFile)}); out.push('token: READ'); } catch (e) { out.push('token: ' + e.code); }`,
      `try { await dial(${JSON.stringify(`unix!${socket}`)}, { uname: 'root' }); out.push('socket: ATTACHED'); } catch (e) { out.push('socket: ' + (e.code ?? 'REFUSED ' + e.message)); }`,
      `try { await dial(${JSON.stringify(tcp)}, { uname: 'root' }); out.push('tcp: ATTACHED'); } catch (e) { out.push('tcp: REFUSED ' + e.message); }`,
      'process.stdout.write(out.join("\\n"));',
      '',
    ].join('\n'),
  );
  chmodSync(probe, 0o644);
  // The test's temp dir is 0700: nobody may pass through it to the probe, and no further (run2/ stays 0700).
  chmodSync(dirname(dir), 0o711);
  return new Promise((resolve, reject) => {
    const p = spawn('setpriv', ['--reuid=nobody', '--regid=nogroup', '--clear-groups', process.execPath, probe], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('exit', () => resolve(out));
  });
}
