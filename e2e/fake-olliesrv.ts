/**
 * A scripted olliesrv for one renderer test (e2e/chat.test.ts, states and sub-agents) and `bench/gui.mjs --fake`: the
 * namespace's session and agent files with no LLM behind it. The test decides what each agent "does" — any state at
 * any moment (compacting, paused: a real agent is in those only while it compacts or its session is paused),
 * sub-agents appearing and ending, exact token figures for the status bar — so that the UI can be checked step by
 * step. Every file and event payload it serves is written and read through olliesrv's own
 * declarations (src/formats/olliesrv.ts), so it cannot drift from the daemon's formats. Everything else (approvals,
 * the tray watcher, the large chat, the whole flow) runs against the real daemon.
 */
import { Dir, Each, Leaf, NinepError, Server, build } from '../src/ninep/index.js';
import { compileFilter, EventBus } from '../src/olliesrv/event/bus.js';
import { parseFromRequest } from '../src/olliesrv/agent/chatlog.js';
// Every file and event payload this fake serves is written through olliesrv's own declarations.
import { AGENT_CTL, AGENT_IDX, AGENT_NEW, BACKENDS, BYPASS, CFG, EVENTS, PROFILES, SESSION_CTL, SESSION_IDX, SESSION_NEW, STATS } from '../src/formats/olliesrv.js';

import type { Block } from '../src/olliesrv/agent/chatlog.js';
export type { Block };

export { syntheticBlock } from './synthetic.js';
import { syntheticBlock } from './synthetic.js';

interface Agent {
  id: string;
  name: string;
  parent: string;
  depth: number;
  state: string;
  log: string[];
  wake: Set<() => void>;
  dead: boolean;
  /** Prompts that ran (turns started), in order. */
  prompts: string[];
  queue: string[];
  ctl: string[];
  stats: Record<string, string>;
  cfg: Record<string, string>;
}

interface Session {
  id: string;
  name: string;
  cwd: string;
  paused: boolean;
  agents: Map<string, Agent>;
  pending: { id: string; agent: string; tool: string; cmd: string; cwd: string; reason: string }[];
  resolutions: string[];
}

let seq = 0;
const hex = (): string => (++seq).toString(16).padStart(8, '0');

export class FakeOlliesrv {
  readonly bus = new EventBus();
  readonly sessions = new Map<string, Session>();
  readonly server: Server<unknown>;
  /** The root `backends` file (olliesrv's columns: name, * on the default, type, url, model). */
  backends = BACKENDS.format([{ name: 'mock*', type: 'openai', url: 'http://127.0.0.1:1/v1', model: 'mock-model' }]);

