/**
 * A generic match index: entries of any kind, each with a text (a skill's description, a tool's name and
 * description, a memory), ranked against a query either by cosine over sentence embeddings (when a model is
 * installed) or by BM25 over words (when none is). Both give scores in [0, 1], so one threshold per use reads
 * the same whichever method is in use.
 *
 *   const idx = await Index.build(skills, (s) => s.description, embedder);   // embedder undefined → BM25
 *   const q = await idx.query(prompt);            // embed once, reuse for several indexes
 *   idx.match(q, { limit: 3, threshold: 0.35 });  // [{ item, score }] best first
 */
import { cosine, type Embedder } from './embed.js';

export type Method = 'embeddings' | 'bm25';

export interface Query {
  text: string;
  /** The query's embedding, when the index it was made for uses embeddings. */
  vec?: Float32Array;
}

export interface Match<T> {
  item: T;
  score: number;
}

/** Words too common to say anything about a match (BM25 here, the memory's full-text queries). */
export const STOP = new Set(
  (
    'a an and are as at be but by can could do does for from has have how i if in into is it its me my no not of on or our ' +
    'please should so than that the their them then there these this those to was we were what when where which who why will ' +
    'with would you your'
  ).split(' '),
);

/** Words for BM25: lowercased letters and digits (so file_read is "file read"), stop words out, a light stemmer. */
export function words(text: string): string[] {
  const out: string[] = [];
  for (const w of text.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if (!w || STOP.has(w)) continue;
    out.push(stem(w));
  }
  return out;
}

/** Folds the common English inflections (tests/testing/tested → test), enough for short descriptions. */
function stem(w: string): string {
  if (w.length <= 4) return w;
  for (const suf of ['ations', 'ation', 'ings', 'ing', 'ied', 'ies', 'ed', 'es', 's']) {
    if (w.endsWith(suf) && w.length - suf.length >= 3) {
      const base = w.slice(0, -suf.length);
      return suf === 'ied' || suf === 'ies' ? `${base}y` : base.replace(/(.)\1$/, '$1');
    }
  }
  return w;
}

/** Okapi BM25 over a fixed corpus. */
export class Bm25 {
  private readonly docs: Array<Map<string, number>>;
  private readonly lens: number[];
  private readonly df = new Map<string, number>();
  private readonly avg: number;

  constructor(
    texts: readonly string[],
    private readonly k1 = 1.2,
    private readonly b = 0.75,
  ) {
    this.docs = texts.map((t) => {
      const tf = new Map<string, number>();
      for (const w of words(t)) tf.set(w, (tf.get(w) ?? 0) + 1);
      return tf;
    });
    this.lens = this.docs.map((d) => [...d.values()].reduce((a, x) => a + x, 0));
    for (const d of this.docs) for (const w of d.keys()) this.df.set(w, (this.df.get(w) ?? 0) + 1);
    this.avg = this.lens.reduce((a, x) => a + x, 0) / Math.max(1, this.docs.length) || 1;
  }

  private idf(w: string): number {
    const n = this.df.get(w) ?? 0;
    return Math.log(1 + (this.docs.length - n + 0.5) / (n + 0.5));
  }

  /**
   * Each document's score divided by what a document of average length holding every query word (known to the
   * corpus) once would score, capped at 1: a score in [0, 1] comparable with a cosine.
   */
  scores(query: string): number[] {
    const q = [...new Set(words(query))].filter((w) => this.df.has(w));
    const full = q.reduce((a, w) => a + this.idf(w), 0);
    if (full === 0) return this.docs.map(() => 0);
    return this.docs.map((d, i) => {
      let s = 0;
      for (const w of q) {
        const tf = d.get(w);
        if (!tf) continue;
        s += (this.idf(w) * tf * (this.k1 + 1)) / (tf + this.k1 * (1 - this.b + (this.b * this.lens[i]!) / this.avg));
      }
      return Math.min(1, s / full);
    });
  }
}

export class Index<T> {
  private constructor(
    readonly entries: readonly T[],
    readonly method: Method,
    private readonly embedder: Embedder | undefined,
    private readonly vectors: Float32Array[],
    private readonly bm25: Bm25 | undefined,
  ) {}

  static async build<T>(entries: readonly T[], text: (t: T) => string, embedder?: Embedder): Promise<Index<T>> {
    const texts = entries.map(text);
    if (embedder) return new Index(entries, 'embeddings', embedder, await embedder.embed(texts), undefined);
    return new Index(entries, 'bm25', undefined, [], new Bm25(texts));
  }

  get size(): number {
    return this.entries.length;
  }

  /** The query for `text`: embedded once when this index uses embeddings. */
  async query(text: string): Promise<Query> {
    if (!this.embedder) return { text };
    const [vec] = await this.embedder.embed([text]);
    return { text, vec: vec! };
  }

  /** Entries scoring at least `threshold`, best first, at most `limit`. */
  match(q: Query, o: { limit: number; threshold: number }): Array<Match<T>> {
    if (!this.entries.length || o.limit <= 0) return [];
    let scores: number[];
    if (this.embedder) {
      if (!q.vec) throw new Error('Index.match: this index ranks by embeddings; make the query with query()');
      scores = this.vectors.map((v) => cosine(q.vec!, v));
    } else scores = this.bm25!.scores(q.text);
    return scores
      .map((score, i) => ({ item: this.entries[i]!, score }))
      .filter((m) => m.score >= o.threshold && m.score > 0)
      .sort((a, b) => b.score - a.score)
      .slice(0, o.limit);
  }
}
