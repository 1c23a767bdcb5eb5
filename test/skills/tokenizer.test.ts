import { describe, expect, it } from 'vitest';
import { TokenizerError, WordPieceTokenizer } from '../../src/olliesrv/skills/tokenizer.js';
import { tinyModel } from '../../src/olliesrv/skills/tiny-model.js';

const VOCAB = [
  'un',
  '##aff',
  '##able',
  'hello',
  'world',
  ',',
  '!',
  'runn',
  '##ing',
  'run',
  '##s',
  'cafe',
  'naive',
  '中',
  '文',
  'a',
  '##b',
  '##c',
  'abc',
  'test',
  '##er',
  '##ers',
];

function tok(o: { lowercase?: boolean; maxLength?: number } = {}): WordPieceTokenizer {
  return new WordPieceTokenizer(tinyModel({ vocab: VOCAB, dim: 4, ...o }).tokenizer);
}

describe('WordPiece tokenizer (tokenizer.json)', () => {
  it("splits words into the longest pieces first, with ## continuations (BERT's own example)", () => {
    const t = tok();
    expect(t.wordPiece('unaffable')).toEqual(['un', '##aff', '##able']);
    expect(t.wordPiece('running')).toEqual(['runn', '##ing']);
    expect(t.wordPiece('runs')).toEqual(['run', '##s']);
    // Longest match first: "abc" is a word of its own, so it is not a + ##b + ##c.
    expect(t.wordPiece('abc')).toEqual(['abc']);
    expect(t.wordPiece('testers')).toEqual(['test', '##ers']);
  });

  it('makes the whole word [UNK] when any part has no piece', () => {
    const t = tok();
    expect(t.wordPiece('unaffablez')).toEqual(['[UNK]']);
    expect(t.wordPiece('xyz')).toEqual(['[UNK]']);
    expect(t.wordPiece('a'.repeat(101))).toEqual(['[UNK]']);
  });

  it('normalizes like BertNormalizer: lowercase, accents stripped, controls dropped, CJK split', () => {
    const t = tok();
    expect(t.normalize('Café NAÏVE')).toBe('cafe naive');
    expect(t.normalize('a\u0000b\u200bc\td')).toBe('abc d');
    expect(t.preTokenize(t.normalize('中文'))).toEqual(['中', '文']);
  });

  it('splits punctuation off as tokens of their own', () => {
    expect(tok().preTokenize('hello, world!')).toEqual(['hello', ',', 'world', '!']);
    expect(tok().preTokenize('a$b`c')).toEqual(['a', '$', 'b', '`', 'c']);
  });

  it('encodes with [CLS] and [SEP] and the vocabulary ids', () => {
    const t = tok();
    const e = t.encode('Hello, World! Unaffable');
    expect(e.tokens).toEqual(['[CLS]', 'hello', ',', 'world', '!', 'un', '##aff', '##able', '[SEP]']);
    expect(e.ids[0]).toBe(t.clsId);
    expect(e.ids.at(-1)).toBe(t.sepId);
    expect(e.ids[1]).toBe(t.vocab.get('hello'));
  });

  it('keeps case and accents when the tokenizer says lowercase: false (strip_accents follows it)', () => {
    const t = tok({ lowercase: false });
    expect(t.normalize('Café')).toBe('Café');
    expect(t.encode('Hello').tokens).toEqual(['[CLS]', '[UNK]', '[SEP]']);
  });

  it('truncates to max_length, [SEP] included', () => {
    const t = tok({ maxLength: 6 });
    expect(t.maxLength).toBe(6);
    const e = t.encode('hello world hello world hello world');
    expect(e.tokens).toEqual(['[CLS]', 'hello', 'world', 'hello', 'world', '[SEP]']);
  });

  it('refuses a tokenizer.json that is not WordPiece', () => {
    expect(() => new WordPieceTokenizer({ model: { type: 'BPE', vocab: {} } })).toThrow(TokenizerError);
    expect(() => new WordPieceTokenizer({ model: { type: 'WordPiece', vocab: { a: 0 } } })).toThrow(/no \[UNK\]/);
  });
});
