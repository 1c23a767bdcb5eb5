/**
 * The olliesrv namespace, declared once. Every file the daemon serves is a line here; `help` is generated
 * from the doc strings. Handlers are one-liners into the objects that own the data.
 */
import { build, Dir, Each, EachFile, Leaf, NinepError, type Ctx, type Namespace } from '../../ninep/index.js';
import type { Agent } from '../agent/agent.js';
import type { BackendPool } from '../agent/deps.js';
import { oneShot } from '../agent/oneshot.js';
import { parseFromRequest } from '../agent/chatlog.js';
import type { Profiles } from '../agent/profiles.js';
import { renderStats } from '../agent/stats.js';
import { compileFilter, type EventBus } from '../event/bus.js';
import { Agents } from '../session/agents.js';
import type { Sessions } from '../session/registry.js';
import type { Workflows } from '../session/workflows.js';
import type { ConfigFiles } from '../config/files.js';
import type { Hooks } from '../hooks/hooks.js';
import { PROVIDER_IDS, PROVIDERS, type Provider } from '../backend/setup.js';
import type { SessionTools } from '../toolclient/host.js';
import { ruleFor, type BypassRuleStore } from '../store/bypass.js';
import { parseKeyValues, RequestError } from './kv.js';
import { FormatError, type Commands } from '../../formats/index.js';
import * as F from '../../formats/olliesrv.js';
import {
  ANYONE,
  ANYONE_READS,
  checkAgentCommand,
  inSession,
  onAgent,
  OWNER_ONLY,
  principalOf,
  relate,
  type Scope,
} from '../auth/access.js';
import { MAX_DEPTH } from '../session/agents.js';
import { knownWindow } from '../backend/windows.js';
import { realpathSync } from 'node:fs';
import type { McpMirror } from '../mcp/mirror.js';
import { sessionMcpDir } from '../mcp/namespace.js';
import type { SessionRemotes } from '../toolclient/remotes.js';
import { newSession, remoteCtl, toolsConnected } from './remote-files.js';
import type { Checkpoints } from '../checkpoint/service.js';
import { checkpointDir } from './checkpoint-spec.js';
import { relative, isAbsolute, resolve as resolvePath } from 'node:path';

export interface Olliesrv {
  sessions: Sessions;
  agents: Agents;
  bus: EventBus;
  backends: BackendPool;
  profiles: Profiles;
  workflows: Workflows;
  config: ConfigFiles;
  /** The session's toolsrv if one is running (bypass requests live there). */
  sessionTools: (sessionId: string) => SessionTools | undefined;
  /** Remembered bypass approvals (listed and revoked through `bypassrules`). */
  rules?: BypassRuleStore;
  /** Which host each session's tools run on (toolclient/remotes.ts). */
  remotes?: SessionRemotes;
  /** Root ctl `reload`: re-reads backends.conf; returns what changed or throws the file's error. */
  reload: () => string;
  /** Lifecycle hooks: their runs (session/S/hooks) and the per-session switch (session ctl `hooks on|off`). */
  hooks?: Hooks;
  /** The sessions' MCP servers (session/S/mcp, olliesrv/mcp). */
  mcp?: McpMirror;
  /** Checkpoints of agents' writable roots (an agent's checkpoint/ directory, ctl rewind). */
  checkpoints?: Checkpoints;
}

/**
 * `agent/new` requests: key=value pairs; `prompt=` may come last and unquoted, taking the rest of the request
 * (so `agent=reviewer prompt=look at the diff` works from a shell).
 */
