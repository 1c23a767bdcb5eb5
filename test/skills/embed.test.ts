import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cosine, findModel, OnnxEmbedder } from '../../src/olliesrv/skills/embed.js';
import { Bm25, Index, words } from '../../src/olliesrv/skills/index.js';
import { writeTinyModel } from '../../src/olliesrv/skills/tiny-model.js';
import { topicModel, DIM } from './fixtures.js';

let root: string;
let emb: OnnxEmbedder;
beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'ollie-embed-'));
  emb = await OnnxEmbedder.load(topicModel(join(root, 'models')).dir);
});
afterAll(async () => {
  await emb.close();
  rmSync(root, { recursive: true, force: true });
});

describe('ONNX inference with a generated model', () => {
  it('loads model.onnx and tokenizer.json and reports the dimension', () => {
    expect(emb.dim).toBe(DIM);
    expect(findModel('all-MiniLM-L6-v2', join(root, 'models'))).toBe(join(root, 'models', 'all-MiniLM-L6-v2'));
    expect(findModel('missing', join(root, 'models'))).toBeUndefined();
  });

  it('mean-pools the token vectors over the attention mask and L2-normalizes', async () => {
    const dir = join(root, 'exact');
    // Known vectors: [CLS] and [SEP] are zero, so "a b" pools to (a + b) / 4 before normalizing.
    const { vocab, table } = writeTinyModel(dir, {
      vocab: ['a', 'b'],
      dim: 3,
      vectors: { a: [1, 0, 0], b: [0, 2, 0] },
    });
    const e = await OnnxEmbedder.load(dir);
    const [v] = await e.embed(['a b']);
    const n = Math.sqrt(0.25 ** 2 + 0.5 ** 2);
    expect([...v!].map((x) => +x.toFixed(5))).toEqual([+(0.25 / n).toFixed(5), +(0.5 / n).toFixed(5), 0]);
    // [PAD]'s row is huge: had padding leaked into the pooling, the short text of a batch would point along (1,1,1).
    expect(table[vocab.indexOf('[PAD]') * 3]).toBe(100);
    const [short, long] = await e.embed(['a', 'a b a b a b a b']);
    expect([...short!].map((x) => +x.toFixed(5))).toEqual([1, 0, 0]);
    expect(Math.hypot(...long!)).toBeCloseTo(1, 5);
    await e.close();
  });

  it('gives the same vector for a text alone or in a padded batch', async () => {
    const texts = ['write a unit test', 'merge conflict in git after a rebase of my branch', 'crash'];
    const batch = await emb.embed(texts);
    for (let i = 0; i < texts.length; i++) {
      const [alone] = await emb.embed([texts[i]!]);
      expect(cosine(alone!, batch[i]!)).toBeCloseTo(1, 5);
    }
    expect(batch).toHaveLength(3);
    for (const v of batch) expect(Math.hypot(...v)).toBeCloseTo(1, 5);
  });

  it('embeds more texts than one inference batch holds', async () => {
    const texts = Array.from({ length: 70 }, (_, i) => (i % 2 ? 'git commit' : 'unit test'));
    const vs = await emb.embed(texts);
    expect(vs).toHaveLength(70);
    expect(cosine(vs[0]!, vs[68]!)).toBeCloseTo(1, 5);
  });

  it('says what is wrong with a broken model file', async () => {
    const dir = join(root, 'broken');
    mkdirSync(dir);
    writeFileSync(join(dir, 'model.onnx'), 'not a model');
    writeFileSync(
      join(dir, 'tokenizer.json'),
      JSON.stringify(
        JSON.parse(
          JSON.stringify(
            (await import('../../src/olliesrv/skills/tiny-model.js')).tinyModel({ vocab: ['a'], dim: 2 }).tokenizer,
          ),
        ),
      ),
    );
    await expect(OnnxEmbedder.load(dir)).rejects.toThrow(/broken\/model\.onnx/);
  });
});

describe('ranking', () => {
  const docs = [
    'writing-tests: how to write focused unit tests, fix flaky tests, assert behaviour',
    'git-workflow: commit, branch, rebase and resolve merge conflicts',
    'debugging: find the cause of a crash, an error or a failing test',
    'code-review: review a diff or pull request and write comments',
  ];

  it('ranks by cosine with the embeddings, best first, above the threshold only', async () => {
    const idx = await Index.build(docs, (d) => d, emb);
    expect(idx.method).toBe('embeddings');
    const q = await idx.query('how do I resolve a merge conflict after rebase');
    const m = idx.match(q, { limit: 3, threshold: 0.3 });
    expect(m[0]!.item).toBe(docs[1]);
    expect(m.every((x, i) => i === 0 || x.score <= m[i - 1]!.score)).toBe(true);
    expect(m.every((x) => x.score >= 0.3)).toBe(true);
    expect(idx.match(await idx.query('unit test flaky'), { limit: 1, threshold: 0 })[0]!.item).toBe(docs[0]);
    expect(idx.match(await idx.query('kubernetes deployment cluster'), { limit: 3, threshold: 0.5 })).toEqual([]);
  });

  it('falls back to BM25 without a model, with scores in [0, 1]', async () => {
    const idx = await Index.build(docs, (d) => d);
    expect(idx.method).toBe('bm25');
    const q = await idx.query('How do I fix the flaky tests?');
    expect(q.vec).toBeUndefined();
    const m = idx.match(q, { limit: 3, threshold: 0.1 });
    expect(m[0]!.item).toBe(docs[0]);
    for (const x of m) {
      expect(x.score).toBeGreaterThan(0);
      expect(x.score).toBeLessThanOrEqual(1);
    }
    expect(idx.match(await idx.query('weather in Paris'), { limit: 3, threshold: 0 })).toEqual([]);
  });

  it('BM25 prefers the rarer word and the shorter document', () => {
    const b = new Bm25(['apple banana', 'apple cherry', 'apple banana cherry durian elderberry fig grape']);
    const [s0, s1, s2] = b.scores('banana');
    expect(s1).toBe(0);
    expect(s0!).toBeGreaterThan(s2!);
    expect(words('Testing the tests: tested!')).toEqual(['test', 'test', 'test']);
  });
});
