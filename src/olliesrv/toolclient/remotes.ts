/**
 * Which host each session's tools run on: `session/new remote=…` and the session's `ctl remote …` set it (the
 * owner only: the namespace gives an agent neither file), session/idx shows it. Kept in the daemon's database,
 * so a session comes back on its host after a restart; a session that is removed takes its row with it.
 *
 * Every change is announced as `session.ID.remote` (payload: the host, or `-` for this machine); the daemon
 * then moves the session's connections (SessionTools.reconnect) to the toolsrv of the new host.
 */
import type { DB } from '../store/db.js';
import type { EventBus } from '../event/bus.js';
import { readFileSync } from 'node:fs';
import { parseRemote, sshConfigHosts } from './remote.js';

export class SessionRemotes {
  private readonly byId = new Map<string, string>();
  private readonly moved = new Set<(sessionId: string) => void>();

  /** @param sshConfig the ssh config whose Host aliases hosts() offers ($OLLIE_SSH_CONFIG, else ~/.ssh/config) */
  constructor(
    private readonly db: DB,
    private readonly bus: EventBus,
    private readonly sshConfig?: string,
  ) {
    db.exec(`CREATE TABLE IF NOT EXISTS session_remote (
      session TEXT PRIMARY KEY REFERENCES session(id) ON DELETE CASCADE,
      remote  TEXT NOT NULL
    )`);
    for (const r of db.prepare('SELECT session, remote FROM session_remote').all() as Array<{
      session: string;
      remote: string;
    }>) {
      this.byId.set(r.session, r.remote);
    }
  }

  /** The session's host as the user named it, or undefined for this machine. */
  get(sessionId: string): string | undefined {
    return this.byId.get(sessionId);
  }

  /**
   * Sets the session's host (`[user@]host[:port]`, a Host alias; `-` or empty for this machine). Throws on a
   * value that is not a host; returns the stored label.
   */
  set(sessionId: string, remote: string | undefined): string | undefined {
    const label =
      remote === undefined || remote.trim() === '' || remote.trim() === '-' ? undefined : parseRemote(remote).label;
    if (label === this.byId.get(sessionId)) return label;
    if (label) {
      this.db
        .prepare(
          'INSERT INTO session_remote (session, remote) VALUES (?, ?) ON CONFLICT(session) DO UPDATE SET remote = excluded.remote',
        )
        .run(sessionId, label);
      this.byId.set(sessionId, label);
    } else {
      this.db.prepare('DELETE FROM session_remote WHERE session = ?').run(sessionId);
      this.byId.delete(sessionId);
    }
    this.bus.publish(`session.${sessionId}.remote`, label ?? '-');
    for (const l of [...this.moved]) l(sessionId);
    return label;
  }

  /** The Host aliases of the ssh config (none when there is no config): what the GUI offers. */
  hosts(): string[] {
    if (!this.sshConfig) return [];
    try {
      return sshConfigHosts(readFileSync(this.sshConfig, 'utf8'));
    } catch {
      return [];
    }
  }

  /** The session is gone (its row went with it, by the foreign key). */
  forget(sessionId: string): void {
    this.byId.delete(sessionId);
  }

  /** Called after a session's host changed; returns an unsubscribe function. */
  onMove(listener: (sessionId: string) => void): () => void {
    this.moved.add(listener);
    return () => this.moved.delete(listener);
  }
}
