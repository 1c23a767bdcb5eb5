/**
 * Every format the olliesrv namespace declares round-trips hostile values: what the daemon formats through a
 * declaration, every client parses back through it to the same values (spaces, tabs, newlines, `=`, quotes,
 * backslashes, `-`, unicode and invisible characters, empty). The formats are enumerated from the declared tree, so a
 * new declaration is covered without an edit here, and a kind this test does not know fails it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Commands,
  EnvLines,
  Events,
  Json,
  JsonLines,
  KeyValues,
  Lines,
  OneLine,
  Records,
  Status,
  Text,
  splitWords,
  quoteWord,
  quoteWords,
  type AnyFormat,
  type Field,
} from '../../src/formats/index.js';
import { shellWords } from '../../src/olliesrv/store/shellwords.js';
import { declaredFormats } from './declared.js';

/** Characters that break naive line formats, quoting and escaping. */
const NASTY = [
  ' ',
  '\t',
  '\n',
  '\r',
  '=',
  "'",
  '"',
  '\\',
  '-',
  '#',
  '$',
  '`',
  '*',
  ';',
  '|',
  '{',
  '}',
  'é',
  '日本',
  '\u202e',
  '\u200b',
  '\u0000',
  '\u00a0',
  '🙂',
  '\\n',
  '\\u{41}',
  "'\\''",
  '--',
];
const hostile: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('', '-', '\\-', ...NASTY),
  fc
    .array(fc.oneof(fc.constantFrom(...NASTY), fc.string({ unit: 'grapheme', maxLength: 4 })), { maxLength: 8 })
    .map((a) => a.join('')),
  fc.string({ unit: 'binary', maxLength: 12 }),
);
/** A value with no newline (formats that are one value a line). */
const oneLine = hostile.map((s) => s.replace(/[\n\r]/g, ''));

const RUNS = { numRuns: 150 };

function rowOf(fields: readonly Field[]): fc.Arbitrary<Record<string, string | null>> {
  return fc.record(
    Object.fromEntries(fields.map((c) => [c.name, c.optional ? fc.option(hostile, { nil: null }) : hostile])),
  );
}

function checkRecords(f: Records): void {
  fc.assert(
    fc.property(fc.array(rowOf(f.columns), { maxLength: 5 }), (rows) => {
      expect(f.parse(f.format(rows))).toEqual(rows);
    }),
    RUNS,
  );
}

function checkKeyValues(f: KeyValues): void {
  const keys = fc
    .subarray(f.keys.map((k) => k.name))
    .chain((names) => fc.record(Object.fromEntries(names.map((n) => [n, hostile]))));
  const extra = f.extra
    ? fc
        .dictionary(fc.constantFrom('subagent.a1', 'subagent.b-2', 'extra_key'), hostile, { maxKeys: 2 })
        .map((d) =>
          Object.fromEntries(
            Object.entries(d).filter(([k]) => f.extra!.pattern.test(k) && !f.keys.some((x) => x.name === k)),
          ),
        )
    : fc.constant({});
  fc.assert(
    fc.property(keys, extra, (declared, more) => {
      const values = { ...declared, ...more };
      expect(f.parse(f.format(values))).toEqual(values);
    }),
    RUNS,
  );
}

function checkCommands(f: Commands): void {
  for (const c of f.commands) {
    const need = c.args.filter((a) => !a.optional).length;
    fc.assert(
      fc.property(fc.array(hostile, { minLength: need, maxLength: c.args.length }), (args) => {
        expect(f.parse(f.format(c.name, args))).toEqual({ name: c.name, args });
      }),
      { numRuns: 60 },
    );
    // Typed by a person, unquoted, the last argument is the rest of the line as written.
    if (c.args.length === 1)
      expect(f.parse(`${c.name}   free text, don't "quote" \\ it  \n`)).toEqual({
        name: c.name,
        args: [`free text, don't "quote" \\ it`],
      });
  }
  expect(() => f.parse('no-such-command')).toThrow(/unknown command "no-such-command"; known commands: /);
  // What the commands answer is declared too, and round-trips the same way.
  for (const c of f.commands) if (c.reply) check(c.reply as AnyFormat);
}

