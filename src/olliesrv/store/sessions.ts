/** Session rows. Every change is written through at once; there is no separate save step to forget. */
import type { DB } from './db.js';

export interface SessionRow {
  id: string;
  name: string;
  cwd: string;
  env: string;
  plan: string;
  paused: boolean;
  created: number;
  goal: string;
  goalstatus: string;
  workflow: string;
}

type Raw = Omit<SessionRow, 'paused'> & { paused: number };

export class SessionStore {
  private readonly q;

  constructor(private readonly db: DB) {
    this.q = {
      all: db.prepare<[], Raw>(
        'SELECT id, name, cwd, env, plan, paused, created, goal, goalstatus, workflow FROM session ORDER BY created, id',
      ),
      insert: db.prepare(
        'INSERT INTO session (id, name, cwd, env, plan, paused, created, goal, goalstatus, workflow) VALUES (@id, @name, @cwd, @env, @plan, @paused, @created, @goal, @goalstatus, @workflow)',
      ),
      goal: db.prepare('UPDATE session SET goal = ? WHERE id = ?'),
      goalstatus: db.prepare('UPDATE session SET goalstatus = ? WHERE id = ?'),
      workflow: db.prepare('UPDATE session SET workflow = ? WHERE id = ?'),
      rename: db.prepare('UPDATE session SET name = ? WHERE id = ?'),
      env: db.prepare('UPDATE session SET env = ? WHERE id = ?'),
      plan: db.prepare('UPDATE session SET plan = ? WHERE id = ?'),
      cwd: db.prepare('UPDATE session SET cwd = ? WHERE id = ?'),
      paused: db.prepare('UPDATE session SET paused = ? WHERE id = ?'),
      delete: db.prepare('DELETE FROM session WHERE id = ?'),
    };
  }

  all(): SessionRow[] {
    return this.q.all.all().map((r) => ({ ...r, paused: r.paused !== 0 }));
  }

  insert(row: SessionRow): void {
    this.q.insert.run({ ...row, paused: row.paused ? 1 : 0 });
  }

  rename(id: string, name: string): void {
    this.q.rename.run(name, id);
  }

  setEnv(id: string, env: string): void {
    this.q.env.run(env, id);
  }

  setPlan(id: string, plan: string): void {
    this.q.plan.run(plan, id);
  }

  setCwd(id: string, cwd: string): void {
    this.q.cwd.run(cwd, id);
  }

  setGoal(id: string, goal: string): void {
    this.q.goal.run(goal, id);
  }

  setGoalStatus(id: string, status: string): void {
    this.q.goalstatus.run(status, id);
  }

  setWorkflow(id: string, workflow: string): void {
    this.q.workflow.run(workflow, id);
  }

  setPaused(id: string, paused: boolean): void {
    this.q.paused.run(paused ? 1 : 0, id);
  }

  delete(id: string): void {
    this.q.delete.run(id);
  }

  /** Moves the WAL into the main database file, so the file alone is a complete copy. */
  checkpoint(): void {
    this.db.pragma('wal_checkpoint(TRUNCATE)');
  }
}
