/**
 * The inside of a resident tool host (toolsrv's side: src/toolsrv/exec/hosts.ts): read calls as JSON lines
 * on stdin, run each with its tool's handler, answer on stdout. Calls run concurrently; a cancel aborts the
 * call's signal (handlers check it between steps). stdin's end means toolsrv is gone or stopped this host:
 * `onExit` hooks run (language servers are shut down) and the process exits.
 *
 * `--call TOOL` runs one call without toolsrv (arguments as JSON on stdin, output on stdout): the same
 * handlers, one process per call, for debugging and for the first-call figure of bench/codeintel.mjs.
 */
import { createInterface } from 'node:readline';

export interface CallContext {
  cwd: string;
  env: Record<string, string>;
  signal: AbortSignal;
  /** Streams output now (a handler may also just return its output). */
  write(text: string): void;
}

/** A handler's answer: its output (exit 0), or output with an exit code. Errors it throws become `TOOL: message`, exit 1. */
export type Answer = string | { output: string; exit: number };
export type Handler = (args: Record<string, unknown>, ctx: CallContext) => Promise<Answer> | Answer;

/** An error meant for the model: printed as `TOOL: message` with exit code 1. */
export class ToolError extends Error {
  override name = 'ToolError';
}

export interface HostSpec {
  name: string;
  tools: Record<string, Handler>;
  /** Counters shown by the stats request (loads, cache sizes…), merged with the runtime's own. */
  stats?: () => Record<string, unknown>;
  /** Runs before the host exits (stdin closed). */
  onExit?: () => Promise<void> | void;
}

/** The host's idle time as toolsrv passed it (--idle-ms N), for what it keeps warm inside (language servers). */
export function idleMsArg(argv = process.argv, dflt = 10 * 60 * 1000): number {
  const i = argv.indexOf('--idle-ms');
  const n = i >= 0 ? Number(argv[i + 1]) : NaN;
  return Number.isFinite(n) && n > 0 ? n : dflt;
}

async function runOne(
  spec: HostSpec,
  tool: string,
  args: Record<string, unknown>,
  ctx: CallContext,
): Promise<{ output: string; exit: number }> {
  const h = spec.tools[tool];
  if (!h)
    return {
      output: `${spec.name}: no tool ${tool} in this host (it serves ${Object.keys(spec.tools).join(', ')})\n`,
      exit: 1,
    };
  try {
    const a = await h(args, ctx);
    return typeof a === 'string' ? { output: a, exit: 0 } : a;
  } catch (e) {
    if (ctx.signal.aborted) throw e;
    const msg = e instanceof ToolError ? e.message : `${(e as Error).message ?? String(e)}`;
    return { output: `${tool}: ${msg}\n`, exit: 1 };
  }
}

export async function serveHost(spec: HostSpec): Promise<void> {
  const started = Date.now();
  const modeCall = process.argv.indexOf('--call');
  if (modeCall >= 0) {
    const tool = process.argv[modeCall + 1] ?? '';
    let input = '';
    for await (const c of process.stdin) input += c;
    const ctl = new AbortController();
    const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined)) as Record<
      string,
      string
    >;
    const r = await runOne(spec, tool, JSON.parse(input || '{}') as Record<string, unknown>, {
      cwd: process.cwd(),
      env,
      signal: ctl.signal,
      write: (t) => process.stdout.write(t),
    });
    process.stdout.write(r.output);
    await spec.onExit?.();
    process.exitCode = r.exit;
    return;
  }

  // stdout carries the protocol only: console output of libraries goes to stderr.
  const toStderr = (...a: unknown[]): void => void process.stderr.write(`${a.map(String).join(' ')}\n`);
  console.log = toStderr;
  console.info = toStderr;
  console.debug = toStderr;
  const send = (m: unknown): void => void process.stdout.write(`${JSON.stringify(m)}\n`);
  const running = new Map<number, AbortController>();
  let calls = 0;
  send({ hello: { pid: process.pid, name: spec.name } });

  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  rl.on('line', (line) => {
    let m: {
      id?: number;
      tool?: string;
      args?: Record<string, unknown>;
      cwd?: string;
      env?: Record<string, string>;
      cancel?: number;
      signal?: string;
      stats?: boolean;
    };
    try {
      m = JSON.parse(line) as typeof m;
    } catch {
      process.stderr.write(`${spec.name}: not a request: ${line.slice(0, 200)}\n`);
      return;
    }
    if (typeof m.cancel === 'number') {
      running.get(m.cancel)?.abort(new Error(`cancelled (${m.signal ?? 'SIGTERM'})`));
      return;
    }
    const id = m.id;
    if (typeof id !== 'number') return;
    if (m.stats) {
      send({
        id,
        stats: {
          name: spec.name,
          pid: process.pid,
          uptimeMs: Date.now() - started,
          calls,
          running: running.size,
          ...spec.stats?.(),
        },
      });
      return;
    }
    calls++;
    const ctl = new AbortController();
    running.set(id, ctl);
    const ctx: CallContext = {
      cwd: m.cwd ?? process.cwd(),
      env: m.env ?? {},
      signal: ctl.signal,
      write: (t) => send({ id, out: t }),
    };
    void runOne(spec, m.tool ?? '', m.args ?? {}, ctx).then(
      (r) => {
        running.delete(id);
        if (ctl.signal.aborted) return send({ id, exit: null, signal: 'SIGTERM' });
        if (r.output) send({ id, out: r.output });
        send({ id, exit: r.exit });
      },
      () => {
        running.delete(id);
        send({ id, exit: null, signal: 'SIGTERM' });
      },
    );
  });
  rl.on('close', () => {
    for (const c of running.values()) c.abort(new Error('the host is stopping'));
    void Promise.resolve(spec.onExit?.()).finally(() => process.exit(0));
  });
}
