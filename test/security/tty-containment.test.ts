/**
 * tty tools, attacked the way a model would: scripted calls of a tty tool (its command runs on a pseudo-terminal
 * of its own) to a real sandboxed toolsrv (the real spawner, helper, policy and kernel) that try to outlive their
 * call from a session of their own, fork past the process limit and spread memory past the memory limit. The
 * terminal comes from the spawner, so a tty call is contained and limited like every other call; and without the
 * spawner it is refused, bypassed or --yolo, rather than run on a terminal that nothing contains.
 *
 * Who may reach what: a tty tool is the owner's (a tool directory) and the agent reaches it only through calls;
 * its terminal's keyboard (proc/{pid}/in) and size (proc/{pid}/ctl resize) are the owner's (test/security/
 * principals.test.ts attacks those).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import type { ProcResult } from '../../src/toolsrv/protocol.js';
import { alive, withArg } from '../helpers/processes.js';
import { startEnv, until, type Env } from '../toolsrv/helpers.js';
import { useShippedPolicy, writeLimits } from './shipped-policy.js';
import { TERM_TOOL, termEnv } from './tty-tool.js';

const readPid = (file: string): number => Number(readFileSync(file, 'utf8').trim());

const { userPolicy } = useShippedPolicy('ollie-tty-xdg-');

let env: Env | undefined;
const markers: string[] = [];
afterEach(async () => {
  await env?.close();
  env = undefined;
  // Nothing of a failed test may stay behind (on the old code the escaped sleeps would).
  for (const m of markers.splice(0))
    for (const pid of withArg(m)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
});

/** A sandboxed toolsrv with the shipped policy and the tty tool; the agent works in `dir`. */
async function sandboxed(): Promise<{
  dir: string;
  c: Client;
  term(command: string, flags?: Record<string, unknown>): Promise<ProcResult>;
}> {
  const t = await termEnv();
  env = t.env;
  const { dir, c } = t;
  const e = env;
  return { dir, c, term: (command, flags = {}) => e.call(c, { tool: 'term', args: { command }, flags }) };
}

describe('a tty tool runs on a terminal of its own, from the spawner', () => {
  it('sees a terminal as stdin and stdout, 120x40, resized by ctl resize; keystrokes reach it', async () => {
    const { dir, c } = await sandboxed();
    const pid = Number(
      (
        await c.rdwrText(
          'proc/new.bg',
          JSON.stringify({
            tool: 'term',
            args: {
              command:
                'test -t 0 && test -t 1 && test -t 2 && echo "all three: terminal"; tty; echo "TERM=$TERM"; ' +
                // Its controlling terminal: what ssh, sudo and gpg open to ask for a password.
                'echo "on /dev/tty" > /dev/tty; ' +
                'stty size; : > ready; read line; stty size; echo "got $line"',
            },
          }),
        )
      ).trim(),
    );
    await until(() => existsSync(join(dir, 'ready')), 'the tool to print its first size');
    await c.write(`proc/${pid}/ctl`, 'resize 100 30');
    await c.write(`proc/${pid}/in`, 'hello there\r');
    expect((await c.readText(`proc/${pid}/wait`)).trim()).toBe('0');
    const out = (await c.readText(`proc/${pid}/out`)).replace(/\r/g, '');
    expect(out).toMatch(
      // Its terminal has no name under /dev/pts: the tool sees a devpts instance of its own there (the machine's
      // terminals are not its to open), and the one the spawner gave it is the machine's.
      /^all three: terminal\nnot a tty\nTERM=xterm-256color\non \/dev\/tty\n40 120\nhello there\n30 100\ngot hello there\n$/,
    );
  });
});

describe('a tty call is contained and limited like every other call', () => {
  it('a setsid sleeper and a double-forked daemon are dead when the call returns', async () => {
    const { dir, term } = await sandboxed();
    const m = `3${String(process.pid % 100000).padStart(5, '0')}.5`;
    markers.push(m);
    writeFileSync(
      join(dir, 'daemon.py'),
      `import os, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
open("py.pid", "w").write(str(os.getpid()))
time.sleep(${m})`,
    );
    const r = await term(
      `setsid sh -c 'sleep ${m} & echo $! > a.pid; sleep ${m}' & /usr/bin/python3 daemon.py; ` +
        `for f in a py; do while [ ! -s $f.pid ]; do sleep 0.01; done; done; echo escaped`,
      { timeout: 30 },
    );
    expect(r).toMatchObject({ status: 'exited', exit: 0 });
    expect(r.output).toContain('escaped');
    // Not "soon": the result comes only once every process of the call is gone.
    for (const f of ['a', 'py']) expect(alive(readPid(join(dir, `${f}.pid`))), `${f}.pid`).toBe(false);
    expect(withArg(m)).toEqual([]);
  });

  it('a 300-process fork is killed at the process limit with the usual reason', async () => {
    const { term } = await sandboxed();
    const m = `3${String(process.pid % 100000).padStart(5, '0')}.25`;
    markers.push(m);
    const r = await term(`for i in $(seq 300); do sleep ${m} & done; wait`, { timeout: 30 });
    expect(r, r.output).toMatchObject({ status: 'killed', error: 'killed: process limit 256' });
    expect(withArg(m)).toEqual([]);
  });

  it('memory spread over several processes is killed at the memory limit (a user limit of 256 MiB)', async () => {
    writeLimits(userPolicy(), { memory: '256 MiB' });
    const { term } = await sandboxed();
    const eat = `${process.execPath} -e 'globalThis.b = Buffer.alloc(120 * 1024 * 1024, 1); setTimeout(() => {}, 60000)'`;
    const r = await term(`for i in 1 2 3; do ${eat} & done; wait`, { timeout: 30 });
    expect(r).toMatchObject({ status: 'killed', error: 'killed: memory limit 256 MiB' });
  });
});

describe('without the spawner a tty call is refused, saying why', () => {
  const refusal =
    /^a tty tool's terminal comes from the process spawner: the process spawner \S+ollie-spawner is missing, and without it the processes of a call can be neither contained nor limited/;

  it('sandboxed, and --yolo', async () => {
    for (const yolo of [false, true]) {
      env = await startEnv(TERM_TOOL, { yolo, spawner: false });
      const c = await env.client('agent1');
      await c.write('ctl', 'load term');
      const r = await env.call(c, { tool: 'term', args: { command: 'echo ran' } });
      expect(r.status, `yolo ${yolo}`).toBe('refused');
      expect(r.error, `yolo ${yolo}`).toMatch(refusal);
      expect(r.output).not.toContain('ran');
      await env.close();
      env = undefined;
    }
  });

  it('asking to bypass the sandbox: refused before the owner is asked (nothing could run it)', async () => {
    env = await startEnv(TERM_TOOL, { yolo: false, spawner: false });
    const c = await env.client('agent1');
    await c.write('ctl', 'load term');
    // Were the owner asked, the call would wait for an answer that never comes.
    const r = await env.call(c, { tool: 'term', args: { command: 'echo ran', bypass: true } });
    expect(r.status).toBe('refused');
    expect(r.error).toMatch(refusal);
  });
});
