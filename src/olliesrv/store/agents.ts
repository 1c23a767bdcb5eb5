/**
 * Agent rows, history and chat log in SQLite. Everything is appended as it happens (a message when it is
 * complete, a block when it is final), so a `kill -9` loses at most the block being streamed. A compaction or a
 * `clear` starts a new history epoch instead of deleting: older epochs are the recovery record.
 *
 * The full-text index (block_fts) is derived data and lags behind: the blocks appended since the last batch are
 * indexed together in one transaction, FTS_DELAY after the first of them, before any search, and on open for
 * what a crash left unindexed (agent.fts_seq is each agent's watermark). One FTS5 insert per block, each in its
 * own transaction, cost two thirds of the append.
 */
import type { DB } from './db.js';

export interface AgentRow {
  id: string;
  session: string;
  name: string;
  parent: string;
  depth: number;
  /** JSON of the agent's configuration (profile, backend, model, cwd, params). */
  cfg: string;
  epoch: number;
  /** JSON of the accumulated usage. */
  stats: string;
  /** 1 while a turn runs: found set at start-up, the turn was interrupted. */
  running: number;
  created: number;
  /** When the agent ended (ms; 0 or absent while it lives), how, and the name it had. */
  ended?: number;
  ended_how?: string;
  shown_name?: string;
}

export interface SearchHit {
  agent: string;
  id: string;
  role: string;
  /** The matching part of the block, terms in [brackets]. */
  snippet: string;
}

/** Every word of a user's query as a quoted FTS5 term: plain words in, no query-syntax errors out. */
export function ftsQuery(text: string): string {
  return (text.match(/[\p{L}\p{N}_]+/gu) ?? []).map((w) => `"${w}"`).join(' ');
}

/** How long appended blocks wait to be indexed together (a search never waits: it indexes them first). */
const FTS_DELAY = 500;

export class AgentStore {
  private readonly q;
  /** Agents with blocks appended since their last indexing. */
  private readonly unindexed = new Set<string>();
  private indexTimer?: ReturnType<typeof setTimeout>;
  /** One wrapper for every batch (better-sqlite3 builds five functions per transaction() call). */
  private readonly inTransaction: (fn: () => unknown) => unknown;

  constructor(private readonly db: DB) {
    this.inTransaction = db.transaction((fn: () => unknown) => fn());
    this.q = {
      bySession: db.prepare<[string], AgentRow>('SELECT * FROM agent WHERE session = ? ORDER BY created, id'),
      insert: db.prepare(
        `INSERT INTO agent (id, session, name, parent, depth, cfg, epoch, stats, running, created, fts_key)
           VALUES (@id, @session, @name, @parent, @depth, @cfg, @epoch, @stats, @running, @created, (SELECT COALESCE(MAX(fts_key), 0) + 1 FROM agent))`,
      ),
      rename: db.prepare('UPDATE agent SET name = ? WHERE id = ?'),
      cfg: db.prepare('UPDATE agent SET cfg = ? WHERE id = ?'),
      stats: db.prepare('UPDATE agent SET stats = ? WHERE id = ?'),
      running: db.prepare('UPDATE agent SET running = ? WHERE id = ?'),
      epoch: db.prepare('UPDATE agent SET epoch = ? WHERE id = ?'),
      delete: db.prepare('DELETE FROM agent WHERE id = ?'),
      end: db.prepare(
        'UPDATE agent SET ended = @at, ended_how = @how, shown_name = name, name = id, running = 0 WHERE id = @id AND ended = 0',
      ),
      block: db.prepare<[string, string], { body: string }>('SELECT body FROM block WHERE agent = ? AND id = ?'),
      messages: db.prepare<[string, number], { body: string }>(
        'SELECT body FROM message WHERE agent = ? AND epoch = ? ORDER BY seq',
      ),
      maxMessage: db.prepare<[string], { m: number | null }>('SELECT MAX(seq) AS m FROM message WHERE agent = ?'),
      addMessage: db.prepare('INSERT INTO message (agent, seq, epoch, body) VALUES (?, ?, ?, ?)'),
      blocks: db.prepare<[string], { body: string }>('SELECT body FROM block WHERE agent = ? ORDER BY seq'),
      blockRange: db.prepare<[string, number, number], { body: string }>(
        'SELECT body FROM block WHERE agent = ? AND seq >= ? AND seq < ? ORDER BY seq',
      ),
      blockSeq: db.prepare<[string, string], { seq: number }>(
        'SELECT seq FROM block WHERE agent = ? AND id = ? ORDER BY seq LIMIT 1',
      ),
      maxBlock: db.prepare<[string], { m: number | null }>('SELECT MAX(seq) AS m FROM block WHERE agent = ?'),
      addBlock: db.prepare('INSERT INTO block (agent, seq, id, body) VALUES (?, ?, ?, ?)'),
      // An agent's blocks past its watermark into the index, and the watermark moved past them.
      index: db.prepare(
        `INSERT INTO block_fts (rowid, content, agent, id, role)
           SELECT (a.fts_key << 32) + b.seq, json_extract(b.body, '$.content'), b.agent, b.id, json_extract(b.body, '$.role')
           FROM agent a JOIN block b ON b.agent = a.id AND b.seq > a.fts_seq
           WHERE a.id = @agent AND json_extract(b.body, '$.role') != 'context'`,
      ),
      indexed: db.prepare(
        'UPDATE agent SET fts_seq = COALESCE((SELECT MAX(seq) FROM block WHERE agent = @agent), fts_seq) WHERE id = @agent',
      ),
      behind: db.prepare<[], { id: string }>(
        'SELECT id FROM agent WHERE fts_seq < (SELECT COALESCE(MAX(seq), -1) FROM block WHERE block.agent = agent.id)',
      ),
      search: db.prepare<[string, number], SearchHit>(
        "SELECT agent, id, role, snippet(block_fts, 0, '[', ']', '…', 16) AS snippet FROM block_fts WHERE block_fts MATCH ? ORDER BY rank LIMIT ?",
      ),
    };
    // Blocks appended by a daemon that died before indexing them.
    for (const r of this.q.behind.all()) this.unindexed.add(r.id);
    this.indexNow();
  }

