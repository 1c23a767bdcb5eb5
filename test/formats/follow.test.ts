/**
 * A format changed in the spec alone is followed by the daemon, the renderer's parsers, the gateway's JSON and `o`,
 * with no edit to any of them: the test reorders a declaration's columns and adds one, on the declaration the spec's
 * Leaf carries, against a real daemon.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Records, type Field } from '../../src/formats/index.js';
import { formatsOf } from '../../src/gateway/formats.js';
import type { DeclaredNode } from '../../src/ninep/index.js';
import { parseAgentIdx, parsePending, parseSessionIdx } from '../../src/renderer/src/lib/parse.js';
import { agentRows, pendingRequests, sessionRows } from '../../src/cli/o-read.js';
import { withGateway } from './gateway-harness.js';

const g = withGateway();
const restore: Array<() => void> = [];

afterEach(() => {
  for (const r of restore.splice(0)) r();
});

/** The declaration the spec's Leaf at `pattern` carries. */
function specFormat(pattern: string): Records {
  const tree = (g.h.daemon.server.options.fs as unknown as { declared(): DeclaredNode }).declared();
  const f = formatsOf(tree)[pattern];
  if (!(f instanceof Records)) throw new Error(`${pattern} declares no records`);
  return f;
}

/** Changes the columns of a declaration for this test only. */
function change(f: Records, columns: Field[]): void {
  const before = [...f.columns];
  f.columns.splice(0, f.columns.length, ...columns);
  restore.push(() => f.columns.splice(0, f.columns.length, ...before));
}

const json = (path: string): Promise<Array<Record<string, unknown>>> => g.json(path);

describe('a format changed in the spec alone', () => {
  it('session/idx with its columns reversed and one added: the daemon writes it, the renderer, the gateway and o read it', async () => {
    const cwd = `${g.h.dir}`;
    await g.h.c.rdwrText('session/new', `name=follow cwd=${cwd}`);
    const idx = specFormat('/session/idx');
    const before = await g.h.c.readText('session/idx');
    change(idx, [
      { name: 'label', optional: true, doc: 'a column the clients do not know' },
      ...[...idx.columns].reverse(),
    ]);

    const text = await g.h.c.readText('session/idx');
    expect(text).not.toBe(before);
    // The daemon writes the new order: the added column first (none), then cwd … id.
    const line = text.split('\n').find((l) => l.includes('\tfollow\t'))!;
    expect(line.split('\t')[0]).toBe('-');
    expect(line.split('\t')[1]).toBe(cwd);

    expect(parseSessionIdx(text).find((s) => s.name === 'follow')).toMatchObject({
      name: 'follow',
      cwd,
      paused: false,
    });
    const row = (await json('/session/idx')).find((r) => r.name === 'follow')!;
    expect(Object.keys(row)).toEqual(['label', 'cwd', 'remote', 'connected', 'paused', 'name', 'id']);
    expect(row).toMatchObject({ label: null, cwd, paused: '0' });
    expect(sessionRows(text).find((r) => r[0] === 'follow')).toEqual([
      'follow',
      expect.stringMatching(/^[0-9a-f-]{36}$/),
      'no',
      cwd,
    ]);
  });

  it('agent/idx and bypass reordered: the tree, the approvals and o follow', async () => {
    const a = await g.h.agent();
    const agentIdx = specFormat('/session/{session}/agent/idx');
    change(agentIdx, [...agentIdx.columns].reverse());
    const text = await g.h.c.readText(`session/${a.session}/agent/idx`);
    expect(text.split('\t').at(-1)!.trim()).toBe(a.sid);
    expect(parseAgentIdx(text)).toEqual([
      expect.objectContaining({ id: a.aid, name: a.name, session: a.sid, parent: '', depth: 0, state: 'idle' }),
    ]);
    expect(Object.keys((await json(`/session/${a.session}/agent/idx`))[0]!)).toEqual(
      agentIdx.columns.map((c) => c.name),
    );
    expect(agentRows(text)).toEqual([[a.name, 'idle', '0', '-', a.aid]]);

    // A pending request as the daemon would list it (formatted by the declaration, as spec.ts does), reordered.
    const bypass = specFormat('/session/{session}/bypass');
    change(bypass, [...bypass.columns].reverse());
    const request = {
      id: '7',
      agent: a.aid,
      tool: 'shell',
      cwd: '/w d',
      cmd: 'npm test\nrm -rf ~',
      reason: 'net',
      remember: 'once',
      rule: '',
    };
    const pending = bypass.format([request]);
    // Parsed back, it is the same request, of the session whose file it was read from.
    expect(parsePending(pending, a.sid)).toEqual([{ ...request, session: a.sid }]);
    expect(pendingRequests(pending, text)).toEqual([
      { id: '7', agent: a.name, tool: 'shell', cwd: '/w d', cmd: 'npm test\nrm -rf ~' },
    ]);
  });
});
