/** hooks.json as the hooks read it (src/olliesrv/hooks/config.ts): Claude Code's shape, errors naming file and field. */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EventBus } from '../../src/olliesrv/event/bus.js';
import { DEFAULT_HOOK_TIMEOUT, matching, parseHooks } from '../../src/olliesrv/hooks/config.js';
import { Hooks } from '../../src/olliesrv/hooks/hooks.js';

const F = '/cfg/hooks.json';
const one = (command: string) => [{ hooks: [{ type: 'command', command }] }];

describe('parseHooks', () => {
  it("reads Claude Code's shape, its UserPromptSubmit name and its matchers", () => {
    const t = parseHooks(
      F,
      JSON.stringify({
        hooks: {
          PreToolUse: [
            { matcher: 'file_write|file_edit', hooks: [{ type: 'command', command: 'fmt', timeout: 5 }] },
            { matcher: '*', hooks: [{ type: 'command', command: 'audit' }] },
          ],
          UserPromptSubmit: one('ctx'),
        },
      }),
    );
    expect(matching(t, 'PreToolUse', 'file_write').map((c) => [c.command, c.timeoutSec])).toEqual([
      ['fmt', 5],
      ['audit', DEFAULT_HOOK_TIMEOUT],
    ]);
    // The whole name: "file_edit" does not match "file_edit_many".
    expect(matching(t, 'PreToolUse', 'file_edit_many').map((c) => c.command)).toEqual(['audit']);
    expect(matching(t, 'UserPrompt').map((c) => c.command)).toEqual(['ctx']);
    expect(matching(t, 'Stop')).toEqual([]);
    expect(parseHooks(F, '').size).toBe(0);
    expect(parseHooks(F, JSON.stringify({ disableAllHooks: true, hooks: { Stop: one('x') } })).size).toBe(0);
  });

  it('names the file and the field that is wrong', () => {
    const bad: Array<[unknown, RegExp]> = [
      ['{', /^\/cfg\/hooks\.json: not JSON/],
      [[], /expected an object/],
      [{ hook: {} }, /unknown key "hook"/],
      [{ hooks: { PreToolUsage: [] } }, /hooks\.PreToolUsage: unknown event/],
      [{ hooks: { Stop: {} } }, /hooks\.Stop: expected a list/],
      [
        { hooks: { PreToolUse: [{ matcher: '(', hooks: [] }] } },
        /hooks\.PreToolUse\[0\]\.matcher: not a regular expression/,
      ],
      [{ hooks: { PreToolUse: [{ matcher: 3, hooks: [] }] } }, /hooks\.PreToolUse\[0\]\.matcher: must be a string/],
      [
        { hooks: { Stop: [{ hooks: [{ type: 'prompt', command: 'x' }] }] } },
        /hooks\.Stop\[0\]\.hooks\[0\]\.type: must be "command"/,
      ],
      [
        { hooks: { Stop: [{ hooks: [{ type: 'command', command: ' ' }] }] } },
        /hooks\.Stop\[0\]\.hooks\[0\]\.command: must be a non-empty/,
      ],
      [
        { hooks: { Stop: [{ hooks: [{ type: 'command', command: 'x', timeout: 0 }] }] } },
        /hooks\.Stop\[0\]\.hooks\[0\]\.timeout: must be a number/,
      ],
      [
        { hooks: { Stop: [{ hooks: [{ type: 'command', command: 'x', timeout: '5' }] }] } },
        /\.timeout: must be a number/,
      ],
      [
        { hooks: { Stop: [{ hooks: [{ type: 'command', command: 'x', async: true }] }] } },
        /hooks\.Stop\[0\]\.hooks\[0\]: unknown key "async"/,
      ],
    ];
    for (const [doc, re] of bad)
      expect(() => parseHooks(F, typeof doc === 'string' ? doc : JSON.stringify(doc)), JSON.stringify(doc)).toThrow(re);
  });
});

describe('the per-session switch', () => {
  it('is kept across restarts in a private file, and forgotten with the session', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ollie-hooks-off-'));
    try {
      const offFile = join(dir, 'data', 'hooks-off');
      const make = () =>
        new Hooks({
          configDir: join(dir, 'config'),
          run: { configDir: join(dir, 'config'), dataDir: join(dir, 'data'), runtimeDir: join(dir, 'run'), env: {} },
          bus: new EventBus(),
          log: () => undefined,
          offFile,
        });
      const a = make();
      a.setEnabled('s1', false);
      a.setEnabled('s2', false);
      a.setEnabled('s2', true);
      expect(statSync(offFile).mode & 0o777).toBe(0o600);
      const b = make();
      expect([b.enabled('s1'), b.enabled('s2')]).toEqual([false, true]);
      b.forget('s1');
      expect(make().enabled('s1')).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
