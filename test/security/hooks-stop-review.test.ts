/**
 * A red-team review of the Stop guard's end of a turn (src/olliesrv/hooks/agent.ts stopHooks, agent/turn.ts): an
 * agent that wants its turn to end as done (`agent/idx` says `ok`) although the owner's Stop guard never let it.
 * Scripted tool calls of a real agent against a real olliesrv, toolsrv, sandbox helper and the mock LLM. Each test
 * failed before its fix:
 *
 * - text the agent injected into its own turn (ctl inject) between two failures of a guard that fails closed
 *   reset their count, so the guard never failed "twice running" and the turn went on to its step limit, as `ok`;
 * - the final round (the step limit reached) ran no Stop hook: an agent that kept calling tools ended its turn as
 *   `ok` without its Stop guard ever running;
 * - a turn started by a background process's exit (an interrupt, which skips the UserPrompt hooks) kept the last
 *   turn's Stop state: its first Stop was told `stop_hook_active: true` (a guard that insists once let it end).
 */
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { attackerInWork, cmd } from '../helpers/hooks.js';
import type { Block, Harness } from '../olliesrv/agent-harness.js';
import { attackerProfile, client9p, sh } from './scripted-calls.js';

/** The owner's Stop guard, failing closed: it reads a file the agent removed (or never had), and fails each time. */
const FAILING_GUARD = { Stop: [{ hooks: [{ ...cmd('cat .guard/rules >/dev/null'), failClosed: true }] }] };

const chatRequests = (h: Harness): number => h.mock.requests.filter((r) => r.path.includes('chat/completions')).length;

/** How the agent's last turn ended: the last column of agent/idx. */
async function lastTurn(h: Harness, session: string): Promise<string> {
  const idx = await h.c.readText(`session/${session}/agent/idx`);
  return idx.trim().split('\n').at(-1)!.split('\t').at(-1)!;
}

const errors = (blocks: Block[]): string[] => blocks.filter((b) => b.role === 'error').map((b) => b.content);

/** Until `cond` holds, or `ms` passed (then false). */
async function until(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}

describe('an agent ending its turn past the Stop guard', () => {
  it("injects text into its own turn between the guard's failures: they still count as running, the turn ends in error", async () => {
    const { h, a } = await attackerInWork(attackerProfile(['client_9p'], 8), FAILING_GUARD);
    const inject = client9p('rdwr', `${a.path}/ctl`, 'inject keep going');
    // Enough rounds for the step limit: the agent stops, injects, stops, injects…
    h.mock.script(
      [{ text: 'first' }],
      [{ toolCalls: [inject] }],
      [{ text: 'second' }],
      [{ toolCalls: [inject] }],
      [{ text: 'third' }],
      [{ toolCalls: [inject] }],
      [{ text: 'fourth' }],
      [{ toolCalls: [inject] }],
      [{ text: 'summary' }],
    );
    const blocks = await h.turn(a.path, 'go', 60_000);
    expect(errors(blocks).some((e) => /the turn ends unconfirmed: .*fails closed, again/.test(e))).toBe(true);
    // first (the guard fails: once more), the injection, second (fails again: the end).
    expect(chatRequests(h)).toBe(3);
    expect(await lastTurn(h, a.session)).toBe('error');
  }, 60_000);

  it('keeps calling tools until its step limit: the Stop guard runs at the final round, and blocking there ends the turn in error', async () => {
    const { h, a } = await attackerInWork(attackerProfile(['shell'], 2), {
      Stop: [{ hooks: [cmd("[ -f tests-passed ] || { echo 'run the tests first' >&2; exit 2; }")] }],
    });
    h.mock.script(
      [{ toolCalls: [sh('echo one')] }],
      [{ toolCalls: [sh('echo two')] }],
      [{ text: 'summary: all done' }],
    );
    const blocks = await h.turn(a.path, 'go', 60_000);
    expect(blocks.some((b) => b.name === 'hook' && b.content.startsWith('Stop hook: exit 2'))).toBe(true);
    expect(errors(blocks).some((e) => /the turn ends unconfirmed at its step limit: run the tests first/.test(e))).toBe(
      true,
    );
    expect(await lastTurn(h, a.session)).toBe('error');

    // A guard that lets it end at the final round: the turn is done.
    h.mock.script([{ toolCalls: [sh('touch tests-passed')] }], [{ toolCalls: [sh('echo two')] }], [{ text: 'done' }]);
    const again = (await h.turn(a.path, 'go', 60_000)).slice(blocks.length);
    expect(errors(again)).toEqual([]);
    expect(await lastTurn(h, a.session)).toBe('ok');
  }, 60_000);

  it("a turn a background process's exit starts does not inherit the last turn's Stop state", async () => {
    // The guard fails closed, and notes what each Stop told it.
    const { h, a } = await attackerInWork(attackerProfile(['shell'], 8), {
      Stop: [{ hooks: [{ ...cmd('{ cat; echo; } >> stops.jsonl; cat .guard/rules >/dev/null'), failClosed: true }] }],
    });
    h.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'sleep 0.3; echo finished', background: true } }] }],
      [{ text: 'first' }],
      [{ text: 'second' }],
      // The turn the process's exit starts.
      [{ text: 'third' }],
      [{ text: 'fourth' }],
    );
    const blocks = await h.turn(a.path, 'go', 60_000);
    expect(errors(blocks).some((e) => /again/.test(e))).toBe(true);
    const agent = h.daemon.agents.all().find((x) => x.id === a.aid)!;
    const assistant = async (text: string): Promise<boolean> =>
      (await h.blocks(a.path)).some((b) => b.role === 'assistant' && b.content === text);
    expect(await until(async () => (await assistant('third')) && !agent.busy && !agent.queue.length, 30_000)).toBe(
      true,
    );
    const stops = readFileSync(join(a.work, 'stops.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { stop_hook_active: boolean });
    // first, second; third (a new turn: nothing blocked in it yet), fourth.
    expect(stops.map((s) => s.stop_hook_active)).toEqual([false, true, false, true]);
    expect(await assistant('fourth')).toBe(true);
    expect(existsSync(join(a.work, '.guard'))).toBe(false);
  }, 60_000);
});
