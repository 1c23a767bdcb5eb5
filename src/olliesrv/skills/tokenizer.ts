/**
 * A BERT WordPiece tokenizer read from a Hugging Face `tokenizer.json` (the format all-MiniLM-L6-v2 ships):
 * the BertNormalizer (clean text, CJK spacing, lowercasing, accent stripping as configured), the
 * BertPreTokenizer (split on whitespace and punctuation), WordPiece (greedy longest match, `##` continuations,
 * `[UNK]` for a word with no split or longer than max_input_chars_per_word), then `[CLS] … [SEP]` and
 * truncation to the configured max length. Written here because no tokenizer package runs offline without
 * native builds, and BERT's algorithm is small.
 */
import { readFileSync } from 'node:fs';

export interface Encoding {
  ids: number[];
  /** The tokens the ids stand for (for tests and debugging). */
  tokens: string[];
}

interface TokenizerJson {
  normalizer?: {
    type?: string;
    clean_text?: boolean;
    handle_chinese_chars?: boolean;
    strip_accents?: boolean | null;
    lowercase?: boolean;
  } | null;
  truncation?: { max_length?: number } | null;
  model?: {
    type?: string;
    vocab?: Record<string, number>;
    unk_token?: string;
    continuing_subword_prefix?: string;
    max_input_chars_per_word?: number;
  };
  added_tokens?: Array<{ id: number; content: string }>;
}

export class TokenizerError extends Error {
  override name = 'TokenizerError';
}

/** Longest sequence a BERT-class model accepts (position embeddings). */
const BERT_MAX = 512;

const isWhitespace = (c: number): boolean =>
  c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d || /\p{Zs}/u.test(String.fromCodePoint(c));
const isControl = (c: number): boolean =>
  c !== 0x09 && c !== 0x0a && c !== 0x0d && /\p{Cc}|\p{Cf}/u.test(String.fromCodePoint(c));
// BERT counts all non-alphanumeric ASCII as punctuation ($, +, ^, `…), plus Unicode's P* categories.
const isPunct = (c: number): boolean =>
  (c >= 33 && c <= 47) ||
  (c >= 58 && c <= 64) ||
  (c >= 91 && c <= 96) ||
  (c >= 123 && c <= 126) ||
  /\p{P}/u.test(String.fromCodePoint(c));
const isCjk = (c: number): boolean =>
  (c >= 0x4e00 && c <= 0x9fff) ||
  (c >= 0x3400 && c <= 0x4dbf) ||
  (c >= 0x20000 && c <= 0x2a6df) ||
  (c >= 0x2a700 && c <= 0x2b73f) ||
  (c >= 0x2b740 && c <= 0x2b81f) ||
  (c >= 0x2b820 && c <= 0x2ceaf) ||
  (c >= 0xf900 && c <= 0xfaff) ||
  (c >= 0x2f800 && c <= 0x2fa1f);

export class WordPieceTokenizer {
  readonly vocab: Map<string, number>;
  readonly maxLength: number;
  private readonly lowercase: boolean;
  private readonly stripAccents: boolean;
  private readonly cleanText: boolean;
  private readonly chinese: boolean;
  private readonly prefix: string;
  private readonly maxWordChars: number;
  private readonly unk: string;
  private readonly unkId: number;
  readonly clsId: number;
  readonly sepId: number;
  readonly padId: number;

  constructor(json: unknown, opts: { maxLength?: number } = {}) {
    const j = json as TokenizerJson;
    const m = j?.model;
    if (!m || m.type !== 'WordPiece' || !m.vocab || typeof m.vocab !== 'object') {
      throw new TokenizerError(`not a WordPiece tokenizer.json (model.type is ${JSON.stringify(m?.type)})`);
    }
    this.vocab = new Map(Object.entries(m.vocab));
    for (const t of j.added_tokens ?? []) this.vocab.set(t.content, t.id);
    const n = j.normalizer ?? {};
    this.lowercase = n.lowercase ?? true;
    // tokenizers: strip_accents null means "follow lowercase" (as BERT's original code did).
    this.stripAccents = n.strip_accents ?? this.lowercase;
    this.cleanText = n.clean_text ?? true;
    this.chinese = n.handle_chinese_chars ?? true;
    this.prefix = m.continuing_subword_prefix ?? '##';
    this.maxWordChars = m.max_input_chars_per_word ?? 100;
    this.unk = m.unk_token ?? '[UNK]';
    const id = (t: string): number => {
      const v = this.vocab.get(t);
      if (v === undefined) throw new TokenizerError(`the vocabulary has no ${t}`);
      return v;
    };
    this.unkId = id(this.unk);
    this.clsId = id('[CLS]');
    this.sepId = id('[SEP]');
    this.padId = this.vocab.get('[PAD]') ?? 0;
    this.maxLength = Math.min(opts.maxLength ?? j.truncation?.max_length ?? 256, BERT_MAX);
  }

  static fromFile(path: string, opts: { maxLength?: number } = {}): WordPieceTokenizer {
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(path, 'utf8'));
    } catch (e) {
      throw new TokenizerError(`${path}: ${(e as Error).message}`);
    }
    try {
      return new WordPieceTokenizer(json, opts);
    } catch (e) {
      throw new TokenizerError(`${path}: ${(e as Error).message}`);
    }
  }

  /** BertNormalizer. */
  normalize(text: string): string {
    let out = '';
    for (const ch of text) {
      const c = ch.codePointAt(0)!;
      if (this.cleanText) {
        if (c === 0 || c === 0xfffd || isControl(c)) continue;
        if (isWhitespace(c)) {
          out += ' ';
          continue;
        }
      }
      out += this.chinese && isCjk(c) ? ` ${ch} ` : ch;
    }
    if (this.stripAccents) out = out.normalize('NFD').replace(/\p{Mn}/gu, '');
    if (this.lowercase) out = out.toLowerCase();
    return out;
  }

  /** BertPreTokenizer: words split on whitespace, each punctuation character a word of its own. */
  preTokenize(text: string): string[] {
    const words: string[] = [];
    let cur = '';
    for (const ch of text) {
      const c = ch.codePointAt(0)!;
      if (isWhitespace(c)) {
        if (cur) words.push(cur);
        cur = '';
      } else if (isPunct(c)) {
        if (cur) words.push(cur);
        words.push(ch);
        cur = '';
      } else cur += ch;
    }
    if (cur) words.push(cur);
    return words;
  }

  /** WordPiece of one word: greedy longest match first; the whole word is [UNK] when any piece has no match. */
  wordPiece(word: string): string[] {
    const chars = [...word];
    if (chars.length > this.maxWordChars) return [this.unk];
    const pieces: string[] = [];
    let start = 0;
    while (start < chars.length) {
      let end = chars.length;
      let found: string | undefined;
      while (start < end) {
        const sub = (start > 0 ? this.prefix : '') + chars.slice(start, end).join('');
        if (this.vocab.has(sub)) {
          found = sub;
          break;
        }
        end--;
      }
      if (found === undefined) return [this.unk];
      pieces.push(found);
      start = end;
    }
    return pieces;
  }

  /** The tokens of `text` between [CLS] and [SEP], truncated to the max length. */
  encode(text: string): Encoding {
    const tokens = ['[CLS]'];
    const room = this.maxLength - 1;
    outer: for (const w of this.preTokenize(this.normalize(text))) {
      for (const p of this.wordPiece(w)) {
        if (tokens.length >= room) break outer;
        tokens.push(p);
      }
    }
    tokens.push('[SEP]');
    return { tokens, ids: tokens.map((t) => this.vocab.get(t) ?? this.unkId) };
  }
}
