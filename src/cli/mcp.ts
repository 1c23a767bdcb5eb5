/**
 * `ollie mcp`: Ollie as an MCP server on stdio, so other agents (Claude Code, Codex…) can drive Ollie's sessions
 * and agents. Each tool is a few plain 9P operations on the namespace of a running olliesrv, dialled as whoever
 * runs the command (src/platform/dial.ts): the owner on the Unix socket, an agent when run by that agent's tools
 * (its OLLIE_TOKEN), so it can do exactly what the same principal can with ollie-9p, nothing more.
 *
 * Approvals are listed, never resolved: letting a sandboxed agent out is a person's decision, not another
 * agent's.
 */
import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import type { Client } from '../ninep/index.js';
import { dialOllie } from '../platform/dial.js';
import { defaultAddress } from '../platform/paths.js';
import { promptTurn } from './turn.js';

export interface McpOptions {
  addr: string;
  /** Longest a prompt_agent call waits for its turn, in seconds. */
  timeout: number;
}

export function registerMcp(program: Command): void {
  program
    .command('mcp')
    .description(
      'serve Ollie as an MCP server on stdio: sessions and agents as tools (list, create, prompt, read logs, list approvals)',
    )
    .option(
      '-a, --addr <addr>',
      'olliesrv address: unix!/path, tcp!host!port, or ssh![user@]host[:port][!/remote.sock] (over ssh)',
      defaultAddress(),
    )
    .option(
      '--timeout <seconds>',
      'longest prompt_agent waits for the turn to end',
      (v) => {
        const n = Number(v);
        if (!(n > 0)) throw new Error(`--timeout: expected a number of seconds, got ${JSON.stringify(v)}`);
        return n;
      },
      600,
    )
    .action(async (o: McpOptions) => {
      try {
        await serveMcp(o);
      } catch (e) {
        process.stderr.write(`ollie mcp: ${(e as Error).message}\n`);
        process.exit(1);
      }
    });
}

/** A name as the namespace takes it: one path element. */
function element(what: string, v: string): string {
  if (!v || v === '.' || v === '..' || /[/\s]/.test(v))
    throw new Error(`bad ${what} name ${JSON.stringify(v)}: one word, no slash`);
  return v;
}

