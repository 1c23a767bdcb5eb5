/**
 * A tiny model whose vectors carry topics: each topic word points along its own axis (plus a little noise), other
 * words are short random vectors. So "how do I write a unit test" lands near descriptions about testing, as
 * with a real sentence-transformer, and the tests can say which skill must match.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeTinyModel } from '../../src/olliesrv/skills/tiny-model.js';

export const DIM = 16;
export const TOPICS: string[][] = [
  ['test', 'tests', 'testing', 'unit', 'assert', 'flaky', 'spec'],
  ['git', 'commit', 'branch', 'merge', 'rebase', 'conflict', 'conflicts'],
  ['bug', 'debug', 'debugging', 'crash', 'error', 'stack', 'failing'],
  ['review', 'reviewing', 'diff', 'pull', 'request', 'comments'],
  ['file', 'files', 'search', 'grep', 'read', 'contents', 'pattern'],
  ['shell', 'command', 'run', 'bash', 'script'],
  ['memory', 'remember', 'recall', 'decision', 'decisions'],
  ['deploy', 'deployment', 'kubernetes', 'cluster'],
];
export const GENERIC = [
  'how',
  'do',
  'i',
  'write',
  'a',
  'the',
  'to',
  'for',
  'and',
  'of',
  'with',
  'in',
  'my',
  'this',
  'fix',
  'please',
  'code',
  'make',
  'new',
  'some',
  'about',
  'it',
  ',',
  '.',
  '!',
  ':',
  '(',
  ')',
  '-',
  '##s',
  '##ing',
  'un',
  '##aff',
  '##able',
  'hello',
  'world',
];

export function topicVectors(): Record<string, number[]> {
  let s = 7;
  const rnd = (): number => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 2147483648 - 0.5;
  };
  const v: Record<string, number[]> = {};
  TOPICS.forEach((words, axis) => {
    for (const w of words) v[w] = Array.from({ length: DIM }, (_, d) => (d === axis ? 1 : 0) + 0.1 * rnd());
  });
  for (const w of GENERIC) v[w] = Array.from({ length: DIM }, () => 0.15 * rnd());
  v['[UNK]'] = Array.from({ length: DIM }, () => 0.15 * rnd());
  return v;
}

/** Writes the topic model into a fresh models dir; returns { modelsDir, dir } (dir = modelsDir/all-MiniLM-L6-v2). */
export function topicModel(root = mkdtempSync(join(tmpdir(), 'ollie-model-'))): { modelsDir: string; dir: string } {
  const dir = join(root, 'all-MiniLM-L6-v2');
  writeTinyModel(dir, { vocab: [...TOPICS.flat(), ...GENERIC], dim: DIM, vectors: topicVectors(), maxLength: 64 });
  return { modelsDir: root, dir };
}
