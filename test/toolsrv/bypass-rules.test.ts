import { describe, expect, it } from 'vitest';
import { BypassRuleStore, globMatch } from '../../src/olliesrv/store/bypass.js';
import { openDatabase } from '../../src/olliesrv/store/db.js';

describe('bypass rules', () => {
  it('match whole commands with * and ?, everything else literal', () => {
    expect(globMatch('shell npm test*', 'shell npm test')).toBe(true);
    expect(globMatch('shell npm test*', 'shell npm test -- --watch')).toBe(true);
    expect(globMatch('shell npm test*', 'shell npm install')).toBe(false);
    expect(globMatch('shell npm test', 'shell npm test; rm -rf /')).toBe(false); // anchored at both ends
    expect(globMatch('shell make ?', 'shell make a')).toBe(true);
    expect(globMatch('shell make ?', 'shell make ab')).toBe(false);
    expect(globMatch('shell (a).[b]+$x', 'shell (a).[b]+$x')).toBe(true); // regex characters are literal
    expect(globMatch('shell (a).[b]+$x', 'shell (a)x[b]+$x')).toBe(false);
    expect(globMatch('shell echo *', 'shell echo a\nb')).toBe(true); // * spans newlines too
  });

  it('are stored, listed, matched and revoked', () => {
    const db = openDatabase(':memory:');
    const rules = new BypassRuleStore(db);
    const a = rules.add('shell git push*');
    expect(rules.add('shell git push*')).toEqual(a); // the same pattern is one rule
    const b = rules.add('file_write *');
    expect(rules.list().map((r) => r.pattern)).toEqual(['shell git push*', 'file_write *']);
    expect(rules.match('shell git push origin main')).toEqual(a);
    expect(rules.match('shell git pull')).toBeUndefined();
    expect(rules.remove(a.id)).toBe(true);
    expect(rules.remove(a.id)).toBe(false);
    expect(rules.remove('file_write *')).toBe(true);
    expect(rules.list()).toEqual([]);
    expect(() => rules.add('  ')).toThrow(/needs a pattern/);
    expect(b.created).toBeGreaterThan(0);
    db.close();
  });
});