function parseAgentRequest(req: string): Record<string, string> {
  const m = /(^|\s)prompt=(?!["'])/.exec(req);
  if (!m) return parseKeyValues(req, F.AGENT_NEW);
  const head = parseKeyValues(req.slice(0, m.index), F.AGENT_NEW);
  if (head.prompt !== undefined) throw new RequestError('key prompt given twice');
  return { ...head, prompt: req.slice(m.index + m[0].length).replace(/\n$/, '') };
}

/** Whether `dir` is `root` or inside it, both with symlinks resolved (a link in the workspace is not a way out). */
function inside(root: string, dir: string): boolean {
  let r: string;
  let d: string;
  try {
    r = realpathSync(root);
    d = realpathSync(dir);
  } catch {
    return false;
  }
  const rel = relative(r, d);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/**
 * What an agent or a workflow may ask of agent/new: never more than it has. An agent's new agent is its
 * sub-agent (its parent is the caller or one of the caller's sub-agents, within the depth limit), works in the
 * caller's directory or below, and uses the caller's backend; a workflow's agents work in the session's
 * directory or below. Returns the request as it applies.
 */
function confineNewAgent(
  o: Olliesrv,
  ctx: Ctx,
  kv: ReturnType<typeof parseAgentRequest>,
): ReturnType<typeof parseAgentRequest> & { sandboxRoot?: string } {
  const p = principalOf(ctx);
  if (!p || p.kind === 'owner') return kv;
  const sessionName = ctx.params.session!;
  const session = o.sessions.get(sessionName);
  if (p.kind === 'session') {
    const cwd = kv.cwd === undefined ? session.cwd : resolvePath(session.cwd, kv.cwd);
    checkSessionCwd(o, ctx, cwd);
    return { ...kv, cwd };
  }
  const caller = o.agents.find(sessionName, p.agent);
  const cwd = kv.cwd === undefined ? caller.cfg.cwd : resolvePath(caller.cfg.cwd, kv.cwd);
  if (!inside(caller.cfg.cwd, cwd))
    throw new NinepError(
      `refused: cwd ${cwd} is outside ${caller.cfg.cwd}; an agent's sub-agents work inside its own directory`,
    );
  if (kv.backend !== undefined && kv.backend !== caller.cfg.backend)
    throw new NinepError(
      `refused: an agent's sub-agents use its own backend (${caller.cfg.backend}), not ${kv.backend}`,
    );
  let parent = caller;
  if (kv.parent !== undefined) {
    const named = o.agents.find(sessionName, kv.parent);
    const rel = relate(o, sessionName, caller.id, named);
    if (rel !== 'self' && rel !== 'descendant')
      throw new NinepError(`refused: parent=${kv.parent} is not this agent nor one of its sub-agents`);
    parent = named;
  }
  if (parent.depth + 1 > MAX_DEPTH)
    throw new NinepError(
      `refused: sub-agent depth limit: ${parent.name} is at depth ${parent.depth}, and sub-agents may nest at most ${MAX_DEPTH} deep`,
    );
  return {
    ...kv,
    cwd,
    backend: caller.cfg.backend,
    parent: parent.id,
    sandboxRoot: caller.cfg.sandboxRoot ?? caller.cfg.cwd,
  };
}

/**
 * Refuses a command the caller may not give an agent: an agent, the ones that widen (checkAgentCommand), and
 * `tool_load` of a tool the target's profile does not list (a profile's tool set is a limit the owner chose: a
 * reader without shell, an agent without web_fetch's network); a workflow, a working directory outside its
 * session's.
 */
function agentCommand(o: Olliesrv, ctx: Ctx, target: Agent, command: string): string {
  const p = principalOf(ctx);
  const why = checkAgentCommand(p, command);
  if (why) throw new NinepError(`refused: ${why}`);
  const {
    name: cmd,
    args: [args = ''],
  } = parseCommand(F.AGENT_CTL, command);
  // Rewinding changes the user's files and conversation: the owner's decision, not a workflow's.
  if (p?.kind !== 'owner' && (cmd === 'rewind' || cmd === 'checkpoint'))
    throw new NinepError(`refused: only the owner may ${cmd}`);
  if (p?.kind === 'agent' && cmd === 'tool_load') {
    const listed = new Set([...o.profiles.get(target.cfg.profile).autoLoad]);
    const other = args.split(/\s+/).filter((n) => n && !listed.has(n));
    if (other.length)
      throw new NinepError(
        `refused: an agent may load only the tools of its profile (${[...listed].join(', ') || 'none'}), not ${other.join(', ')}; other tools are the owner's to give`,
      );
  }
  if (p?.kind === 'session' && cmd === 'cwd' && args) checkSessionCwd(o, ctx, resolvePath(target.cfg.cwd, args));
  return command;
}

/**
 * The one way an agent command runs: a write to its ctl and `/cmd` typed as its prompt both come here, are read
 * through the declared command table (formats/olliesrv.ts AGENT_CTL), checked for the caller, and run by the
 * agent's command table (agent/commands.ts). Returns the reply.
 */
async function dispatchAgentCommand(o: Olliesrv, ctx: Ctx, target: Agent, command: string): Promise<string> {
  return target.ctl(agentCommand(o, ctx, target, command));
}

/** A request read by a declared command table; a bad one is a RequestError naming what and where. */
function parseCommand(table: Commands, text: string): { name: string; args: string[] } {
  try {
    return table.parse(text);
  } catch (e) {
    if (e instanceof FormatError) throw new RequestError(e.message);
    throw e;
  }
}

/** A workflow's agents work inside the session's directory. */
function checkSessionCwd(o: Olliesrv, ctx: Ctx, cwd: string): void {
  const session = o.sessions.get(ctx.params.session!);
  if (!inside(session.cwd, cwd))
    throw new NinepError(
      `refused: cwd ${cwd} is outside the session's directory ${session.cwd}; a workflow's agents work inside it`,
    );
}

function positiveInt(key: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new RequestError(`${key}: ${JSON.stringify(v)} is not a positive integer`);
  return n;
}

function renderCfg(a: Agent): string {
  const params = Object.fromEntries(
    Object.entries(a.cfg.params).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : String(v)]),
  );
  return F.CFG.format({
    backend: a.cfg.backend,
    model: a.cfg.model,
    profile: a.cfg.profile,
    cwd: a.cfg.cwd,
    ...params,
    maxSteps: a.cfg.maxSteps,
    compactAt: a.cfg.compactAt,
  });
}

function providerLines(): string {
  return F.PROVIDERS.format(
    PROVIDER_IDS.map((id) => {
      const p: Provider = PROVIDERS[id];
      return {
        id,
        label: p.label,
        type: p.type,
        url: p.url ?? null,
        key_env: p.keyEnv ?? null,
        key: p.needsKey ? 'needed' : 'optional',
      };
    }),
  );
}

/** Writes to `cfg`: key=value lines (or pairs); each applies or the whole write is refused with the reason. */
async function applyCfg(o: Olliesrv, a: Agent, text: string): Promise<void> {
  const kv = parseKeyValues(text, F.CFG);
  if (Object.keys(kv).length === 0) return;
  if (a.busy)
    throw new NinepError(
      `agent ${a.name} is running a turn; cfg changes are refused until it is idle (ctl stop ends it)`,
    );
  if (kv.backend !== undefined) o.backends.get(kv.backend);
  if (kv.profile !== undefined && kv.profile !== a.cfg.profile) await a.switchProfile(kv.profile);
  if (kv.backend !== undefined && kv.backend !== a.cfg.backend) {
    a.cfg.backend = kv.backend;
    if (kv.model === undefined) a.cfg.model = '';
  }
  if (kv.model !== undefined) a.cfg.model = kv.model;
  const params = Agents.params(kv);
  a.cfg.params = { ...a.cfg.params, ...params };
  // Stop sequences as cfg shows them (a profile may set them): comma-separated, empty for none.
  if (kv.stop !== undefined) a.cfg.params = { ...a.cfg.params, stop: kv.stop ? kv.stop.split(',') : undefined };
  if (kv.maxSteps !== undefined) a.cfg.maxSteps = positiveInt('maxSteps', kv.maxSteps);
  if (kv.compactAt !== undefined) {
    const f = Number(kv.compactAt);
    if (!(f > 0 && f < 1))
      throw new RequestError(`compactAt: ${JSON.stringify(kv.compactAt)} is not a fraction between 0 and 1`);
    a.cfg.compactAt = f;
  }
  a.saveCfg();
  if (kv.cwd !== undefined && kv.cwd !== a.cfg.cwd) await a.ctl(`cwd ${kv.cwd}`);
}

async function* procStream(a: Agent, pid: number, signal: AbortSignal): AsyncIterable<Uint8Array> {
  const h = await a.procHost();
  if (!h.output) throw new NinepError('this toolsrv connection cannot stream proc output');
  yield* h.output(pid, signal);
}

function rootCtl(o: Olliesrv, request: string): string {
  const { name } = parseCommand(F.ROOT_CTL, request);
  if (name === 'reload') return o.reload();
  throw new NinepError(`command ${name} is declared but not handled`);
}

/** The pending requests; the command is escaped by the records (\n, \t, \\, \u{HEX}), so nothing in it passes for something else. */
function bypassLines(o: Olliesrv, sessionId: string): string {
  return F.BYPASS.format(
    (o.sessionTools(sessionId)?.pending() ?? []).map((r) => {
      const rule = r.ask ? { refused: 'a hook asked' } : ruleFor(r);
      return {
        id: r.id,
        agent: r.agent,
        tool: r.tool,
        cwd: r.cwd,
        cmd: r.cmd,
        reason: r.reason,
        ...('refused' in rule ? { remember: 'once', rule: '' } : { remember: rule.kind, rule: rule.rule }),
      };
    }),
  );
}

async function resolveBypass(o: Olliesrv, sessionId: string, request: string): Promise<string> {
  let d: ReturnType<typeof F.parseBypassDecision>;
  try {
    d = F.parseBypassDecision(request.trim());
  } catch (e) {
    throw new RequestError((e as Error).message);
  }
  const { id, decision, remember } = d;
  const st = o.sessionTools(sessionId);
  if (!st) throw new NinepError('no tool server runs for this session: there is nothing to approve');
  await st.resolve(id, decision, remember);
  return `${decision === 'approve' ? 'approved' : 'denied'} ${id}\n`;
}

function ruleLines(o: Olliesrv): string {
  const names = new Map(o.sessions.all().map((x) => [x.id, x.name]));
  return F.BYPASS_RULES.format(
    (o.rules?.list() ?? []).map((r) => ({
      id: r.id,
      tool: r.tool,
      kind: r.kind,
      rule: r.rule,
      scope: r.session === null ? 'global' : `session ${names.get(r.session) ?? r.session}`,
      created: new Date(r.created).toISOString(),
    })),
  );
}

/** `revoke ID` lines (BYPASS_RULES_WRITE); every line is checked before any rule goes, so a bad write changes nothing. */
function revokeRules(o: Olliesrv, text: string): void {
  const ids: number[] = [];
  for (const [n, line] of text.split('\n').entries()) {
    if (!line.trim()) continue;
    let id: string | undefined;
    try {
      id = F.BYPASS_RULES_WRITE.parse(line).args[0];
    } catch {
      id = undefined;
    }
    if (id === undefined || !/^\d+$/.test(id))
      throw new RequestError(`bypassrules line ${n + 1}: expected "revoke ID", got ${JSON.stringify(line.trim())}`);
    ids.push(Number(id));
  }
  const known = new Set((o.rules?.list() ?? []).map((r) => r.id));
  const missing = ids.filter((id) => !known.has(id));
  if (missing.length) throw new NinepError(`bypassrules: no rule ${missing.join(', ')} (read the file for the ids)`);
  for (const id of ids) o.rules!.remove(id);
}

/** `hooks`, `hooks on`, `hooks off`: the session's switch for lifecycle hooks (olliesrv/hooks). */
function hooksCtl(o: Olliesrv, name: string, args: string): string {
  if (!o.hooks) throw new NinepError('hooks are not available in this daemon');
  const id = o.sessions.get(name).id;
  if (args !== '' && args !== 'on' && args !== 'off')
    throw new RequestError(`hooks: expected on or off, not ${JSON.stringify(args)}`);
  if (args) o.hooks.setEnabled(id, args === 'on');
  return `hooks ${o.hooks.enabled(id) ? 'on' : 'off'}\n`;
}

function sessionCtl(o: Olliesrv, name: string, request: string): string {
  const {
    name: cmd,
    args: [args = ''],
  } = parseCommand(F.SESSION_CTL, request);
  // The table's arguments and usage are declared in formats/olliesrv.ts (SESSION_CTL); these are what they do.
  const commands: Record<string, { run: () => string }> = {
    kill: { run: () => (o.sessions.kill(name), 'killed\n') },
    save: { run: () => (o.sessions.save(), 'saved\n') },
    pause: { run: () => (o.sessions.setPaused(name, true), 'paused\n') },
    resume: { run: () => (o.sessions.setPaused(name, false), 'resumed\n') },
    hooks: { run: () => hooksCtl(o, name, args) },
    remote: { run: () => remoteCtl(o, name, args) },
    workflow: {
      run: () => {
        const s = o.sessions.get(name);
        if (!args)
          return `${s.workflow}${o.workflows.isRunning(s.id) ? ' (running)' : ''}\nworkflows: ${o.workflows.names().join(' ')}\n`;
        o.workflows.path(args);
        o.sessions.setWorkflow(name, args);
        return `workflow ${args}\n`;
      },
    },
  };
  const c = commands[cmd];
  if (!c) throw new NinepError(`command ${cmd} is declared but not handled`);
  return c.run();
}

export function olliesrvNamespace(o: Olliesrv, owner: string): Namespace {
  const { sessions, agents } = o;
  const scope: Scope = o;
  // Who may reach what (auth/access.ts): everything not given a rule here is the owner's alone.
  const both = ['walk', 'read', 'write'] as const;
  const reads = ['walk', 'read'] as const;
  const agentView = onAgent(scope, { session: both, agent: { self: reads, descendant: reads, peer: reads } });
  const agentOwn = onAgent(scope, { session: both, agent: { self: both, descendant: both } });
  const s = (ctx: { params: Readonly<Record<string, string>> }) => sessions.get(ctx.params.session!);
  // An agent's directory answers to its name and to its id ($OLLIE_UNAME in a tool's environment).
  const ag = (ctx: Ctx) => agents.find(ctx.params.session!, ctx.params.agent!);
  return build(
    Dir(
      '/',
      { access: ANYONE },
      Leaf('sshhosts', {
        doc: "The Host aliases of the ssh config ($OLLIE_SSH_CONFIG, else ~/.ssh/config), one per line: hosts a session's tools can run on (session/new remote=).",
        format: F.SSH_HOSTS,
        read: () => F.SSH_HOSTS.format(o.remotes?.hosts() ?? []),
      }),
      Leaf('backends', {
        doc: 'The configured LLM backends, one per line: name, type, url, default model; the default backend is marked with *.',
        format: F.BACKENDS,
        read: () =>
          F.BACKENDS.format(
            o.backends.names().map((n) => {
              const b = o.backends.get(n);
              return {
                name: `${n}${n === o.backends.defaultName ? '*' : ''}`,
                type: b.type,
                url: b.url,
                model: b.defaultModel,
              };
            }),
          ),
      }),
      Leaf('models', {
        doc: "Models of every backend (asked once, then cached): backend, model, context length (the provider's, else backends.conf's context =, else the known window of the model; - when none is known). Unreachable backends say why.",
        format: F.MODELS,
        blockOnce: async () => {
          const parts = await Promise.all(
            o.backends.names().map(async (n) => {
              try {
                const b = o.backends.get(n);
                const list = await b.models();
                return F.MODELS.format(
                  list.map((m) => ({
                    backend: n,
                    model: m.id,
                    context: m.contextLength ?? b.configuredContext ?? knownWindow(m.id) ?? null,
                    error: null,
                  })),
                );
              } catch (e) {
                return F.MODELS.format([{ backend: n, model: null, context: null, error: (e as Error).message }]);
              }
            }),
          );
          return parts.join('');
        },
      }),
      Leaf('agents', {
        doc: 'Agent profile names, one per line.',
        access: ANYONE_READS,
        format: F.PROFILES,
        read: () => F.PROFILES.format(o.profiles.names()),
      }),
      Leaf('ctl', {
        doc: 'Write a command, read its result: reload (re-read backends.conf).',
        format: F.ROOT_CTL,
        rdwr: (_ctx, req) => rootCtl(o, req),
      }),
      Leaf('bypassrules', {
        doc: 'Remembered bypass approvals, one per line: id, tool, prefix|exact, rule, scope (global, or session NAME), created. Write "revoke ID" (one per line) to remove one.',
        mode: 0o600,
        format: F.BYPASS_RULES,
        request: F.BYPASS_RULES_WRITE,
        read: () => ruleLines(o),
        write: (_ctx, data) => revokeRules(o, new TextDecoder().decode(data)),
      }),
      Dir(
        'config',
        {
          doc: 'The configuration files. A write is checked by the parser that reads the file and lands only when it parses.',
        },
        Leaf('backends.conf', {
          doc: 'The LLM backends (INI); written, it is reloaded at once.',
          mode: 0o600,
          format: F.TEXT('INI, parsed by backend/config.ts'),
          // An empty write (an OTRUNC open with nothing written) must not wipe the file: a file is never emptied here.
          text: {
            get: () => o.config.read('backends.conf'),
            set: (_ctx, v) => void (v.trim() && o.config.writeBackends(v)),
          },
        }),
        Leaf('providers', {
          doc: 'The providers config/check and config/backend know, one per line: id, label, backends.conf type, URL (- when the user gives one), the environment variable its key usually is in (- none), key (needed or optional).',
          format: F.PROVIDERS,
          read: () => providerLines(),
        }),
        Leaf('check', {
          doc: 'Check a backend before storing it: write provider=, url=, key= or key_env=, model= lines (provider: openai, anthropic, openrouter, ollama, gemini, copilot, compatible); read its models, "ID<TAB>context" lines, or the provider\'s error.',
          format: F.CHECKED_MODELS,
          request: F.BACKEND_SETUP,
          rdwr: (_ctx, req) => o.config.checkBackend(req),
        }),
        Leaf('backend', {
          doc: 'Store a backend: the same lines as check (and name=, default=yes|no); it is merged into backends.conf as a commented section, written 0600 and reloaded.',
          format: F.TEXT("the stored section's name, or the error"),
          request: F.BACKEND_SETUP,
          rdwr: (_ctx, req) => o.config.setupBackend(req),
        }),
        Leaf('sandbox.yaml', {
          doc: 'The sandbox policy; applies to the tool servers started after the write.',
          format: F.TEXT('YAML, the sandbox policy (docs/sandbox.md)'),
          text: {
            get: () => o.config.read('sandbox.yaml'),
            set: async (_ctx, v) => void (v.trim() && (await o.config.writeSandbox(v))),
          },
        }),
        Leaf('mcp.json', {
          doc: 'MCP servers ({"mcpServers": {…}}, docs/mcp.md), checked before it is written; running sessions restart their servers with it.',
          format: F.TEXT('JSON, the mcpServers format (docs/mcp.md)'),
          mode: 0o600,
          text: {
            get: () => o.config.read('mcp.json'),
            set: (_ctx, v) => void (v.trim() && (o.config.writeMcp(v), o.mcp?.reloadAll())),
          },
        }),
        Leaf('trust', {
          doc: 'Trusted project files (.ollie-sandbox.yaml; .ollie-hooks.json and .mcp.json, named by their paths), "sha256<TAB>path" lines; write "trust PATH" or "untrust PATH" lines (a project dir or its file). A file applies only while its hash matches.',
          mode: 0o600,
          format: F.TRUST,
          text: { get: () => o.config.readTrust(), set: (_ctx, v) => void (v.trim() && o.config.writeTrust(v)) },
        }),
        Leaf('hooks.json', {
          doc: 'Lifecycle hooks (Claude Code\'s {"hooks": {EVENT: [{"matcher", "hooks": [{"type": "command", "command", "timeout"}]}]}}); see docs/hooks.md. Applies from the next event.',
          format: F.TEXT('JSON, {"hooks": {EVENT: [{matcher, hooks: [{type, command, timeout}]}]}} (docs/hooks.md)'),
          mode: 0o600,
          text: { get: () => o.config.read('hooks.json'), set: (_ctx, v) => void (v.trim() && o.config.writeHooks(v)) },
        }),
        Leaf('profile', {
          doc: 'The profile new agents get when agent/new names none.',
          format: F.VALUE('the profile name'),
          text: {
            get: () => `${o.config.defaultProfile()}\n`,
            set: (_ctx, v) => (v.trim() ? o.config.writeDefaultProfile(v) : undefined),
          },
        }),
      ),
      Leaf('sandbox', {
        doc: 'What the tool sandbox applies on this machine, as JSON: Landlock ABI and rights, the system call filter, the capabilities dropped, containment, limits, and a one-line summary.',
        format: F.SANDBOX,
        blockOnce: async () => F.SANDBOX.format(await o.config.sandboxStatus()),
      }),
      Leaf('search', {
        doc: "Full-text search of every chat log: write words, read matches (all words, best first): session, agent, block id, role, snippet with the words in [brackets], agent id, ended (- for a live agent, else how it ended: its log is then under session/S/ended/ID). Workflows find only their own session's, agents only what they may read (their own, their sub-agents' and peers' logs).",
        access: ANYONE,
        format: F.SEARCH_HITS,
        rdwr: (ctx, req) => {
          const p = principalOf(ctx);
          if (p?.kind === 'owner') return agents.search(req);
          // An agent finds what it may read: its own log, its sub-agents' and its peers' (not its siblings').
          const shown = p?.kind === 'agent' ? (a: Agent) => relate(scope, p.session, p.agent, a) !== 'none' : undefined;
          return agents.search(req, p?.session ?? '-', shown);
        },
      }),
      Leaf('generate', {
        doc: 'One-shot generation, no history, no tools: write optional key=value lines (backend, model, system, temperature, maxTokens…), a blank line and the prompt; read the reply.',
        format: F.TEXT('the reply'),
        request: F.ONESHOT_HEADERS,
        rdwr: (_ctx, req, signal) => oneShot(o.backends, req, 'generate', signal),
      }),
      Leaf('complete', {
        doc: 'Code completion: write optional key=value lines (backend, model, suffix=TEXT after the cursor), a blank line and the text before the cursor; read the completion.',
        format: F.TEXT('the completion'),
        request: F.ONESHOT_HEADERS,
        rdwr: (_ctx, req, signal) => oneShot(o.backends, req, 'complete', signal),
      }),
      Leaf('event', {
        doc: 'Write a filter (* one segment, > the rest; several separated by spaces), then read events: "topic payload" lines. A workflow gets its own session\'s only. Topics: session.S.{new,rename,kill,pause,resume,goal}; session.S.agent.A.{new,rename,kill,state,turn,peer.add,peer.del,peer.message,bypass.request,bypass.resolved,hook} (hook: event, tool, exit, ms, command); session.S.hooks (on|off).',
        access: (ctx, op) => (principalOf(ctx)?.kind === 'session' ? undefined : OWNER_ONLY(ctx, op)),
        format: F.EVENTS,
        rdwrStream: (ctx, filter, signal) => {
          const p = principalOf(ctx);
          const wanted = compileFilter(filter);
          if (p?.kind !== 'session') return o.bus.subscribe(wanted, signal);
          const mine = `session.${p.session}.`;
          return o.bus.subscribe((topic) => topic.startsWith(mine) && wanted(topic), signal);
        },
      }),
      Dir(
        'session',
        {
          doc: 'Sessions, by name. mkdir creates one, rm kills one, mv renames one.',
          access: ANYONE_READS,
          create: (_ctx, name, perm) => {
            if (!(perm & 0x80000000)) throw new NinepError('only directories (sessions) can be created here');
            sessions.create({ name });
          },
        },
        Leaf('new', {
          doc: 'Write key=value pairs (name=, cwd=, remote=[user@]host[:port] to run its tools there over SSH, with cwd= a path there) to create a session; read back its name.',
          format: F.SESSION_NEW,
          rdwr: (_ctx, req) => `${newSession(o, parseKeyValues(req, F.SESSION_NEW)).name}\n`,
        }),
        Leaf('idx', {
          doc: 'One line per session: id, name, paused, connected (1 while a tool server serves it and is reachable), remote (its host, - for this machine), cwd (tab-separated).',
          format: F.SESSION_IDX,
          read: () =>
            F.SESSION_IDX.format(
              sessions.all().map((x) => ({
                id: x.id,
                name: x.name,
                paused: x.paused,
                connected: toolsConnected(o.sessionTools(x.id)),
                remote: o.remotes?.get(x.id) ?? null,
                cwd: x.cwd,
              })),
            ),
        }),
        Each(
          'session',
          {
            doc: 'One session.',
            access: inSession(scope, { session: ['walk'], agent: ['walk'] }),
            list: () => sessions.names(),
            has: (_ctx, name) => sessions.has(name),
            key: (_ctx, name) => sessions.get(name).id,
            nameOf: (_ctx, id) => sessions.all().find((x) => x.id === id)?.name,
            rename: (ctx, newName) => void sessions.rename(ctx.params.session!, newName),
            remove: (ctx) => sessions.kill(ctx.params.session!),
          },
          Leaf('id', {
            doc: 'The immutable session UUID.',
            access: inSession(scope, { session: reads, agent: reads }),
            format: F.VALUE('the id'),
            read: (ctx) => `${s(ctx).id}\n`,
          }),
          Leaf('name', {
            doc: 'The session name; write to rename (the directory moves).',
            access: inSession(scope, { session: reads, agent: reads }),
            format: F.VALUE('the name'),
            text: {
              get: (ctx) => `${s(ctx).name}\n`,
              set: (ctx, v) => void sessions.rename(ctx.params.session!, v.trim()),
            },
          }),
          Leaf('cwd', {
            doc: 'The session working directory.',
            access: inSession(scope, { session: reads, agent: reads }),
            format: F.VALUE('the directory'),
            read: (ctx) => `${s(ctx).cwd}\n`,
          }),
          Leaf('env', {
            doc: 'Session environment: KEY=value lines. Writing replaces it (the owner only; workflows may read it).',
            access: inSession(scope, { session: reads }),
            format: F.ENV,
            text: { get: (ctx) => s(ctx).env, set: (ctx, v) => sessions.setEnv(ctx.params.session!, v) },
          }),
          Leaf('plan', {
            doc: 'The session plan, a markdown checklist. Writing replaces it.',
            access: inSession(scope, { session: both, agent: both }),
            format: F.TEXT('markdown'),
            text: { get: (ctx) => s(ctx).plan, set: (ctx, v) => sessions.setPlan(ctx.params.session!, v) },
          }),
          Leaf('ctl', {
            doc: 'Write a command, read its result: kill, save (checkpoint to disk), pause, resume, hooks [on|off] (lifecycle hooks for this session), remote [HOST|-] (the host its tools run on; docs/remote.md).',
            format: F.SESSION_CTL,
            rdwr: (ctx, req) => sessionCtl(o, ctx.params.session!, req),
          }),
          Leaf('goal', {
            doc: 'The session goal. Writing it starts the session workflow (ctl workflow; default conductor) unless one is running.',
            access: inSession(scope, { session: reads, agent: reads }),
            format: F.TEXT('the goal as the owner wrote it'),
            text: {
              get: (ctx) => s(ctx).goal,
              set: (ctx, v) => (v.trim() ? sessions.setGoal(ctx.params.session!, v) : undefined),
            },
          }),
          Leaf('goalstatus', {
            doc: 'The goal status: first line running, complete, blocked or error; then a summary. Workflows write it.',
            access: inSession(scope, { session: both, agent: both }),
            format: F.GOAL_STATUS,
            text: {
              get: (ctx) => s(ctx).goalstatus,
              set: (ctx, v) => (v.trim() ? sessions.setGoalStatus(ctx.params.session!, v) : undefined),
            },
          }),
          Leaf('goalwait', {
            doc: 'A read blocks until the goal status changes, then returns it.',
            access: inSession(scope, { session: reads, agent: reads }),
            format: F.GOAL_STATUS,
            blockOnce: (ctx, signal) => sessions.waitGoal(ctx.params.session!, signal),
          }),
          Leaf('hooks', {
            doc: 'The lifecycle hooks that ran in this session (the last 200), one per line: time (ms since the epoch), agent id, event, tool (- for none), exit (a status, timeout, killed or notrun), duration (ms), command, output (both with \\n, \\t, \\\\ escaped). Its workflow may read it.',
            format: F.HOOK_RUNS,
            access: inSession(scope, { session: reads }),
            read: (ctx) => o.hooks?.lines(s(ctx).id) ?? '',
          }),
          ...(o.mcp ? [sessionMcpDir(o.mcp, scope, (ctx) => s(ctx).id)] : []),
          Leaf('bypass', {
            doc: 'Pending sandbox-bypass requests: id, agent id, tool, cwd, command (\\n, \\t, \\\\ and \\u{HEX} escaped), reason, and the rule "session" or "always" would store: prefix|exact and the rule, or once and nothing when it can only be approved once. Write "ID approve|deny [once|session|always]".',
            format: F.BYPASS,
            request: F.BYPASS_DECISION,
            read: (ctx) => bypassLines(o, s(ctx).id),
            write: async (ctx, data) => void (await resolveBypass(o, s(ctx).id, new TextDecoder().decode(data))),
          }),
          // Agents that ended are a record for the person (tree, search): not an agent's business, so the owner's and
          // the session's (its workflow) only; an agent reaches nothing here.
          Dir(
            'ended',
            {
              doc: 'Agents that ended (finished sub-agents, killed agents), read-only, by agent id. rm forgets one (its log and search entries go).',
              access: inSession(scope, { session: reads }),
            },
            Leaf('idx', {
              doc: 'One line per ended agent: session id, agent id, name, parent id (- for none), depth, ended (ms since the epoch), how (finished, killed, interrupted), last (how its last turn ended) (tab-separated).',
              access: inSession(scope, { session: reads }),
              format: F.ENDED_IDX,
              read: (ctx) => agents.endedIdx(ctx.params.session!),
            }),
            Each(
              'ended',
              {
                doc: 'One ended agent, by id.',
                access: inSession(scope, { session: reads }),
                list: (ctx) => agents.endedList(ctx.params.session!).map((e) => e.id),
                has: (ctx, id) =>
                  sessions.has(ctx.params.session!) && agents.endedList(ctx.params.session!).some((e) => e.id === id),
                remove: (ctx) => agents.forget(ctx.params.session!, ctx.params.ended!),
              },
              Leaf('name', {
                doc: 'The name it had.',
                access: inSession(scope, { session: reads }),
                format: F.VALUE('the name'),
                read: (ctx) => `${agents.ended(ctx.params.session!, ctx.params.ended!).name}\n`,
              }),
              Leaf('log.raw', {
                doc: 'Its chat log as JSONL blocks, whole (it no longer grows).',
                access: inSession(scope, { session: reads }),
                format: F.LOG,
                read: (ctx) => agents.endedLog(agents.ended(ctx.params.session!, ctx.params.ended!)),
              }),
              Leaf('block', {
                doc: "Write a block id, read that block's JSON.",
                access: inSession(scope, { session: both }),
                format: F.BLOCK,
                rdwr: (ctx, req) => {
                  const b = agents.endedBlock(agents.ended(ctx.params.session!, ctx.params.ended!), req.trim());
                  if (!b) throw new NinepError(`no block ${JSON.stringify(req.trim())}`);
                  return b;
                },
              }),
            ),
          ),
          Dir(
            'agent',
            {
              doc: 'The agents of this session, by name. rm kills one, mv renames one.',
              access: inSession(scope, { session: reads, agent: reads }),
            },
            Leaf('new', {
              doc: "Write key=value (name, cwd, backend, model, agent=PROFILE, generation parameters), read the new agent's name. With prompt= (last, may be unquoted): a sub-agent runs the prompt (parent=CALLER gives it a snapshot of the caller's history; steps=, tokens= are its budget), the read returns its reply, and it is removed.",
              access: inSession(scope, { session: both, agent: both }),
              format: F.AGENT_NEW,
              rdwr: async (ctx, req, signal) => {
                const kv = confineNewAgent(o, ctx, parseAgentRequest(req));
                const opts = {
                  name: kv.name,
                  cwd: kv.cwd,
                  backend: kv.backend,
                  model: kv.model,
                  agent: kv.agent,
                  parent: kv.parent,
                  params: Agents.params(kv),
                  ...(kv.sandboxRoot !== undefined && { sandboxRoot: kv.sandboxRoot }),
                };
                if (kv.prompt !== undefined) {
                  if (!kv.prompt.trim()) throw new RequestError('prompt= is empty');
                  return agents.spawn(
                    ctx.params.session!,
                    {
                      ...opts,
                      prompt: kv.prompt,
                      steps: positiveInt('steps', kv.steps),
                      tokens: positiveInt('tokens', kv.tokens),
                    },
                    signal,
                  );
                }
                if (kv.steps !== undefined || kv.tokens !== undefined)
                  throw new RequestError('steps= and tokens= are budgets of sub-agents: give them with prompt=');
                return `${agents.create(ctx.params.session!, opts).name}\n`;
              },
            }),
            Leaf('idx', {
              doc: 'One line per agent: session id, agent id, name, parent id (- for none), depth, state, last (how the last turn ended: ok, error, stopped, or - before the first) (tab-separated). An agent sees itself, its sub-agents and its peers.',
              access: inSession(scope, { session: reads, agent: reads }),
              format: F.AGENT_IDX,
              read: (ctx) => {
                const p = principalOf(ctx);
                const sn = ctx.params.session!;
                return agents.idx(
                  sn,
                  p?.kind === 'agent' ? (a) => relate(scope, sn, p.agent, a) !== 'none' : undefined,
                );
              },
            }),
            Each(
              'agent',
              {
                doc: 'One agent.',
                access: onAgent(scope, { agent: { self: ['walk'], descendant: ['walk', 'remove'], peer: ['walk'] } }),
                list: (ctx) => agents.list(ctx.params.session!).map((a) => a.name),
                has: (ctx, name) =>
                  agents.has(ctx.params.session!, name) ||
                  (sessions.has(ctx.params.session!) && agents.list(ctx.params.session!).some((a) => a.id === name)),
                key: (ctx, name) => agents.find(ctx.params.session!, name).id,
                nameOf: (ctx, id) => agents.list(ctx.params.session!).find((x) => x.id === id)?.name,
                rename: (ctx, newName) => agents.rename(ag(ctx), newName),
                remove: (ctx) => agents.kill(ctx.params.session!, ctx.params.agent!),
              },
              Leaf('prompt', {
                doc: 'Write a prompt (everything written on one open file is one prompt, taken when it is closed); it runs now, or waits in the queue while a turn runs. /cmd is a ctl command, !cmd a shell command.',
                access: agentOwn,
                format: F.TEXT('a prompt; /cmd is an agent ctl command, !cmd a shell command'),
                whole: true,
                write: async (ctx, data) => {
                  const text = new TextDecoder().decode(data);
                  if (!text.startsWith('/')) return void (await ag(ctx).submit(text));
                  const out = await dispatchAgentCommand(o, ctx, ag(ctx), text.slice(1));
                  ag(ctx).log.add('info', out.trimEnd() || 'ok', { name: 'command' });
                },
              }),
              Leaf('fifo', {
                doc: 'The prompt queue as a FIFO: what is written on one open file enqueues one prompt (when it is closed), a read pops the oldest (empty when none).',
                access: onAgent(scope, { agent: {} }),
                format: F.TEXT('one prompt'),
                whole: true,
                write: (ctx, data) => void ag(ctx).enqueue(new TextDecoder().decode(data)),
                // Not `read`: a read at offset 0 computes it again, and popping is not idempotent.
                blockOnce: async (ctx) => ag(ctx).queue.shift() ?? '',
              }),
              Leaf('queue', {
                doc: 'The queued prompts as a JSON array of strings; writing an array replaces the queue.',
                access: onAgent(scope, { agent: { self: reads, descendant: reads } }),
                format: F.QUEUE,
                text: {
                  get: (ctx) => F.QUEUE.format(ag(ctx).queue),
                  set: (ctx, v) => {
                    if (!v.trim()) return;
                    let q: unknown;
                    try {
                      q = JSON.parse(v);
                    } catch (e) {
                      throw new RequestError(`queue: not JSON: ${(e as Error).message}`);
                    }
                    if (!Array.isArray(q) || !q.every((x) => typeof x === 'string'))
                      throw new RequestError('queue: expected a JSON array of strings');
                    ag(ctx).queue = q as string[];
                  },
                },
              }),
              Leaf('log.raw', {
                doc: 'The chat log as JSONL blocks {role, id, content, name?, format?, partial?}, from the start, then live; EOF when the agent dies.',
                access: agentView,
                format: F.LOG,
                stream: (ctx, signal) => ag(ctx).log.stream(signal),
              }),
              Leaf('log.from', {
                doc: 'The chat log from a point, as log.raw\'s JSONL: write "tail N" (the last N blocks, then live), "before BLOCKID N" (the N blocks before that one, then EOF) or "after BLOCKID" (every block after it, then live); N at most 10000. Readable by whoever may read log.raw (the write is the request, not a change).',
                // log.raw's principals; they need write here only to say where to start.
                access: onAgent(scope, { session: both, agent: { self: both, descendant: both, peer: both } }),
                format: F.LOG,
                request: F.LOG_FROM,
                rdwrStream: (ctx, req, signal) => {
                  // A read before any request (the empty one) has nothing to say where to start.
                  if (!req.trim())
                    throw new RequestError(
                      `${ctx.path}: write a request first: "tail N", "before BLOCKID N" or "after BLOCKID"`,
                    );
                  return ag(ctx).log.from(parseFromRequest(req), signal);
                },
              }),
              Leaf('log', {
                doc: 'The chat log as plain text, the last 64 KiB.',
                access: agentView,
                format: F.TEXT('the chat as a person reads it'),
                read: (ctx) => ag(ctx).log.rendered(),
              }),
              Leaf('block', {
                doc: "Write a block id, read that block's JSON.",
                access: onAgent(scope, { agent: { self: both, descendant: both, peer: both } }),
                format: F.BLOCK,
                rdwr: (ctx, req) => {
                  const b = ag(ctx).log.get(req.trim());
                  if (!b) throw new NinepError(`no block ${JSON.stringify(req.trim())}`);
                  return b;
                },
              }),
              Leaf('state', {
                doc: 'idle, thinking, calling, paused or compacting.',
                access: agentView,
                format: F.VALUE('the state'),
                read: (ctx) => `${ag(ctx).state}\n`,
              }),
              Leaf('cfg', {
                doc: "key=value: backend, model, profile, cwd, generation parameters, maxSteps, compactAt. Writes apply, or are refused while a turn runs. Agents may read their own and their sub-agents'.",
                access: onAgent(scope, { session: both, agent: { self: reads, descendant: reads } }),
                format: F.CFG,
                text: {
                  get: (ctx) => renderCfg(ag(ctx)),
                  set: (ctx, v) => {
                    const cwd = principalOf(ctx)?.kind === 'session' ? parseKeyValues(v, F.CFG).cwd : undefined;
                    if (cwd !== undefined) checkSessionCwd(o, ctx, resolvePath(ag(ctx).cfg.cwd, cwd));
                    return applyCfg(o, ag(ctx), v);
                  },
                },
              }),
              Leaf('ctl', {
                doc: 'Write a command, read its result (write "help" for the list). Agents may give themselves and their sub-agents the commands that widen nothing.',
                access: agentOwn,
                format: F.AGENT_CTL,
                rdwr: (ctx, req) => dispatchAgentCommand(o, ctx, ag(ctx), req),
              }),
              Dir(
                'proc',
                {
                  doc: "The agent's background processes (a mirror of its toolsrv's proc/), by pid.",
                  access: agentOwn,
                },
                Leaf('idx', {
                  doc: 'One line per background process: pid, tool, status (running, or how it ended), exit code (- while running), arguments.',
                  access: agentOwn,
                  format: F.PROC_IDX,
                  read: (ctx) =>
                    F.PROC_IDX.format(
                      [...ag(ctx).procs.values()].map((p) => ({
                        pid: p.pid,
                        tool: p.tool,
                        status: p.status ?? 'running',
                        exit: p.exit ?? null,
                        args: p.args,
                      })),
                    ),
                }),
                Each(
                  'pid',
                  {
                    access: agentOwn,
                    list: (ctx) => [...ag(ctx).procs.keys()].map(String),
                    has: (ctx, pid) => ag(ctx).procs.has(Number(pid)),
                  },
                  Leaf('out', {
                    doc: 'The output, from the start and live until the process exits (ANSI colours as the tool wrote them).',
                    access: agentOwn,
                    format: F.TEXT('the output as the tool wrote it'),
                    stream: (ctx, signal) => procStream(ag(ctx), Number(ctx.params.pid), signal),
                  }),
                  Leaf('stat', {
                    doc: 'key=value: state, status, runtime_ms, tool, exit, signal, tty, output_bytes, cmd….',
                    access: agentOwn,
                    format: F.PROC_STAT,
                    blockOnce: async (ctx) => {
                      const h = await ag(ctx).procHost();
                      if (!h.stat) throw new NinepError('this toolsrv connection has no proc stat');
                      return F.PROC_STAT.format(await h.stat(Number(ctx.params.pid)));
                    },
                  }),
                  Leaf('wait', {
                    doc: 'A read blocks until the process exits, then returns its exit code.',
                    access: agentOwn,
                    format: F.VALUE('the exit code'),
                    blockOnce: async (ctx, signal) => {
                      const h = await ag(ctx).procHost();
                      if (!h.wait) throw new NinepError('this toolsrv connection cannot wait for procs');
                      return `${await h.wait(Number(ctx.params.pid), signal)}\n`;
                    },
                  }),
                  // No access rule: the owner only. An agent must not type into processes (its own included): its
                  // tool calls are how it acts, each through the sandbox and its policy.
                  Leaf('in', {
                    doc: "Write: keystrokes for a tty tool's terminal (a process without a pty refuses them; stat says tty=1 or 0). The owner's only.",
                    format: F.TEXT('keystrokes'),
                    write: async (ctx, data) => {
                      const h = await ag(ctx).procHost();
                      if (!h.input) throw new NinepError('this toolsrv connection cannot send input to procs');
                      await h.input(Number(ctx.params.pid), data);
                    },
                  }),
                  Leaf('ctl', {
                    doc: "Write signal N, term, kill, resize COLS ROWS (a tty tool's terminal) or dismiss.",
                    access: agentOwn,
                    format: F.PROC_CTL,
                    write: async (ctx, data) => {
                      const h = await ag(ctx).procHost();
                      if (!h.procCtl) throw new NinepError('this toolsrv connection cannot control procs');
                      const cmd = new TextDecoder().decode(data).trim();
                      await h.procCtl(Number(ctx.params.pid), cmd);
                      if (cmd === 'dismiss') ag(ctx).procs.delete(Number(ctx.params.pid));
                    },
                  }),
                ),
              ),
              Dir(
                'peer',
                {
                  doc: 'One write-only file per peer (ctl peeradd NAME links two agents): a write delivers the text to that agent as a prompt, marked with the sender.',
                  access: onAgent(scope, { agent: { self: reads } }),
                },
                EachFile('peer', {
                  access: onAgent(scope, { agent: { self: ['walk', 'write'] } }),
                  list: (ctx) => agents.peerNames(ag(ctx)),
                  has: (ctx, name) => agents.peerNames(ag(ctx)).includes(name),
                  file: {
                    whole: true,
                    format: F.TEXT('a message, delivered as a prompt'),
                    write: (ctx, data) => agents.sendPeer(ag(ctx), ctx.params.peer!, new TextDecoder().decode(data)),
                  },
                }),
              ),
              Leaf('id', {
                doc: 'The immutable agent id.',
                access: agentView,
                format: F.VALUE('the id'),
                read: (ctx) => `${ag(ctx).id}\n`,
              }),
              Leaf('name', {
                doc: 'The agent name; write to rename.',
                access: agentView,
                format: F.VALUE('the name'),
                text: {
                  get: (ctx) => `${ag(ctx).name}\n`,
                  set: (ctx, v) => void (v.trim() && agents.rename(ag(ctx), v.trim())),
                },
              }),
              Leaf('stats', {
                doc: "key=value: tokens (input, output, cached, cache creation), requests, cost of the last turn and the session (USD); the next request's size (context_estimate, corrected by the provider's reports), the window (context_length), context_percent, and the request split by part (context_system, context_tools, context_history, context_skills, context_attachments); then what finished sub-agents used (they are removed, their caller pays): subagents (how many), subagents_input_tokens, subagents_output_tokens, subagents_cached_tokens, subagents_cache_creation_tokens, subagents_requests, subagents_cost, cost_total (cost_session plus subagents_cost), and one line per sub-agent: subagent.ID=name=NAME input_tokens=… output_tokens=… cached_tokens=… requests=… cost=… (each including its own sub-agents).",
                access: agentView,
                format: F.STATS,
                blockOnce: async (ctx) => {
                  const a = ag(ctx);
                  const len = await a.contextLength().catch(() => 0);
                  return renderStats(a.stats, a.contextEstimate(), len);
                },
              }),
              checkpointDir(o.checkpoints, ag, scope),
            ),
          ),
        ),
      ),
    ),
    { uid: owner, help: true, access: OWNER_ONLY },
  );
}
