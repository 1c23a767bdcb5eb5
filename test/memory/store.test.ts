import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ftsQuery, MemoryStore, projectOf } from '../../src/olliesrv/memory/store.js';
import { memoryTool } from '../../src/olliesrv/memory/tool.js';
import { OnnxEmbedder } from '../../src/olliesrv/skills/embed.js';
import { topicModel } from '../skills/fixtures.js';

let root: string;
let store: MemoryStore;
let emb: OnnxEmbedder;
beforeAll(async () => {
  emb = await OnnxEmbedder.load(topicModel(mkdtempSync(join(tmpdir(), 'ollie-memmodel-'))).dir);
});
afterAll(() => emb.close());
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'ollie-memory-'));
  store = MemoryStore.open(join(root, 'memory', 'memory.db'));
});
afterEach(() => {
  store.close();
  rmSync(root, { recursive: true, force: true });
});

describe('the memory store', () => {
  it('opens in WAL mode and keeps memories across opens', () => {
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    store.remember({ text: 'kept', project: '/p' });
    store.close();
    store = MemoryStore.open(join(root, 'memory', 'memory.db'));
    expect(store.get(1)?.text).toBe('kept');
  });

  it('recalls by full text within the scope asked for', () => {
    store.remember({ text: 'Tests need a build first', project: '/a', tags: ['Build Steps'] });
    store.remember({ text: 'Global: answer in English', project: '' });
    store.remember({ text: 'Project b builds with make', project: '/b' });
    expect(store.recall('build', { project: '/a' }).map((m) => m.id)).toEqual([1]);
    expect(store.recall('builds', { project: '/b', scope: 'project' }).map((m) => m.id)).toEqual([3]);
    expect(store.recall('english build', { project: '/b', scope: 'global' }).map((m) => m.id)).toEqual([2]);
    expect(
      store
        .recall('english build', { project: '/b', scope: 'all' })
        .map((m) => m.id)
        .sort(),
    ).toEqual([2, 3]);
    expect(store.get(1)?.tags).toEqual(['build-steps']);
    expect(store.recall('', { project: '/a' })).toEqual([]);
  });

  it('ranks the better full-text match first', () => {
    store.remember({ text: 'sqlite is used', project: '/a' });
    store.remember({ text: 'sqlite WAL mode: sqlite readers do not block the sqlite writer', project: '/a' });
    expect(store.recall('sqlite writer', { project: '/a' }).map((m) => m.id)).toEqual([2, 1]);
  });

  it('fuses full text with embeddings: a memory with other words but the same meaning is found', async () => {
    const add = async (text: string): Promise<void> =>
      void store.remember({ text, project: '/a', vec: (await emb.embed([text]))[0], model: 'tiny' });
    await add('Resolve a merge conflict with rebase, then commit');
    await add('A flaky unit test failed in CI');
    const q = 'git branch';
    expect(store.recall(q, { project: '/a' })).toEqual([]);
    const hits = store.recall(q, { project: '/a', vec: (await emb.embed([q]))[0], model: 'tiny' });
    expect(hits.map((m) => m.id)).toEqual([1]);
    // Vectors of another model are not compared.
    expect(store.recall(q, { project: '/a', vec: (await emb.embed([q]))[0], model: 'other' })).toEqual([]);
  });

  it('zooms on a memory with its neighbours in the same project', () => {
    for (let i = 1; i <= 6; i++) store.remember({ text: `m${i}`, project: i === 3 ? '/other' : '/a' });
    const z = store.zoom(4, 2)!;
    expect([z.before.map((m) => m.text), z.focus.text, z.after.map((m) => m.text)]).toEqual([
      ['m1', 'm2'],
      'm4',
      ['m5', 'm6'],
    ]);
    expect(store.zoom(1, 1)!.before).toEqual([]);
    expect(store.zoom(42)).toBeUndefined();
  });

  it('quotes every word of a query for FTS5 and drops stop words', () => {
    expect(ftsQuery('NOT a* OR "b" (c) AND d*')).toBe('"b" OR "c" OR "d"');
    expect(ftsQuery('the of and')).toBe('');
  });

  it('takes the git root above the cwd as the project', () => {
    mkdirSync(join(root, 'repo', '.git'), { recursive: true });
    mkdirSync(join(root, 'repo', 'src', 'deep'), { recursive: true });
    expect(projectOf(join(root, 'repo', 'src', 'deep'))).toBe(join(root, 'repo'));
    expect(projectOf(join(root, 'memory'))).toBe(join(root, 'memory'));
  });
});

describe('the memory tools (in process)', () => {
  it('wake puts memories matching the task first, then the project, then global ones', async () => {
    const ctx = { cwd: join(root, 'p'), store, embedder: emb };
    mkdirSync(ctx.cwd);
    await memoryTool('remember', { text: 'Resolve merge conflicts by rebase on main' }, ctx);
    await memoryTool('remember', { text: 'The style guide: two spaces' }, ctx);
    await memoryTool('remember', { text: 'User: be brief', global: true }, ctx);
    const w = await memoryTool('wake', { task: 'fix the git branch', limit: 3 }, ctx);
    expect(
      w
        .split('\n')
        .filter((l) => /^#\d/.test(l))
        .map((l) => l.split(' ')[0]),
    ).toEqual(['#1', '#2', '#3']);
    expect(await memoryTool('remember', { text: 'x' }, ctx)).toBe(
      `remembered #4 (project ${ctx.cwd}, with an embedding)\n`,
    );
    await expect(memoryTool('recall', { query: 'x', limit: 0 }, ctx)).rejects.toThrow(
      'argument limit must be a whole number from 1 to 50',
    );
    await expect(memoryTool('remember', { text: 'x', tags: 'a' }, ctx)).rejects.toThrow(
      'argument tags must be a list of strings',
    );
  });
});
