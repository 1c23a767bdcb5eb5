/**
 * `ollie run PROMPT`: one turn, headless. It starts olliesrv in-process (a throwaway data dir unless --data is
 * given) or uses a running one (-a ADDR), creates a session and an agent, sends the prompt, streams the reply to
 * stdout and the tool calls to stderr, and exits 0 when the turn ends well, 1 when it ends in an error.
 * Everything goes through the 9P namespace, exactly as any other client would do it.
 */
import { bypassDecisionLine, EVENTS } from '../formats/olliesrv.js';
import { dialOllie } from '../platform/dial.js';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { lines, OREAD, ORDWR, type Client } from '../ninep/index.js';
import type { Daemon } from '../olliesrv/daemon.js';
import { configDir as defaultConfigDir } from '../platform/paths.js';
import type { Block } from '../olliesrv/agent/chatlog.js';

export interface RunOptions {
  addr?: string;
  backend?: string;
  model?: string;
  agent?: string;
  cwd?: string;
  config?: string;
  data?: string;
  yolo?: boolean;
  /** Print reasoning to stderr. */
  reasoning?: boolean;
}

const quote = (v: string): string => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
const oneLine = (s: string, n: number): string => {
  const l = s.replace(/\s+/g, ' ').trim();
  return l.length > n ? `${l.slice(0, n - 1)}…` : l;
};

function write(stream: NodeJS.WriteStream, s: string): Promise<void> {
  return new Promise((res) => (stream.write(s) ? res() : stream.once('drain', res)));
}

export async function run(prompt: string, o: RunOptions): Promise<number> {
  let daemon: Daemon | undefined;
  let scratch: string | undefined;
  let addr = o.addr;
  if (!addr) {
    scratch = mkdtempSync(join(tmpdir(), 'ollie-run-'));
    const socket = join(scratch, 'run', 'ollie.sock');
    // toolsrv boots (a Node process of its own) while this one loads the daemon: the session takes it over.
    const { spawnToolsrv } = await import('../olliesrv/toolclient/spawn.js');
    mkdirSync(join(scratch, 'run'), { mode: 0o700 });
    const dirs = {
      dataDir: o.data ? resolve(o.data) : join(scratch, 'data'),
      configDir: o.config ? resolve(o.config) : defaultConfigDir(),
    };
    // The same dirs as the daemon's: toolsrv reads the user's tools and policy there and denies them to tools.
    const early = spawnToolsrv({
      runtimeDir: join(scratch, 'run'),
      name: 'run',
      yolo: o.yolo,
      ollieAddr: `unix!${socket}`,
      ...dirs,
    });
    early.catch(() => undefined);
    // Loaded only here: with -a, the daemon's code (SQLite, providers) is never loaded at all.
    const { startDaemon } = await import('../olliesrv/daemon.js');
    daemon = await startDaemon({
      socket,
      ...dirs,
      toolsrv: { yolo: o.yolo, spare: early },
      log: (m) => process.stderr.write(`olliesrv: ${m}\n`),
    });
    addr = `unix!${socket}`;
  }
  const c: Client = await dialOllie(addr);
  const life = new AbortController();
  const onSig = () => life.abort(new Error('interrupted'));
  process.once('SIGINT', onSig);
  try {
    const kv = (pairs: Record<string, string | undefined>): string =>
      Object.entries(pairs)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => `${k}=${quote(v!)}`)
        .join(' ');
    const cwd = resolve(o.cwd ?? process.cwd());
    const session = (await c.rdwrText('session/new', kv({ cwd }))).trim();
    const agentName = (
      await c.rdwrText(`session/${session}/agent/new`, kv({ backend: o.backend, model: o.model, agent: o.agent, cwd }))
    ).trim();
    const base = `session/${session}/agent/${agentName}`;
    const sid = (await c.readText(`session/${session}/id`)).trim();
    const aid = (await c.readText(`${base}/id`)).trim();

    // Subscribe to the agent's state and bypass requests before the prompt goes in, so no change is missed.
    const events = await c.open('event', ORDWR);
    await events.writeAll(
      new TextEncoder().encode(`session.${sid}.agent.${aid}.state session.${sid}.agent.${aid}.bypass.request`),
    );
    const log = await c.open(`${base}/log.raw`, OREAD);

    let failed = '';
    const streamed = new Set<string>();
    let atLineStart = true;
    const follow = (async () => {
      for await (const l of lines(log.chunks(life.signal))) {
        const b = JSON.parse(l) as Block;
        if (b.role === 'assistant') {
          if (b.partial) {
            streamed.add(b.id);
            await write(process.stdout, b.content);
            atLineStart = b.content.endsWith('\n');
          } else if (!streamed.has(b.id)) {
            await write(process.stdout, b.content);
            atLineStart = b.content.endsWith('\n');
          }
          continue;
        }
        if (b.partial) {
          if (b.role === 'reasoning' && o.reasoning) await write(process.stderr, b.content);
          continue;
        }
        if (!atLineStart) {
          await write(process.stdout, '\n');
          atLineStart = true;
        }
        if (b.role === 'call') await write(process.stderr, `→ ${b.name} ${oneLine(b.content, 160)}\n`);
        else if (b.role === 'tool')
          await write(process.stderr, `  ${b.name}: ${oneLine(b.content, 160) || '(no output)'}\n`);
        else if (b.role === 'error') {
          failed = b.content;
          await write(process.stderr, `error: ${b.content}\n`);
        } else if (b.role === 'retry' || b.role === 'stalled' || (b.role === 'info' && b.name !== 'prompt'))
          await write(process.stderr, `[${b.role}] ${b.content}\n`);
      }
    })();

    const ended = (async () => {
      let started = false;
      for await (const l of lines(events.chunks(life.signal))) {
        const e = EVENTS.split(l);
        const { topic, payload } = e;
        if (topic.endsWith('.bypass.request')) {
          const { id, cmd } = EVENTS.fields(e) ?? {};
          if (o.yolo) await c.write(`session/${session}/bypass`, bypassDecisionLine(id!, 'approve', 'once'));
          else {
            process.stderr.write(
              `ollie run: refused a request to run outside the sandbox: ${cmd} (use --yolo to allow it)\n`,
            );
            await c.write(`session/${session}/bypass`, bypassDecisionLine(id!, 'deny', 'once'));
          }
          continue;
        }
        if (payload !== 'idle' && payload !== 'paused') started = true;
        else if (started) return;
      }
    })();

    await c.write(`${base}/prompt`, prompt);
    await ended;
    // The log's last blocks were emitted before the state changed, so their replies precede the event's on this
    // connection; one more round trip makes sure they are in, then the reader is stopped.
    await c.readText(`${base}/state`);
    life.abort();
    await follow.catch(() => undefined);
    if (!atLineStart) process.stdout.write('\n');
    await events.clunk().catch(() => undefined);
    await log.clunk().catch(() => undefined);
    if (o.addr) process.stderr.write(`ollie run: session ${session}, agent ${agentName}\n`);
    return failed ? 1 : 0;
  } catch (e) {
    if (life.signal.aborted) {
      process.stderr.write('ollie run: interrupted\n');
      return 130;
    }
    throw e;
  } finally {
    process.off('SIGINT', onSig);
    c.close();
    await daemon?.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
}
