/**
 * Sentence embeddings with onnxruntime-node: a BERT-class sentence-transformer exported to ONNX (inputs
 * input_ids, attention_mask and token_type_ids, int64 [batch, seq]; output last_hidden_state float
 * [batch, seq, dim]), mean-pooled over the attention mask and L2-normalized, so that a dot product is the
 * cosine. all-MiniLM-L6-v2 (384-d) is the default. A model is a directory holding `model.onnx` and its
 * `tokenizer.json`, under $XDG_DATA_HOME/ollie/models/NAME (`ollie models install` puts it there).
 *
 * onnxruntime-node is imported only when a model is present: without one, nothing here costs start-up time. It is
 * an optional dependency: when it is not installed, loading a model fails with that reason and callers fall back
 * to matching by words.
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type * as Ort from 'onnxruntime-node';
import { dataDir } from '../../platform/paths.js';
import { WordPieceTokenizer } from './tokenizer.js';

export const DEFAULT_MODEL = 'all-MiniLM-L6-v2';
/** Texts embedded per inference call: padding costs grow with the longest text of a batch. */
const BATCH = 32;

/** Where models live: $XDG_DATA_HOME/ollie/models. */
export function modelsDir(): string {
  return join(dataDir(), 'models');
}

/** The model directory for `name` (or an absolute path as given), when it holds model.onnx and tokenizer.json. */
export function findModel(name = DEFAULT_MODEL, dir = modelsDir()): string | undefined {
  const d = name.startsWith('/') ? name : join(dir, name);
  const ok = (f: string): boolean => {
    try {
      return statSync(join(d, f)).isFile();
    } catch {
      return false;
    }
  };
  return existsSync(d) && ok('model.onnx') && ok('tokenizer.json') ? d : undefined;
}

/** Texts to unit vectors; `kind` says which ranking they stand for in messages. */
export interface Embedder {
  readonly dim: number;
  /** The model directory. */
  readonly path: string;
  embed(texts: readonly string[]): Promise<Float32Array[]>;
}

export class EmbedError extends Error {
  override name = 'EmbedError';
}

export class OnnxEmbedder implements Embedder {
  private constructor(
    readonly path: string,
    private readonly ort: typeof Ort,
    private readonly session: Ort.InferenceSession,
    readonly tokenizer: WordPieceTokenizer,
    readonly dim: number,
    private readonly output: string,
  ) {}

  /** Loads model.onnx and tokenizer.json from `dir` and checks the model's inputs and output by one inference. */
  static async load(dir: string, opts: { maxLength?: number; threads?: number } = {}): Promise<OnnxEmbedder> {
    const tokenizer = WordPieceTokenizer.fromFile(join(dir, 'tokenizer.json'), opts);
    // onnxruntime-node's telemetry (Microsoft's 1DS client) writes a session file and an empty mat-debug-PID.log
    // into $TMPDIR on every start, or `:memory:.ses` into the cwd where it cannot: in a memory tool that is the
    // agent's working directory. It sends nothing from the sandbox anyway; ORT_DISABLE_TELEMETRY (read by the
    // native library when it starts, so set before the import) turns it off. A user's explicit setting is kept.
    process.env.ORT_DISABLE_TELEMETRY ??= '1';
    // An optional dependency (289 MB): without it, skills and memory match by words (BM25) and say why.
    const ort = (await import('onnxruntime-node').catch((e: unknown) => {
      throw new Error(
        `onnxruntime-node is not installed (an optional dependency: npm install onnxruntime-node): ${(e as Error).message}`,
      );
    })) as typeof Ort;
    // Warnings would land in a tool's output (the model reads it): onnxruntime's telemetry cannot persist its
    // device id inside the sandbox, and says so on every start.
    ort.env.logLevel = 'error';
    let session: Ort.InferenceSession;
    try {
      session = await ort.InferenceSession.create(join(dir, 'model.onnx'), {
        // Prompts are short: one or two threads answer faster than a pool's hand-offs on a small machine.
        intraOpNumThreads: opts.threads ?? 1,
        interOpNumThreads: 1,
        graphOptimizationLevel: 'all',
        logSeverityLevel: 3,
      });
    } catch (e) {
      throw new EmbedError(`${join(dir, 'model.onnx')}: ${(e as Error).message}`);
    }
    for (const need of ['input_ids', 'attention_mask']) {
      if (!session.inputNames.includes(need))
        throw new EmbedError(`${dir}/model.onnx: no input ${need} (inputs: ${session.inputNames.join(', ')})`);
    }
    const output = session.outputNames.includes('last_hidden_state') ? 'last_hidden_state' : session.outputNames[0]!;
    const probe = new OnnxEmbedder(dir, ort, session, tokenizer, 0, output);
    const [v] = await probe.embed(['probe']);
    return new OnnxEmbedder(dir, ort, session, tokenizer, v!.length, output);
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    const out: Float32Array[] = [];
    for (let i = 0; i < texts.length; i += BATCH) out.push(...(await this.batch(texts.slice(i, i + BATCH))));
    return out;
  }

