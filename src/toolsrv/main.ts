#!/usr/bin/env node
/**
 * toolsrv, the process. olliesrv starts it (src/olliesrv/toolclient/spawn.ts) with a pipe on stdin:
 *
 *   node dist/toolsrv/main.js --socket PATH [--pid-file PATH] [--session ID] [--ollie-addr ADDR] [--cwd DIR]
 *                             [--tools-dir DIR]... [--config-dir DIR] [--data-dir DIR] [--yolo] [--idle-ms N]
 *                             [--grace-ms N] [--proc-ttl-ms N] [--seal DIR]...
 *
 * The first line on stdin is the shared secret (never argv or the environment, which other processes of the
 * user can read). The pipe then stays open: EOF on it means the parent is gone, and toolsrv exits with every
 * process it runs. It also exits `--idle-ms` (30 s) after its last connection closed, once one has come, or
 * `--grace-ms` (60 s) after start if none ever does. When listening it writes the pid file and prints
 * `ready SOCKET` on stdout.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startToolsrv, type Toolsrv } from './server.js';

const { values } = parseArgs({
  options: {
    socket: { type: 'string' },
    'pid-file': { type: 'string' },
    session: { type: 'string' },
    'ollie-addr': { type: 'string' },
    cwd: { type: 'string' },
    'tools-dir': { type: 'string', multiple: true },
    'config-dir': { type: 'string' },
    'data-dir': { type: 'string' },
    yolo: { type: 'boolean', default: false },
    'idle-ms': { type: 'string', default: '30000' },
    'grace-ms': { type: 'string', default: '60000' },
    'proc-ttl-ms': { type: 'string' },
    // A directory no tool may write, whatever the policy grants: a remote toolsrv's own package cache.
    seal: { type: 'string', multiple: true },
  },
  strict: true,
});

const log = (m: string): void => void process.stderr.write(`toolsrv[${process.pid}]: ${m}\n`);
// Our stdout and stderr are pipes to the parent: once it is gone, writing to them must not kill us before we
// have cleaned up.
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);

function die(m: string): never {
  log(m);
  process.exit(2);
}

function ms(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) die(`--${name}: not a number of milliseconds: ${v}`);
  return n;
}

/** Reads the first line of stdin; afterwards the 'end' event of stdin means the parent died. */
function readSecret(): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const onData = (d: Buffer): void => {
      buf += d.toString('utf8');
      const nl = buf.indexOf('\n');
      if (nl < 0) {
        if (buf.length > 4096) reject(new Error('no newline after 4096 bytes of secret'));
        return;
      }
      process.stdin.off('data', onData);
      process.stdin.off('end', onEnd);
      resolve(buf.slice(0, nl).trim());
    };
    const onEnd = (): void => reject(new Error('stdin closed before the secret arrived'));
    process.stdin.on('data', onData);
    process.stdin.once('end', onEnd);
  });
}

async function main(): Promise<void> {
  if (!values.socket) die('--socket PATH is required');
  for (const k of ['config-dir', 'data-dir'] as const)
    if (values[k] !== undefined && !values[k].startsWith('/')) die(`--${k}: not an absolute path: ${values[k]}`);
  for (const d of values.seal ?? []) if (!d.startsWith('/')) die(`--seal: not an absolute path: ${d}`);
  const idleMs = ms('idle-ms', values['idle-ms'])!;
  const graceMs = ms('grace-ms', values['grace-ms'])!;
  const secret = await readSecret().catch((e: Error) => die(e.message));
  if (!secret) die('empty secret on stdin');

  // Filled in once listening; exit() may run before that (the parent gone during start).
  const running: { ts?: Toolsrv } = {};
  let exiting = false;
  const exit = async (why: string): Promise<never> => {
    if (!exiting) {
      exiting = true;
      if (values['pid-file']) rmSync(values['pid-file'], { force: true });
      await running.ts?.close().catch(() => undefined);
      log(`exiting: ${why}`);
    }
    process.exit(0);
  };
  // Parent death: our end of the pipe from it reaches EOF. Keep reading so the event can come.
  process.stdin.on('end', () => void exit('parent closed the pipe (gone)'));
  process.stdin.on('error', () => void exit('parent pipe failed'));
  process.stdin.resume();
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => void exit(sig));

  const ttl = ms('proc-ttl-ms', values['proc-ttl-ms']);
  const ts = await startToolsrv({
    socket: values.socket,
    secret,
    yolo: values.yolo,
    log,
    ...(values['tools-dir'] && { toolDirs: values['tools-dir'] }),
    ...(values['config-dir'] && { configDir: values['config-dir'] }),
    ...(values['data-dir'] && { dataDir: values['data-dir'] }),
    ...(values.seal && { sealed: values.seal }),
    ...(values.cwd && { cwd: values.cwd }),
    ...(values.session && { sessionId: values.session }),
    ...(values['ollie-addr'] && { ollieAddr: values['ollie-addr'] }),
    ...(ttl !== undefined && { procTtlMs: ttl }),
  }).catch((e: Error) => die(`cannot serve on ${values.socket}: ${e.message}`));
  running.ts = ts;

  let idle: NodeJS.Timeout | undefined = setTimeout(
    () => void exit(`no connection within ${graceMs} ms of start`),
    graceMs,
  );
  ts.onConnections = (n) => {
    clearTimeout(idle);
    idle =
      n === 0
        ? setTimeout(() => void exit(`idle for ${idleMs} ms after the last connection closed`), idleMs)
        : undefined;
  };
  if (values['pid-file']) writeFileSync(values['pid-file'], `${process.pid}\n`, { mode: 0o600 });
  process.stdout.write(`ready ${values.socket}\n`);
}

void main();
