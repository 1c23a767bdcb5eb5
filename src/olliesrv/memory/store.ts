/**
 * Memory: what agents learned and want to keep across sessions, in one SQLite file per user,
 * `$XDG_DATA_HOME/ollie/memory/memory.db` (WAL, so the memory tools of many agents read while one writes).
 * Each memory belongs to a project (the git root above the agent's cwd, else the cwd) or is global (project
 * ''). Recall is full-text (FTS5, porter stemming, bm25 ranking), fused with cosine over sentence embeddings
 * when a model is installed and the memory was stored with one.
 *
 * Writers go through toolsrv's path lock on the memory directory (memory_remember's .meta `lockPath`); SQLite's
 * own locking (busy_timeout) covers writers of other toolsrv processes.
 */
import Database from 'better-sqlite3';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { dataDir } from '../../platform/paths.js';
import { privateDir, privateFile } from '../../platform/private.js';
import { cosine } from '../skills/embed.js';
import { STOP } from '../skills/index.js';

export interface Memory {
  id: number;
  /** The project's directory, or '' for a global memory. */
  project: string;
  text: string;
  tags: string[];
  /** ms since the epoch. */
  created: number;
  session: string;
  agent: string;
}

export interface Scored extends Memory {
  score: number;
}

export type RecallScope = 'project' | 'global' | 'all';

/** The memory directory and database of this user. */
export function memoryDir(): string {
  return join(dataDir(), 'memory');
}
export function memoryDbPath(): string {
  return join(memoryDir(), 'memory.db');
}

