/**
 * Remembered bypass approvals ("rules"), computed from a request a person approved — never typed free-form:
 *
 * - `prefix`: a tool, a program and its arguments as words of the parsed command (shellwords.ts). A later
 *   request matches when its command parses to plain words that begin with the rule's words, the words it adds
 *   being operands (no `-option` or `NAME=value` before a `--`): `npm test` covers `npm test -- --watch`, not
 *   `npm testx`, and never a command with an operator or an expansion (`npm test; curl x | sh`,
 *   `npm test && rm -rf ~`, `npm test $(id)`), which does not parse to words at all.
 * - `exact`: the whole command (or a tool's JSON arguments), character for character. What a request gets
 *   when its command has operators, when it is the program alone, when a program in it joins its arguments
 *   into code (eval, ssh, watch…, first or behind a wrapper like `timeout 30 ssh`: a prefix of such a command is
 *   not a prefix of what runs), or when the tool takes arguments rather than a command line.
 *
 * A rule's scope is one session (kept until the session's tool server is closed) or global (kept until revoked).
 * The glob rules of earlier versions (`always:*` approved everything) are dropped when the store opens.
 */
import type { DB } from './db.js';
import { hiddenChar, quoteWords, shellWords } from './shellwords.js';

export type RuleKind = 'prefix' | 'exact';

export interface RuleSpec {
  tool: string;
  kind: RuleKind;
  /** prefix: the words, quoted as a command line; exact: the command (or JSON arguments) as requested. */
  rule: string;
}

export interface BypassRule extends RuleSpec {
  id: number;
  /** The session id for a session rule; null for a global one. */
  session: string | null;
  created: number;
}

/** What a rule is matched against: a bypass request's tool and what it runs (src/toolsrv/protocol.ts). */
export interface RuleSubject {
  tool: string;
  /** `TOOL COMMAND` or `TOOL JSON-ARGUMENTS`. */
  cmd: string;
  /** The tool's command line, when the call was described by it. */
  command?: string;
}

/** Programs that join their arguments into code to run: a rule that let arguments be added would let code in. */
const JOINS_ARGUMENTS = new Set([
  'eval',
  'builtin',
  'command',
  'trap',
  'ssh',
  'watch',
  'su',
  'runuser',
  'parallel',
  'script',
  'tmux',
  'screen',
]);

const TOOL_NAME = /^[A-Za-z0-9_.-]+$/;

/**
 * The first word naming a program that joins its arguments into code — anywhere in the command, not only first:
 * behind a wrapper (`timeout 30 ssh host uptime`, `env ssh …`, `nice`, `sudo`, `exec`, `xargs`…) it gets the
 * added words all the same (`… uptime ';' rm -rf ~` runs on the remote shell).
 */
