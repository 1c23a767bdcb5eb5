/**
 * The formats as declared on the namespace: which files have none (generated content must have one), `help` prints
 * them, the gateway's JSON and OpenAPI have one key per declared column or key, and the GUI completes from the
 * daemon's command table.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Records, KeyValues, type AnyFormat } from '../../src/formats/index.js';
import {
  AGENT_CTL,
  BACKEND_SETUP,
  BYPASS_DECISION,
  BYPASS_RULES_WRITE,
  bypassDecisionLine,
  parseBypassDecision,
  COMMAND_LIST,
  EVENTS,
  LOG_FROM,
  ONESHOT_HEADERS,
} from '../../src/formats/olliesrv.js';
import { parseFromRequest } from '../../src/olliesrv/agent/chatlog.js';
import { parseOneShot } from '../../src/olliesrv/agent/oneshot.js';
import { parseSetupRequest } from '../../src/olliesrv/backend/setup.js';
import { formatsOf, render, renderLine } from '../../src/gateway/formats.js';
import { openApi } from '../../src/gateway/openapi.js';
import { ctlCompletions } from '../../src/renderer/src/lib/parse.js';
import { withGateway } from './gateway-harness.js';
import { declaredLeaves, declaredTree } from './declared.js';
import { olliesrvNamespace, type Olliesrv } from '../../src/olliesrv/fs/spec.js';

describe('which files declare a format', () => {
  it('lists the files without one; a file whose content the daemon generates (anything readable) must have one', () => {
    const missing = declaredLeaves().filter((l) => !l.format);
    // Listed for whoever adds files: write-only files may go without, but then say what they take in their doc.
    if (missing.length)
      console.info(
        `files without a declared format:\n${missing.map((l) => `  ${l.pattern} (read: ${l.read ?? 'none'}, write: ${l.write ?? 'none'})`).join('\n')}`,
      );
    expect(missing.filter((l) => l.read !== undefined).map((l) => l.pattern)).toEqual([]);
  });

  it("help prints each file's format under it", () => {
    const help = olliesrvNamespace({} as Olliesrv, 'owner').help();
    const lines = help.split('\n');
    for (const l of declaredLeaves()) {
      const at = lines.findIndex((x) => x.includes(` ${l.pattern} `));
      expect(at, l.pattern).toBeGreaterThanOrEqual(0);
      expect(lines[at + 1]!.trim(), l.pattern).toBe(`Format: ${l.format!.describe()}`);
    }
    expect(help).toContain(
      'Format: tab-separated records, one a line (\\t \\n \\\\ escaped): id; name; paused (boolean); connected (boolean): 1 while a tool server serves it; remote (- for none): none for this machine; cwd.',
    );
  });

  it('the requests the daemon parses are declared, printed by help under the file, and parsed through the declaration', () => {
    const requests = new Map(
      declaredLeaves()
        .filter((l) => l.request)
        .map((l) => [l.pattern, l.request!]),
    );
    expect(requests.get('/session/{session}/agent/{agent}/log.from')).toBe(LOG_FROM);
    expect(requests.get('/generate')).toBe(ONESHOT_HEADERS);
    expect(requests.get('/complete')).toBe(ONESHOT_HEADERS);
    expect(requests.get('/config/check')).toBe(BACKEND_SETUP);
    expect(requests.get('/config/backend')).toBe(BACKEND_SETUP);
    expect(requests.get('/bypassrules')).toBe(BYPASS_RULES_WRITE);
    expect(requests.get('/session/{session}/bypass')).toBe(BYPASS_DECISION);
    const lines = olliesrvNamespace({} as Olliesrv, 'owner')
      .help()
      .split('\n');
    for (const [pattern, f] of requests) {
      const at = lines.findIndex((x) => x.includes(` ${pattern} `));
      expect(lines[at + 2]!.trim(), pattern).toBe(`Request: ${f.describe()}`);
    }
    // What the clients write, formatted through the declarations, is what the daemon's parsers read.
    expect(parseFromRequest(LOG_FROM.format('before', ["b 1\t'x", '25']))).toEqual({
      kind: 'before',
      id: "b 1\t'x",
      n: 25,
    });
    expect(parseFromRequest(LOG_FROM.format('tail', ['7']))).toEqual({ kind: 'tail', n: 7 });
    const headers = { system: "be brief = 'terse'\t", model: 'm x', temperature: 0.5 };
    expect(parseOneShot(`${ONESHOT_HEADERS.format(headers)}\nthe text\n\nmore`)).toEqual({
      headers: { system: "be brief = 'terse'\t", model: 'm x', temperature: '0.5' },
      text: 'the text\n\nmore',
    });
    expect(
      parseSetupRequest(
        BACKEND_SETUP.format({
          provider: 'compatible',
          url: 'http://h:1/v1',
          key: "k'e y=",
          name: 'lab',
          default: 'no',
        }),
        'config/backend',
      ),
    ).toEqual({
      provider: 'compatible',
      name: 'lab',
      url: 'http://h:1/v1',
      key: "k'e y=",
      makeDefault: false,
    });
    expect(parseBypassDecision(bypassDecisionLine("b 2'\t", 'approve', 'always'))).toEqual({
      id: "b 2'\t",
      decision: 'approve',
      remember: 'always',
    });
    expect(parseBypassDecision(bypassDecisionLine('7f', 'deny'))).toEqual({ id: '7f', decision: 'deny' });
    expect(bypassDecisionLine('7f', 'approve', 'session')).toBe('7f approve session');
    expect(() => parseBypassDecision('7f approve session extra')).toThrow(/too many words/);
    expect(() => parseBypassDecision('7f allow')).toThrow(/unknown command "allow"/);
    expect(() => parseBypassDecision('')).toThrow(/expected: ID approve\|deny/);
    // A changed declaration changes what they accept: the parsers read the declared keys, not a copy.
    const keys = [...ONESHOT_HEADERS.keys];
    try {
      ONESHOT_HEADERS.keys.push({ name: 'extra' });
      expect(parseOneShot('extra=1\n\nx').headers).toEqual({ extra: '1' });
    } finally {
      ONESHOT_HEADERS.keys.splice(0, Infinity, ...keys);
    }
    expect(parseOneShot('extra=1\n\nx')).toEqual({ headers: {}, text: 'extra=1\n\nx' });
  });
});

/** A row of hostile but valid values for a declaration's fields. */
const sample = (names: string[]): Record<string, string> =>
  Object.fromEntries(names.map((n, i) => [n, `${n} v=${i}\t'x"\\\n`]));

