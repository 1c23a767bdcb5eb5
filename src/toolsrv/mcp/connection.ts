/**
 * One configured MCP server, as toolsrv keeps it: the SDK's client over its transport, its tools, resources and
 * prompts as last listed, a log, and its life. A stdio server is started through `launch` (the sandbox helper,
 * with the server's own policy: see manager.ts); a remote one is dialled by toolsrv itself. When a server dies or
 * its connection drops it is started again after a backoff that doubles (1 s, 2 s, … 60 s) and resets once a
 * connection has lived a minute; calls in flight fail with the reason, and nothing else notices.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
  type Prompt,
  type Resource,
  type Tool as McpTool,
} from '@modelcontextprotocol/sdk/types.js';
import { Launcher, NO_SPAWNER } from '../../platform/launcher.js';
import type { ServerConfig, StdioServer } from './config.js';
import { SpawnedTransport, type ServerCommand } from './spawned-transport.js';

export type McpState = 'starting' | 'ready' | 'restarting' | 'stopped' | 'failed' | 'disabled';

/** The command that starts a stdio server (the sandbox helper's, around the server's own), or why it cannot start. */
export type Launch = (s: StdioServer, unconfined: boolean) => ServerCommand | { refused: string };

export interface ConnectionOptions {
  cwd: string;
  launch: Launch;
  /** Starts stdio servers (through the spawner where it is built: contained, limited); toolsrv's own. */
  launcher?: Launcher;
  /** --yolo: stdio servers run unsandboxed, so without the spawner they start as --yolo tool calls do. */
  yolo?: boolean;
  /** First restart delay; doubles up to 60 s (tests shorten it). */
  backoffMs?: number;
  /** How long a start may take (spawn, initialize, first listings). */
  startTimeoutMs?: number;
  /** The server's tools, resources or prompts changed (or its state did). */
  changed: () => void;
  log: (m: string) => void;
}

const LOG_LINES = 500;
const LOG_LINE = 2000;
/**
 * The most tools (resources, prompts) taken from one server: each tool is a line of every tool list olliesrv
 * reads and a candidate of every tool_search, and a real server has tens.
 */
const MAX_ITEMS = 1000;
const MAX_BACKOFF_MS = 60_000;
/** A connection that lived this long resets the backoff. */
const HEALTHY_MS = 60_000;
const START_TIMEOUT_MS = 30_000;
const CLIENT = { name: 'ollie', version: '1' };
let defaultLauncher: Launcher | undefined;

export class McpConnection {
  state: McpState;
  error = '';
  restarts = 0;
  /** The sandboxed command the running server was started with (commandKey), to tell when the policy changed. */
  private startedWith = '';
  /** A restart under the policy in force, under way: calls meanwhile wait for it rather than fail as starting. */
  private policyRestart?: Promise<void>;
  /** When the last start under the policy was (or is to be), and how long one that follows within HEALTHY_MS waits. */
  private policyStartAt = 0;
  private policyDelay = 0;
  /** It is stopped (or failed to start) because the policy in force refuses it: a re-check starts it once allowed. */
  private refusedByPolicy = false;
  /** The resident server's transport (a stdio one), to kill at once when the policy takes its rights back. */
  private spawned?: SpawnedTransport;
  pid = 0;
  startedAt = 0;
  tools: McpTool[] = [];
  resources: Resource[] = [];
  prompts: Prompt[] = [];
  private client?: Client;
  private lines: string[] = [];
  private backoff: number;
  private timer?: NodeJS.Timeout;
  /** Bumped by every start and stop: a late event of an older connection changes nothing. */
  private generation = 0;
  private readyWaiters: Array<() => void> = [];
  private listing: Record<'tools' | 'resources' | 'prompts', 'idle' | 'running' | 'again'> = {
    tools: 'idle',
    resources: 'idle',
    prompts: 'idle',
  };

  constructor(
    readonly config: ServerConfig,
    private readonly o: ConnectionOptions,
  ) {
    this.backoff = o.backoffMs ?? 1000;
    this.state = config.disabled ? 'disabled' : 'stopped';
  }

  get name(): string {
    return this.config.name;
  }

  /** The server's log: lifecycle lines and what a stdio server wrote to stderr, newest last. */
  log(): string {
    return this.lines.map((l) => `${l}\n`).join('');
  }

  private note(line: string): void {
    const stamp = new Date().toISOString();
    // Lines are cut: the log is kept in memory, and a server writes to stderr what it likes.
    for (const l of line.split('\n'))
      if (l.trim()) this.lines.push(`${stamp} ${l.length > LOG_LINE ? `${l.slice(0, LOG_LINE)}… (cut)` : l}`);
    if (this.lines.length > LOG_LINES) this.lines.splice(0, this.lines.length - LOG_LINES);
  }

