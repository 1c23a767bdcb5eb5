/**
 * An agent against the resident tool hosts of its session (src/toolsrv/exec/hosts.ts). A host is keyed by its
 * wrapped command, which holds the protected paths toolsrv looks up on disk at every command (sandbox/index.ts,
 * protectArgs): an agent that adds a `.git/worktrees` entry before each hosted call (code_outline) got a new
 * codeintel host each time, every old one idling on for ten minutes — resident processes without bound. Past a few
 * hosts of one name in one cwd the oldest are retired.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { testHarness } from '../olliesrv/agent-harness.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';
import { until } from '../wait.js';
import { attackerProfile, results, script, sh, type Call } from './scripted-calls.js';

beforeAll(() => buildNative());

/** The codeintel hosts running in `cwd`. */
function hostsIn(cwd: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (!readFileSync(`/proc/${e}/cmdline`, 'utf8').includes('codeintel')) continue;
      if (readlinkSync(`/proc/${e}/cwd`) === cwd) out.push(Number(e));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

describe('an agent that changes its protected paths before every hosted call', () => {
  it('makes a .git/worktrees entry, then calls code_outline, 8 times: at most 3 codeintel hosts stay', async () => {
    const h = await testHarness({ profiles: { attacker: attackerProfile(['shell', 'code_outline'], 40) } });
    const ws = join(h.dir, 'ws');
    mkdirSync(ws);
    execFileSync('git', ['init', '-q'], { cwd: ws });
    writeFileSync(join(ws, 'a.ts'), 'export function f(): number {\n  return 1;\n}\n');
    const a = await h.agent({ profile: 'attacker', session: (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim() });
    const calls: Call[] = [];
    for (let i = 0; i < 8; i++)
      calls.push(sh(`mkdir -p .git/worktrees/w${i} && echo made`), {
        name: 'code_outline',
        args: { path: join(ws, 'a.ts') },
      });
    h.mock.script(...script(...calls));
    const out = results(await h.turn(a.path, 'attack', 90_000));
    expect(out.at(-1), out.join('\n')).toMatch(/\bf\b/);
    await until(() => hostsIn(ws).length <= 3, `at most 3 codeintel hosts in ${ws}`, 10_000);
    expect(hostsIn(ws).length).toBeGreaterThan(0);
  }, 150_000);
});
