/**
 * MCP servers as configured: `config/mcp.json` (the owner's, in Ollie's config dir, which no tool can read or
 * write) and a project's `.mcp.json` in the workspace root, in the `mcpServers` shape Claude Code, Claude Desktop
 * and Cursor use:
 *
 *   {"mcpServers": {
 *     "NAME": {"command": "npx", "args": ["-y", "pkg"], "env": {"K": "V"}},                 stdio (type "stdio")
 *     "NAME": {"type": "http", "url": "https://…/mcp", "headers": {"Authorization": "…"}},   Streamable HTTP
 *     "NAME": {"type": "sse", "url": "https://…/sse"},                                       the older SSE transport
 *   }}
 *
 * plus Ollie's own key per server, `"ollie": {"sandbox": {…}, "workspace": "ro"|"rw", "cwd": "workspace"|"/abs",
 * "timeout": S, "disabled": B}`: the sandbox rules of a stdio server beyond the policy (the .meta `sandbox` rules:
 * network ports, env names, data dirs; registry/sandbox-rules.ts), whether it may write the workspace (default:
 * read only), the directory it starts in (default `/`, see STDIO_DEFAULT_CWD), the default timeout of its calls
 * in seconds. A project's file applies only once the owner trusted that exact file
 * (sandbox/trust.ts, `config/trust`: `trust /path/to/project/.mcp.json`); a project server of the same name as a
 * global one replaces it, like Claude Code's project scope.
 *
 * A bad file or a bad server never stops the others: each problem is one line naming the file, the server and
 * the field, kept with the server (its `status` says it) or with the file.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MetaError } from '../registry/meta.js';
import { parseToolSandbox } from '../registry/sandbox-rules.js';
import type { SandboxExtra } from '../sandbox/index.js';
import { PROJECT_MCP_NAME, projectPolicy, readTrusted } from '../sandbox/trust.js';

export const GLOBAL_MCP_FILE = 'mcp.json';
export const PROJECT_MCP_FILE = PROJECT_MCP_NAME;

/** Server names: what `mcp__SERVER__TOOL` and a namespace directory can hold. */
export const SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$/;

interface Common {
  name: string;
  /** The file it was declared in. */
  file: string;
  /** Default timeout of its tool calls (seconds). */
  timeout?: number;
  disabled: boolean;
}

export interface StdioServer extends Common {
  type: 'stdio';
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Rules laid over the sandbox policy for this server alone. */
  sandbox: SandboxExtra;
  /** The workspace (the session's cwd) writable to it; read only by default. */
  workspaceWritable: boolean;
  /** The directory it starts in: an absolute path, or 'workspace' for the session's workspace. */
  cwd: string;
}

export interface RemoteServer extends Common {
  type: 'http' | 'sse';
  url: string;
  headers: Record<string, string>;
}

export type ServerConfig = StdioServer | RemoteServer;

/** A server whose declaration is wrong: kept, so its status names the problem. */
export interface BadServer {
  name: string;
  file: string;
  error: string;
}

export interface McpConfig {
  servers: ServerConfig[];
  bad: BadServer[];
  /** Problems of whole files (not JSON, no mcpServers object, untrusted project file), one line each. */
  errors: string[];
  /** Informational lines (a project file present but not trusted). */
  notices: string[];
}

class ConfigError extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function strings(v: unknown, where: string): string[] {
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string'))
    throw new ConfigError(`${where}: must be a list of strings`);
  return v as string[];
}

function stringMap(v: unknown, where: string): Record<string, string> {
  if (!isObject(v) || !Object.values(v).every((x) => typeof x === 'string'))
    throw new ConfigError(`${where}: must be an object of strings`);
  return v as Record<string, string>;
}

const STDIO_KEYS = ['type', 'command', 'args', 'env', 'ollie'];
const REMOTE_KEYS = ['type', 'url', 'headers', 'ollie'];
const OLLIE_KEYS = ['sandbox', 'workspace', 'cwd', 'timeout', 'disabled'];