function joiner(words: string[]): string | undefined {
  return words.map((w) => w.replace(/^.*\//, '')).find((w) => JOINS_ARGUMENTS.has(w));
}

/** The part of a request a rule is about: its command line, or the JSON arguments after the tool name. */
function subjectText(s: RuleSubject): string {
  return s.command ?? s.cmd.slice(s.tool.length + 1);
}

/**
 * The rule that approving `s` for the session or always stores, or why none can be (approve it once).
 */
export function ruleFor(s: RuleSubject): RuleSpec | { refused: string } {
  const text = subjectText(s);
  if (s.command !== undefined) {
    const parsed = shellWords(s.command);
    if ('words' in parsed) {
      if (parsed.words.length > 1 && !joiner(parsed.words))
        return { tool: s.tool, kind: 'prefix', rule: quoteWords(parsed.words) };
    }
  }
  return [...text].some(hiddenChar)
    ? {
        refused:
          'the command holds a newline, a control character or invisible formatting; such a command can only be approved once',
      }
    : { tool: s.tool, kind: 'exact', rule: text };
}

/** Checks a rule as stored: a clear error for anything malformed or broader than one program and its arguments. */
export function checkRule(r: RuleSpec): void {
  if (!TOOL_NAME.test(r.tool)) throw new Error(`bypass rule: bad tool name ${JSON.stringify(r.tool)}`);
  if (r.kind === 'exact') {
    if (!r.rule.trim()) throw new Error('bypass rule: an exact rule needs the command');
    if ([...r.rule].some(hiddenChar))
      throw new Error(`bypass rule ${JSON.stringify(r.rule)}: control or invisible characters cannot be in a rule`);
    return;
  }
  if (r.kind !== 'prefix') throw new Error(`bypass rule: kind must be prefix or exact, not ${JSON.stringify(r.kind)}`);
  const parsed = shellWords(r.rule);
  if ('refused' in parsed)
    throw new Error(
      `bypass rule ${JSON.stringify(r.rule)}: not a plain command (${parsed.refused}); wildcards, operators and expansions are never rules`,
    );
  if (parsed.words.length < 2)
    throw new Error(
      `bypass rule ${JSON.stringify(r.rule)}: too broad; a prefix rule names the program and at least one argument`,
    );
  const program = joiner(parsed.words);
  if (program)
    throw new Error(
      `bypass rule ${JSON.stringify(r.rule)}: ${program} joins its arguments into code, so only an exact rule can name it`,
    );
}

/** Whether rule `r` covers the request `s`. */
export function ruleMatches(r: RuleSpec, s: RuleSubject): boolean {
  if (r.tool !== s.tool) return false;
  if (r.kind === 'exact') return r.rule === subjectText(s);
  if (s.command === undefined) return false;
  const want = shellWords(r.rule);
  const got = shellWords(s.command);
  if ('refused' in want || 'refused' in got || got.words.length < want.words.length) return false;
  if (!want.words.every((w, i) => got.words[i] === w)) return false;
  return addedWordsArePlain(want.words, got.words.slice(want.words.length));
}

/**
 * The words a request adds to a prefix rule may be operands, not options or settings: `find . -name x` must not
 * become `find . -name x -exec sh -c …`, nor `git log` `git log --output=~/.bashrc`, nor `make test`
 * `make test SHELL=/tmp/x` (nor `make test -- SHELL=/tmp/x`: make reads settings after `--` too). After a `--` (in
 * the rule or added) every other word is an operand by convention, which is how `npm test -- --watch` hands its
 * options to the test runner; a `NAME=value` word never is, there or anywhere.
 */
function addedWordsArePlain(rule: string[], added: string[]): boolean {
  let operands = rule.includes('--');
  for (const w of added) {
    // A setting stays a setting after `--`: GNU make reads `make test -- SHELL=./x` as SHELL=./x all the same
    // (and dd its `of=`). Only an option's own `--opt=value`, for the program the `--` hands words on to, passes.
    if (w.includes('=') && !(operands && w.startsWith('-'))) return false;
    if (operands) continue;
    if (w === '--') operands = true;
    else if (w.startsWith('-')) return false;
  }
  return true;
}

export class BypassRuleStore {
  private readonly q;

  constructor(db: DB, log: (m: string) => void = () => undefined) {
    const COLS = 'id, tool, kind, rule, session, created';
    this.q = {
      list: db.prepare<[], BypassRule>(`SELECT ${COLS} FROM approval_rule ORDER BY id`),
      add: db.prepare(
        'INSERT OR IGNORE INTO approval_rule (tool, kind, rule, session, created) VALUES (?, ?, ?, ?, ?)',
      ),
      find: db.prepare<[string, string, string, string], BypassRule>(
        `SELECT ${COLS} FROM approval_rule WHERE tool = ? AND kind = ? AND rule = ? AND IFNULL(session, '') = ?`,
      ),
      remove: db.prepare('DELETE FROM approval_rule WHERE id = ?'),
      removeSession: db.prepare('DELETE FROM approval_rule WHERE session = ?'),
    };
    // Glob rules from before: `always:*` approved every bypass everywhere. None is carried over.
    for (const old of db.prepare<[], { pattern: string }>('SELECT pattern FROM bypass_rule').all()) {
      log(
        `dropped the old "always" rule ${JSON.stringify(old.pattern)}: glob rules are no longer honoured; approve the command again for a rule on its words`,
      );
    }
    db.prepare('DELETE FROM bypass_rule').run();
    // Session rules outlive neither their session's tool server nor the daemon (one killed with -9 included).
    db.prepare('DELETE FROM approval_rule WHERE session IS NOT NULL').run();
    for (const r of this.list()) {
      try {
        checkRule(r);
      } catch (e) {
        log(`dropped the stored rule ${r.id}: ${(e as Error).message}`);
        this.q.remove.run(r.id);
      }
    }
  }

  /** Every rule, global and of every session, oldest first. */
  list(): BypassRule[] {
    return this.q.list.all();
  }

  /** Stores a rule (or returns the same one already there); `session` scopes it to one session. Throws for a bad rule. */
  add(spec: RuleSpec, session?: string): BypassRule {
    checkRule(spec);
    this.q.add.run(spec.tool, spec.kind, spec.rule, session ?? null, Date.now());
    return this.q.find.get(spec.tool, spec.kind, spec.rule, session ?? '')!;
  }

  /** Revokes a rule by id; whether it was there. */
  remove(id: number): boolean {
    return this.q.remove.run(id).changes > 0;
  }

  /** Drops the rules of one session. */
  forgetSession(session: string): void {
    this.q.removeSession.run(session);
  }

  /** The first rule, global or of `session`, that covers the request. */
  match(s: RuleSubject, session: string): BypassRule | undefined {
    return this.list().find((r) => (r.session === null || r.session === session) && ruleMatches(r, s));
  }
}
