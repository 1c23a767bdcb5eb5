/**
 * A BERT-shaped ONNX model small enough to write by hand, for the tests and bench/embed: the same inputs and
 * output as all-MiniLM-L6-v2 (input_ids, attention_mask, token_type_ids int64 [batch, seq] → last_hidden_state
 * float [batch, seq, dim]), with a tokenizer.json of the same format. The graph is an embedding lookup:
 *
 *   last_hidden_state = Gather(words, input_ids) + Gather(types, token_type_ids) + Gather(masks, attention_mask)
 *
 * (`types` and `masks` are zeros, there so that every input is used.) Each word's vector is given, or drawn
 * from a seeded generator; [PAD]'s is large on purpose, so that pooling which forgets the mask shows.
 *
 * The ONNX file is protobuf, written here with a small encoder (field numbers from onnx.proto), because no
 * ONNX writer is available offline.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// ---- protobuf ----------------------------------------------------------------------------------------

class Pb {
  private readonly parts: Uint8Array[] = [];
  private static varint(n: bigint): Uint8Array {
    const out: number[] = [];
    let v = BigInt.asUintN(64, n);
    while (v >= 0x80n) {
      out.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    out.push(Number(v));
    return Uint8Array.from(out);
  }
  private key(field: number, wire: number): void {
    this.parts.push(Pb.varint(BigInt((field << 3) | wire)));
  }
  int(field: number, v: number | bigint): this {
    this.key(field, 0);
    this.parts.push(Pb.varint(BigInt(v)));
    return this;
  }
  bytes(field: number, b: Uint8Array): this {
    this.key(field, 2);
    this.parts.push(Pb.varint(BigInt(b.length)), b);
    return this;
  }
  str(field: number, s: string): this {
    return this.bytes(field, new TextEncoder().encode(s));
  }
  msg(field: number, m: Pb): this {
    return this.bytes(field, m.finish());
  }
  finish(): Uint8Array {
    const n = this.parts.reduce((a, p) => a + p.length, 0);
    const out = new Uint8Array(n);
    let o = 0;
    for (const p of this.parts) {
      out.set(p, o);
      o += p.length;
    }
    return out;
  }
}

const FLOAT = 1;
const INT64 = 7;

/** TensorProto: dims=1, data_type=2, name=8, raw_data=9 (little-endian floats). */
function floatTensor(name: string, dims: number[], data: Float32Array): Pb {
  const t = new Pb();
  for (const d of dims) t.int(1, d);
  t.int(2, FLOAT).str(8, name);
  return t.bytes(9, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
}

/** ValueInfoProto name=1, type=2 → TypeProto tensor_type=1 → elem_type=1, shape=2 → dim=1 → dim_param=2. */
function valueInfo(name: string, elem: number, dims: string[]): Pb {
  const shape = new Pb();
  for (const d of dims) shape.msg(1, new Pb().str(2, d));
  return new Pb().str(1, name).msg(2, new Pb().msg(1, new Pb().int(1, elem).msg(2, shape)));
}

/** NodeProto: input=1, output=2, name=3, op_type=4. */
function node(op: string, inputs: string[], output: string): Pb {
  const n = new Pb();
  for (const i of inputs) n.str(1, i);
  return n.str(2, output).str(3, output).str(4, op);
}

// ---- the model ---------------------------------------------------------------------------------------

export const SPECIAL = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];

export interface TinyModelOptions {
  /** Words and word pieces (`##ing`); the special tokens come first on their own. */
  vocab: readonly string[];
  dim: number;
  /** Vectors for some tokens (length dim); the others are drawn from the seed. */
  vectors?: Record<string, readonly number[]>;
  seed?: number;
  /** tokenizer.json's truncation max_length. */
  maxLength?: number;
  lowercase?: boolean;
}

/** The ONNX bytes and the tokenizer.json object of a tiny model. */
export function tinyModel(o: TinyModelOptions): {
  onnx: Uint8Array;
  tokenizer: Record<string, unknown>;
  table: Float32Array;
  vocab: string[];
} {
  const vocab = [...SPECIAL, ...o.vocab.filter((w) => !SPECIAL.includes(w))];
  const dim = o.dim;
  // mulberry32: a seeded generator, so a model is the same on every run.
  let s = (o.seed ?? 1) >>> 0;
  const rnd = (): number => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5;
  };
  const table = new Float32Array(vocab.length * dim);
  vocab.forEach((w, i) => {
    const given = o.vectors?.[w];
    for (let d = 0; d < dim; d++) {
      let v: number;
      if (given) v = given[d] ?? 0;
      else if (w === '[PAD]')
        v = 100; // large: must never reach a pooled vector
      else if (w === '[CLS]' || w === '[SEP]') v = 0;
      else v = rnd();
      table[i * dim + d] = v;
    }
  });
  const graph = new Pb()
    .msg(1, node('Gather', ['words', 'input_ids'], 'w'))
    .msg(1, node('Gather', ['types', 'token_type_ids'], 't'))
    .msg(1, node('Gather', ['masks', 'attention_mask'], 'm'))
    .msg(1, node('Add', ['w', 't'], 'wt'))
    .msg(1, node('Add', ['wt', 'm'], 'last_hidden_state'))
    .str(2, 'tiny-bert')
    .msg(5, floatTensor('words', [vocab.length, dim], table))
    .msg(5, floatTensor('types', [2, dim], new Float32Array(2 * dim)))
    .msg(5, floatTensor('masks', [2, dim], new Float32Array(2 * dim)))
    .msg(11, valueInfo('input_ids', INT64, ['batch', 'sequence']))
    .msg(11, valueInfo('attention_mask', INT64, ['batch', 'sequence']))
    .msg(11, valueInfo('token_type_ids', INT64, ['batch', 'sequence']))
    .msg(12, valueInfo('last_hidden_state', FLOAT, ['batch', 'sequence', String(dim)]));
  // ModelProto: ir_version=1, producer_name=2, graph=7, opset_import=8 (domain "" = ai.onnx, version 13).
  const model = new Pb().int(1, 8).str(2, 'ollie-tiny-model').msg(7, graph).msg(8, new Pb().str(1, '').int(2, 13));
  const tokenizer = {
    version: '1.0',
    truncation: { direction: 'Right', max_length: o.maxLength ?? 128, strategy: 'LongestFirst', stride: 0 },
    padding: null,
    added_tokens: SPECIAL.map((content, id) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: {
      type: 'BertNormalizer',
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: o.lowercase ?? true,
    },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: { type: 'TemplateProcessing' },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab: Object.fromEntries(vocab.map((w, i) => [w, i])),
    },
  };
  return { onnx: model.finish(), tokenizer, table, vocab };
}

/** Writes model.onnx and tokenizer.json into `dir` (created). */
export function writeTinyModel(dir: string, o: TinyModelOptions): { vocab: string[]; table: Float32Array } {
  const m = tinyModel(o);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'model.onnx'), m.onnx);
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(m.tokenizer));
  return { vocab: m.vocab, table: m.table };
}
