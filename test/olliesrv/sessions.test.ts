import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DMDIR, OREAD, type Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { startDaemon, type Daemon } from '../../src/olliesrv/daemon.js';
import { compileFilter, EventBus, QUEUE_LIMIT } from '../../src/olliesrv/event/bus.js';
import { until } from '../wait.js';

describe('olliesrv sessions', () => {
  let dir: string;
  let daemon: Daemon;
  let c: Client;

  const start = async (): Promise<void> => {
    daemon = await startDaemon({
      socket: join(dir, 'run', 'ollie.sock'),
      dataDir: join(dir, 'data'),
      configDir: join(dir, 'config'),
      log: () => undefined,
    });
    c = await dial({ kind: 'unix', path: join(dir, 'run', 'ollie.sock') }, { uname: userInfo().username });
  };
  const restart = async (): Promise<void> => {
    c.close();
    await daemon.close();
    await start();
  };

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'olliesrv-test-'));
    await start();
  });
  afterEach(async () => {
    c.close();
    await daemon.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates sessions from key=value requests and lists them in idx', async () => {
    expect(await c.rdwrText('session/new', `name=alpha cwd=${dir}`)).toBe('alpha\n');
    const anon = (await c.rdwrText('session/new', '')).trim();
    expect(anon).toMatch(/^[0-9a-f]{8}$/);
    const id = (await c.readText('session/alpha/id')).trim();
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const idx = (await c.readText('session/idx'))
      .trimEnd()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(idx).toContainEqual([id, 'alpha', '0', '0', '-', dir]);
    expect(idx).toHaveLength(2);
    expect((await c.ls('session')).map((s) => s.name).sort()).toEqual(['alpha', anon, 'idx', 'new'].sort());
  });

  it('refuses bad requests with errors that say what is wrong', async () => {
    await expect(c.rdwr('session/new', 'name=a colour=red')).rejects.toThrow(
      'unknown key "colour"; valid keys: name, cwd',
    );
    await expect(c.rdwr('session/new', 'justaword')).rejects.toThrow('expected key=value');
    await c.rdwr('session/new', 'name=taken');
    await expect(c.rdwr('session/new', 'name=taken')).rejects.toThrow('a session named "taken" already exists');
    await expect(c.rdwr('session/new', 'name=new')).rejects.toThrow('reserved');
    await expect(c.rdwr('session/new', 'name="has space"')).rejects.toThrow('whitespace');
    await expect(c.rdwr('session/new', `name=x cwd=${join(dir, 'missing')}`)).rejects.toThrow(
      'is not an existing directory',
    );
    await expect(c.rdwr('session/new', 'name=y cwd=relative/dir')).rejects.toThrow('not an absolute path');
    await expect(c.rdwr('session/taken/ctl', 'explode')).rejects.toThrow(
      'unknown command "explode"; known commands: kill, save, pause, resume',
    );
    await expect(c.write('session/taken/env', 'not an assignment\n', { truncate: true })).rejects.toThrow(
      'env line 1: expected KEY=value',
    );
    expect((await c.readText('session/idx')).split('\n').filter(Boolean)).toHaveLength(1);
  });

  it('renames through the name file and through wstat; the directory moves, the id and qids stay', async () => {
    await c.rdwr('session/new', 'name=one');
    const id = await c.readText('session/one/id');
    const qid = (await c.stat('session/one/plan')).qid.path;
    await c.write('session/one/name', 'two\n', { truncate: true });
    await expect(c.stat('session/one')).rejects.toThrow('file not found');
    expect(await c.readText('session/two/id')).toBe(id);
    expect(await c.readText('session/two/name')).toBe('two\n');
    await c.rename('session/two', 'three');
    expect(await c.readText('session/three/id')).toBe(id);
    expect((await c.stat('session/three/plan')).qid.path).toBe(qid);
    await c.rdwr('session/new', 'name=other');
    await expect(c.rename('session/three', 'other')).rejects.toThrow('already exists');
  });

  it('keeps env and plan, pauses and resumes, and kills through ctl or remove', async () => {
    await c.rdwr('session/new', 'name=s');
    await c.write('session/s/env', 'GOPATH=/go\n# comment\n\nEDITOR=vi\n', { truncate: true });
    expect(await c.readText('session/s/env')).toBe('GOPATH=/go\nEDITOR=vi\n');
    await c.write('session/s/plan', '- [ ] write tests\n- [x] write code\n', { truncate: true });
    expect(await c.rdwrText('session/s/ctl', 'pause')).toBe('paused\n');
    expect((await c.readText('session/idx')).split('\t')[2]).toBe('1');
    expect(await c.rdwrText('session/s/ctl', 'save')).toBe('saved\n');
    await restart();
    expect(await c.readText('session/s/env')).toBe('GOPATH=/go\nEDITOR=vi\n');
    expect(await c.readText('session/s/plan')).toBe('- [ ] write tests\n- [x] write code\n');
    expect((await c.readText('session/idx')).split('\t')[2]).toBe('1');
    await c.rdwr('session/s/ctl', 'resume');
    expect((await c.readText('session/idx')).split('\t')[2]).toBe('0');
    expect(await c.rdwrText('session/s/ctl', 'kill')).toBe('killed\n');
    expect(await c.readText('session/idx')).toBe('');
    await c.rdwr('session/new', 'name=t');
    await c.remove('session/t');
    expect(await c.readText('session/idx')).toBe('');
    const made = await c.create('session/made', DMDIR | 0o755, OREAD);
    await made.clunk();
    expect(await c.readText('session/made/name')).toBe('made\n');
    await restart();
    expect((await c.readText('session/idx')).split('\t')[1]).toBe('made');
  });

  it('publishes session events to filtered subscribers', async () => {
    const ac = new AbortController();
    const lines: string[] = [];
    const subs = daemon.bus.subscribers;
    const done = (async () => {
      for await (const chunk of c.stream('event', { request: 'session.*.new session.*.rename', signal: ac.signal })) {
        lines.push(...new TextDecoder().decode(chunk).split('\n').filter(Boolean));
        if (lines.length >= 2) ac.abort(new Error('done'));
      }
    })().catch(() => undefined);
    await until(() => daemon.bus.subscribers > subs, 'the event subscription');
    await c.rdwr('session/new', 'name=ev');
    await c.rdwr('session/ev/ctl', 'pause'); // filtered out
    await c.rename('session/ev', 'ev2');
    await done;
    const id = (await c.readText('session/ev2/id')).trim();
    expect(lines).toEqual([`session.${id}.new ev`, `session.${id}.rename ev\tev2`]);
  });

  it('serves help generated from the namespace', async () => {
    const help = await c.readText('help');
    expect(help).toMatch(/\/session\/new\s+rdwr\s+Write key=value pairs/);
    expect(help).toMatch(/\/session\/\{session\}\/ctl/);
  });
});

