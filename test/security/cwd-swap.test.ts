/**
 * agent/new checks a sub-agent's cwd (after resolving symlinks) when the sub-agent is created, but the workspace
 * is the agent's to rewrite: it replaces the directory with a symlink to / afterwards. The sandbox helper grants
 * a rule only while its path still resolves to itself, so the swapped directory grants nothing.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { describe, expect, it, onTestFinished } from 'vitest';
import { testHarness } from '../olliesrv/agent-harness.js';
import { until } from '../wait.js';
import { ATTACKER, results } from './scripted-calls.js';

describe("a sub-agent's cwd", () => {
  it('cannot be turned into / by swapping the directory for a symlink after agent/new checked it', async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const a = await h.agent({ profile: 'attacker' });
    const ws = join(h.dir, 'ws');
    mkdirSync(ws);
    // A directory outside the workspace (say, the user's ~/.local/bin): the sandbox must not let it be written.
    const victim = join('/tmp', `ollie-review-victim-${randomBytes(4).toString('hex')}`);
    mkdirSync(victim);
    onTestFinished(() => rmSync(victim, { force: true, recursive: true }));
    const target = join(victim, 'pwned');
    const sh = (command: string) => ({ toolCalls: [{ name: 'shell', args: { command } }] });
    const c9 = (op: string, path: string, data: string) => ({
      toolCalls: [{ name: 'client_9p', args: { op, path, data } }],
    });
    // Control: the agent itself cannot write there.
    h.mock.script(
      [sh(`touch ${target}; echo rc=$?`)],
      [sh(`mkdir -p ${ws}/d`)],
      [c9('rdwr', 'session/$OLLIE_SESSION_ID/agent/new', `name=kid cwd=${ws}/d`)],
      [sh(`rmdir ${ws}/d && ln -s / ${ws}/d && ls -ld ${ws}/d`)],
      // `!cmd` runs the shell tool for the kid, in the kid's sandbox, with no model turn.
      [c9('write', 'session/$OLLIE_SESSION_ID/agent/kid/prompt', `!touch ${target}; echo kid rc=$?`)],
      [{ text: 'done' }],
    );
    const out = results(await h.turn(a.path, 'attack'));
    expect(out[0]).not.toMatch(/rc=0/);
    expect(out[2]!.trim()).toBe('kid');
    await h.waitState(`session/${a.session}/agent/kid`, 'idle', 20000).catch(() => undefined);
    const kidOut = await until(
      async () => {
        const out = results(await h.blocks(`session/${a.session}/agent/kid`)).join('\n');
        return /kid rc=/.test(out) ? out : undefined;
      },
      "the sub-agent's attempt",
      10_000,
    );
    expect(kidOut).not.toMatch(/kid rc=0/);
    expect(existsSync(target)).toBe(false);
  });
});