  constructor() {
    const s = (ctx: { params: Readonly<Record<string, string>> }): Session => this.session(ctx.params.session!);
    const a = (ctx: { params: Readonly<Record<string, string>> }): Agent => this.agent(ctx.params.session!, ctx.params.agent!);
    const ns = build(
      Dir('/',
        Leaf('backends', { format: BACKENDS, read: () => this.backends }),
        Leaf('agents', { format: PROFILES, read: () => PROFILES.format(['default', 'reviewer']) }),
        Leaf('event', { format: EVENTS, rdwrStream: (_c, filter, signal) => this.bus.subscribe(compileFilter(filter), signal) }),
        Dir('session',
          Leaf('new', {
            format: SESSION_NEW,
            rdwr: (_c, req) => {
              const f = SESSION_NEW.parse(req);
              return `${this.addSession(f.name ?? `s${seq + 1}`, f.cwd ?? '/tmp').name}\n`;
            },
          }),
          Leaf('idx', { format: SESSION_IDX, read: () => SESSION_IDX.format([...this.sessions.values()].map((x) => ({ id: x.id, name: x.name, paused: x.paused, connected: false, remote: null, cwd: x.cwd }))) }),
          Each('session', { list: () => [...this.sessions.keys()], has: (_c, n) => this.sessions.has(n) },
            Leaf('id', { read: (c) => `${s(c).id}\n` }),
            Leaf('name', { text: { get: (c) => `${s(c).name}\n`, set: (c, v) => this.renameSession(c.params.session!, v.trim()) } }),
            Leaf('ctl', {
              format: SESSION_CTL,
              rdwr: (c, req) => {
                const cmd = SESSION_CTL.parse(req).name;
                const sess = s(c);
                if (cmd === 'kill') this.killSession(sess.name);
                else if (cmd === 'pause' || cmd === 'resume') {
                  sess.paused = cmd === 'pause';
                  this.bus.publish(`session.${sess.id}.${cmd}`);
                } else throw new NinepError(`unknown command ${cmd}`);
                return `${cmd}\n`;
              },
            }),
            Leaf('bypass', {
              // olliesrv's declared records; what approving would remember is olliesrv's to compute, not this fake's.
              format: BYPASS,
              read: (c) => BYPASS.format(s(c).pending.map((p) => ({ ...p, remember: 'once', rule: '' }))),
              write: (c, data) => {
                const sess = s(c);
                const line = new TextDecoder().decode(data).trim();
                const [id, decision] = line.split(' ');
                const p = sess.pending.find((x) => x.id === id);
                if (!p) throw new NinepError(`no pending request ${id}`);
                if (decision !== 'approve' && decision !== 'deny') throw new NinepError('expected approve or deny');
                sess.pending = sess.pending.filter((x) => x !== p);
                sess.resolutions.push(line);
                const topic = `session.${sess.id}.agent.${p.agent}.bypass.resolved`;
                this.bus.publish(topic, EVENTS.payload(topic, { id, decision: decision === 'approve' ? 'approved' : 'denied' }));
              },
            }),
            Dir('agent',
              Leaf('new', {
                format: AGENT_NEW,
                rdwr: (c, req) => {
                  const f = AGENT_NEW.parse(req);
                  return `${this.addAgent(c.params.session!, f.name || `agent${seq + 1}`).name}\n`;
                },
              }),
              Leaf('idx', {
                format: AGENT_IDX,
                read: (c) => {
                  const sess = s(c);
                  return AGENT_IDX.format([...sess.agents.values()].map((x) => ({ session: sess.id, id: x.id, name: x.name, parent: x.parent || null, depth: x.depth, state: x.state, last: null })));
                },
              }),
              Each('agent', {
                list: (c) => [...s(c).agents.keys()],
                has: (c, n) => s(c).agents.has(n),
                remove: (c) => this.killAgent(c.params.session!, c.params.agent!),
              },
                Leaf('id', { read: (c) => `${a(c).id}\n` }),
                Leaf('name', { text: { get: (c) => `${a(c).name}\n`, set: (c, v) => this.renameAgent(c.params.session!, c.params.agent!, v.trim()) } }),
                Leaf('state', { read: (c) => `${a(c).state}\n` }),
                Leaf('stats', { format: STATS, read: (c) => STATS.format(a(c).stats) }),
                Leaf('cfg', { format: CFG, read: (c) => CFG.format(a(c).cfg) }),
                Leaf('prompt', {
                  // Like olliesrv: runs now when idle, otherwise waits in the queue.
                  write: (c, data) => {
                    const text = new TextDecoder().decode(data);
                    const ag = a(c);
                    if (ag.state === 'idle') this.run(c.params.session!, ag.name, text);
                    else ag.queue.push(text);
                  },
                }),
                Leaf('queue', {
                  text: {
                    get: (c) => `${JSON.stringify(a(c).queue)}\n`,
                    set: (c, v) => {
                      if (v.trim()) a(c).queue = JSON.parse(v) as string[];
                    },
                  },
                }),
                Leaf('ctl', {
                  format: AGENT_CTL,
                  rdwr: (c, req) => {
                    const ag = a(c);
                    // Read as olliesrv reads it (an unknown command or a wrong count is refused the same way).
                    AGENT_CTL.parse(req);
                    const cmd = req.trim();
                    ag.ctl.push(cmd);
                    if (cmd === 'stop') this.setState(c.params.session!, ag.name, 'idle');
                    return `ok ${cmd}\n`;
                  },
                }),
                Leaf('log.raw', { stream: (c, signal) => this.logStream(a(c), signal) }),
                Leaf('log.from', {
                  rdwrStream: (c, req, signal) => {
                    if (!req.trim()) throw new NinepError('log.from: write a request first');
                    return this.logFrom(a(c), req, signal);
                  },
                }),
              ),
            ),
          ),
        ),
      ),
      { uid: 'ollie' },
    );
    this.server = new Server({ fs: ns }) as Server<unknown>;
  }

  session(name: string): Session {
    const s = this.sessions.get(name);
    if (!s) throw new NinepError(`no session ${name}`);
    return s;
  }

  agent(session: string, name: string): Agent {
    const a = this.session(session).agents.get(name);
    if (!a) throw new NinepError(`no agent ${name}`);
    return a;
  }

  addSession(name: string, cwd = '/tmp'): Session {
    const s: Session = { id: `sid-${hex()}`, name, cwd, paused: false, agents: new Map(), pending: [], resolutions: [] };
    this.sessions.set(name, s);
    this.bus.publish(`session.${s.id}.new`, name);
    return s;
  }

  renameSession(old: string, name: string): void {
    const s = this.session(old);
    this.sessions.delete(old);
    s.name = name;
    this.sessions.set(name, s);
    this.bus.publish(`session.${s.id}.rename`, EVENTS.payload(`session.${s.id}.rename`, { old, new: name }));
  }

  killSession(name: string): void {
    const s = this.session(name);
    for (const a of s.agents.values()) this.killAgent(name, a.name);
    this.sessions.delete(name);
    this.bus.publish(`session.${s.id}.kill`);
  }

  addAgent(session: string, name: string, parent?: string): Agent {
    const s = this.session(session);
    const p = parent ? this.agent(session, parent) : undefined;
    const a: Agent = {
      id: `aid-${hex()}`, name, parent: p?.id ?? '', depth: p ? p.depth + 1 : 0, state: 'idle', log: [], wake: new Set(), dead: false,
      prompts: [], queue: [], ctl: [], stats: { input_tokens: '1200', output_tokens: '345', cached_tokens: '100', context_percent: '12', cost_last_turn: '0.0012', cost_session: '0.0100', context_estimate: '15360', context_length: '128000', context_system: '1600', context_tools: '900', context_history: '12000', context_skills: '700', context_attachments: '0', estimate_factor: '1.040' },
      cfg: { backend: 'mock', model: 'mock-model' },
    };
    s.agents.set(name, a);
    this.bus.publish(`session.${s.id}.agent.${a.id}.new`, EVENTS.payload(`session.${s.id}.agent.${a.id}.new`, { name }));
    return a;
  }

