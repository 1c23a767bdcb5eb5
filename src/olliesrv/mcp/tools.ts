/**
 * What the agent loop knows about MCP tools (src/toolsrv/mcp): they are in every agent's toolsrv scope without a
 * `load`, all `cold`, so the model is told only which servers there are and how many tools each has — a line,
 * whatever their number — and loads the ones it needs with tool_search (or calls one by name).
 */
import type { ToolInfo } from '../../toolsrv/protocol.js';

export const MCP_PREFIX = 'mcp__';
/** toolsrv's ctl command that waits (bounded) for the MCP servers to start, so the first tool list has them. */
export const MCP_WAIT = 'mcp-wait';

export const isMcpTool = (name: string): boolean => name.startsWith(MCP_PREFIX);

/** The servers among the deferred tools, as a line for the system prompt's "More tools" ('' when none). */
export function mcpSummary(deferred: readonly ToolInfo[]): string {
  const count = new Map<string, number>();
  for (const t of deferred) {
    const server = /^mcp__(.+?)__/.exec(t.name)?.[1];
    if (server) count.set(server, (count.get(server) ?? 0) + 1);
  }
  if (!count.size) return '';
  const list = [...count].map(([s, n]) => `${s} (${n} tool${n === 1 ? '' : 's'})`).join(', ');
  return `\n- MCP servers, tools named mcp__SERVER__TOOL (find them with \`tool_search\` by what they do): ${list}`;
}
