/**
 * One MCP server in a session's `mcp/status` (JSON, src/toolsrv/mcp/namespace.ts): what toolsrv's MCP manager
 * reports and the app's Settings shows. `State` narrows the state where the writer knows its values.
 */
export interface McpServerStatus<State extends string = string> {
  name: string;
  type: string;
  file: string;
  state: State;
  error: string;
  pid: number;
  restarts: number;
  tools: number;
  resources: number;
  prompts: number;
}