describe("the gateway's JSON: one key per column of the file it renders", () => {
  const formats = formatsOf(declaredTree());

  it('every record file, key=value file and event payload, rendered from content the declaration wrote', () => {
    let records = 0;
    for (const [pattern, f] of Object.entries(formats) as Array<[string, AnyFormat]>) {
      if (f instanceof Records) {
        records++;
        const row = sample(f.columns.map((c) => c.name));
        const json = render(f, f.format([row, row])) as Array<Record<string, unknown>>;
        expect(json, pattern).toHaveLength(2);
        for (const o of json) expect(Object.keys(o), pattern).toEqual(f.columns.map((c) => c.name));
        expect(renderLine(f, f.formatRow(row)), pattern).toEqual(row);
      } else if (f instanceof KeyValues) {
        const values = sample(f.keys.map((k) => k.name));
        expect(Object.keys(render(f, f.format(values)) as object), pattern).toEqual(f.keys.map((k) => k.name));
      }
    }
    expect(records).toBeGreaterThanOrEqual(12);
    for (const k of EVENTS.kinds) {
      const payload = sample(k.payload.columns.map((c) => c.name));
      const o = renderLine(
        EVENTS,
        EVENTS.formatLine(k.topic.replace('{session}', 'S').replace('{agent}', 'A'), payload),
      ) as { payload: object };
      expect(Object.keys(o.payload), k.topic).toEqual(k.payload.columns.map((c) => c.name));
    }
  });

  it('the OpenAPI document describes exactly those keys', () => {
    const doc = openApi(declaredTree(), formats, 'http://127.0.0.1:1') as {
      paths: Record<
        string,
        { get?: { responses: { '200': { content: Record<string, { schema: Record<string, unknown> }> } } } }
      >;
    };
    for (const [pattern, f] of Object.entries(formats)) {
      const schema = doc.paths[pattern]?.get?.responses['200'].content['application/json']?.schema as
        { items?: { properties: object; required: string[] }; properties?: object } | undefined;
      if (f instanceof Records && schema) {
        expect(Object.keys(schema.items!.properties), pattern).toEqual(f.columns.map((c) => c.name));
        expect(schema.items!.required, pattern).toEqual(f.columns.map((c) => c.name));
      }
      if (f instanceof KeyValues && schema)
        expect(Object.keys(schema.properties!), pattern).toEqual(f.keys.map((k) => k.name));
    }
  });
});

