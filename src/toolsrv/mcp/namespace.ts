/**
 * toolsrv's `mcp/` directory: the MCP servers of this toolsrv, for olliesrv (toolsrv's only client; it decides
 * which principal sees what of it, olliesrv/mcp/namespace.ts).
 *
 *   mcp/status              JSON: {"session", "workspace", "servers": [ServerStatus…], "notes": [problems of the config files…]}
 *   mcp/changes             stream: a number per change of any server's state, tools, resources or prompts
 *   mcp/ctl                 write: reload (read config/mcp.json and the project's .mcp.json again, restart all)
 *   mcp/SERVER/status       key=value lines: name, type, file, state, error, pid, restarts, tools, resources, prompts
 *   mcp/SERVER/tools        the names agents call its tools by, one a line
 *   mcp/SERVER/log          its log: lifecycle and what a stdio server wrote to stderr
 *   mcp/SERVER/ctl          write: restart | stop | start
 *   mcp/SERVER/resources    its resources, one a line: URI<TAB>NAME<TAB>MIME
 *   mcp/SERVER/resource     rdwr: write a URI, read its contents
 *   mcp/SERVER/prompts      JSON: its prompts (name, description, arguments)
 *   mcp/SERVER/prompt       rdwr: write {"name": N, "arguments": {…}}, read the prompt's messages as text
 */
import { Dir, Each, Leaf, NinepError, type Ctx } from '../../ninep/index.js';
import type { McpManager } from './manager.js';

const text = (d: Uint8Array): string => new TextDecoder().decode(d);

function fail(e: unknown): never {
  throw e instanceof NinepError ? e : new NinepError((e as Error).message);
}

export function mcpDir(m: McpManager): ReturnType<typeof Dir> {
  const conn = (ctx: Ctx) => {
    try {
      return m.connection(ctx.params.server!);
    } catch (e) {
      return fail(e);
    }
  };
  return Dir(
    'mcp',
    { doc: "The MCP servers of this workspace (config/mcp.json, and the project's .mcp.json once trusted)." },
    Leaf('status', {
      doc: "JSON: every server's state, and the problems of the config files.",
      read: () =>
        `${JSON.stringify({ session: m.session ?? null, workspace: m.workspace, servers: m.status(), notes: m.notes() })}\n`,
    }),
    Leaf('changes', {
      doc: "Stream: the change count now, then a line at every change of a server's state, tools, resources or prompts.",
      stream: (_ctx, signal) =>
        (async function* () {
          for await (const n of m.changes.follow(signal, () => [m.changeNumber])) yield `${n}\n`;
        })(),
    }),
    Leaf('ctl', {
      doc: 'Write: reload (read the configuration again and restart every server).',
      write: (_ctx, data) => {
        const cmd = text(data).trim();
        if (cmd !== 'reload') throw new NinepError(`unknown command ${JSON.stringify(cmd)}; commands: reload`);
        try {
          m.start();
        } catch (e) {
          fail(e);
        }
      },
    }),
    Each(
      'server',
      {
        doc: 'One MCP server, by its name in the config.',
        list: () => [...m.servers.keys()],
        has: (_ctx, n) => m.servers.has(n),
      },
      Leaf('status', {
        doc: 'key=value lines: state (starting, ready, restarting, stopped, failed, disabled), error, pid, restarts, counts.',
        read: (ctx) => {
          const st = m.status().find((s) => s.name === ctx.params.server);
          if (!st) fail(new Error(`no MCP server ${ctx.params.server}`));
          return Object.entries(st)
            .map(([k, v]) => `${k}=${String(v).replace(/\n/g, ' ')}\n`)
            .join('');
        },
      }),
      Leaf('tools', {
        doc: 'The names its tools are called by (mcp__SERVER__TOOL), one a line.',
        read: (ctx) =>
          m
            .toolNames(ctx.params.server!)
            .map((n) => `${n}\n`)
            .join(''),
      }),
      Leaf('log', {
        doc: 'Its log: starts, stops, restarts, and what it wrote to stderr.',
        read: (ctx) => conn(ctx).log(),
      }),
      Leaf('ctl', {
        doc: 'Write: restart, stop or start.',
        write: (ctx, data) => {
          const c = conn(ctx);
          const cmd = text(data).trim();
          if (cmd === 'restart') c.restart();
          else if (cmd === 'stop') c.stop('stopped on request');
          else if (cmd === 'start') c.start();
          else throw new NinepError(`unknown command ${JSON.stringify(cmd)}; commands: restart, stop, start`);
        },
      }),
      Leaf('resources', {
        doc: 'Its resources, one a line: URI, name, MIME type (tab-separated).',
        read: (ctx) =>
          conn(ctx)
            .resources.map((r) => `${r.uri}\t${r.name.replace(/[\t\n]/g, ' ')}\t${r.mimeType ?? ''}\n`)
            .join(''),
      }),
      Leaf('resource', {
        doc: 'Write a resource URI; read its contents on the same fid.',
        rdwr: async (ctx, uri) => conn(ctx).readResource(uri.trim()).catch(fail),
      }),
      Leaf('prompts', {
        doc: 'JSON: its prompts, with their arguments.',
        read: (ctx) => `${JSON.stringify(conn(ctx).prompts)}\n`,
      }),
      Leaf('prompt', {
        doc: 'Write {"name": N, "arguments": {…}}; read the prompt\'s messages as text on the same fid.',
        rdwr: async (ctx, req) => {
          let r: { name?: unknown; arguments?: unknown };
          try {
            r = JSON.parse(req) as typeof r;
          } catch (e) {
            return fail(new Error(`not JSON: ${(e as Error).message}`));
          }
          if (typeof r.name !== 'string') fail(new Error('expected {"name": PROMPT, "arguments": {…}}'));
          const args = (r.arguments ?? {}) as Record<string, unknown>;
          if (
            typeof args !== 'object' ||
            Array.isArray(args) ||
            !Object.values(args).every((v) => typeof v === 'string')
          )
            fail(new Error('arguments: must be an object of strings'));
          return conn(ctx)
            .getPrompt(r.name as string, args as Record<string, string>)
            .catch(fail);
        },
      }),
    ),
  );
}
