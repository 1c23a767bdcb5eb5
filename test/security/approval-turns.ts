/**
 * Approvals as a person gives them in tests: the agent's scripted reply is a call that asks to leave the sandbox,
 * and this test, writing the session's `bypass` file as the GUI does, is the person.
 */
import type { Harness } from '../olliesrv/agent-harness.js';
import { until } from '../wait.js';

/** The mock's turns for one shell call that asks to leave the sandbox, then a closing text. */
export const bypassCall = (command: string) => [
  [{ toolCalls: [{ name: 'shell', args: { command, bypass: true } }] }],
  [{ text: 'done' }],
];

export interface Agent {
  session: string;
  path: string;
  aid: string;
}

/**
 * Prompts the agent (whose scripted reply is one bypass call) and waits until either its request shows in the
 * session's bypass file (returned, split in columns) or the turn ends without one (undefined: it was approved
 * by a remembered rule, or never asked).
 */
export async function prompt(hh: Harness, a: Agent): Promise<string[] | undefined> {
  const agent = hh.daemon.agents.all().find((x) => x.id === a.aid)!;
  let ended = false;
  void agent.nextTurn().then(() => (ended = true));
  await hh.c.write(`${a.path}/prompt`, 'go');
  const seen = await until(
    async () => {
      const line = (await hh.c.readText(`session/${a.session}/bypass`)).split('\n').find(Boolean);
      return line ? { req: line.split('\t') } : ended ? { req: undefined } : undefined;
    },
    'a bypass request or the end of the turn',
    30_000,
  );
  return seen.req;
}

/** Answers a request (`ID approve|deny ...`) as the person, and waits for the turn it unblocks to end. */
export async function resolve(hh: Harness, a: Agent, req: string): Promise<void> {
  const agent = hh.daemon.agents.all().find((x) => x.id === a.aid)!;
  const done = agent.nextTurn();
  await hh.c.write(`session/${a.session}/bypass`, req);
  await done;
}

/** What the agent's last tool call returned. */
export async function lastTool(hh: Harness, a: Agent): Promise<string> {
  return (await hh.blocks(a.path)).filter((b) => b.role === 'tool').at(-1)!.content;
}