const quote = (v: string): string => (/^[^\s"\\]+$/.test(v) ? v : `"${v.replace(/[\\"]/g, (c) => `\\${c}`)}"`);
const kv = (pairs: Record<string, string | undefined>): string =>
  Object.entries(pairs)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${k}=${quote(v!)}`)
    .join(' ');
const rows = (text: string): string[][] =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split('\t'));
const json = (v: unknown): { content: Array<{ type: 'text'; text: string }> } => ({
  content: [{ type: 'text', text: JSON.stringify(v, null, 2) }],
});
const text = (t: string): { content: Array<{ type: 'text'; text: string }> } => ({
  content: [{ type: 'text', text: t }],
});

export async function serveMcp(o: McpOptions): Promise<void> {
  // Imported here: the SDK is a tenth of a second `ollie serve` need not pay.
  const [{ McpServer }, { StdioServerTransport }, { z }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/mcp.js'),
    import('@modelcontextprotocol/sdk/server/stdio.js'),
    import('zod'),
  ]);
  // src/cli/ and dist/cli/ are both two levels below the package root.
  const version = (
    JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
  ).version;

  // One connection, dialled on first use and again after it drops (a daemon restart).
  let conn: Promise<Client> | undefined;
  const client = async (): Promise<Client> => {
    conn ??= dialOllie(o.addr).catch((e: unknown) => {
      conn = undefined;
      throw new Error(`cannot reach olliesrv at ${o.addr}: ${(e as Error).message}`);
    });
    return conn;
  };
  /** Runs `fn` on the connection; a connection that failed under it is dropped, so the next call dials again. */
  const on = async <T>(fn: (c: Client) => Promise<T>): Promise<T> => {
    const c = await client();
    try {
      return await fn(c);
    } catch (e) {
      if (/connection closed|EPIPE|ECONNRESET/.test((e as Error).message)) {
        c.close();
        conn = undefined;
      }
      throw e;
    }
  };

  const server = new McpServer(
    { name: 'ollie', version },
    {
      instructions:
        'Ollie runs AI coding agents in sessions. Create a session (a working directory), create an agent in it, then prompt_agent and read its reply; read_agent_log shows what it did.',
    },
  );
  const session = z.string().describe('session name');
  const agent = z.string().describe('agent name');

  server.registerTool(
    'list_sessions',
    {
      description: 'List Ollie sessions: name, id, paused, connected (a tool server serves it), cwd.',
      annotations: { readOnlyHint: true },
    },
    () =>
      on(async (c) =>
        json(
          rows(await c.readText('session/idx')).map(([id, name, paused, connected, , cwd]) => ({
            name,
            id,
            paused: paused === '1',
            connected: connected === '1',
            cwd,
          })),
        ),
      ),
  );

  server.registerTool(
    'create_session',
    {
      description:
        "Create a session; returns its name. cwd is the working directory of its agents (default: the daemon's home).",
      inputSchema: {
        name: z.string().optional().describe('name (default: a generated one)'),
        cwd: z.string().optional().describe('absolute path of an existing directory'),
      },
    },
    ({ name, cwd }) =>
      on(async (c) =>
        text((await c.rdwrText('session/new', kv({ name: name && element('session', name), cwd }))).trim()),
      ),
  );

  /** A read-only tool that lists a session's file of rows (tab-separated lines), each made into an object. */
  const registerSessionList = (
    name: string,
    description: string,
    file: string,
    toObject: (row: string[]) => unknown,
  ): void => {
    server.registerTool(
      name,
      { description, inputSchema: { session }, annotations: { readOnlyHint: true } },
      ({ session: s }) =>
        on(async (c) => json(rows(await c.readText(`session/${element('session', s)}/${file}`)).map(toObject))),
    );
  };

  registerSessionList(
    'list_agents',
    'List the agents of a session: name, id, state (idle, thinking, calling, paused, compacting), how the last turn ended, parent and depth.',
    'agent/idx',
    ([, id, name, parent, depth, state, last]) => ({
      name,
      id,
      state,
      last,
      parent: parent === '-' ? null : parent,
      depth: Number(depth),
    }),
  );

  server.registerTool(
    'create_agent',
    {
      description: 'Create an agent in a session; returns its name.',
      inputSchema: {
        session,
        name: z.string().optional().describe('name (default: a generated one)'),
        profile: z.string().optional().describe('agent profile (default: the configured default)'),
        backend: z.string().optional().describe('LLM backend (default: the configured default)'),
        model: z.string().optional(),
        cwd: z.string().optional().describe("working directory (default: the session's)"),
      },
    },
    (a) =>
      on(async (c) =>
        text(
          (
            await c.rdwrText(
              `session/${element('session', a.session)}/agent/new`,
              kv({
                name: a.name && element('agent', a.name),
                agent: a.profile,
                backend: a.backend,
                model: a.model,
                cwd: a.cwd,
              }),
            )
          ).trim(),
        ),
      ),
  );

  server.registerTool(
    'prompt_agent',
    {
      description:
        'Send a prompt to an agent and wait for its turn to end (queued behind a running turn if there is one); returns its last answer. A prompt starting with / is a command (its reply is returned at once).',
      inputSchema: {
        session,
        agent,
        prompt: z.string().min(1),
        timeout_seconds: z.number().positive().optional().describe(`how long to wait (default ${o.timeout})`),
      },
    },
    ({ session: s, agent: a, prompt, timeout_seconds }, extra) =>
      on(async (c) => {
        const path = `session/${element('session', s)}/agent/${element('agent', a)}`;
        if (!prompt.trim()) throw new Error('empty prompt');
        if (prompt.startsWith('/')) return text(await c.rdwrText(`${path}/ctl`, prompt.slice(1)));
        const seconds = timeout_seconds ?? o.timeout;
        const signal = AbortSignal.any([extra.signal, AbortSignal.timeout(seconds * 1000)]);
        let r;
        try {
          r = await promptTurn(c, path, prompt, signal);
        } catch (e) {
          if (signal.aborted && !extra.signal.aborted)
            throw new Error(
              `the turn did not end within ${seconds} s; it goes on (read_agent_log shows it, or prompt "/stop" stops it)`,
            );
          throw e;
        }
        if (r.error)
          return {
            isError: true,
            content: [
              {
                type: 'text' as const,
                text: `the turn ended in an error: ${r.error}${r.reply ? `\n\nlast answer:\n${r.reply}` : ''}`,
              },
            ],
          };
        return text(r.reply);
      }),
  );

  server.registerTool(
    'read_agent_log',
    {
      description:
        "An agent's chat log as plain text (prompts, answers, tool calls and results), the last 64 KiB at most.",
      inputSchema: {
        session,
        agent,
        max_chars: z.number().int().positive().optional().describe('keep only the last N characters'),
      },
      annotations: { readOnlyHint: true },
    },
    ({ session: s, agent: a, max_chars }) =>
      on(async (c) => {
        const log = await c.readText(`session/${element('session', s)}/agent/${element('agent', a)}/log`);
        return text(max_chars && log.length > max_chars ? log.slice(-max_chars) : log);
      }),
  );

  registerSessionList(
    'list_approvals',
    "Requests of a session's agents to run a command outside the sandbox, waiting for a person (approve or deny them in Ollie: the app, `o sess approve`).",
    'bypass',
    ([id, agentId, tool, cwd, command, reason]) => ({ id, agent: agentId, tool, cwd, command, reason }),
  );

  const transport = new StdioServerTransport();
  const closed = new Promise<void>((r) => (transport.onclose = r));
  await server.connect(transport);
  // stdin closing ends the session (the client went away).
  process.stdin.once('end', () => void server.close());
  await closed;
  void conn?.then(
    (c) => c.close(),
    () => undefined,
  );
}