  /**
   * Runs `fn`'s writes as one transaction: what one step of an agent appends together (a tool result's block and
   * message) costs one commit instead of one each. Committed before it returns, as a single write would be.
   */
  batch<T>(fn: () => T): T {
    return this.db.inTransaction ? fn() : (this.inTransaction(fn) as T);
  }

  bySession(session: string): AgentRow[] {
    return this.q.bySession.all(session);
  }

  insert(row: AgentRow): void {
    this.q.insert.run(row);
  }

  rename(id: string, name: string): void {
    this.q.rename.run(name, id);
  }

  setCfg(id: string, cfg: string): void {
    this.q.cfg.run(cfg, id);
  }

  setStats(id: string, stats: string): void {
    this.q.stats.run(stats, id);
  }

  setRunning(id: string, running: boolean): void {
    this.q.running.run(running ? 1 : 0, id);
  }

  setEpoch(id: string, epoch: number): void {
    this.q.epoch.run(epoch, id);
  }

  delete(id: string): void {
    this.q.delete.run(id);
  }

  /** Keeps an agent that ended as a read-only record (its name freed; see the migration). */
  end(id: string, how: string, at = Date.now()): void {
    this.q.end.run({ id, how, at });
  }

  /** One stored block's JSON, by its id. */
  block(agent: string, id: string): string | undefined {
    return this.q.block.get(agent, id)?.body;
  }

  messages(agent: string, epoch: number): string[] {
    return this.q.messages.all(agent, epoch).map((r) => r.body);
  }

  nextMessageSeq(agent: string): number {
    return (this.q.maxMessage.get(agent)?.m ?? -1) + 1;
  }

  addMessage(agent: string, seq: number, epoch: number, body: string): void {
    this.q.addMessage.run(agent, seq, epoch, body);
  }

  /** Writes a whole epoch in one transaction (a compaction's new history, a snapshot for a sub-agent). */
  addMessages(agent: string, firstSeq: number, epoch: number, bodies: string[]): void {
    this.db.transaction(() => bodies.forEach((b, i) => this.q.addMessage.run(agent, firstSeq + i, epoch, b)))();
  }

  blocks(agent: string): string[] {
    return this.q.blocks.all(agent).map((r) => r.body);
  }

  /** The blocks numbered from..to-1 (the primary key's range: no scan of the rest of the log). */
  blockRange(agent: string, from: number, to: number): string[] {
    return this.q.blockRange.all(agent, from, to).map((r) => r.body);
  }

  /** The number of block `id` in the agent's log (through the block_id index), or undefined. */
  blockSeq(agent: string, id: string): number | undefined {
    return this.q.blockSeq.get(agent, id)?.seq;
  }

  nextBlockSeq(agent: string): number {
    return (this.q.maxBlock.get(agent)?.m ?? -1) + 1;
  }

  /** Blocks of every agent matching all words of `text`, best first. */
  search(text: string, limit = 50): SearchHit[] {
    const q = ftsQuery(text);
    if (!q) return [];
    this.indexNow();
    return this.q.search.all(q, limit);
  }

  addBlock(agent: string, seq: number, id: string, body: string): void {
    this.q.addBlock.run(agent, seq, id, body);
    this.unindexed.add(agent);
    if (!this.indexTimer) {
      this.indexTimer = setTimeout(() => {
        try {
          this.indexNow();
        } catch {
          // The database is busy or failing: the blocks stay queued for the next batch or search.
        }
      }, FTS_DELAY);
      // Nothing is lost to an exit before it fires: the next open catches up from the watermarks.
      this.indexTimer.unref?.();
    }
  }

  /** Indexes every block appended since the last batch, in one transaction. */
  indexNow(): void {
    clearTimeout(this.indexTimer);
    this.indexTimer = undefined;
    if (!this.unindexed.size || !this.db.open) return;
    // A deleted agent's blocks are gone, so it indexes nothing and has no watermark to move.
    this.batch(() => {
      for (const agent of this.unindexed) {
        this.q.index.run({ agent });
        this.q.indexed.run({ agent });
      }
    });
    this.unindexed.clear();
  }
}
