/**
 * The olliesrv namespace, declared once. Every file the daemon serves is a line here; `help` is generated
 * from the doc strings. Handlers are one-liners into the objects that own the data.
 */
import { build, Dir, Each, EachFile, Leaf, NinepError, type Ctx, type Namespace } from '../../ninep/index.js';
import type { Agent } from '../agent/agent.js';
import type { BackendPool } from '../agent/deps.js';
import { oneShot } from '../agent/oneshot.js';
import type { Profiles } from '../agent/profiles.js';
import { renderStats } from '../agent/stats.js';
import { compileFilter, type EventBus } from '../event/bus.js';
import { Agents } from '../session/agents.js';
import type { Sessions } from '../session/registry.js';
import type { Workflows } from '../session/workflows.js';
import type { ConfigFiles } from '../config/files.js';
import type { SessionTools } from '../toolclient/host.js';
import { parseKeyValues, RequestError, splitCommand } from './kv.js';

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
  /** Root ctl `reload`: re-reads backends.conf; returns what changed or throws the file's error. */
  reload: () => string;
}

const AGENT_KEYS = ['name', 'cwd', 'backend', 'model', 'agent', 'parent', 'prompt', 'steps', 'tokens', 'temperature', 'topP', 'topK', 'maxTokens', 'seed', 'thinkingBudget', 'reasoningEffort'] as const;
const CFG_KEYS = ['backend', 'model', 'profile', 'cwd', 'temperature', 'topP', 'topK', 'maxTokens', 'seed', 'thinkingBudget', 'reasoningEffort', 'maxSteps', 'compactAt'] as const;

/**
 * `agent/new` requests: key=value pairs; `prompt=` may come last and unquoted, taking the rest of the request
 * (so `agent=reviewer prompt=look at the diff` works from a shell).
 */