describe('against the real daemon', () => {
  const g = withGateway();
  const get = (path: string): Promise<unknown> => g.json(path);

  it('every JSON object the gateway serves for a declared file has one key per declared column or key', async () => {
    const a = await g.h.agent();
    const tree = (
      g.h.daemon.server.options.fs as unknown as { declared(): ReturnType<typeof declaredTree> }
    ).declared();
    const formats = formatsOf(tree);
    const files: Record<string, string> = {
      '/backends': '/backends',
      '/models': '/models',
      '/config/providers': '/config/providers',
      '/session/idx': '/session/idx',
      '/session/{session}/agent/idx': `/session/${a.session}/agent/idx`,
      '/session/{session}/agent/{agent}/cfg': `/${a.path}/cfg`,
      '/session/{session}/agent/{agent}/stats': `/${a.path}/stats`,
    };
    for (const [pattern, path] of Object.entries(files)) {
      const f = formats[pattern];
      const json = await get(path);
      if (f instanceof Records) {
        expect((json as object[]).length, pattern).toBeGreaterThan(0);
        for (const o of json as object[]) expect(Object.keys(o), pattern).toEqual(f.columns.map((c) => c.name));
      } else if (f instanceof KeyValues) {
        // Every key the file has is declared, and the declared ones the daemon always writes are there.
        const keys = Object.keys(json as object);
        expect(
          keys.filter((k) => !f.keys.some((d) => d.name === k) && !f.extra?.pattern.test(k)),
          pattern,
        ).toEqual([]);
        expect(keys.length, pattern).toBeGreaterThan(3);
      } else {
        throw new Error(`${pattern} has no records or key=value format`);
      }
    }
  });

  it("the GUI's /command completion is the daemon's command table: every command help lists, none more", async () => {
    const a = await g.h.agent();
    const help = await g.h.c.rdwrText(`${a.path}/ctl`, 'help');
    const daemon = COMMAND_LIST.parse(help).map((r) => r.usage!.split(' ')[0]);
    expect(ctlCompletions('').map((c) => c.name)).toEqual(daemon);
    expect(daemon).toHaveLength(AGENT_CTL.commands.length);
    expect(ctlCompletions('pe').map((c) => c.name)).toEqual(['peeradd', 'peerdel', 'peers']);
  });

  it('a ctl argument and a session cwd with spaces, tabs, quotes and = work as the GUI and o quote them', async () => {
    const { mkdirSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { SESSION_NEW, SESSION_IDX } = await import('../../src/formats/olliesrv.js');
    const { parseSessionIdx } = await import('../../src/renderer/src/lib/parse.js');
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('a b', "it's", 'x=y z', 'tab\there', 'q"uote', 'back\\slash', 'é 日本'),
        async (name) => {
          const cwd = join(g.h.dir, `dir ${name}`);
          mkdirSync(cwd, { recursive: true });
          const created = (await g.h.c.rdwrText('session/new', SESSION_NEW.format({ cwd }))).trim();
          const row = parseSessionIdx(await g.h.c.readText('session/idx')).find((s) => s.name === created);
          expect(row?.cwd).toBe(cwd);
          expect(SESSION_IDX.parse(await g.h.c.readText('session/idx')).find((r) => r.name === created)?.cwd).toBe(cwd);
          const agent = (await g.h.c.rdwrText(`session/${created}/agent/new`, 'agent=test')).trim();
          const other = join(g.h.dir, `other ${name}`);
          mkdirSync(other, { recursive: true });
          expect(
            (await g.h.c.rdwrText(`session/${created}/agent/${agent}/ctl`, AGENT_CTL.format('cwd', [other]))).trim(),
          ).toBe(other);
          expect((await g.h.c.rdwrText(`session/${created}/agent/${agent}/ctl`, 'cwd')).trim()).toBe(other);
        },
      ),
      { numRuns: 7 },
    );
  });
});