  private async batch(texts: readonly string[]): Promise<Float32Array[]> {
    const enc = texts.map((t) => this.tokenizer.encode(t).ids);
    const n = enc.length;
    const seq = Math.max(...enc.map((e) => e.length));
    const ids = new BigInt64Array(n * seq);
    const mask = new BigInt64Array(n * seq);
    for (let b = 0; b < n; b++) {
      const e = enc[b]!;
      for (let t = 0; t < seq; t++) {
        ids[b * seq + t] = BigInt(t < e.length ? e[t]! : this.tokenizer.padId);
        mask[b * seq + t] = t < e.length ? 1n : 0n;
      }
    }
    const feeds: Record<string, Ort.Tensor> = {
      input_ids: new this.ort.Tensor('int64', ids, [n, seq]),
      attention_mask: new this.ort.Tensor('int64', mask, [n, seq]),
    };
    if (this.session.inputNames.includes('token_type_ids'))
      feeds.token_type_ids = new this.ort.Tensor('int64', new BigInt64Array(n * seq), [n, seq]);
    const res = await this.session.run(feeds, [this.output]);
    const t = res[this.output]!;
    const data = t.data as Float32Array;
    const dims = t.dims;
    const vecs: Float32Array[] = [];
    if (dims.length === 2) {
      // Already pooled (a sentence_embedding output): only normalize.
      const dim = dims[1]!;
      for (let b = 0; b < n; b++) vecs.push(normalize(data.slice(b * dim, (b + 1) * dim)));
      return vecs;
    }
    if (dims.length !== 3 || dims[0] !== n || dims[1] !== seq)
      throw new EmbedError(
        `${this.path}/model.onnx: output ${this.output} has shape [${dims.join(', ')}], expected [${n}, ${seq}, dim]`,
      );
    const dim = dims[2]!;
    for (let b = 0; b < n; b++) {
      // Mean pooling over the real tokens only: padding positions carry hidden states too.
      const v = new Float32Array(dim);
      const len = enc[b]!.length;
      for (let tk = 0; tk < len; tk++) {
        const off = (b * seq + tk) * dim;
        for (let d = 0; d < dim; d++) v[d]! += data[off + d]!;
      }
      for (let d = 0; d < dim; d++) v[d]! /= len;
      vecs.push(normalize(v));
    }
    return vecs;
  }

  async close(): Promise<void> {
    await this.session.release();
  }
}

/** Scales `v` to unit length in place (a zero vector stays zero). */
export function normalize(v: Float32Array): Float32Array {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!;
  const n = Math.sqrt(s);
  if (n > 0) for (let i = 0; i < v.length; i++) v[i]! /= n;
  return v;
}

/** Cosine of two unit vectors: their dot product. */
export function cosine(a: Float32Array, b: Float32Array): number {
  let s = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) s += a[i]! * b[i]!;
  return s;
}