function checkEvents(f: Events): void {
  // A payload that does not read as declared is no fields, never an exception that stops a client's stream.
  expect(f.fields(f.split('session.S.agent.A.bypass.request only-one-field'))).toBeUndefined();
  expect(f.fields(f.split('session.S.kill unexpected'))).toBeUndefined();
  expect(f.fields(f.split('ollie.overflow 12'))).toEqual({ dropped: '12' });
  for (const k of f.kinds) {
    fc.assert(
      fc.property(fc.uuid(), fc.uuid(), rowOf(k.payload.columns), (sid, aid, payload) => {
        const topic = k.topic.replace('{session}', sid).replace('{agent}', aid);
        const e = f.split(f.formatLine(topic, payload));
        expect(e.topic).toBe(topic);
        expect(f.fields(e)).toEqual(payload);
      }),
      { numRuns: 60 },
    );
  }
}

function check(f: AnyFormat): void {
  switch (f.kind) {
    case 'tsv':
      return checkRecords(f);
    case 'kv':
      return checkKeyValues(f);
    case 'ctl':
      return checkCommands(f);
    case 'events':
      return checkEvents(f);
    case 'json':
      return fc.assert(
        fc.property(fc.jsonValue(), (v) => {
          expect(JSON.stringify(f.parse(f.format(v)))).toBe(JSON.stringify(v));
        }),
        RUNS,
      );
    case 'jsonl':
      return fc.assert(
        fc.property(
          fc.array(fc.dictionary(hostile, fc.oneof(hostile, fc.integer(), fc.boolean())), { maxLength: 4 }),
          (vs) => {
            expect(f.parse(f.format(vs))).toEqual(vs);
          },
        ),
        RUNS,
      );
    case 'lines':
      fc.assert(
        fc.property(
          fc.array(
            oneLine.filter((s) => s !== ''),
            { maxLength: 5 },
          ),
          (items) => {
            expect(f.parse(f.format(items))).toEqual(items);
          },
        ),
        RUNS,
      );
      // What a line cannot hold is refused when written, never mangled.
      expect(() => f.format(['a\nb'])).toThrow(/newline/);
      return;
    case 'value':
      fc.assert(
        fc.property(oneLine, (v) => {
          expect(f.parse(f.format(v))).toBe(v);
        }),
        RUNS,
      );
      expect(() => f.format('a\nb')).toThrow(/newline/);
      return;
    case 'status':
      return fc.assert(
        fc.property(fc.constantFrom(...f.words), hostile, (status, summary) => {
          expect(f.parse(f.format({ status, summary }))).toEqual({ status, summary });
        }),
        RUNS,
      );
    case 'text':
      return fc.assert(
        fc.property(hostile, (v) => {
          expect(f.parse(f.format(v))).toBe(v);
        }),
        RUNS,
      );
    case 'env':
      fc.assert(
        fc.property(fc.dictionary(fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/), oneLine), (vars) => {
          expect(f.parse(f.format(vars))).toEqual(vars);
        }),
        RUNS,
      );
      expect(() => f.format({ A: 'x\ny' })).toThrow(/newline/);
      return;
    default: {
      const unknown: never = f;
      throw new Error(`no round-trip property for format kind ${(unknown as AnyFormat).kind}: add one here`);
    }
  }
}

describe('every declared format round-trips hostile values', () => {
  const formats = declaredFormats();
  it('the namespace declares formats of every kind the library has', () => {
    const classes = [Records, KeyValues, Commands, Events, Json, JsonLines, Lines, OneLine, Status, Text, EnvLines];
    for (const cls of classes)
      expect(
        formats.some((f) => f instanceof cls),
        cls.name,
      ).toBe(true);
  });
  for (const f of formats) {
    it(`${f.kind} ${'name' in f ? String(f.name) : f.describe().slice(0, 40)}`, () => check(f));
  }
});

describe('one quoting mechanism', () => {
  it('a quoted word reads back as itself, and a shell (bypass rules) reads quoted words the same way', () => {
    fc.assert(
      fc.property(hostile, (w) => {
        expect(splitWords(quoteWord(w))).toEqual([w]);
      }),
      { numRuns: 300 },
    );
    // The strict reader refuses what a person could not see; what it accepts, it reads as splitWords does.
    fc.assert(
      fc.property(fc.array(hostile, { minLength: 1, maxLength: 4 }), (words) => {
        const line = quoteWords(words);
        const strict = shellWords(line);
        if ('words' in strict) expect(strict.words).toEqual(splitWords(line));
      }),
      { numRuns: 300 },
    );
  });
});
