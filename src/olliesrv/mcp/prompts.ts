/**
 * MCP prompts as slash commands: `/mcp SERVER PROMPT [NAME=VALUE…]` (or Claude Code's spelling,
 * `/mcp__SERVER__PROMPT [NAME=VALUE…]`) asks the session's server for the prompt and sends its text to the agent
 * as the next prompt. A value with spaces is quoted ("…"); a prompt with a single argument also takes the rest
 * of the line as its value. Without arguments, `/mcp` lists the prompts of every server. Only the owner (and a
 * workflow) may run it: an agent's ctl commands are limited to those that widen nothing (auth/access.ts).
 */
import type { Agent } from '../agent/agent.js';
import type { AgentDeps } from '../agent/deps.js';

interface PromptInfo {
  name: string;
  description?: string;
  arguments?: Array<{ name: string; required?: boolean }>;
}

export const MCP_COMMAND_USAGE = 'mcp [SERVER PROMPT [NAME=VALUE…]]';

/** `/mcp__SERVER__PROMPT args` in the form the command takes: `SERVER PROMPT args`. */
export function mcpAlias(cmd: string, args: string): string | undefined {
  const m = /^mcp__(.+?)__(.+)$/.exec(cmd);
  return m ? `${m[1]} ${m[2]}${args ? ` ${args}` : ''}` : undefined;
}

export async function runMcpCommand(a: Agent, args: string, deps: AgentDeps): Promise<string> {
  const st = await deps.tools(a.sessionId);
  if (!st?.toolsrv) throw new Error('no tool server runs for this session: its MCP servers are not running');
  const c = st.toolsrv();
  const status = JSON.parse(await c.readText('mcp/status')) as {
    session: string | null;
    servers: Array<{ name: string; state: string; prompts: number }>;
  };
  if (status.session !== a.sessionId)
    throw new Error(
      "this session's MCP servers are not running (they start with its first agent; a shared tool server runs only the first session's)",
    );
  if (!args.trim()) {
    const out: string[] = [];
    for (const s of status.servers.filter((x) => x.prompts > 0)) {
      for (const p of JSON.parse(await c.readText(`mcp/${s.name}/prompts`)) as PromptInfo[]) {
        out.push(
          `/mcp ${s.name} ${p.name}${(p.arguments ?? []).map((x) => ` ${x.name}=${x.required ? '…' : '[…]'}`).join('')}${p.description ? `\t${p.description}` : ''}\n`,
        );
      }
    }
    return (
      out.join('') ||
      `no MCP server of this session has prompts (servers: ${status.servers.map((s) => `${s.name} ${s.state}`).join(', ') || 'none'})\n`
    );
  }
  const m = /^(\S+)\s+(\S+)\s*([\s\S]*)$/.exec(args.trim());
  if (!m) throw new Error(`usage: ${MCP_COMMAND_USAGE}`);
  const [, server, name, rest = ''] = m;
  if (!status.servers.some((s) => s.name === server))
    throw new Error(
      `no MCP server ${JSON.stringify(server)} (servers: ${status.servers.map((s) => s.name).join(', ') || 'none'})`,
    );
  const prompts = JSON.parse(await c.readText(`mcp/${server}/prompts`)) as PromptInfo[];
  const p = prompts.find((x) => x.name === name);
  if (!p)
    throw new Error(
      `MCP server ${server} has no prompt ${JSON.stringify(name)} (prompts: ${prompts.map((x) => x.name).join(', ') || 'none'})`,
    );
  const values = parseArgs(rest, p);
  const missing = (p.arguments ?? []).filter((x) => x.required && values[x.name] === undefined).map((x) => x.name);
  if (missing.length) throw new Error(`prompt ${server} ${name} needs ${missing.map((x) => `${x}=…`).join(' ')}`);
  const text = await c.rdwrText(`mcp/${server}/prompt`, JSON.stringify({ name, arguments: values }));
  // The server's words are a prompt for the model, never a `!` shell command: the queue runs a prompt starting
  // with `!` in the agent's shell, which may write the workspace the server's own sandbox keeps read only.
  a.enqueue(text.startsWith('!') ? `\n${text}` : text);
  return `sent MCP prompt ${server} ${name} (${text.length} characters)\n`;
}

function parseArgs(rest: string, p: PromptInfo): Record<string, string> {
  const known = (p.arguments ?? []).map((x) => x.name);
  const out: Record<string, string> = {};
  if (!rest.trim()) return out;
  // A single-argument prompt takes the rest of the line unless it is written NAME=VALUE.
  if (known.length === 1 && !rest.startsWith(`${known[0]}=`)) return { [known[0]!]: rest.trim() };
  const re = /\s*([A-Za-z_][\w-]*)=(?:"((?:[^"\\]|\\.)*)"|(\S*))/y;
  let at = 0;
  while (at < rest.length) {
    if (!rest.slice(at).trim()) break;
    re.lastIndex = at;
    const m = re.exec(rest);
    if (!m) throw new Error(`expected NAME=VALUE at ${JSON.stringify(rest.slice(at).trim())}`);
    if (!known.includes(m[1]!))
      throw new Error(`prompt ${p.name} has no argument ${m[1]} (arguments: ${known.join(', ') || 'none'})`);
    out[m[1]!] = m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!;
    at = re.lastIndex;
  }
  return out;
}
