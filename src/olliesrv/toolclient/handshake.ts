// Starting a toolsrv child, wherever it runs (a local Node, or ssh to a remote): the same handshake both ways.
// The secret goes as the first line of stdin and the pipe then stays open (toolsrv's lifeline); stdout says
// `ready ` when it serves; stderr is relayed line by line to the log.
import type { ChildProcess } from 'node:child_process';
import { confine } from '../auth/confined.js';

export interface HandshakeOptions {
  secret: string;
  timeoutMs: number;
  /** One line of the child's stderr. */
  log: (line: string) => void;
  /** Runs once when the child has exited (before `exited` resolves). */
  onExit?: () => void;
  timeoutMessage: string;
  /** The error for a child that could not be started at all. */
  spawnError: (e: Error) => Error;
  /** The message for a child that exited before it was ready; `errTail` is the end of its stderr. */
  exitMessage: (code: number | null, errTail: string) => string;
}

export interface StartedToolsrvChild {
  readonly exited: Promise<void>;
  readonly alive: boolean;
  /** Closes the pipe (toolsrv exits and kills its procs); SIGKILL if it has not exited within `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/** Confines `child`, hands it the secret and waits for `ready`; on failure kills it and throws. */
export async function handshakeToolsrv(child: ChildProcess, o: HandshakeOptions): Promise<StartedToolsrvChild> {
  confine(child);
  let alive = true;
  const exited = new Promise<void>((r) => child.once('exit', () => ((alive = false), o.onExit?.(), r())));
  child.stdin!.on('error', () => undefined);
  child.stdin!.write(`${o.secret}\n`);
  let errTail = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (d: string) => {
    errTail = (errTail + d).slice(-2000);
    for (const l of d.split('\n')) if (l) o.log(l);
  });
  try {
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(o.timeoutMessage)), o.timeoutMs);
      child.stdout!.setEncoding('utf8');
      child.stdout!.on('data', (d: string) => {
        out += d;
        if (out.includes('ready ')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('error', (e) => {
        clearTimeout(timer);
        reject(o.spawnError(e));
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(o.exitMessage(child.exitCode, errTail)));
      });
    });
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }
  // A toolsrv never keeps olliesrv (or `ollie run`) alive: when we end, our end of the pipe closes and it follows.
  child.unref();
  for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as { unref?: () => void } | null)?.unref?.();
  return {
    exited,
    get alive() {
      return alive;
    },
    async stop(graceMs = 3000) {
      if (!alive) return;
      child.stdin!.end();
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(t);
    },
  };
}