/**
 * Where a stdio server starts unless its declaration says otherwise: not the workspace, which agents write. A
 * command finds programs relative to its directory — `npx -y PKG` runs `./node_modules/PKG` when there is one,
 * `python -m MOD` a `./MOD.py` — so a server started in the workspace runs whatever an agent planted there, with
 * the server's keys; `/` holds nothing an agent can write. A server that needs the project as its directory says
 * `"cwd": "workspace"`, and with it trusts the workspace's files.
 */
export const STDIO_DEFAULT_CWD = '/';

/** One server's declaration, checked; throws ConfigError naming the field. */
function parseServer(name: string, file: string, v: unknown): ServerConfig {
  // No "__" in it and no "_" at its end: the first "__" after mcp__ must end the server's name, or server "a"
  // with tool "_x" and server "a_" with tool "x" would both be mcp__a___x, the first listed answering for both.
  if (!SERVER_NAME.test(name) || name.includes('__') || name.endsWith('_'))
    throw new ConfigError(
      `the name must be letters, digits, - and _ (no "__", not ending in "_", at most 48), as it becomes part of mcp__${name}__TOOL`,
    );
  if (!isObject(v)) throw new ConfigError('must be an object like {"command": …} or {"type": "http", "url": …}');
  const type = v.type ?? (v.url !== undefined ? 'http' : 'stdio');
  if (type !== 'stdio' && type !== 'http' && type !== 'sse' && type !== 'streamable-http')
    throw new ConfigError(`type: ${JSON.stringify(type)} is not one of stdio, http, sse`);
  const known = type === 'stdio' ? STDIO_KEYS : REMOTE_KEYS;
  for (const k of Object.keys(v))
    if (!known.includes(k))
      throw new ConfigError(`${k}: unknown field for a ${type} server (fields: ${known.join(', ')})`);
  const o = v.ollie ?? {};
  if (!isObject(o)) throw new ConfigError('ollie: must be an object like {"sandbox": {…}, "workspace": "ro"}');
  for (const k of Object.keys(o))
    if (!OLLIE_KEYS.includes(k)) throw new ConfigError(`ollie.${k}: unknown (known: ${OLLIE_KEYS.join(', ')})`);
  if (o.timeout !== undefined && !(typeof o.timeout === 'number' && o.timeout > 0))
    throw new ConfigError('ollie.timeout: must be a positive number of seconds');
  if (o.disabled !== undefined && typeof o.disabled !== 'boolean')
    throw new ConfigError('ollie.disabled: must be true or false');
  const common = {
    name,
    file,
    disabled: o.disabled === true,
    ...(typeof o.timeout === 'number' && { timeout: o.timeout }),
  };
  if (type === 'stdio') {
    if (typeof v.command !== 'string' || v.command.trim() === '')
      throw new ConfigError('command: missing (a stdio server is a program to run)');
    if (o.workspace !== undefined && o.workspace !== 'ro' && o.workspace !== 'rw')
      throw new ConfigError('ollie.workspace: must be "ro" or "rw"');
    if (
      o.cwd !== undefined &&
      o.cwd !== 'workspace' &&
      !(typeof o.cwd === 'string' && o.cwd.startsWith('/') && !o.cwd.includes('\0'))
    )
      throw new ConfigError('ollie.cwd: must be "workspace" or an absolute path');
    let sandbox: SandboxExtra;
    try {
      sandbox = parseToolSandbox(o.sandbox);
    } catch (e) {
      throw new ConfigError(`ollie.${(e as MetaError).message}`);
    }
    // The dial-back socket is for Ollie's own tools, which carry an agent's token: no MCP server gets it.
    if (sandbox.allowOllieSocket)
      throw new ConfigError('ollie.sandbox.ollieSocket: an MCP server cannot be given the Ollie socket');
    const env = v.env === undefined ? {} : stringMap(v.env, 'env');
    for (const k of Object.keys(env))
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k))
        throw new ConfigError(`env: ${JSON.stringify(k)} is not a variable name`);
    return {
      ...common,
      type: 'stdio',
      command: v.command,
      args: v.args === undefined ? [] : strings(v.args, 'args'),
      env,
      sandbox,
      workspaceWritable: o.workspace === 'rw',
      cwd: typeof o.cwd === 'string' ? o.cwd : STDIO_DEFAULT_CWD,
    };
  }
  const local = (['sandbox', 'workspace', 'cwd'] as const).find((k) => o[k] !== undefined);
  if (local)
    throw new ConfigError(
      `ollie.${local}: only a stdio server runs in the sandbox; a ${type} server is reached over the network by toolsrv`,
    );
  if (typeof v.url !== 'string') throw new ConfigError('url: missing (a remote server is a URL)');
  let url: URL;
  try {
    url = new URL(v.url);
  } catch {
    throw new ConfigError(`url: ${JSON.stringify(v.url)} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ConfigError(`url: ${url.protocol} is not http: or https:`);
  return {
    ...common,
    type: type === 'sse' ? 'sse' : 'http',
    url: url.href,
    headers: v.headers === undefined ? {} : stringMap(v.headers, 'headers'),
  };
}

/** The servers of one file's text. */
export function parseMcpFile(
  file: string,
  text: string,
): { servers: ServerConfig[]; bad: BadServer[]; error?: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return { servers: [], bad: [], error: `${file}: not valid JSON: ${(e as Error).message}` };
  }
  if (!isObject(json) || !isObject(json.mcpServers))
    return { servers: [], bad: [], error: `${file}: expected {"mcpServers": {NAME: {…}, …}}` };
  const servers: ServerConfig[] = [];
  const bad: BadServer[] = [];
  for (const [name, v] of Object.entries(json.mcpServers)) {
    try {
      servers.push(parseServer(name, file, v));
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      bad.push({ name, file, error: `${file}: mcpServers.${name}: ${e.message}` });
    }
  }
  return { servers, bad };
}

/**
 * Everything that applies in `cwd`: the owner's config/mcp.json, then the project's .mcp.json when the owner
 * trusted it as it is now (a project server replaces a global one of the same name).
 */
export function loadMcpConfig(configDir: string, cwd: string): McpConfig {
  const out: McpConfig = { servers: [], bad: [], errors: [], notices: [] };
  const byName = new Map<string, ServerConfig | BadServer>();
  const add = (r: ReturnType<typeof parseMcpFile>): void => {
    if (r.error) out.errors.push(r.error);
    for (const s of [...r.servers, ...r.bad]) byName.set(s.name, s);
  };
  const global = join(configDir, GLOBAL_MCP_FILE);
  let text: string | undefined;
  try {
    text = readFileSync(global, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') out.errors.push(`${global}: ${(e as Error).message}`);
  }
  if (text !== undefined) add(parseMcpFile(global, text));
  const project = projectFile(configDir, cwd);
  if (project.error) out.errors.push(project.error);
  if (project.notice) out.notices.push(project.notice);
  if (project.text !== undefined) add(parseMcpFile(project.file, project.text));
  for (const s of byName.values()) {
    if ('error' in s) out.bad.push(s);
    else out.servers.push(s);
  }
  return out;
}

/**
 * The project's .mcp.json, read once through one descriptor (projectPolicy: no symlink, a regular file) and
 * used only when its bytes are the ones the owner trusted: the agent can write the workspace, so an edit made
 * after the owner looked is untrusted again.
 */
function projectFile(configDir: string, cwd: string): { file: string; text?: string; error?: string; notice?: string } {
  const file = join(cwd, PROJECT_MCP_FILE);
  let p: ReturnType<typeof projectPolicy>;
  try {
    p = projectPolicy(file);
  } catch (e) {
    if (/no such file/.test((e as Error).message)) return { file };
    return { file, error: `${(e as Error).message}; its MCP servers are not started` };
  }
  let trusted: Map<string, string>;
  try {
    trusted = readTrusted(configDir);
  } catch (e) {
    return { file: p.file, error: `the trust list cannot be read (${(e as Error).message}); ${p.file} is not used` };
  }
  if (trusted.get(p.file) !== p.sha) {
    return {
      file: p.file,
      notice: `${p.file} is not trusted${trusted.has(p.file) ? ' as it is now (it changed since it was trusted)' : ''}: its MCP servers are not started; the owner trusts it with "trust ${p.file}" in config/trust`,
    };
  }
  return { file: p.file, text: p.bytes.toString('utf8') };
}