/** The project a cwd belongs to: the nearest directory above it (itself included) holding .git, else the cwd. */
export function projectOf(cwd: string): string {
  for (let d = cwd; ; d = dirname(d)) {
    if (existsSync(join(d, '.git'))) return d;
    if (dirname(d) === d) return cwd;
  }
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS memory (
  id INTEGER PRIMARY KEY,
  project TEXT NOT NULL,
  text TEXT NOT NULL,
  tags TEXT NOT NULL DEFAULT '',
  created INTEGER NOT NULL,
  session TEXT NOT NULL DEFAULT '',
  agent TEXT NOT NULL DEFAULT '',
  vec BLOB,
  model TEXT
);
CREATE INDEX IF NOT EXISTS memory_project ON memory(project, id);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(text, tags, content='memory', content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER IF NOT EXISTS memory_ai AFTER INSERT ON memory BEGIN
  INSERT INTO memory_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
END;
CREATE TRIGGER IF NOT EXISTS memory_ad AFTER DELETE ON memory BEGIN
  INSERT INTO memory_fts(memory_fts, rowid, text, tags) VALUES ('delete', old.id, old.text, old.tags);
END;
`;

interface Row {
  id: number;
  project: string;
  text: string;
  tags: string;
  created: number;
  session: string;
  agent: string;
  vec?: Buffer | null;
  model?: string | null;
}

const toMemory = (r: Row): Memory => ({
  id: r.id,
  project: r.project,
  text: r.text,
  tags: r.tags ? r.tags.split(' ') : [],
  created: r.created,
  session: r.session,
  agent: r.agent,
});

/**
 * A query as FTS5 reads it: every word quoted (no operators from the model's text), any of them matching, stop
 * words left out (with OR, "the" would match nearly every memory).
 */
export function ftsQuery(q: string): string {
  const words = (q.toLowerCase().match(/[\p{L}\p{N}_]+/gu) ?? []).filter((w) => !STOP.has(w));
  return [...new Set(words)].map((w) => `"${w}"`).join(' OR ');
}

/** Rank fusion constant: the usual 60 of reciprocal rank fusion. */
const RRF_K = 60;
/** Memories whose vectors recall scans, newest first: bounds the cost of a semantic search. */
const VECTOR_SCAN = 5000;

export class MemoryStore {
  private constructor(
    readonly db: Database.Database,
    readonly file: string,
  ) {}

  /** Opens (creating the directory and the schema) the store at `file`. */
  static open(file = memoryDbPath(), opts: { readonly?: boolean } = {}): MemoryStore {
    // Owner-only like ollie.db, and refused when a symlink or another user's file sits at one of its names.
    privateDir(dirname(file), 'the memory directory');
    for (const suffix of ['-wal', '-shm', '-journal']) privateFile(file + suffix, 'the memory database file');
    privateFile(file, 'the memory database', { create: !opts.readonly });
    const db = new Database(file, { readonly: !!opts.readonly && existsSync(file) && statSync(file).size > 0 });
    db.pragma('busy_timeout = 5000');
    if (!db.readonly) {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.exec(SCHEMA);
    }
    return new MemoryStore(db, file);
  }

  close(): void {
    this.db.close();
  }

  remember(m: {
    text: string;
    project: string;
    tags?: string[];
    session?: string;
    agent?: string;
    vec?: Float32Array;
    model?: string;
    now?: number;
  }): Memory {
    const tags = (m.tags ?? []).map((t) => t.trim().toLowerCase().replace(/\s+/g, '-')).filter(Boolean);
    const r = this.db
      .prepare(
        'INSERT INTO memory (project, text, tags, created, session, agent, vec, model) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      )
      .run(
        m.project,
        m.text.trim(),
        tags.join(' '),
        m.now ?? Date.now(),
        m.session ?? '',
        m.agent ?? '',
        m.vec ? Buffer.from(m.vec.buffer, m.vec.byteOffset, m.vec.byteLength) : null,
        m.vec ? (m.model ?? '') : null,
      );
    return this.get(Number(r.lastInsertRowid))!;
  }

  get(id: number): Memory | undefined {
    const r = this.db
      .prepare('SELECT id, project, text, tags, created, session, agent FROM memory WHERE id = ?')
      .get(id) as Row | undefined;
    return r && toMemory(r);
  }

  count(project?: string): number {
    const r = (
      project === undefined
        ? this.db.prepare('SELECT count(*) AS n FROM memory').get()
        : this.db.prepare('SELECT count(*) AS n FROM memory WHERE project = ?').get(project)
    ) as { n: number };
    return r.n;
  }

  private scopeSql(scope: RecallScope): string {
    return scope === 'project'
      ? 'm.project = @project'
      : scope === 'global'
        ? "m.project = ''"
        : "(m.project = @project OR m.project = '')";
  }

  /**
   * Memories matching `query` in `scope`, best first. Full-text always; with `vec` (the query's embedding) and
   * memories stored with vectors of the same `model`, both rankings are fused (reciprocal rank fusion), so a
   * memory found by either way ranks, and one found by both ranks first.
   */
  recall(
    query: string,
    o: { project: string; scope?: RecallScope; limit?: number; vec?: Float32Array; model?: string },
  ): Scored[] {
    const scope = o.scope ?? 'all';
    const limit = o.limit ?? 10;
    const where = this.scopeSql(scope);
    const fused = new Map<number, { row: Row; score: number }>();
    const q = ftsQuery(query);
    if (q) {
      const rows = this.db
        .prepare(
          `SELECT m.id, m.project, m.text, m.tags, m.created, m.session, m.agent FROM memory_fts f JOIN memory m ON m.id = f.rowid WHERE memory_fts MATCH @q AND ${where} ORDER BY bm25(memory_fts) LIMIT 100`,
        )
        .all({ q, project: o.project }) as Row[];
      rows.forEach((r, i) => fused.set(r.id, { row: r, score: 1 / (RRF_K + i + 1) }));
    }
    if (o.vec) {
      const rows = this.db
        .prepare(
          `SELECT m.id, m.project, m.text, m.tags, m.created, m.session, m.agent, m.vec FROM memory m WHERE m.vec IS NOT NULL AND m.model = @model AND ${where} ORDER BY m.id DESC LIMIT ${VECTOR_SCAN}`,
        )
        .all({ project: o.project, model: o.model ?? '' }) as Row[];
      const sims = rows
        .map((r) => ({
          r,
          s: cosine(o.vec!, new Float32Array(r.vec!.buffer, r.vec!.byteOffset, r.vec!.byteLength / 4)),
        }))
        // Unrelated memories still have some cosine: only those that look related take part.
        .filter((x) => x.s >= 0.3)
        .sort((a, b) => b.s - a.s)
        .slice(0, 100);
      sims.forEach((x, i) => {
        const prev = fused.get(x.r.id);
        fused.set(x.r.id, { row: x.r, score: (prev?.score ?? 0) + 1 / (RRF_K + i + 1) });
      });
    }
    return [...fused.values()]
      .sort((a, b) => b.score - a.score || b.row.id - a.row.id)
      .slice(0, limit)
      .map((x) => ({ ...toMemory(x.row), score: x.score }));
  }

  /** The newest memories of `scope`. */
  recent(o: { project: string; scope: RecallScope; limit: number }): Memory[] {
    const rows = this.db
      .prepare(
        `SELECT m.id, m.project, m.text, m.tags, m.created, m.session, m.agent FROM memory m WHERE ${this.scopeSql(o.scope)} ORDER BY m.id DESC LIMIT @limit`,
      )
      .all({ project: o.project, limit: o.limit }) as Row[];
    return rows.map(toMemory);
  }

  /** Memory `id` with up to `radius` memories of the same project stored just before and just after it. */
  zoom(id: number, radius = 2): { focus: Memory; before: Memory[]; after: Memory[] } | undefined {
    const focus = this.get(id);
    if (!focus) return undefined;
    const cols = 'id, project, text, tags, created, session, agent';
    const before = (
      this.db
        .prepare(`SELECT ${cols} FROM memory WHERE project = ? AND id < ? ORDER BY id DESC LIMIT ?`)
        .all(focus.project, id, radius) as Row[]
    )
      .map(toMemory)
      .reverse();
    const after = (
      this.db
        .prepare(`SELECT ${cols} FROM memory WHERE project = ? AND id > ? ORDER BY id ASC LIMIT ?`)
        .all(focus.project, id, radius) as Row[]
    ).map(toMemory);
    return { focus, before, after };
  }
}
