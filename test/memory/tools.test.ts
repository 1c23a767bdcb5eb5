/**
 * The memory tools as toolsrv runs them: the shipped .meta files and scripts, a real toolsrv (in process),
 * sandboxed (Landlock) with the tools' own rules, against a fresh $XDG_DATA_HOME.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { MemoryStore } from '../../src/olliesrv/memory/store.js';
import type { ProcResult } from '../../src/toolsrv/protocol.js';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { startEnv, until, type Env } from '../toolsrv/helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';

const TOOLS = join(PACKAGE_ROOT, 'data', 'tools');
const MEMORY_TOOLS = ['memory_remember', 'memory_recall', 'memory_wake', 'memory_zoom'];
let root: string;
let env: Env;
let savedXdg: string | undefined;
let projA: string;
let projB: string;
let clients: Record<string, Client>;

beforeAll(async () => {
  buildNative();
  root = mkdtempSync(join(tmpdir(), 'ollie-memtools-'));
  savedXdg = process.env.XDG_DATA_HOME;
  // toolsrv and its tools read $XDG_DATA_HOME when they start: the store goes into this test's directory.
  process.env.XDG_DATA_HOME = join(root, 'share');
  projA = join(root, 'a');
  projB = join(root, 'b');
  mkdirSync(join(projA, '.git'), { recursive: true });
  mkdirSync(join(projA, 'src'), { recursive: true });
  mkdirSync(projB, { recursive: true });
  // A tool with the memory tools' own sandbox rules that tries to write where they must not.
  const probeDir = join(root, 'probe-tools');
  mkdirSync(probeDir);
  const meta = JSON.parse(readFileSync(join(TOOLS, 'memory_recall.meta'), 'utf8')) as Record<string, unknown>;
  writeFileSync(
    join(probeDir, 'probe.meta'),
    JSON.stringify({ description: 'probe', scope: 'read', sandbox: meta.sandbox }),
  );
  const targets = [
    join(root, 'share', 'ollie', 'memory', 'ok.txt'),
    join(root, 'share', 'ollie', 'ollie.db'),
    join(root, 'share', 'ollie', 'models', 'x'),
    join(root, 'outside.txt'),
  ];
  writeFileSync(
    join(probeDir, 'probe'),
    `#!${process.execPath}\nconst fs = require('fs');\nfor (const p of ${JSON.stringify(targets)}) { try { fs.writeFileSync(p, 'x'); console.log('wrote', p); } catch (e) { console.log(e.code, p); } }\nconsole.log('XDG', process.env.XDG_DATA_HOME);\n`,
    { mode: 0o755 },
  );
  env = await startEnv({}, { toolDirs: [probeDir, TOOLS], yolo: false, cwd: projA });
  clients = {};
  for (const [name, cwd] of [
    ['a', join(projA, 'src')],
    ['b', projB],
  ] as const) {
    const c = await env.client(`agent-${name}`);
    await c.rdwrText('ctl', `cwd ${cwd}\n${MEMORY_TOOLS.map((t) => `load ${t}`).join('\n')}\n`);
    clients[name] = c;
  }
});

afterAll(async () => {
  await env?.close();
  if (savedXdg === undefined) delete process.env.XDG_DATA_HOME;
  else process.env.XDG_DATA_HOME = savedXdg;
  rmSync(root, { recursive: true, force: true });
});

const call = (who: 'a' | 'b', tool: string, args: Record<string, unknown>): Promise<ProcResult> =>
  env.call(clients[who]!, { tool, args });

describe('memory tools through toolsrv, sandboxed', () => {
  it('runs in the sandbox and creates the store under $XDG_DATA_HOME/ollie/memory', async () => {
    const r = await call('a', 'memory_remember', {
      text: 'The build needs npm run build:node before the tests: tools import dist/.',
      tags: ['build', 'tests'],
    });
    expect(r.status).toBe('exited');
    expect(r.output).toBe(`remembered #1 (project ${projA})\n`);
    expect(r.bypassed).toBeUndefined();
    expect(existsSync(join(root, 'share', 'ollie', 'memory', 'memory.db'))).toBe(true);
  });

  it('scopes by project (the git root above the cwd) and shares global memories', async () => {
    await call('a', 'memory_remember', { text: 'The user prefers tabs over spaces in every project.', global: true });
    await call('b', 'memory_remember', { text: 'Project b deploys with rsync to the staging host.' });
    const fromB = (await call('b', 'memory_recall', { query: 'build tests tabs rsync' })).output;
    expect(fromB).toContain('#2 (global');
    expect(fromB).toContain('#3 (project');
    expect(fromB).not.toContain('npm run build:node');
    const fromA = (await call('a', 'memory_recall', { query: 'how do the tests build', scope: 'project' })).output;
    expect(fromA).toMatch(
      /^1 memory, best first \(full text\):\n\n#1 \(project, .*tags: build tests\)\nThe build needs npm run build:node/,
    );
  });

  it('recalls by full text with stemming and says when nothing matches', async () => {
    expect((await call('a', 'memory_recall', { query: 'building' })).output).toContain('#1 (project');
    expect((await call('a', 'memory_recall', { query: 'kubernetes' })).output).toBe(
      `no memories match "kubernetes" (project ${projA} and global)\n`,
    );
    // Query syntax of FTS5 in the model's words is taken literally, not as operators.
    expect((await call('a', 'memory_recall', { query: 'NOT "build* OR (' })).output).toContain('#1');
  });

  it('wakes with this project and the global memories, and zooms with neighbours', async () => {
    const w = (await call('a', 'memory_wake', {})).output;
    expect(w).toMatch(new RegExp(`^Memories for ${projA} \\(2 shown; 1 stored for this project, 1 global`));
    expect(w).not.toContain('rsync');
    await call('a', 'memory_remember', { text: 'Decided: the CLI uses commander 14 (15 needs Node 22).' });
    await call('a', 'memory_remember', { text: 'Landlock ABI 6 is needed for signal scoping.' });
    const z = (await call('a', 'memory_zoom', { id: '#4', radius: 1 })).output;
    expect(
      z
        .split('\n')
        .filter((l) => /^(> )?#\d+ \(/.test(l))
        .map((l) => l.replace(/ \(.*/, '')),
    ).toEqual(['#1', '> #4', '#5']);
    expect((await call('a', 'memory_zoom', { id: 99 })).output).toBe('memory_zoom: no memory #99\n');
  });

  it('reports bad arguments in words, exit 1', async () => {
    const r = await call('a', 'memory_remember', { text: '  ' });
    expect([r.exit, r.output]).toEqual([1, 'memory_remember: argument text must be a non-empty string\n']);
    expect((await call('a', 'memory_recall', { query: 'x', scope: 'everywhere' })).status).toBe('refused');
  });

  it('takes the write lock on the memory directory for memory_remember, none for recall', async () => {
    const memDir = join(root, 'share', 'ollie', 'memory');
    expect(
      env.ts.core.catalog.resolve('memory_remember', {
        platform: process.platform,
        arch: process.arch,
        env: {},
        path: [],
      }).fields.lockPath,
    ).toBe(memDir);
    const release = await env.ts.core.locks.acquire({ kind: 'path', path: memDir });
    let done = false;
    const write = call('a', 'memory_remember', { text: 'Written after the lock was released.' }).then(
      (r) => ((done = true), r),
    );
    // A read goes past the held lock; the write waits for it.
    expect((await call('a', 'memory_recall', { query: 'Landlock' })).output).toContain('#5');
    await until(() => env.ts.core.locks.snapshot().waiting.length > 0, 'the write to queue on the lock');
    expect(done).toBe(false);
    expect(env.ts.core.locks.snapshot().waiting).toEqual([{ kind: 'path', path: memDir }]);
    release();
    expect((await write).output).toMatch(/^remembered #6 /);
  });

  it('grants the store and nothing more: the daemon database and the rest of the disk stay closed', async () => {
    writeFileSync(join(root, 'share', 'ollie', 'ollie.db'), 'daemon database');
    await clients.a!.rdwrText('ctl', 'load probe\n');
    const out = (await call('a', 'probe', {})).output;
    expect(out).toContain(`wrote ${join(root, 'share', 'ollie', 'memory', 'ok.txt')}`);
    expect(out).toContain(`EACCES ${join(root, 'share', 'ollie', 'ollie.db')}`);
    expect(out).toMatch(/(EACCES|ENOENT) .*models\/x/);
    expect(out).toContain(`EACCES ${join(root, 'outside.txt')}`);
    expect(out).toContain(`XDG ${join(root, 'share')}`);
  });

  it('keeps the memories in the store that other agents read', () => {
    const s = MemoryStore.open(join(root, 'share', 'ollie', 'memory', 'memory.db'));
    expect(s.count()).toBe(6);
    expect(s.count('')).toBe(1);
    s.close();
  });
});
