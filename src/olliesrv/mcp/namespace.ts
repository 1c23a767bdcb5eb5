/**
 * `session/S/mcp/`: the session's MCP servers (they run in its toolsrv, src/toolsrv/mcp), and who may reach what:
 *
 *   mcp/status                    JSON: every server's state and the config files' problems   owner; session, agent: read
 *   mcp/ctl                       write: reload | restart S | stop S | start S                owner
 *   mcp/SERVER/status             key=value lines                                              owner; session, agent: read
 *   mcp/SERVER/tools              the names its tools are called by                            owner; session, agent: read
 *   mcp/SERVER/prompts            JSON: its prompts (run one with /mcp SERVER PROMPT k=v…)     owner; session, agent: read
 *   mcp/SERVER/log                its log, with what it wrote to stderr (may hold secrets)     owner
 *   mcp/SERVER/ctl                write: restart | stop | start                                owner
 *   mcp/SERVER/resources/FILE     a resource (FILE: its URI, %-escaped), read from the server  owner; session, agent: read
 *
 * Agents reach only their own session's (inSession), never a control file: starting, stopping or reconfiguring
 * a server is the owner's, as the configuration is.
 */
import { Dir, Each, Leaf, NinepError, type Ctx } from '../../ninep/index.js';
import { inSession, type Scope } from '../auth/access.js';
import { resourceFile, type McpMirror } from './mirror.js';

const reads = ['walk', 'read'] as const;
const text = (d: Uint8Array): string => new TextDecoder().decode(d);

async function ask<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw e instanceof NinepError ? e : new NinepError((e as Error).message);
  }
}

export function sessionMcpDir(m: McpMirror, scope: Scope, sid: (ctx: Ctx) => string): ReturnType<typeof Dir> {
  const readable = inSession(scope, { session: reads, agent: reads });
  const c = (ctx: Ctx) => m.client(sid(ctx));
  const server = (ctx: Ctx) => ctx.params.mcpserver!;
  const fromToolsrv = (path: (ctx: Ctx) => string) => (ctx: Ctx) => ask(() => c(ctx).readText(path(ctx)));
  return Dir(
    'mcp',
    {
      doc: "The session's MCP servers (config/mcp.json, and the project's .mcp.json once trusted); they run in its tool server.",
      access: readable,
    },
    Leaf('status', {
      doc: 'JSON: {"servers": [{name, type, file, state, error, pid, restarts, tools, resources, prompts}…], "notes": [problems of the config files…]}.',
      access: readable,
      blockOnce: fromToolsrv(() => 'mcp/status'),
    }),
    Leaf('ctl', {
      doc: 'Write: reload (the configuration again, every server restarted), restart SERVER, stop SERVER, start SERVER.',
      write: (ctx, data) =>
        ask(async () => {
          const [cmd, name, ...rest] = text(data).trim().split(/\s+/);
          if (cmd === 'reload' && !name) return c(ctx).write('mcp/ctl', 'reload');
          if ((cmd === 'restart' || cmd === 'stop' || cmd === 'start') && name && !rest.length) {
            if (!m.servers(sid(ctx)).includes(name))
              throw new Error(
                `no MCP server ${JSON.stringify(name)} in this session (servers: ${m.servers(sid(ctx)).join(', ') || 'none'})`,
              );
            return c(ctx).write(`mcp/${name}/ctl`, cmd);
          }
          throw new Error('commands: reload, restart SERVER, stop SERVER, start SERVER');
        }),
    }),
    Each(
      'mcpserver',
      {
        doc: 'One MCP server, by its name in the config.',
        access: readable,
        list: (ctx) => m.servers(sid(ctx)),
        has: (ctx, n) => m.servers(sid(ctx)).includes(n),
      },
      Leaf('status', {
        doc: 'key=value lines: name, type, file, state, error, pid, restarts, tools, resources, prompts.',
        access: readable,
        blockOnce: fromToolsrv((ctx) => `mcp/${server(ctx)}/status`),
      }),
      Leaf('tools', {
        doc: 'The names its tools are called by (mcp__SERVER__TOOL), one a line.',
        access: readable,
        blockOnce: fromToolsrv((ctx) => `mcp/${server(ctx)}/tools`),
      }),
      Leaf('prompts', {
        doc: 'JSON: its prompts and their arguments; /mcp SERVER PROMPT [NAME=VALUE…] sends one as a prompt.',
        access: readable,
        blockOnce: fromToolsrv((ctx) => `mcp/${server(ctx)}/prompts`),
      }),
      // What a server writes to stderr may hold the keys its config gave it: the owner's alone.
      Leaf('log', {
        doc: 'Its log: starts, stops, restarts, and what it wrote to stderr.',
        blockOnce: fromToolsrv((ctx) => `mcp/${server(ctx)}/log`),
      }),
      Leaf('ctl', {
        doc: 'Write: restart, stop or start.',
        write: (ctx, data) => ask(() => c(ctx).write(`mcp/${server(ctx)}/ctl`, text(data).trim())),
      }),
      Dir(
        'resources',
        {
          doc: 'Its resources, one file each (the name is the URI, %-escaped); a read asks the server.',
          access: readable,
        },
        Each('resource', {
          doc: 'One resource.',
          access: readable,
          list: (ctx) => m.resources(sid(ctx), server(ctx)).map((r) => resourceFile(r.uri)),
          has: (ctx, n) => m.resources(sid(ctx), server(ctx)).some((r) => resourceFile(r.uri) === n),
          file: {
            access: readable,
            blockOnce: (ctx) =>
              ask(() => c(ctx).rdwrText(`mcp/${server(ctx)}/resource`, decodeURIComponent(ctx.params.resource!))),
          },
        }),
      ),
    ),
  );
}