  /** Resolves once the server is ready or has given up for now (failed, restarting, stopped), or after `ms`. */
  settled(ms: number): Promise<void> {
    if (this.state !== 'starting') return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.readyWaiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  private settle(): void {
    for (const w of this.readyWaiters.splice(0)) w();
  }

  start(): void {
    if (this.config.disabled) return;
    clearTimeout(this.timer);
    const gen = ++this.generation;
    this.listing = { tools: 'idle', resources: 'idle', prompts: 'idle' };
    this.state = 'starting';
    this.error = '';
    this.o.changed();
    void this.connect(gen);
  }

  private async connect(gen: number): Promise<void> {
    let transport: Transport;
    try {
      transport = this.transport();
    } catch (e) {
      this.refusedByPolicy = e instanceof PolicyRefusal;
      return this.failed(gen, (e as Error).message, false);
    }
    this.refusedByPolicy = false;
    const client = new Client(CLIENT, { capabilities: {} });
    this.client = client;
    client.onclose = () => {
      if (gen === this.generation && (this.state === 'ready' || this.state === 'starting'))
        this.failed(
          gen,
          transport instanceof SpawnedTransport && transport.ended ? transport.ended : 'the connection closed',
          true,
        );
    };
    client.onerror = (e) => {
      if (gen === this.generation) this.note(`error: ${e.message}`);
    };
    const timeout = this.o.startTimeoutMs ?? START_TIMEOUT_MS;
    try {
      await client.connect(transport, { timeout });
      if (gen !== this.generation) return void client.close().catch(() => undefined);
      this.pid = transport instanceof SpawnedTransport ? transport.pid : 0;
      this.startedAt = Date.now();
      const caps = client.getServerCapabilities() ?? {};
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.refresh(gen, 'tools'));
      client.setNotificationHandler(ResourceListChangedNotificationSchema, () => this.refresh(gen, 'resources'));
      client.setNotificationHandler(PromptListChangedNotificationSchema, () => this.refresh(gen, 'prompts'));
      this.tools = caps.tools ? await this.listAll('tools', timeout) : [];
      this.resources = caps.resources ? await this.listAll('resources', timeout) : [];
      this.prompts = caps.prompts ? await this.listAll('prompts', timeout) : [];
      if (gen !== this.generation) return;
      this.state = 'ready';
      const v = client.getServerVersion();
      this.note(
        `ready${v ? ` (${v.name} ${v.version})` : ''}: ${this.tools.length} tools, ${this.resources.length} resources, ${this.prompts.length} prompts${this.pid ? `, pid ${this.pid}` : ''}`,
      );
      this.settle();
      this.o.changed();
    } catch (e) {
      this.failed(gen, (e as Error).message, true);
    }
  }

  private transport(): Transport {
    const c = this.config;
    if (c.type === 'stdio') {
      const cmd = this.o.launch(c, false);
      if ('refused' in cmd) throw new PolicyRefusal(cmd.refused);
      // As a sandboxed tool call, a sandboxed server does not run where nothing could contain or limit it.
      if (!this.o.yolo && !this.launcher().native) throw new Error(`sandbox unavailable: ${NO_SPAWNER}`);
      this.startedWith = commandKey(cmd);
      this.note(
        `starting ${[c.command, ...c.args].join(' ')} (${this.o.yolo ? '--yolo: unsandboxed' : `sandboxed, workspace ${c.workspaceWritable ? 'writable' : 'read only'}`})`,
      );
      this.spawned = this.stdio(cmd);
      return this.spawned;
    }
    // Dialled by toolsrv itself, outside the sandbox (as any HTTP client of the owner's): the owner's config named it.
    this.note(`connecting to ${redactUrl(c.url)} (${c.type === 'sse' ? 'SSE' : 'Streamable HTTP'})`);
    const requestInit = { headers: c.headers };
    return c.type === 'sse'
      ? new SSEClientTransport(new URL(c.url), { requestInit })
      : new StreamableHTTPClientTransport(new URL(c.url), { requestInit });
  }

  private launcher(): Launcher {
    // One launcher for every connection that was given none (tests): its spawner starts on first use.
    defaultLauncher ??= Launcher.create();
    return this.o.launcher ?? defaultLauncher;
  }

