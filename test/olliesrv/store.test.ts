import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentStore, type AgentRow } from '../../src/olliesrv/store/agents.js';
import { openDatabase, type DB } from '../../src/olliesrv/store/db.js';
import { until } from '../wait.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ollie-store-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function addAgent(db: DB, store: AgentStore, id: string): void {
  if (!db.prepare('SELECT 1 FROM session WHERE id = ?').get('s')) {
    db.prepare("INSERT INTO session (id, name, cwd, created) VALUES ('s', 's', '/', 0)").run();
  }
  const row: AgentRow = {
    id,
    session: 's',
    name: id,
    parent: '',
    depth: 0,
    cfg: '{}',
    epoch: 0,
    stats: '{}',
    running: 0,
    created: 0,
  };
  store.insert(row);
}

const block = (role: string, content: string): string => JSON.stringify({ role, id: 'x', content });

describe('chat-log search index', () => {
  it('finds a block searched for right after it was appended, context blocks excepted', () => {
    const db = openDatabase(join(dir, 'a.db'));
    const store = new AgentStore(db);
    addAgent(db, store, 'a1');
    store.addBlock('a1', 0, 'b0', block('user', 'where is the flux capacitor'));
    store.addBlock('a1', 1, 'b1', block('context', 'capacitor in a context block'));
    expect(store.search('capacitor').map((h) => [h.agent, h.id, h.role])).toEqual([['a1', 'b0', 'user']]);
    store.addBlock('a1', 2, 'b2', block('assistant', 'the capacitor is in the car'));
    expect(store.search('capacitor')).toHaveLength(2);
    store.delete('a1');
    expect(store.search('capacitor')).toEqual([]);
    db.close();
  });

  it("drops an agent's rows with the agent, also when its session goes, and keeps the others'", () => {
    const db = openDatabase(join(dir, 'a.db'));
    const store = new AgentStore(db);
    addAgent(db, store, 'a1');
    addAgent(db, store, 'a2');
    addAgent(db, store, 'a3');
    for (const a of ['a1', 'a2', 'a3'])
      for (let i = 0; i < 3; i++) store.addBlock(a, i, `${a}-${i}`, block('user', `capacitor ${a}`));
    expect(store.search('capacitor')).toHaveLength(9);
    store.delete('a2');
    expect(new Set(store.search('capacitor').map((h) => h.agent))).toEqual(new Set(['a1', 'a3']));
    const rows = (): number => (db.prepare('SELECT COUNT(*) AS n FROM block_fts').get() as { n: number }).n;
    expect(rows()).toBe(6);
    db.prepare("DELETE FROM session WHERE id = 's'").run();
    expect(rows()).toBe(0);
    db.close();
  });

  it('indexes on its own after a short while, each block once', async () => {
    const db = openDatabase(join(dir, 'a.db'));
    const store = new AgentStore(db);
    addAgent(db, store, 'a1');
    store.addBlock('a1', 0, 'b0', block('user', 'gigawatts'));
    const rows = (): number =>
      (db.prepare("SELECT COUNT(*) AS n FROM block_fts WHERE block_fts MATCH 'gigawatts'").get() as { n: number }).n;
    expect(rows()).toBe(0);
    await until(() => rows() === 1, 'the background indexer');
    expect(rows()).toBe(1);
    store.indexNow();
    expect(store.search('gigawatts')).toHaveLength(1);
    db.close();
  });

  it('catches up on open with the blocks a killed daemon never indexed', () => {
    const path = join(dir, 'a.db');
    const db = openDatabase(path);
    const store = new AgentStore(db);
    addAgent(db, store, 'a1');
    addAgent(db, store, 'a2');
    store.addBlock('a1', 0, 'b0', block('user', 'indexed before the crash'));
    store.indexNow();
    store.addBlock('a1', 1, 'b1', block('assistant', 'appended after the last batch'));
    store.addBlock('a2', 0, 'c0', block('user', 'another agent, also after the last batch'));
    // As a kill -9 would leave it: the blocks are committed, the index is behind.
    db.close();
    const db2 = openDatabase(path);
    const count = (): number => (db2.prepare('SELECT COUNT(*) AS n FROM block_fts').get() as { n: number }).n;
    expect(count()).toBe(1);
    const store2 = new AgentStore(db2);
    expect(count()).toBe(3);
    expect(
      store2
        .search('batch')
        .map((h) => h.id)
        .sort(),
    ).toEqual(['b1', 'c0']);
    expect(store2.search('crash').map((h) => h.id)).toEqual(['b0']);
    db2.close();
  });

  it('migrates a database indexed by the old triggers: each block found once, rows dropped with their agent', () => {
    const path = join(dir, 'old.db');
    // Schema version 4 (made by winding the current one back): triggers indexed every block as it was inserted
    // and dropped an agent's rows by a scan of the index.
    const db = openDatabase(path);
    db.exec(`ALTER TABLE agent DROP COLUMN ended;
      ALTER TABLE agent DROP COLUMN ended_how;
      ALTER TABLE agent DROP COLUMN shown_name;
      DROP TABLE approval_rule;
      DROP TRIGGER block_fts_drop;
      DROP INDEX agent_fts_key;
      ALTER TABLE agent DROP COLUMN fts_key;
      ALTER TABLE agent DROP COLUMN fts_seq;
      CREATE TRIGGER block_fts_add AFTER INSERT ON block WHEN json_extract(new.body, '$.role') != 'context' BEGIN
        INSERT INTO block_fts (content, agent, id, role) VALUES (json_extract(new.body, '$.content'), new.agent, new.id, json_extract(new.body, '$.role'));
      END;
      CREATE TRIGGER block_fts_drop AFTER DELETE ON agent BEGIN
        DELETE FROM block_fts WHERE agent = old.id;
      END;
      PRAGMA user_version = 4;`);
    db.exec("INSERT INTO session (id, name, cwd, created) VALUES ('s', 's', '/', 0)");
    for (const a of ['a1', 'a2']) {
      db.prepare("INSERT INTO agent (id, session, name, cfg, created) VALUES (?, 's', ?, '{}', 0)").run(a, a);
      db.prepare('INSERT INTO block (agent, seq, id, body) VALUES (?, ?, ?, ?)').run(
        a,
        0,
        `${a}-0`,
        block('user', 'old words'),
      );
    }
    db.close();
    const raw = new Database(path);
    expect(raw.pragma('user_version', { simple: true })).toBe(4);
    expect((raw.prepare('SELECT COUNT(*) AS n FROM block_fts').get() as { n: number }).n).toBe(2);
    raw.close();
    const db2 = openDatabase(path);
    const store = new AgentStore(db2);
    expect(
      store
        .search('old words')
        .map((h) => h.id)
        .sort(),
    ).toEqual(['a1-0', 'a2-0']);
    store.addBlock('a1', 1, 'a1-1', block('assistant', 'new words'));
    expect(
      store
        .search('words')
        .map((h) => h.id)
        .sort(),
    ).toEqual(['a1-0', 'a1-1', 'a2-0']);
    store.delete('a1');
    expect(store.search('words').map((h) => h.id)).toEqual(['a2-0']);
    addAgent(db2, store, 'a3');
    store.addBlock('a3', 0, 'a3-0', block('user', 'words of a new agent'));
    expect(
      store
        .search('words')
        .map((h) => h.id)
        .sort(),
    ).toEqual(['a2-0', 'a3-0']);
    db2.close();
  });
});
