#!/usr/bin/env node
/**
 * `o`: Ollie from a shell, for every day. Each command is a few plain 9P operations on the namespace (the same
 * files ollie-9p, scripts and the app use); nothing here is a second API.
 *
 * The context (which session, which agent) comes from flags (-s, -g) or the environment (OLLIE_SESSION and
 * OLLIE_AGENT by name, OLLIE_SESSION_ID and OLLIE_UNAME by id, as `o env` prints them and as tools and workflows
 * get them). It is never guessed: a command that needs one says which flag or variable is missing.
 */
import { dialOllie } from '../platform/dial.js';
import { Command } from 'commander';
import { resolve } from 'node:path';
import { lines, OREAD, type Client } from '../ninep/index.js';
import { defaultAddress } from '../platform/paths.js';
import type { Block } from '../olliesrv/agent/chatlog.js';
import { promptTurn, type TurnResult } from './turn.js';
import { escapeField, type KeyValues } from '../formats/index.js';
import {
  AGENT_CTL,
  AGENT_NEW,
  bypassDecisionLine,
  GOAL_STATUS,
  QUEUE_LIST,
  SESSION_CTL,
  SESSION_NEW,
} from '../formats/olliesrv.js';
import { agentNameOf, agentRows, pendingRequests, sessionNameOf, sessionRows, type Pending } from './o-read.js';

interface Globals {
  addr: string;
  session?: string;
  agent?: string;
}

class UsageError extends Error {}

const program = new Command('o')
  .description('Ollie from the shell: sessions, agents, prompts, goals and approvals, as plain 9P operations.')
  .option(
    '-a, --addr <addr>',
    'olliesrv address: unix!/path, tcp!host!port, or ssh![user@]host[:port][!/remote.sock] (over ssh)',
    defaultAddress(),
  )
  .option('-s, --session <name>', 'session (default: $OLLIE_SESSION, or the session whose id is $OLLIE_SESSION_ID)')
  .option('-g, --agent <name>', 'agent (default: $OLLIE_AGENT, or the agent whose id is $OLLIE_UNAME)')
  .showHelpAfterError();

/** A key=value request, quoted by its declaration (empty values left out). */
const kv = (decl: KeyValues, pairs: Record<string, string | undefined>): string =>
  decl.format(Object.fromEntries(Object.entries(pairs).filter(([, v]) => v !== undefined && v !== '')));

function out(s: string | Uint8Array): Promise<void> {
  return new Promise((res) => (process.stdout.write(s) ? res() : process.stdout.once('drain', res)));
}

/** Aborted on Ctrl-C, so pending reads are flushed and fids clunked before exit. */
function interruptible(): AbortController {
  const ac = new AbortController();
  process.once('SIGINT', () => ac.abort(new Error('interrupted')));
  return ac;
}

/** The resolved context of one command, over one connection. */
class Ctx {
  constructor(
    readonly c: Client,
    private readonly g: Globals,
  ) {}

  /** The session's name (the namespace addresses sessions by name). */
  async session(): Promise<string> {
    if (this.g.session) return this.g.session;
    const env = process.env;
    if (env.OLLIE_SESSION) return env.OLLIE_SESSION;
    if (env.OLLIE_SESSION_ID) {
      const name = sessionNameOf(await this.c.readText('session/idx'), env.OLLIE_SESSION_ID);
      if (name === undefined)
        throw new UsageError(`no session has the id in $OLLIE_SESSION_ID (${env.OLLIE_SESSION_ID})`);
      return name;
    }
    throw new UsageError(
      'no session given: use -s NAME, or set OLLIE_SESSION (a name) or OLLIE_SESSION_ID (an id; see `o env`)',
    );
  }

  async agent(): Promise<{ session: string; agent: string; path: string }> {
    const session = await this.session();
    let agent = this.g.agent ?? process.env.OLLIE_AGENT;
    if (!agent && process.env.OLLIE_UNAME) {
      const id = process.env.OLLIE_UNAME;
      agent = agentNameOf(await this.c.readText(`session/${session}/agent/idx`), id);
      if (agent === undefined)
        throw new UsageError(`no agent of session ${session} has the id in $OLLIE_UNAME (${id})`);
    }
    if (!agent)
      throw new UsageError(
        `no agent given (session ${session}): use -g NAME, or set OLLIE_AGENT (a name) or OLLIE_UNAME (an agent id; see \`o env\`)`,
      );
    return { session, agent, path: `session/${session}/agent/${agent}` };
  }
}

