/**
 * The daemon's SQLite database. WAL mode, so a reader never waits for a writer and a `kill -9` loses
 * nothing that was committed. The schema is versioned with user_version and migrated forward on open.
 */
import Database from 'better-sqlite3';
import { dirname } from 'node:path';
import { privateDir, privateFile } from '../../platform/private.js';

export type DB = Database.Database;

const MIGRATIONS: string[] = [
  `CREATE TABLE session (
     id      TEXT PRIMARY KEY,
     name    TEXT NOT NULL UNIQUE,
     cwd     TEXT NOT NULL,
     env     TEXT NOT NULL DEFAULT '',
     plan    TEXT NOT NULL DEFAULT '',
     paused  INTEGER NOT NULL DEFAULT 0,
     created INTEGER NOT NULL
   )`,
  // Agents, their history and their chat log. History and log are append-only: a compaction starts a new epoch
  // (older epochs stay as the pre-compaction record), a `clear` too; nothing is rewritten in place.
  `CREATE TABLE agent (
     id        TEXT PRIMARY KEY,
     session   TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
     name      TEXT NOT NULL,
     parent    TEXT NOT NULL DEFAULT '',
     depth     INTEGER NOT NULL DEFAULT 0,
     cfg       TEXT NOT NULL,
     epoch     INTEGER NOT NULL DEFAULT 0,
     stats     TEXT NOT NULL DEFAULT '{}',
     running   INTEGER NOT NULL DEFAULT 0,
     created   INTEGER NOT NULL,
     UNIQUE (session, name)
   );
   CREATE TABLE message (
     agent   TEXT NOT NULL REFERENCES agent(id) ON DELETE CASCADE,
     seq     INTEGER NOT NULL,
     epoch   INTEGER NOT NULL,
     body    TEXT NOT NULL,
     PRIMARY KEY (agent, seq)
   ) WITHOUT ROWID;
   CREATE TABLE block (
     agent   TEXT NOT NULL REFERENCES agent(id) ON DELETE CASCADE,
     seq     INTEGER NOT NULL,
     id      TEXT NOT NULL,
     body    TEXT NOT NULL,
     PRIMARY KEY (agent, seq)
   ) WITHOUT ROWID;
   CREATE INDEX block_id ON block (agent, id);
   CREATE TABLE bypass_rule (
     id       INTEGER PRIMARY KEY AUTOINCREMENT,
     pattern  TEXT NOT NULL UNIQUE,
     created  INTEGER NOT NULL
   )`,
  // Goals: the text, the workflow's status (first line running|complete|blocked|error, then a summary), the workflow.
  `ALTER TABLE session ADD COLUMN goal TEXT NOT NULL DEFAULT '';
   ALTER TABLE session ADD COLUMN goalstatus TEXT NOT NULL DEFAULT '';
   ALTER TABLE session ADD COLUMN workflow TEXT NOT NULL DEFAULT 'conductor'`,
  // Full-text search over every agent's chat log (context blocks excluded: they are not what anyone said).
  // An agent's rows go when the agent does.
  `CREATE VIRTUAL TABLE block_fts USING fts5(content, agent UNINDEXED, id UNINDEXED, role UNINDEXED, tokenize = 'unicode61');
   CREATE TRIGGER block_fts_add AFTER INSERT ON block WHEN json_extract(new.body, '$.role') != 'context' BEGIN
     INSERT INTO block_fts (content, agent, id, role) VALUES (json_extract(new.body, '$.content'), new.agent, new.id, json_extract(new.body, '$.role'));
   END;
   CREATE TRIGGER block_fts_drop AFTER DELETE ON agent BEGIN
     DELETE FROM block_fts WHERE agent = old.id;
   END;
   INSERT INTO block_fts (content, agent, id, role)
     SELECT json_extract(body, '$.content'), agent, id, json_extract(body, '$.role') FROM block WHERE json_extract(body, '$.role') != 'context'`,
  // The index is fed in batches instead of by trigger (a trigger made every block insert its own FTS segment,
  // ~70 µs of a ~100 µs insert): agent.fts_seq is the last block seq indexed, AgentStore catches up from it on an
  // idle timer, before every search and on open (blocks a kill -9 left unindexed). Everything so far was indexed.
  `DROP TRIGGER block_fts_add;
   ALTER TABLE agent ADD COLUMN fts_seq INTEGER NOT NULL DEFAULT -1;
   UPDATE agent SET fts_seq = COALESCE((SELECT MAX(seq) FROM block WHERE block.agent = agent.id), -1)`,
  // An agent's index rows found by rowid, not by a scan of the whole index (FTS5 cannot look an UNINDEXED column
  // up: dropping a sub-agent cost a pass over every block of every agent). A block's row is fts_key << 32 | seq;
  // the index is rebuilt with such rowids, by AgentStore's catch-up from the reset watermarks.
  `ALTER TABLE agent ADD COLUMN fts_key INTEGER;
   UPDATE agent SET fts_key = rowid;
   CREATE UNIQUE INDEX agent_fts_key ON agent (fts_key);
   DROP TRIGGER block_fts_drop;
   DROP TABLE block_fts;
   CREATE VIRTUAL TABLE block_fts USING fts5(content, agent UNINDEXED, id UNINDEXED, role UNINDEXED, tokenize = 'unicode61');
   UPDATE agent SET fts_seq = -1;
   CREATE TRIGGER block_fts_drop BEFORE DELETE ON agent BEGIN
     DELETE FROM block_fts WHERE rowid IN (SELECT (old.fts_key << 32) + seq FROM block WHERE agent = old.id AND seq <= old.fts_seq);
   END`,
  // Remembered bypass approvals on the words of a command (store/bypass.ts), global or for one session. They
  // replace bypass_rule's globs, which BypassRuleStore drops with a log line when it opens.
  `CREATE TABLE approval_rule (
     id       INTEGER PRIMARY KEY AUTOINCREMENT,
     tool     TEXT NOT NULL,
     kind     TEXT NOT NULL CHECK (kind IN ('prefix', 'exact')),
     rule     TEXT NOT NULL,
     session  TEXT,
     created  INTEGER NOT NULL
   );
   CREATE UNIQUE INDEX approval_rule_key ON approval_rule (tool, kind, rule, IFNULL(session, ''))`,
  // Agents that ended (a sub-agent whose turn is over, a killed agent) keep their row, log and index entries as a
  // read-only record: ended is when (0 while alive), how finished|killed|interrupted. The row's name becomes its id
  // so the name is free again (UNIQUE (session, name)); shown_name keeps the name it had.
  `ALTER TABLE agent ADD COLUMN ended INTEGER NOT NULL DEFAULT 0;
   ALTER TABLE agent ADD COLUMN ended_how TEXT NOT NULL DEFAULT '';
   ALTER TABLE agent ADD COLUMN shown_name TEXT NOT NULL DEFAULT ''`,
];

/**
 * Opens (creating) the database at `path`. Its directory is made owner-only and the database, its -wal and -shm
 * are 0600 (SQLite gives the -wal and -shm the database file's mode): they hold every conversation. A symlink
 * or another user's file at any of those names is refused rather than opened.
 */
export function openDatabase(path: string): DB {
  if (path !== ':memory:') {
    privateDir(dirname(path), 'the data directory');
    for (const suffix of ['-wal', '-shm', '-journal']) privateFile(path + suffix, 'the database file');
    privateFile(path, 'the database', { create: true });
  }
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > MIGRATIONS.length) {
    db.close();
    throw new Error(
      `${path}: database schema version ${version} is newer than this Ollie (${MIGRATIONS.length}); upgrade Ollie`,
    );
  }
  db.transaction(() => {
    for (let v = version; v < MIGRATIONS.length; v++) db.exec(MIGRATIONS[v]!);
    db.pragma(`user_version = ${MIGRATIONS.length}`);
  })();
  return db;
}