describe('event bus', () => {
  it('matches * to one segment and > to the rest', () => {
    const f = compileFilter('session.*.agent.*.state');
    expect(f('session.a.agent.b.state')).toBe(true);
    expect(f('session.a.agent.b.kill')).toBe(false);
    expect(f('session.a.agent.b.state.x')).toBe(false);
    const g = compileFilter('session.abc.>');
    expect(g('session.abc.kill')).toBe(true);
    expect(g('session.abc')).toBe(false);
    expect(g('session.abd.kill')).toBe(false);
    expect(compileFilter('*')('anything.at.all')).toBe(true);
    expect(compileFilter('')('x')).toBe(true);
    expect(() => compileFilter('a.>.b')).toThrow("'>' must be the last segment");
  });

  it('never blocks the publisher: a subscriber that falls behind gets one overflow marker, others are unaffected', async () => {
    const bus = new EventBus();
    const slow = new AbortController();
    const fast = new AbortController();
    const slowIt = bus.subscribe(() => true, slow.signal)[Symbol.asyncIterator]();
    const fastIt = bus.subscribe(() => true, fast.signal)[Symbol.asyncIterator]();
    const started = Date.now();
    let fastCount = 0;
    for (let i = 0; i < QUEUE_LIMIT * 3; i++) {
      bus.publish(`t.${i}`, 'x');
      if (i % 1000 === 999) fastCount += ((await fastIt.next()).value as string).split('\n').filter(Boolean).length;
    }
    expect(Date.now() - started).toBeLessThan(2000);
    fastCount += ((await fastIt.next()).value as string).split('\n').filter(Boolean).length;
    expect(fastCount).toBe(QUEUE_LIMIT * 3);
    const first = ((await slowIt.next()).value as string).split('\n');
    expect(first[0]).toMatch(/^ollie\.overflow \d+$/);
    const dropped = Number(first[0]!.split(' ')[1]);
    expect(dropped + first.filter(Boolean).length - 1).toBe(QUEUE_LIMIT * 3);
    slow.abort();
    fast.abort();
    expect(bus.subscribers).toBe(0);
  });
});
