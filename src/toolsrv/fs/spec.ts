/**
 * toolsrv's namespace, declared once (see src/toolsrv/protocol.ts for the wire contract). Handlers are
 * one-liners into Core. The attach name selects the scope: it is bound as the `scope` parameter of every
 * node, so the handlers below find their agent's registry, env and cwd in ctx.params.
 */
import { build, Dir, Each, Leaf, NinepError, type Ctx, type FileServer, type Node } from '../../ninep/index.js';
import type { Core, Scope } from '../core.js';
import { mcpDir } from '../mcp/namespace.js';

const text = (d: Uint8Array): string => new TextDecoder().decode(d);

function guard<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw e instanceof NinepError ? e : new NinepError((e as Error).message);
  }
}

export function toolsrvNamespace(core: Core, owner: string): FileServer<Node> {
  const scope = (ctx: Ctx): Scope => core.scope(ctx.params.scope ?? '');
  const proc = (ctx: Ctx) => guard(() => core.proc(ctx.params.pid!));
  const ns = build(
    Dir(
      '/',
      Leaf('ctl', {
        doc: "Write commands, one per line: load NAME, unload NAME, env K=V (env K unsets), cwd PATH, reload. Read: this scope's cwd, env and loaded tools.",
        write: async (ctx, data) => {
          const s = scope(ctx);
          for (const line of text(data).split('\n')) if (line.trim()) await guardAsync(() => core.ctl(s, line));
        },
        read: (ctx) => {
          const s = scope(ctx);
          return `cwd ${s.cwd}\n${[...s.env].map(([k, v]) => `env ${k}=${v}\n`).join('')}loaded ${[...s.tools.keys()].join(' ')}\n`;
        },
      }),
      Leaf('tools', {
        doc: 'Read: the loaded tools of this scope as JSON, with the dispatch flags in their schemas. Write tool names to load them.',
        read: (ctx) => `${JSON.stringify(core.toolInfos(scope(ctx)))}\n`,
        write: (ctx, data) => {
          const s = scope(ctx);
          for (const n of text(data).split(/\s+/)) if (n) guard(() => core.ctl(s, `load ${n}`));
        },
      }),
      Leaf('catalog', {
        doc: 'Every tool on disk, loaded or not, and every invalid .meta with the reason (JSON).',
        read: () => `${JSON.stringify(core.catalog.entries())}\n`,
      }),
      Leaf('rev', {
        doc: "Revision of this scope's registry, bumped on every change.",
        read: (ctx) => `${scope(ctx).rev}\n`,
      }),
      Leaf('info', {
        doc: 'Platform, arch, Landlock ABI and what the sandbox enforces (JSON).',
        read: () => `${JSON.stringify(core.info())}\n`,
      }),
      Dir(
        'proc',
        { doc: 'Tool processes.' },
        Leaf('new', {
          doc: 'Write {"tool", "args", "flags"} JSON; the reply (read on the same fid) is the result JSON once the tool exits. A flush kills it.',
          rdwr: async (ctx, req, signal) =>
            `${JSON.stringify(await core.call(scope(ctx), parseRequest(req), signal))}\n`,
        }),
        Leaf('spill', {
          doc: "Write NAME, a newline, then a long tool result: saved whole as NAME.txt in this agent's spill dir here (spilldir), where its tools may read it. Olliesrv's, for tools that run on another host.",
          whole: true,
          write: (ctx, data) => guard(() => core.saveSpill(scope(ctx), data)),
        }),
        Leaf('spilldir', {
          doc: "This agent's spill directory on this host (empty without a session).",
          read: (ctx) => `${core.spillDir(scope(ctx)) ?? ''}\n`,
        }),
        Leaf('new.bg', {
          doc: 'Write a request as for new; read back the pid of the background process at once.',
          rdwr: async (ctx, req, signal) => {
            const r = parseRequest(req);
            const res = await core.call(scope(ctx), { ...r, flags: { ...r.flags, background: true } }, signal);
            if (res.status !== 'background') throw new NinepError(res.error ?? `not started (${res.status})`);
            return `${res.pid}\n`;
          },
        }),
        Leaf('interrupts', {
          doc: 'Stream: one JSON line per finished background process of this scope, each delivered once, with its <system-proc-interrupt> text.',
          stream: (ctx, signal) => core.followInterrupts(scope(ctx), signal),
        }),
        Each(
          'pid',
          {
            doc: 'One process, by pid. Exited ones are collected 10 minutes after their last read.',
            list: (ctx) => core.procIds(scope(ctx)),
            has: (ctx, id) => core.procIds(scope(ctx)).includes(id),
          },
          Leaf('out', {
            doc: 'Stream: its output from the start, live until it exits.',
            stream: (ctx, signal) => proc(ctx).follow(signal),
          }),
          Leaf('in', {
            doc: "Write: keystrokes for a tty tool's terminal (its pty). Refused for a process without one (its stdin was its arguments).",
            write: (ctx, data) => guard(() => proc(ctx).input(data)),
          }),
          Leaf('wait', {
            doc: 'Blocks until it exits; its exit code (128+N when killed by signal N).',
            blockOnce: async (ctx) => {
              const p = proc(ctx);
              await p.done;
              p.lastRead = Date.now();
              return `${p.waitCode()}\n`;
            },
          }),
          Leaf('stat', {
            doc: 'key=value lines: state, status, runtime_ms, tool, exit, signal, …',
            read: (ctx) => core.statText(proc(ctx)),
          }),
          Leaf('ctl', {
            doc: "Write: signal N (or a name), term, kill, resize COLS ROWS (a tty tool's terminal), dismiss (kill if running and remove it now).",
            write: (ctx, data) => guard(() => core.procCtl(proc(ctx), text(data))),
          }),
        ),
      ),
      ...(core.mcp ? [mcpDir(core.mcp)] : []),
      Dir(
        'bypass',
        { doc: 'Requests to run outside the sandbox, waiting for a person.' },
        Leaf('pending', {
          doc: 'Stream: every pending request (BypassRequest JSON lines), then new ones and resolutions ({"id","resolved"}).',
          stream: (_ctx, signal) => core.bypass.follow(signal),
        }),
        Leaf('resolve', {
          doc: 'Write: ID approve|deny [once|session|always].',
          write: (_ctx, data) => {
            for (const line of text(data).split('\n')) if (line.trim()) guard(() => core.bypass.resolveLine(line));
          },
        }),
      ),
    ),
    { uid: owner, help: true },
  );
  // The attach name becomes the scope parameter, inherited by every node walked from that root.
  return {
    attach: (user, aname) => {
      // The scope is made by its first attach, whose uname its tools see as OLLIE_UNAME.
      core.scope(aname, user.name);
      return { ...ns.attach(user), params: { scope: aname } };
    },
    walk: (d, n, u) => ns.walk(d, n, u),
    stat: (n) => ns.stat(n),
    readdir: (d, u) => ns.readdir(d, u),
    open: (n, m, u) => ns.open(n, m, u),
  };
}

async function guardAsync<T>(fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw e instanceof NinepError ? e : new NinepError((e as Error).message);
  }
}

function parseRequest(req: string): Parameters<Core['call']>[1] {
  try {
    return JSON.parse(req) as Parameters<Core['call']>[1];
  } catch (e) {
    throw new NinepError(`request is not JSON: ${(e as Error).message}`);
  }
}
