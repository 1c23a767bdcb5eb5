/**
 * Remembered `always` bypass approvals: glob patterns over the command in words (BypassRequest.cmd, e.g.
 * `shell npm test*`). A request whose command matches a rule is approved without asking. Listed and revocable.
 */
import type { DB } from './db.js';

export interface BypassRule {
  id: number;
  pattern: string;
  created: number;
}

/** Whole-string glob match: `*` any run of characters (including none), `?` one character, the rest literal. */
export function globMatch(pattern: string, text: string): boolean {
  const re = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[\\s\\S]*').replace(/\?/g, '[\\s\\S]')}$`);
  return re.test(text);
}

export class BypassRuleStore {
  private readonly q;

  constructor(db: DB) {
    this.q = {
      list: db.prepare<[], BypassRule>('SELECT id, pattern, created FROM bypass_rule ORDER BY id'),
      add: db.prepare('INSERT OR IGNORE INTO bypass_rule (pattern, created) VALUES (?, ?)'),
      byPattern: db.prepare<[string], BypassRule>('SELECT id, pattern, created FROM bypass_rule WHERE pattern = ?'),
      removeId: db.prepare('DELETE FROM bypass_rule WHERE id = ?'),
      removePattern: db.prepare('DELETE FROM bypass_rule WHERE pattern = ?'),
    };
  }

  list(): BypassRule[] {
    return this.q.list.all();
  }

  /** Adds a rule (or returns the existing one with the same pattern). */
  add(pattern: string): BypassRule {
    if (!pattern.trim()) throw new Error('a bypass rule needs a pattern');
    this.q.add.run(pattern, Date.now());
    return this.q.byPattern.get(pattern)!;
  }

  /** Revokes a rule by id or by pattern; whether one was there. */
  remove(rule: number | string): boolean {
    return (typeof rule === 'number' ? this.q.removeId.run(rule) : this.q.removePattern.run(rule)).changes > 0;
  }

  /** The first rule whose pattern matches `cmd`. */
  match(cmd: string): BypassRule | undefined {
    return this.list().find((r) => globMatch(r.pattern, cmd));
  }
}