function parseAgentRequest(req: string): Partial<Record<(typeof AGENT_KEYS)[number], string>> {
  const m = /(^|\s)prompt=(?!")/.exec(req);
  if (!m) return parseKeyValues(req, AGENT_KEYS);
  const head = parseKeyValues(req.slice(0, m.index), AGENT_KEYS);
  if (head.prompt !== undefined) throw new RequestError('key prompt given twice');
  return { ...head, prompt: req.slice(m.index + m[0].length).replace(/\n$/, '') };
}

function positiveInt(key: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new RequestError(`${key}: ${JSON.stringify(v)} is not a positive integer`);
  return n;
}

function renderCfg(a: Agent): string {
  const lines = [`backend=${a.cfg.backend}`, `model=${a.cfg.model}`, `profile=${a.cfg.profile}`, `cwd=${a.cfg.cwd}`];
  for (const [k, v] of Object.entries(a.cfg.params)) lines.push(`${k}=${Array.isArray(v) ? v.join(',') : String(v)}`);
  if (a.cfg.maxSteps !== undefined) lines.push(`maxSteps=${a.cfg.maxSteps}`);
  if (a.cfg.compactAt !== undefined) lines.push(`compactAt=${a.cfg.compactAt}`);
  return `${lines.join('\n')}\n`;
}

/** Writes to `cfg`: key=value lines (or pairs); each applies or the whole write is refused with the reason. */
async function applyCfg(o: Olliesrv, a: Agent, text: string): Promise<void> {
  const kv = parseKeyValues(text, CFG_KEYS);
  if (Object.keys(kv).length === 0) return;
  if (a.busy) throw new NinepError(`agent ${a.name} is running a turn; cfg changes are refused until it is idle (ctl stop ends it)`);
  if (kv.backend !== undefined) o.backends.get(kv.backend);
  if (kv.profile !== undefined && kv.profile !== a.cfg.profile) await a.switchProfile(kv.profile);
  if (kv.backend !== undefined && kv.backend !== a.cfg.backend) {
    a.cfg.backend = kv.backend;
    if (kv.model === undefined) a.cfg.model = '';
  }
  if (kv.model !== undefined) a.cfg.model = kv.model;
  const params = Agents.params(kv);
  a.cfg.params = { ...a.cfg.params, ...params };
  if (kv.maxSteps !== undefined) a.cfg.maxSteps = positiveInt('maxSteps', kv.maxSteps);
  if (kv.compactAt !== undefined) {
    const f = Number(kv.compactAt);
    if (!(f > 0 && f < 1)) throw new RequestError(`compactAt: ${JSON.stringify(kv.compactAt)} is not a fraction between 0 and 1`);
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
  const { cmd, args } = splitCommand(request);
  if (cmd === 'reload' && !args) return o.reload();
  throw new NinepError(`unknown command ${JSON.stringify(request.trim())}; known commands: reload`);
}

function bypassLines(o: Olliesrv, sessionId: string): string {
  return (o.sessionTools(sessionId)?.pending() ?? [])
    .map((r) => `${r.id}\t${r.agent}\t${r.tool}\t${r.cwd}\t${r.cmd.replace(/\s+/g, ' ')}\t${r.reason.replace(/\s+/g, ' ')}\n`)
    .join('');
}

async function resolveBypass(o: Olliesrv, sessionId: string, request: string): Promise<string> {
  const [id, decision, remember, ...rest] = request.trim().split(/\s+/);
  if (!id || (decision !== 'approve' && decision !== 'deny') || rest.length) {
    throw new RequestError('expected: ID approve|deny [once|session|always:PATTERN]');
  }
  const st = o.sessionTools(sessionId);
  if (!st) throw new NinepError('no tool server runs for this session: there is nothing to approve');
  await st.resolve(id, decision, remember);
  return `${decision === 'approve' ? 'approved' : 'denied'} ${id}\n`;
}

const SESSION_KEYS = ['name', 'cwd'] as const;

function sessionCtl(o: Olliesrv, name: string, request: string): string {
  const { cmd, args } = splitCommand(request);
  const commands: Record<string, { usage: string; run: () => string }> = {
    kill: { usage: 'kill', run: () => (o.sessions.kill(name), 'killed\n') },
    save: { usage: 'save', run: () => (o.sessions.save(), 'saved\n') },
    pause: { usage: 'pause', run: () => (o.sessions.setPaused(name, true), 'paused\n') },
    resume: { usage: 'resume', run: () => (o.sessions.setPaused(name, false), 'resumed\n') },
    workflow: {
      usage: 'workflow [NAME]',
      run: () => {
        const s = o.sessions.get(name);
        if (!args) return `${s.workflow}${o.workflows.isRunning(s.id) ? ' (running)' : ''}\nworkflows: ${o.workflows.names().join(' ')}\n`;
        o.workflows.path(args);
        o.sessions.setWorkflow(name, args);
        return `workflow ${args}\n`;
      },
    },
  };
  const c = commands[cmd];
  if (!c) throw new NinepError(`unknown command ${JSON.stringify(cmd)}; known commands: ${Object.keys(commands).join(', ')}`);
  if (args && !c.usage.includes(' ')) throw new NinepError(`${cmd} takes no arguments`);
  return c.run();
}

export function olliesrvNamespace(o: Olliesrv, owner: string): Namespace {
  const { sessions, agents } = o;
  const s = (ctx: { params: Readonly<Record<string, string>> }) => sessions.get(ctx.params.session!);
  const ag = (ctx: Ctx) => agents.get(ctx.params.session!, ctx.params.agent!);
  return build(
    Dir('/',
      Leaf('backends', {
        doc: 'The configured LLM backends, one per line: name, type, url, default model; the default backend is marked with *.',
        read: () => o.backends.names().map((n) => {
          const b = o.backends.get(n);
          return `${n}${n === o.backends.defaultName ? '*' : ''}\t${b.type}\t${b.url}\t${b.defaultModel}\n`;
        }).join(''),
      }),
      Leaf('models', {
        doc: 'Models of every backend (asked once, then cached): backend, model, context length. Unreachable backends say why.',
        blockOnce: async () => {
          const parts = await Promise.all(o.backends.names().map(async (n) => {
            try {
              const list = await o.backends.get(n).models();
              return list.map((m) => `${n}\t${m.id}\t${m.contextLength ?? '-'}\n`).join('');
            } catch (e) {
              return `${n}\t-\t-\t${(e as Error).message.replace(/\s+/g, ' ')}\n`;
            }
          }));
          return parts.join('');
        },
      }),
      Leaf('agents', { doc: 'Agent profile names, one per line.', read: () => o.profiles.names().map((n) => `${n}\n`).join('') }),
      Leaf('ctl', { doc: 'Write a command, read its result: reload (re-read backends.conf).', rdwr: (_ctx, req) => rootCtl(o, req) }),
      Dir('config', { doc: 'The configuration files. A write is checked by the parser that reads the file and lands only when it parses.' },
        Leaf('backends.conf', {
          doc: 'The LLM backends (INI); written, it is reloaded at once.',
          mode: 0o600,
          // An empty write (an OTRUNC open with nothing written) must not wipe the file: a file is never emptied here.
          text: { get: () => o.config.read('backends.conf'), set: (_ctx, v) => void (v.trim() && o.config.writeBackends(v)) },
        }),
        Leaf('sandbox.yaml', {
          doc: 'The sandbox policy; applies to the tool servers started after the write.',
          text: { get: () => o.config.read('sandbox.yaml'), set: async (_ctx, v) => void (v.trim() && (await o.config.writeSandbox(v))) },
        }),
        Leaf('profile', {
          doc: 'The profile new agents get when agent/new names none.',
          text: { get: () => `${o.config.defaultProfile()}\n`, set: (_ctx, v) => (v.trim() ? o.config.writeDefaultProfile(v) : undefined) },
        }),
      ),
      Leaf('sandbox', {
        doc: 'What the tool sandbox applies on this machine, as JSON: Landlock ABI and rights, the system call filter, the capabilities dropped, containment, limits, and a one-line summary.',
        blockOnce: async () => `${JSON.stringify(await o.config.sandboxStatus())}\n`,
      }),
      Leaf('search', {
        doc: 'Full-text search of every chat log: write words, read matches (all words, best first): session, agent, block id, role, snippet with the words in [brackets].',
        rdwr: (_ctx, req) => agents.search(req),
      }),
      Leaf('generate', {
        doc: 'One-shot generation, no history, no tools: write optional key=value lines (backend, model, system, temperature, maxTokens…), a blank line and the prompt; read the reply.',
        rdwr: (_ctx, req, signal) => oneShot(o.backends, req, 'generate', signal),
      }),
      Leaf('complete', {
        doc: 'Code completion: write optional key=value lines (backend, model, suffix=TEXT after the cursor), a blank line and the text before the cursor; read the completion.',
        rdwr: (_ctx, req, signal) => oneShot(o.backends, req, 'complete', signal),
      }),
      Leaf('event', {
        doc: 'Write a filter (* one segment, > the rest; several separated by spaces), then read events: "topic payload" lines.',
        rdwrStream: (_ctx, filter, signal) => o.bus.subscribe(compileFilter(filter), signal),
      }),
      Dir('session', {
        doc: 'Sessions, by name. mkdir creates one, rm kills one, mv renames one.',
        create: (_ctx, name, perm) => {
          if (!(perm & 0x80000000)) throw new NinepError('only directories (sessions) can be created here');
          sessions.create({ name });
        },
      },
        Leaf('new', {
          doc: 'Write key=value pairs (name=, cwd=) to create a session; read back its name.',
          rdwr: (_ctx, req) => `${sessions.create(parseKeyValues(req, SESSION_KEYS)).name}\n`,
        }),
        Leaf('idx', {
          doc: 'One line per session: id, name, paused, connected, remote, cwd (tab-separated).',
          read: () => sessions.all().map((x) => `${x.id}\t${x.name}\t${x.paused ? 1 : 0}\t0\t-\t${x.cwd}\n`).join(''),
        }),
        Each('session', {
          doc: 'One session.',
          list: () => sessions.names(),
          has: (_ctx, name) => sessions.has(name),
          key: (_ctx, name) => sessions.get(name).id,
          rename: (ctx, newName) => void sessions.rename(ctx.params.session!, newName),
          remove: (ctx) => sessions.kill(ctx.params.session!),
        },
          Leaf('id', { doc: 'The immutable session UUID.', read: (ctx) => `${s(ctx).id}\n` }),
          Leaf('name', {
            doc: 'The session name; write to rename (the directory moves).',
            text: { get: (ctx) => `${s(ctx).name}\n`, set: (ctx, v) => void sessions.rename(ctx.params.session!, v.trim()) },
          }),
          Leaf('cwd', { doc: 'The session working directory.', read: (ctx) => `${s(ctx).cwd}\n` }),
          Leaf('env', {
            doc: 'Session environment: KEY=value lines. Writing replaces it.',
            text: { get: (ctx) => s(ctx).env, set: (ctx, v) => sessions.setEnv(ctx.params.session!, v) },
          }),
          Leaf('plan', {
            doc: 'The session plan, a markdown checklist. Writing replaces it.',
            text: { get: (ctx) => s(ctx).plan, set: (ctx, v) => sessions.setPlan(ctx.params.session!, v) },
          }),
          Leaf('ctl', {
            doc: 'Write a command, read its result: kill, save (checkpoint to disk), pause, resume.',
            rdwr: (ctx, req) => sessionCtl(o, ctx.params.session!, req),
          }),
          Leaf('goal', {
            doc: 'The session goal. Writing it starts the session workflow (ctl workflow; default conductor) unless one is running.',
            text: { get: (ctx) => s(ctx).goal, set: (ctx, v) => (v.trim() ? sessions.setGoal(ctx.params.session!, v) : undefined) },
          }),
          Leaf('goalstatus', {
            doc: 'The goal status: first line running, complete, blocked or error; then a summary. Workflows write it.',
            text: { get: (ctx) => s(ctx).goalstatus, set: (ctx, v) => (v.trim() ? sessions.setGoalStatus(ctx.params.session!, v) : undefined) },
          }),
          Leaf('goalwait', {
            doc: 'A read blocks until the goal status changes, then returns it.',
            blockOnce: (ctx, signal) => sessions.waitGoal(ctx.params.session!, signal),
          }),
          Leaf('bypass', {
            doc: 'Pending sandbox-bypass requests: id, agent id, tool, cwd, command, reason. Write "ID approve|deny [once|session|always:PATTERN]".',
            read: (ctx) => bypassLines(o, s(ctx).id),
            write: async (ctx, data) => void (await resolveBypass(o, s(ctx).id, new TextDecoder().decode(data))),
          }),
          Dir('agent', { doc: 'The agents of this session, by name. rm kills one, mv renames one.' },
            Leaf('new', {
              doc: 'Write key=value (name, cwd, backend, model, agent=PROFILE, generation parameters), read the new agent\'s name. With prompt= (last, may be unquoted): a sub-agent runs the prompt (parent=CALLER gives it a snapshot of the caller\'s history; steps=, tokens= are its budget), the read returns its reply, and it is removed.',
              rdwr: async (ctx, req, signal) => {
                const kv = parseAgentRequest(req);
                const opts = { name: kv.name, cwd: kv.cwd, backend: kv.backend, model: kv.model, agent: kv.agent, parent: kv.parent, params: Agents.params(kv) };
                if (kv.prompt !== undefined) {
                  if (!kv.prompt.trim()) throw new RequestError('prompt= is empty');
                  return agents.spawn(ctx.params.session!, { ...opts, prompt: kv.prompt, steps: positiveInt('steps', kv.steps), tokens: positiveInt('tokens', kv.tokens) }, signal);
                }
                if (kv.steps !== undefined || kv.tokens !== undefined) throw new RequestError('steps= and tokens= are budgets of sub-agents: give them with prompt=');
                return `${agents.create(ctx.params.session!, opts).name}\n`;
              },
            }),
            Leaf('idx', {
              doc: 'One line per agent: session id, agent id, name, parent id (- for none), depth, state (tab-separated).',
              read: (ctx) => agents.idx(ctx.params.session!),
            }),
            Each('agent', {
              doc: 'One agent.',
              list: (ctx) => agents.list(ctx.params.session!).map((a) => a.name),
              has: (ctx, name) => agents.has(ctx.params.session!, name),
              key: (ctx, name) => agents.get(ctx.params.session!, name).id,
              rename: (ctx, newName) => agents.rename(ag(ctx), newName),
              remove: (ctx) => agents.kill(ctx.params.session!, ctx.params.agent!),
            },
              Leaf('prompt', {
                doc: 'Write a prompt (each write is one); it runs now, or waits in the queue while a turn runs. /cmd is a ctl command, !cmd a shell command.',
                write: async (ctx, data) => void (await ag(ctx).submit(new TextDecoder().decode(data))),
              }),
              Leaf('fifo', {
                doc: 'The prompt queue as a FIFO: a write enqueues a prompt, a read pops the oldest (empty when none).',
                write: (ctx, data) => void ag(ctx).enqueue(new TextDecoder().decode(data)),
                // Not `read`: that one is also evaluated for stat (length, version), and popping is not idempotent.
                blockOnce: async (ctx) => ag(ctx).queue.shift() ?? '',
              }),
              Leaf('queue', {
                doc: 'The queued prompts as a JSON array of strings; writing an array replaces the queue.',
                text: {
                  get: (ctx) => `${JSON.stringify(ag(ctx).queue)}\n`,
                  set: (ctx, v) => {
                    if (!v.trim()) return;
                    let q: unknown;
                    try {
                      q = JSON.parse(v);
                    } catch (e) {
                      throw new RequestError(`queue: not JSON: ${(e as Error).message}`);
                    }
                    if (!Array.isArray(q) || !q.every((x) => typeof x === 'string')) throw new RequestError('queue: expected a JSON array of strings');
                    ag(ctx).queue = q as string[];
                  },
                },
              }),
              Leaf('log.raw', {
                doc: 'The chat log as JSONL blocks {role, id, content, name?, format?, partial?}, from the start, then live; EOF when the agent dies.',
                stream: (ctx, signal) => ag(ctx).log.stream(signal),
              }),
              Leaf('log', { doc: 'The chat log as plain text, the last 64 KiB.', read: (ctx) => ag(ctx).log.rendered() }),
              Leaf('block', {
                doc: 'Write a block id, read that block\'s JSON.',
                rdwr: (ctx, req) => {
                  const b = ag(ctx).log.get(req.trim());
                  if (!b) throw new NinepError(`no block ${JSON.stringify(req.trim())}`);
                  return b;
                },
              }),
              Leaf('state', { doc: 'idle, thinking, calling, paused or compacting.', read: (ctx) => `${ag(ctx).state}\n` }),
              Leaf('cfg', {
                doc: 'key=value: backend, model, profile, cwd, generation parameters, maxSteps, compactAt. Writes apply, or are refused while a turn runs.',
                text: { get: (ctx) => renderCfg(ag(ctx)), set: (ctx, v) => applyCfg(o, ag(ctx), v) },
              }),
              Leaf('ctl', {
                doc: 'Write a command, read its result (write "help" for the list).',
                rdwr: (ctx, req) => ag(ctx).ctl(req),
              }),
              Dir('proc', { doc: "The agent's background processes (a mirror of its toolsrv's proc/), by pid." },
                Leaf('idx', {
                  doc: 'One line per background process: pid, tool, status (running, or how it ended), exit code (- while running), arguments.',
                  read: (ctx) => [...ag(ctx).procs.values()]
                    .map((p) => `${p.pid}\t${p.tool}\t${p.status ?? 'running'}\t${p.exit ?? '-'}\t${p.args.replace(/\s+/g, ' ')}\n`)
                    .join(''),
                }),
                Each('pid', {
                  list: (ctx) => [...ag(ctx).procs.keys()].map(String),
                  has: (ctx, pid) => ag(ctx).procs.has(Number(pid)),
                },
                  Leaf('out', {
                    doc: 'The output, from the start and live until the process exits (ANSI colours as the tool wrote them).',
                    stream: (ctx, signal) => procStream(ag(ctx), Number(ctx.params.pid), signal),
                  }),
                  Leaf('stat', {
                    doc: 'key=value: state, runtime, tool, exit.',
                    blockOnce: async (ctx) => {
                      const h = await ag(ctx).procHost();
                      if (!h.stat) throw new NinepError('this toolsrv connection has no proc stat');
                      return Object.entries(await h.stat(Number(ctx.params.pid))).map(([k, v]) => `${k}=${v}\n`).join('');
                    },
                  }),
                  Leaf('wait', {
                    doc: 'A read blocks until the process exits, then returns its exit code.',
                    blockOnce: async (ctx, signal) => {
                      const h = await ag(ctx).procHost();
                      if (!h.wait) throw new NinepError('this toolsrv connection cannot wait for procs');
                      return `${await h.wait(Number(ctx.params.pid), signal)}\n`;
                    },
                  }),
                  Leaf('ctl', {
                    doc: 'Write signal N, term, kill or dismiss.',
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
              Dir('peer', { doc: 'One write-only file per peer (ctl peeradd NAME links two agents): a write delivers the text to that agent as a prompt, marked with the sender.' },
                EachFile('peer', {
                  list: (ctx) => agents.peerNames(ag(ctx)),
                  has: (ctx, name) => agents.peerNames(ag(ctx)).includes(name),
                  file: { write: (ctx, data) => agents.sendPeer(ag(ctx), ctx.params.peer!, new TextDecoder().decode(data)) },
                }),
              ),
              Leaf('id', { doc: 'The immutable agent id.', read: (ctx) => `${ag(ctx).id}\n` }),
              Leaf('name', {
                doc: 'The agent name; write to rename.',
                text: { get: (ctx) => `${ag(ctx).name}\n`, set: (ctx, v) => void (v.trim() && agents.rename(ag(ctx), v.trim())) },
              }),
              Leaf('stats', {
                doc: 'key=value: tokens (input, output, cached, cache creation), requests, cost of the last turn and the session (USD), context estimate, length and percent.',
                blockOnce: async (ctx) => {
                  const a = ag(ctx);
                  const len = await a.contextLength().catch(() => 0);
                  return renderStats(a.stats, a.contextEstimate(), len);
                },
              }),
            ),
          ),
        ),
      ),
    ),
    { uid: owner, help: true },
  );
}