  private stdio(cmd: ServerCommand): SpawnedTransport {
    let buf = '';
    return new SpawnedTransport(this.launcher(), cmd, this.o.cwd, (text) => {
      buf += text;
      const nl = buf.lastIndexOf('\n');
      if (nl >= 0) {
        this.note(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
      if (buf.length > 4096) {
        this.note(buf);
        buf = '';
      }
    });
  }

  private async listAll<K extends 'tools' | 'resources' | 'prompts'>(
    what: K,
    timeout: number,
  ): Promise<K extends 'tools' ? McpTool[] : K extends 'resources' ? Resource[] : Prompt[]> {
    const c = this.client!;
    const out: unknown[] = [];
    let cursor: string | undefined;
    // A server that pages forever is cut off: 100 pages is more than any real server sends.
    for (let page = 0; page < 100; page++) {
      const params = cursor ? { cursor } : {};
      const r =
        what === 'tools'
          ? await c.listTools(params, { timeout })
          : what === 'resources'
            ? await c.listResources(params, { timeout })
            : await c.listPrompts(params, { timeout });
      out.push(...((r as Record<string, unknown[]>)[what] ?? []));
      cursor = r.nextCursor;
      if (!cursor || out.length > MAX_ITEMS) break;
    }
    if (out.length > MAX_ITEMS) {
      this.note(`it lists ${out.length}${cursor ? '+' : ''} ${what}: only the first ${MAX_ITEMS} are used`);
      out.length = MAX_ITEMS;
    }
    return out as never;
  }

  /**
   * A list_changed notification: one listing at a time per list, and at most one more after it, however many
   * notifications came meanwhile (a server flooding them would otherwise have toolsrv list, rebuild and announce
   * once per notification).
   */
  private refresh(gen: number, what: 'tools' | 'resources' | 'prompts'): void {
    const now = this.listing[what];
    if (now === 'idle') void this.relist(gen, what);
    else this.listing[what] = 'again';
  }

  private async relist(gen: number, what: 'tools' | 'resources' | 'prompts'): Promise<void> {
    // The connection's own: a start makes new ones, so a listing of an older connection holds up nothing.
    const listing = this.listing;
    listing[what] = 'running';
    await this.listOnce(gen, what);
    // Set to 'again' by notifications while the listing was out.
    const again = (listing[what] as string) === 'again';
    listing[what] = 'idle';
    if (again && gen === this.generation) void this.relist(gen, what);
  }

  private async listOnce(gen: number, what: 'tools' | 'resources' | 'prompts'): Promise<void> {
    try {
      const list = await this.listAll(what, this.o.startTimeoutMs ?? START_TIMEOUT_MS);
      if (gen !== this.generation) return;
      (this as Record<string, unknown>)[what] = list;
      this.note(`${what} changed: ${list.length}`);
      this.o.changed();
    } catch (e) {
      if (gen === this.generation) this.note(`could not list ${what}: ${(e as Error).message}`);
    }
  }

  private failed(gen: number, why: string, retry: boolean): void {
    if (gen !== this.generation) return;
    const lived = this.startedAt ? Date.now() - this.startedAt : 0;
    this.generation++;
    const client = this.client;
    this.client = undefined;
    void client?.close().catch(() => undefined);
    this.error = why;
    this.startedAt = 0;
    this.pid = 0;
    if (lived >= HEALTHY_MS) this.backoff = this.o.backoffMs ?? 1000;
    if (!retry) {
      this.state = 'failed';
      this.note(`failed: ${why}`);
    } else {
      this.state = 'restarting';
      const delay = this.backoff;
      this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
      this.note(`lost: ${why}; starting again in ${delay} ms`);
      this.o.log(`MCP server ${this.name}: ${why}; restarting in ${delay} ms`);
      this.timer = setTimeout(() => {
        this.restarts++;
        this.start();
      }, delay);
      this.timer.unref();
    }
    this.settle();
    this.o.changed();
  }

  /** Stops it for good (until start or restart). */
  stop(why = 'stopped'): void {
    clearTimeout(this.timer);
    this.refusedByPolicy = false;
    this.generation++;
    const client = this.client;
    this.client = undefined;
    void client?.close().catch(() => undefined);
    if (this.state !== 'disabled') this.state = 'stopped';
    this.pid = 0;
    this.startedAt = 0;
    this.note(why);
    this.settle();
    this.o.changed();
  }

  /** Starts it again now, with the backoff reset (ctl restart). */
  restart(): void {
    this.stop('restarting on request');
    this.backoff = this.o.backoffMs ?? 1000;
    this.start();
  }

  /**
   * Re-checks a running stdio server against the policy in force, and acts at once. The owner may have narrowed
   * the policy since the server started (trusted a project file that denies a path or lowers a limit, edited
   * sandbox.yaml), or an agent changed what it depends on in the workspace (made a `.git`, whose hooks and config
   * then stay read only): a tool call gets the new policy at once, and so must a server, between uses and in the
   * middle of one. A changed command: the server is killed and started again under it (calls in flight end with
   * the reason). A policy that now refuses (a trusted file changed since it was trusted, a malformed sandbox.yaml):
   * the server is killed and stays stopped, its error saying why, until a re-check finds the policy allows it.
   * Synchronous: the caller (a tool call's end, the manager's timer, a use) knows it is done when this returns.
   */
  recheck(): void {
    const c = this.config;
    if (c.type !== 'stdio' || this.config.disabled) return;
    if (this.refusedByPolicy && (this.state === 'stopped' || this.state === 'failed')) {
      if ('refused' in this.o.launch(c, false)) return;
      this.note('the sandbox policy in force allows it again: starting it');
      this.startUnderPolicy();
      return;
    }
    if ((this.state !== 'ready' && this.state !== 'starting') || !this.startedWith) return;
    const now = this.o.launch(c, false);
    if ('refused' in now) {
      const why = `the sandbox policy in force refuses it: ${now.refused}`;
      this.endUnderPolicy(`${why}: stopped`);
      this.o.log(`MCP server ${this.name}: ${why}; stopped`);
      this.stop(`stopped: ${why}`);
      this.error = why;
      this.refusedByPolicy = true;
      this.o.changed();
      return;
    }
    if (commandKey(now) === this.startedWith) return;
    this.endUnderPolicy('the sandbox policy changed while it ran: restarted under the policy in force');
    this.o.log(`MCP server ${this.name}: the sandbox policy changed; restarting it under the policy in force`);
    this.stop('the sandbox policy changed since it started: restarting it under the policy in force');
    this.startUnderPolicy();
  }

  /** Stopped by the policy (until it allows it again): its tools stay listed, and a call says why. */
  get stoppedByPolicy(): boolean {
    return this.refusedByPolicy;
  }

  /**
   * Starts it under the policy in force, as a restart: its tools stay listed meanwhile (an agent's tool list does
   * not change under it), and uses that come meanwhile wait for it rather than fail as starting.
   */
  private startUnderPolicy(): void {
    const base = this.o.backoffMs ?? 1000;
    const now = Date.now();
    // What the policy depends on may change at every check (an agent flipping a `.git` entry at every call's end,
    // a trusted file edited back and forth): each start is a new process, so the first start is at once and those
    // that follow within HEALTHY_MS wait, doubling, as after crashes. The server is stopped meanwhile: waiting
    // leaves it no right, it only gives it its new ones later.
    const delay = this.policyStartAt && now - this.policyStartAt < HEALTHY_MS ? Math.max(this.policyDelay, base) : 0;
    this.policyDelay = delay ? Math.min(delay * 2, MAX_BACKOFF_MS) : base;
    this.policyStartAt = now + delay;
    this.backoff = base;
    this.restarts++;
    let wait: Promise<void>;
    if (!delay) {
      this.start();
      wait = this.settled(this.o.startTimeoutMs ?? START_TIMEOUT_MS);
    } else {
      this.state = 'restarting';
      this.note(
        `starting it under the policy in force in ${delay} ms (it was restarted for the policy less than a minute ago)`,
      );
      // Resolved by settle(): its start's end (ready or failed), or a stop meanwhile.
      wait = new Promise<void>((resolve) => this.readyWaiters.push(resolve));
      this.timer = setTimeout(() => this.start(), delay);
      this.timer.unref();
      this.o.changed();
    }
    wait = wait.finally(() => {
      if (this.policyRestart === wait) this.policyRestart = undefined;
    });
    this.policyRestart = wait;
  }

  /** The running server's rights end now: its calls in flight fail with `why`, and its process is killed. */
  private endUnderPolicy(why: string): void {
    if (this.client) policyEnded.set(this.client, why);
    this.spawned?.kill();
  }

  /** The client of a server that still runs under the policy in force (recheck), once any restart is over. */
  private async current(signal?: AbortSignal): Promise<Client> {
    this.recheck();
    // Calls that came while it restarts (an agent's parallel calls, another agent's) wait for it too.
    if (this.policyRestart) await untilAborted(this.policyRestart, signal);
    signal?.throwIfAborted();
    return this.ready();
  }

  /** `use` of a client; should the policy end the server meanwhile, the error says so rather than "closed". */
  private async using<T>(client: Client, use: (c: Client) => Promise<T>): Promise<T> {
    try {
      return await use(client);
    } catch (e) {
      const why = policyEnded.get(client);
      throw why ? new Error(why) : e;
    }
  }

  private ready(): Client {
    if (this.state !== 'ready' || !this.client) {
      throw new Error(`MCP server ${this.name} is ${this.state}${this.error ? ` (${this.error})` : ''}`);
    }
    return this.client;
  }

  /**
   * One tool call; its result's content in words, and whether the server said it failed. An `unconfined` call (an
   * approved bypass) of a stdio server runs in a connection of its own, started outside the sandbox and closed
   * after: the resident server keeps its sandbox; only this call runs with the user's rights.
   */
  async call(
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
    timeoutMs: number,
    unconfined = false,
  ): Promise<{ text: string; isError: boolean }> {
    const c = this.config;
    if (!unconfined || c.type !== 'stdio')
      return this.using(await this.current(signal), (client) => callOn(client, tool, args, signal, timeoutMs));
    const cmd = this.o.launch(c, true);
    if ('refused' in cmd) throw new Error(cmd.refused);
    this.note(`bypass: starting an unsandboxed instance for one call of ${tool}`);
    const client = new Client(CLIENT, { capabilities: {} });
    await client.connect(this.stdio(cmd), { timeout: this.o.startTimeoutMs ?? START_TIMEOUT_MS, signal });
    try {
      return await callOn(client, tool, args, signal, timeoutMs);
    } finally {
      await client.close().catch(() => undefined);
    }
  }

  async readResource(uri: string): Promise<string> {
    const r = await this.using(await this.current(), (c) => c.readResource({ uri }));
    return r.contents
      .map((c) =>
        'text' in c && typeof c.text === 'string'
          ? c.text
          : 'blob' in c && typeof c.blob === 'string'
            ? Buffer.from(c.blob, 'base64').toString('latin1')
            : '',
      )
      .join('');
  }

  /** A prompt's messages in words (what a slash command sends the model). */
  async getPrompt(name: string, args: Record<string, string>): Promise<string> {
    const r = await this.using(await this.current(), (c) => c.getPrompt({ name, arguments: args }));
    return r.messages.map((m) => contentText(m.content as { type: string })).join('\n\n');
  }
}

async function callOn(
  client: Client,
  tool: string,
  args: Record<string, unknown>,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<{ text: string; isError: boolean }> {
  const r = await client.callTool({ name: tool, arguments: args }, undefined, {
    signal,
    timeout: timeoutMs,
    maxTotalTimeout: timeoutMs,
  });
  if ('toolResult' in r) return { text: JSON.stringify(r.toolResult), isError: false };
  const parts = (r.content as Array<{ type: string }>).map(contentText);
  if (!parts.length && r.structuredContent !== undefined) parts.push(JSON.stringify(r.structuredContent));
  return { text: parts.join('\n'), isError: r.isError === true };
}

/** A content block as text: text as is, the rest named (an image is not text for the tool log). */
function contentText(c: {
  type: string;
  text?: string;
  mimeType?: string;
  resource?: { uri: string; text?: string };
  uri?: string;
  name?: string;
}): string {
  switch (c.type) {
    case 'text':
      return c.text ?? '';
    case 'resource':
      return c.resource?.text ?? `[resource ${c.resource?.uri ?? ''}]`;
    case 'resource_link':
      return `[resource ${c.uri ?? ''}${c.name ? ` ${c.name}` : ''}]`;
    default:
      return `[${c.type}${c.mimeType ? ` ${c.mimeType}` : ''}]`;
  }
}

/** A URL for logs: no user info, no query (tokens ride there). */
export function redactUrl(u: string): string {
  try {
    const url = new URL(u);
    return `${url.protocol}//${url.host}${url.pathname}`;
  } catch {
    return '(bad url)';
  }
}

/** What of a server's sandboxed command the policy decides: the helper's argv (its rules) and the limits. */
function commandKey(cmd: ServerCommand): string {
  return JSON.stringify([cmd.file, cmd.args, cmd.limits ?? null]);
}

/** Why the policy ended a server's connection, by its client: what its calls in flight fail with. */
const policyEnded = new WeakMap<Client, string>();

/** The policy in force refuses a stdio server (launch's refusal), as against any other reason it cannot start. */
class PolicyRefusal extends Error {}

/** `p`, or the abort of `signal` first: an aborted call does not wait out a server's start. */
function untilAborted(p: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return p;
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    void p.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