function action(fn: (ctx: Ctx, ...args: never[]) => Promise<number | void>): (...args: unknown[]) => Promise<void> {
  return async (...args: unknown[]) => {
    const g = program.opts<Globals>();
    const c = await dialOllie(g.addr);
    try {
      const code = await fn(new Ctx(c, g), ...(args as never[]));
      if (typeof code === 'number') process.exitCode = code;
    } finally {
      c.close();
    }
  };
}

function table(header: string[], data: string[][]): string {
  const all = [header, ...data];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return (
    all
      .map((r) =>
        r
          .map((f, i) => (i === r.length - 1 ? f : f.padEnd(widths[i]!)))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}

// ---- sessions ----------------------------------------------------------------------------------------------

const sess = program.command('sess').description('sessions');

sess
  .command('new')
  .description('create a session; prints its name')
  .argument('[name]')
  .option('--cwd <dir>', 'working directory (default: here)')
  .action(
    action(async (x, name?: string, o?: { cwd?: string }) => {
      await out(await x.c.rdwrText('session/new', kv(SESSION_NEW, { name, cwd: resolve(o?.cwd ?? process.cwd()) })));
    }),
  );

sess
  .command('ls')
  .description('list sessions: name, id, paused, cwd')
  .action(
    action(async (x) => {
      await out(table(['NAME', 'ID', 'PAUSED', 'CWD'], sessionRows(await x.c.readText('session/idx'))));
    }),
  );

sess
  .command('kill')
  .description("kill a session (the given one, else the context's)")
  .argument('[name]')
  .action(
    action(async (x, name?: string) => {
      await out(await x.c.rdwrText(`session/${name ?? (await x.session())}/ctl`, 'kill'));
    }),
  );

sess
  .command('rename')
  .description("rename a session: rename NEW (the context's session) or rename OLD NEW")
  .argument('<a>')
  .argument('[b]')
  .action(
    action(async (x, a: string, b?: string) => {
      const [from, to] = b === undefined ? [await x.session(), a] : [a, b];
      await x.c.rename(`session/${from}`, to);
      await out(`${to}\n`);
    }),
  );

sess
  .command('ctl')
  .description("write a command to the session's ctl (kill, save, pause, resume, workflow NAME…), print the reply")
  .argument('<words...>')
  .action(
    action(async (x, words: string[]) => {
      await out(await x.c.rdwrText(`session/${await x.session()}/ctl`, SESSION_CTL.fromArgv(words)));
    }),
  );

async function pending(x: Ctx, session: string): Promise<Pending[]> {
  const bypass = await x.c.readText(`session/${session}/bypass`);
  if (!bypass.trim()) return [];
  return pendingRequests(bypass, await x.c.readText(`session/${session}/agent/idx`));
}

sess
  .command('bypass')
  .description('pending requests to run outside the sandbox: id, agent, cwd, command')
  .action(
    action(async (x) => {
      const p = await pending(x, await x.session());
      // The command shown escaped (\n, \t, \\, \u{HEX}), as the file has it: a newline in it shows.
      if (p.length)
        await out(
          table(
            ['ID', 'AGENT', 'CWD', 'COMMAND'],
            p.map((r) => [r.id, r.agent, r.cwd, escapeField(r.cmd)]),
          ),
        );
    }),
  );

function resolveBypass(decision: 'approve' | 'deny') {
  return action(async (x, id?: string, o?: { remember?: string }) => {
    const session = await x.session();
    if (!id) {
      // Without an id only an unambiguous request is resolved: approving the wrong one is what the id prevents.
      const p = await pending(x, session);
      if (p.length === 0) throw new UsageError(`session ${session} has no pending bypass request`);
      if (p.length > 1)
        throw new UsageError(
          `session ${session} has ${p.length} pending bypass requests; give the id: ${p.map((r) => `${r.id} (${r.agent}: ${r.cmd})`).join(', ')}`,
        );
      id = p[0]!.id;
    }
    await x.c.write(`session/${session}/bypass`, bypassDecisionLine(id, decision, o?.remember));
    await out(`${decision === 'approve' ? 'approved' : 'denied'} ${id}\n`);
  });
}

sess
  .command('approve')
  .description('approve a pending bypass request (the only one, or ID)')
  .argument('[id]')
  .option(
    '--remember <scope>',
    'once (default), session or always: the rule olliesrv computes from the request (the bypass file shows it)',
  )
  .action(resolveBypass('approve'));
sess
  .command('deny')
  .description('deny a pending bypass request (the only one, or ID)')
  .argument('[id]')
  .action(resolveBypass('deny'));

// ---- agents ------------------------------------------------------------------------------------------------

const agent = program.command('agent').description('agents');

agent
  .command('new')
  .description('create an agent in the session; prints its name')
  .argument('[name]')
  .option('-p, --profile <profile>', 'agent profile (default: default)')
  .option('--backend <name>')
  .option('--model <name>')
  .option('--cwd <dir>', "working directory (default: the session's)")
  .action(
    action(async (x, name?: string, o?: { profile?: string; backend?: string; model?: string; cwd?: string }) => {
      const session = await x.session();
      await out(
        await x.c.rdwrText(
          `session/${session}/agent/new`,
          kv(AGENT_NEW, {
            name,
            agent: o?.profile,
            backend: o?.backend,
            model: o?.model,
            cwd: o?.cwd && resolve(o.cwd),
          }),
        ),
      );
    }),
  );

agent
  .command('kill')
  .description("kill an agent (the given one, else the context's): its turn stops and it is removed")
  .argument('[name]')
  .action(
    action(async (x, name?: string) => {
      const path = name ? `session/${await x.session()}/agent/${name}` : (await x.agent()).path;
      await x.c.remove(path);
      await out('killed\n');
    }),
  );

agent
  .command('ls')
  .description("list the session's agents: name, state, depth, parent, id")
  .action(
    action(async (x) => {
      await out(
        table(
          ['NAME', 'STATE', 'DEPTH', 'PARENT', 'ID'],
          agentRows(await x.c.readText(`session/${await x.session()}/agent/idx`)),
        ),
      );
    }),
  );

// ---- talking to an agent -----------------------------------------------------------------------------------

/**
 * Plain text of one streamed log block, as the `log` file renders finished ones. `after` ends an answer: a blank
 * line in a log, a newline for `o prompt`, whose output is the answer.
 */
function render(b: Block, streamed: Set<string>, after = '\n\n'): string {
  switch (b.role) {
    case 'assistant':
      if (b.partial) {
        streamed.add(b.id);
        return b.content;
      }
      return streamed.delete(b.id) ? after : `${b.content}${after}`;
    case 'context':
    case 'reasoning':
      return '';
    case 'user':
      return b.partial ? '' : `> ${b.content.replace(/\n/g, '\n> ')}\n\n`;
    case 'call':
      return b.partial ? '' : `→ ${b.name ?? 'tool'} ${b.content}\n`;
    case 'tool': {
      if (b.partial) return '';
      const lines = b.content.split('\n');
      const shown = lines.length > 12 ? [...lines.slice(0, 12), `… (${lines.length - 12} more lines)`] : lines;
      return `${shown.join('\n').replace(/\n?$/, '\n')}\n`;
    }
    default:
      return b.partial ? '' : `[${b.role}] ${b.content}\n`;
  }
}

program
  .command('prompt')
  .description('send a prompt to the agent and print its answer as it streams (stdin when no text is given)')
  .argument('[words...]')
  .option('-f, --final', "print only the turn's last answer, once the turn is over (for scripts)")
  .action(
    action(async (x, words: string[], opts?: { final?: boolean }) => {
      const text = (words.length ? words.join(' ') : await readStdin()).replace(/\n+$/, '');
      if (!text.trim()) throw new UsageError('empty prompt: give the text as arguments or on stdin');
      const { path } = await x.agent();
      if (text.startsWith('/')) {
        // A slash command runs at once and answers: the ctl file is the same thing with a reply.
        const c = AGENT_CTL.parse(text.slice(1));
        await out(await x.c.rdwrText(`${path}/ctl`, AGENT_CTL.format(c.name, c.args)));
        return;
      }
      const life = interruptible();
      let atLineStart = true;
      let sent = false;
      let nextTurn = false;
      let turn: TurnResult;
      try {
        const streamed = new Set<string>();
        turn = await promptTurn(x.c, path, text, life.signal, {
          block: async (b) => {
            if (opts?.final) return;
            const s = render(b, streamed, '\n');
            if (!s) return;
            if (b.role !== 'assistant' && !atLineStart) await out('\n');
            await out(s);
            atLineStart = s.endsWith('\n');
          },
          sent: () => (sent = true),
          nextTurn: () => (nextTurn = true),
        });
      } catch (e) {
        if (!life.signal.aborted) throw e;
        // Ctrl-C interrupts the agent, as in any agent's terminal: the turn stops (the prompt stays in its history).
        // Whether the running turn is ours is the agent's to say, not the log's: our prompt's block appears only
        // once its turn has set up (tools loaded), and the turn is ours from the moment the prompt left the queue.
        if (sent && !nextTurn) {
          const queued = await x.c.rdwrText(`${path}/ctl`, 'queue').then(
            (q) => QUEUE_LIST.parse(q).some((r) => r.prompt === text),
            () => false,
          );
          const nl = atLineStart ? '' : '\n';
          if (queued) {
            // Behind another turn, which is not ours to stop: say where the prompt is.
            process.stderr.write(
              `${nl}o: interrupted: the prompt is queued behind another turn and stays queued (see \`o ctl queue\`)\n`,
            );
          } else {
            await x.c.rdwrText(`${path}/ctl`, 'stop').catch(() => undefined);
            process.stderr.write(`${nl}o: interrupted: stopped the agent's turn\n`);
          }
          atLineStart = true;
        }
        return 130;
      } finally {
        life.abort(new Error('done'));
      }
      const failed = turn.error ?? '';
      const lastReply = turn.reply;
      if (!atLineStart) await out('\n');
      if (opts?.final && lastReply) await out(`${lastReply.replace(/\n+$/, '')}\n`);
      if (failed) process.stderr.write(`o: the turn ended in an error: ${failed}\n`);
      return failed ? 1 : 0;
    }),
  );

program
  .command('read')
  .description("print the agent's log; with -l follow its log as it grows (until Ctrl-C)")
  .option('-l, --follow', 'follow log.raw, rendered')
  .action(
    action(async (x, o?: { follow?: boolean }) => {
      const { path } = await x.agent();
      if (!o?.follow) return void (await out(await x.c.readText(`${path}/log`)));
      const life = interruptible();
      const log = await x.c.open(`${path}/log.raw`, OREAD);
      const streamed = new Set<string>();
      try {
        for await (const l of lines(log.chunks(life.signal))) await out(render(JSON.parse(l) as Block, streamed));
      } catch (e) {
        if (!life.signal.aborted) throw e;
      } finally {
        await log.clunk().catch(() => undefined);
      }
    }),
  );

program
  .command('ctl')
  .description("write a command to the agent's ctl (stop, compact, peeradd NAME, model M, help…), print the reply")
  .argument('<words...>')
  .action(
    action(async (x, words: string[]) => {
      const { path } = await x.agent();
      await out(await x.c.rdwrText(`${path}/ctl`, AGENT_CTL.fromArgv(words)));
    }),
  );

// ---- goals -------------------------------------------------------------------------------------------------

const state = (status: string): string => GOAL_STATUS.parse(status).status.split(/\s/, 1)[0] ?? '';

program
  .command('goal')
  .description(
    '`o goal TEXT…` sets the session goal (starting its workflow); `o goal wait` waits for the verdict and prints it (exit 0 when complete); `o goal` prints the status',
  )
  .argument('[words...]')
  .action(
    action(async (x, words: string[]) => {
      const session = await x.session();
      const base = `session/${session}`;
      if (words.length === 0) return void (await out(await x.c.readText(`${base}/goalstatus`)));
      if (words.length > 1 || words[0] !== 'wait') {
        await x.c.write(`${base}/goal`, words.join(' '), { truncate: true });
        await out(`goal set; status: ${state(await x.c.readText(`${base}/goalstatus`))}\n`);
        return;
      }
      const life = interruptible();
      try {
        for (;;) {
          // The wait is pending on the server before the status is read, so a change in between is not missed.
          const w = await x.c.open(`${base}/goalwait`, OREAD, life.signal);
          const changed = w.readAll(life.signal);
          changed.catch(() => undefined);
          try {
            const now = await x.c.readText(`${base}/goalstatus`, life.signal);
            if (state(now) !== 'running') {
              await out(now || 'no goal\n');
              return state(now) === 'complete' ? 0 : 1;
            }
            await changed;
          } finally {
            await w.clunk().catch(() => undefined);
          }
        }
      } catch (e) {
        if (life.signal.aborted) return 130;
        throw e;
      }
    }),
  );

// ---- environment -------------------------------------------------------------------------------------------

program
  .command('env')
  .description(
    'print shell exports of the context (eval "$(o -s S -g A env)"): OLLIE_SESSION_ID, and OLLIE_UNAME when an agent is given',
  )
  .action(
    action(async (x) => {
      const session = await x.session();
      const sid = (await x.c.readText(`session/${session}/id`)).trim();
      const hasAgent = Boolean(program.opts<Globals>().agent ?? process.env.OLLIE_AGENT ?? process.env.OLLIE_UNAME);
      const line = [`OLLIE_SESSION_ID=${sid}`];
      if (hasAgent) {
        const { path } = await x.agent();
        line.push(`OLLIE_UNAME=${(await x.c.readText(`${path}/id`)).trim()}`);
      }
      await out(`export ${line.join(' ')}\n`);
    }),
  );

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) return '';
  const parts: Buffer[] = [];
  for await (const chunk of process.stdin) parts.push(chunk as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

try {
  await program.parseAsync();
} catch (e) {
  process.stderr.write(`o: ${(e as Error).message}\n`);
  process.exitCode = e instanceof UsageError ? 2 : 1;
}