  renameAgent(session: string, old: string, name: string): void {
    const s = this.session(session);
    const a = this.agent(session, old);
    s.agents.delete(old);
    a.name = name;
    s.agents.set(name, a);
    this.bus.publish(`session.${s.id}.agent.${a.id}.rename`, EVENTS.payload(`session.${s.id}.agent.${a.id}.rename`, { old, new: name }));
  }

  killAgent(session: string, name: string): void {
    const s = this.session(session);
    const a = this.agent(session, name);
    s.agents.delete(name);
    a.dead = true;
    for (const w of a.wake) w();
    this.bus.publish(`session.${s.id}.agent.${a.id}.kill`);
  }

  /** Sets the state; going idle with prompts queued starts the next one (back to thinking), as olliesrv does. */
  setState(session: string, name: string, state: string): void {
    const s = this.session(session);
    const a = this.agent(session, name);
    a.state = state;
    this.bus.publish(`session.${s.id}.agent.${a.id}.state`, state);
    const next = state === 'idle' ? a.queue.shift() : undefined;
    if (next !== undefined) this.run(session, name, next);
  }

  /** A turn starts: the prompt is logged as a user block and the agent is thinking. */
  private run(session: string, name: string, text: string): void {
    const a = this.agent(session, name);
    a.prompts.push(text);
    this.block(session, name, { role: 'user', content: text });
    a.state = 'thinking';
    this.bus.publish(`session.${this.session(session).id}.agent.${a.id}.state`, 'thinking');
  }

  /**
   * Fills an agent's log with n blocks of a realistic mix (syntheticBlock), for the large-chat test and
   * bench/gui.mjs. Returns the log's size in bytes.
   */
  fillSynthetic(session: string, agent: string, n: number): number {
    for (let i = 0; i < n; i++) this.block(session, agent, syntheticBlock(i));
    return this.agent(session, agent).log.reduce((bytes, l) => bytes + Buffer.byteLength(l), 0);
  }

  /** Appends one JSONL block to the agent's log.raw; returns its id. */
  block(session: string, name: string, b: Omit<Block, 'id'> & { id?: string }): string {
    const a = this.agent(session, name);
    const id = b.id ?? hex();
    a.log.push(`${JSON.stringify({ ...b, id })}\n`);
    for (const w of a.wake) w();
    return id;
  }

  requestBypass(session: string, agent: string, req: { tool: string; cmd: string; cwd: string; reason: string }): string {
    const s = this.session(session);
    const a = this.agent(session, agent);
    const id = `by-${hex()}`;
    s.pending.push({ id, agent: a.id, ...req });
    const topic = `session.${s.id}.agent.${a.id}.bypass.request`;
    this.bus.publish(topic, EVENTS.payload(topic, { id, cmd: req.cmd, cwd: req.cwd, tool: req.tool }));
    return id;
  }

  /**
   * log.from as olliesrv answers it (the same request parser), over this log's lines: the lines of partial
   * chunks are not blocks, so N counts final lines only.
   */
  private logFrom(a: Agent, request: string, signal: AbortSignal): AsyncIterable<string> {
    const req = parseFromRequest(request);
    // Lines end `,"id":"…"}` (block() puts the id last); partial chunks carry "partial":true.
    const isFinal = (l: string) => !l.includes('"partial":true');
    const finalBefore = (end: number, n: number): number => {
      let i = end;
      for (let found = 0; i > 0 && found < n; ) if (isFinal(a.log[--i]!)) found++;
      return i;
    };
    if (req.kind === 'tail') return this.logStream(a, signal, finalBefore(a.log.length, req.n));
    const at = a.log.findIndex((l) => isFinal(l) && l.endsWith(`"id":${JSON.stringify(req.id)}}\n`));
    if (at === -1) throw new NinepError(`log.from: no block ${JSON.stringify(req.id)} in this log`);
    if (req.kind === 'after') return this.logStream(a, signal, at + 1);
    const page = a.log.slice(finalBefore(at, req.n), at).filter(isFinal).join('');
    return (async function* () {
      if (page) yield page;
    })();
  }

  private async *logStream(a: Agent, signal: AbortSignal, start = 0): AsyncGenerator<string> {
    let i = start;
    while (!signal.aborted) {
      if (i < a.log.length) {
        const out = a.log.slice(i).join('');
        i = a.log.length;
        yield out;
        continue;
      }
      if (a.dead) return;
      await new Promise<void>((r) => {
        const done = (): void => {
          a.wake.delete(done);
          signal.removeEventListener('abort', done);
          r();
        };
        a.wake.add(done);
        signal.addEventListener('abort', done, { once: true });
      });
    }
  }
}
