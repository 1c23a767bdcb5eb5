import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { ToolClient } from '../../src/olliesrv/toolclient/client.js';
import { OUTPUT_CAP, type ProcInterrupt } from '../../src/toolsrv/protocol.js';
import { BASIC, keyValues, sleep, startEnv, until, type Env } from './helpers.js';

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** Whether `pid` runs (a zombie waiting for a reaper that is not us counts as dead). */
const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

async function loaded(names = 'sh'): Promise<Client> {
  env = await startEnv();
  const c = await env.client();
  await c.write('ctl', `load ${names}`);
  return c;
}

/** Starts `command` in the background through proc/new.bg; its pid. */
async function bg(c: Client, command: string): Promise<number> {
  return Number((await c.rdwrText('proc/new.bg', JSON.stringify({ tool: 'sh', args: { command } }))).trim());
}

const stat = async (c: Client, pid: number): Promise<Record<string, string>> =>
  keyValues(await c.readText(`proc/${pid}/stat`));

describe('procs', () => {
  it('runs a foreground call and returns combined output and the exit code', async () => {
    const c = await loaded();
    const r = await env!.call(c, { tool: 'sh', args: { command: 'echo out; echo err >&2; exit 3' } });
    expect(r.status).toBe('exited');
    expect(r.exit).toBe(3);
    expect(r.output).toContain('out\n');
    expect(r.output).toContain('err\n');
    expect(r.outputBytes).toBe(8);
    expect(r.pid).toBeGreaterThan(0);
    // The proc stays in the tree after its result, with its output.
    expect(await c.readText(`proc/${r.pid}/wait`)).toBe('3\n');
    expect((await stat(c, r.pid)).state).toBe('exited');
    const out = await c.readText(`proc/${r.pid}/out`);
    expect(out.length).toBe(8);
  });

  it('kills the whole process group on timeout, grandchildren included', async () => {
    const c = await loaded();
    const pidFile = join(env!.dir, 'grandchild.pid');
    const t = Date.now();
    const r = await env!.call(c, {
      tool: 'sh',
      args: { command: `sleep 30 & echo $! > ${pidFile}; wait` },
      flags: { timeout: 0.4 },
    });
    expect(r.status).toBe('timeout');
    expect(r.error).toMatch(/timed out/);
    expect(Date.now() - t).toBeLessThan(3000);
    const grandchild = Number(readFileSync(pidFile, 'utf8'));
    await until(() => !alive(grandchild));
  });

  it('a flushed call kills its process group', async () => {
    const c = await loaded();
    const pidFile = join(env!.dir, 'child.pid');
    const ac = new AbortController();
    const call = env!.call(c, { tool: 'sh', args: { command: `sleep 30 & echo $! > ${pidFile}; wait` } }, ac.signal);
    call.catch(() => undefined);
    const fs = await import('node:fs');
    const child = await until(() => (fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8')) : 0));
    expect(alive(child)).toBe(true);
    ac.abort();
    await expect(call).rejects.toThrow();
    await until(() => !alive(child));
    const p = [...env!.ts.core.procs.values()][0]!;
    await p.done;
    expect(p.status).toBe('killed');
  });

  it('a client that hangs up mid-call takes its foreground call with it, not its background procs', async () => {
    const c = await loaded();
    const pidFile = join(env!.dir, 'fg.pid');
    const bgPid = await bg(c, 'sleep 30');
    const call = env!.call(c, { tool: 'sh', args: { command: `echo $$ > ${pidFile}; exec sleep 30` } });
    call.catch(() => undefined);
    const fg = await until(() => (existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : 0));
    c.close();
    await expect(call).rejects.toThrow();
    await until(() => !alive(fg));
    const p = env!.ts.core.procs.get(bgPid)!;
    expect(p.state).toBe('running');
    p.terminate('killed', 0);
    await p.done;
  });

  it('a foreground call does not leave processes behind in its group after it exits', async () => {
    const c = await loaded();
    const pidFile = join(env!.dir, 'left.pid');
    const t = Date.now();
    const r = await env!.call(c, { tool: 'sh', args: { command: `sleep 30 & echo $! > ${pidFile}; echo bye` } });
    expect(r.output).toBe('bye\n');
    expect(Date.now() - t).toBeLessThan(2500);
    const left = Number(readFileSync(pidFile, 'utf8'));
    await until(() => !alive(left));
  });

  it('runs in the background: pid at once, live output, wait, stat, and an interrupt when it ends', async () => {
    const c = await loaded();
    const fifo = join(env!.dir, 'go');
    const { execFileSync } = await import('node:child_process');
    execFileSync('mkfifo', [fifo]);
    const t = Date.now();
    const res = await env!.call(c, {
      tool: 'sh',
      args: { command: `echo first; read x < ${fifo}; echo "second $x"; exit 4`, background: true },
    });
    expect(res.status).toBe('background');
    expect(Date.now() - t).toBeLessThan(1000);
    const pid = res.pid;
    expect((await stat(c, pid)).state).toBe('running');
    const ls = (await c.ls('proc')).map((s) => s.name);
    expect(ls).toContain(String(pid));

    const ac = new AbortController();
    const seen: string[] = [];
    const reading = (async () => {
      for await (const chunk of c.stream(`proc/${pid}/out`, { signal: ac.signal }))
        seen.push(new TextDecoder().decode(chunk));
    })();
    await until(() => seen.join('') === 'first\n');
    const interrupts: ProcInterrupt[] = [];
    const ic = new AbortController();
    const following = (async () => {
      let buf = '';
      for await (const chunk of c.stream('proc/interrupts', { signal: ic.signal })) {
        buf += new TextDecoder().decode(chunk);
        for (;;) {
          const nl = buf.indexOf('\n');
          if (nl < 0) break;
          interrupts.push(JSON.parse(buf.slice(0, nl)) as ProcInterrupt);
          buf = buf.slice(nl + 1);
        }
      }
    })().catch(() => undefined);
    const waiting = c.readText(`proc/${pid}/wait`);
    writeFileSync(fifo, 'now\n');
    expect(await waiting).toBe('4\n');
    await reading;
    expect(seen.join('')).toBe('first\nsecond now\n');
    const st = await stat(c, pid);
    expect(st).toMatchObject({
      state: 'exited',
      status: 'exited',
      exit: '4',
      tool: 'sh',
      background: '1',
      agent: 'agent1',
    });
    await until(() => interrupts.length === 1);
    const n = interrupts[0]!;
    expect(n).toMatchObject({ pid, agent: 'agent1', tool: 'sh', status: 'exited', exit: 4 });
    expect(n.text).toBe(
      `<system-proc-interrupt id="${pid}" cmd="sh echo first; read x &lt; ${fifo}; echo &quot;second $x&quot;; exit 4" status="exited" exit="4">\nfirst\nsecond now\n</system-proc-interrupt>\n`,
    );
    ic.abort();
    await following;
    // Delivered once: a new reader does not get it again.
    expect(env!.ts.core.scope('agent1').interrupts).toEqual([]);
    ac.abort();
  });

  it('delivers interrupts only to the scope that started the proc, and queues them until read', async () => {
    const c = await loaded();
    const other = await env!.client('agent2');
    await other.write('ctl', 'load sh');
    const pid = await bg(c, 'echo done');
    await c.readText(`proc/${pid}/wait`);
    await until(
      () => env!.ts.core.scope('agent1').interrupts.length > 0,
      'the interrupt for the agent that started it',
    );
    // Another agent neither sees the proc nor its interrupt.
    await expect(other.readText(`proc/${pid}/stat`)).rejects.toThrow(/not found/);
    expect(env!.ts.core.scope('agent2').interrupts).toEqual([]);
    // The session-wide scope sees every proc.
    const session = await env!.client('');
    expect((await session.ls('proc')).map((s) => s.name)).toContain(String(pid));
    // Queued until someone reads proc/interrupts, then gone.
    const ac = new AbortController();
    const it = c.stream('proc/interrupts', { signal: ac.signal });
    const first = await it.next();
    expect(JSON.parse(new TextDecoder().decode(first.value as Uint8Array))).toMatchObject({
      pid,
      status: 'exited',
      exit: 0,
      tail: 'done\n',
    });
    ac.abort();
    await it.return(undefined);
  });

  it('ctl: signal N, term, kill and dismiss', async () => {
    const c = await loaded();
    const trapped = join(env!.dir, 'trapped');
    const p1 = await bg(c, `trap "echo got-usr1; exit 7" USR1; : > ${trapped}; while :; do sleep 0.05; done`);
    await until(() => existsSync(trapped), 'the trap to be set');
    await c.write(`proc/${p1}/ctl`, 'signal USR1');
    expect(await c.readText(`proc/${p1}/wait`)).toBe('7\n');
    expect(await c.readText(`proc/${p1}/out`)).toContain('got-usr1\n'); // the whole group got it: sh may report its sleep's death
    expect((await stat(c, p1)).status).toBe('killed'); // stopped by a person, even though it exited cleanly

    const p2 = await bg(c, 'sleep 30');
    await c.write(`proc/${p2}/ctl`, 'term');
    expect(await c.readText(`proc/${p2}/wait`)).toBe(`${128 + 15}\n`);
    expect(await stat(c, p2)).toMatchObject({ status: 'killed', signal: 'SIGTERM' });

    const p3 = await bg(c, 'trap "" TERM; sleep 30');
    await c.write(`proc/${p3}/ctl`, 'signal 9');
    expect(await c.readText(`proc/${p3}/wait`)).toBe(`${128 + 9}\n`);

    const p4 = await bg(c, 'sleep 30');
    const osPid = Number((await stat(c, p4)).os_pid);
    await c.write(`proc/${p4}/ctl`, 'dismiss');
    await expect(c.readText(`proc/${p4}/stat`)).rejects.toThrow(/not found/);
    await until(() => !alive(osPid));
    await expect(c.write(`proc/${p1}/ctl`, 'explode')).rejects.toThrow(/unknown command/);
    // A dismissed proc announces nothing; the others did.
    await until(() => env!.ts.core.scope('agent1').interrupts.length >= 3, 'the interrupts of the other three');
    expect(env!.ts.core.scope('agent1').interrupts.map((i) => i.pid)).toEqual([p1, p2, p3]);
  });

  it('collects exited procs after their last read, not running ones', async () => {
    env = await startEnv(undefined, { procTtlMs: 300 });
    const c = await env.client();
    await c.write('ctl', 'load sh');
    const done = await env.call(c, { tool: 'sh', args: { command: 'true' } });
    const running = await bg(c, 'sleep 30');
    // Reading keeps it: read at 200 ms, so it is still there at 400 ms.
    await sleep(200);
    await c.readText(`proc/${done.pid}/stat`);
    await sleep(200);
    expect(env.ts.core.procs.has(done.pid)).toBe(true);
    await until(() => !env!.ts.core.procs.has(done.pid), 'the exited proc to be collected', 3000);
    await expect(c.readText(`proc/${done.pid}/stat`)).rejects.toThrow(/not found/);
    expect(env.ts.core.procs.has(running)).toBe(true);
    await c.write(`proc/${running}/ctl`, 'kill');
  });

  it('caps the output of a result and keeps the whole of it in out', async () => {
    const c = await loaded();
    const r = await env!.call(c, {
      tool: 'sh',
      args: { command: `head -c ${OUTPUT_CAP + 100000} /dev/zero | tr '\\0' x; echo; echo END` },
    });
    expect(r.outputBytes).toBe(OUTPUT_CAP + 100000 + 5);
    expect(r.output.length).toBeLessThan(OUTPUT_CAP + 200);
    expect(r.output).toMatch(/\[… \d+ bytes omitted; the whole output is in proc\/\d+\/out …\]/);
    expect(r.output.endsWith('END\n')).toBe(true);
    const whole = await c.read(`proc/${r.pid}/out`);
    expect(whole.length).toBe(r.outputBytes);
  });

  it('ToolClient carries replies larger than one 9P message, and refuses a request larger than one', async () => {
    env = await startEnv();
    const host = await ToolClient.connect({ socket: env.ts.socket, secret: env.secret }, 'big');
    try {
      await host.ctl('load sh echoargs');
      const big = await host.call({
        tool: 'sh',
        args: { command: `head -c ${OUTPUT_CAP + 5000} /dev/zero | tr '\\0' y` },
      });
      expect(big.outputBytes).toBe(OUTPUT_CAP + 5000);
      expect(JSON.stringify(big).length).toBeGreaterThan(OUTPUT_CAP + 24); // more than one Rread
      expect(big.output.startsWith('yyyy')).toBe(true);
      const near = 'z'.repeat(OUTPUT_CAP - 1000);
      const echoed = await host.call({ tool: 'echoargs', args: { x: 1, pad: near } });
      expect(echoed.status).toBe('exited');
      expect(JSON.parse(echoed.output)).toEqual({ x: 1, pad: near });
      const over = await host.call({ tool: 'echoargs', args: { x: 1, pad: 'z'.repeat(OUTPUT_CAP + 100) } });
      expect(over).toMatchObject({ status: 'refused', pid: 0 });
      expect(over.error).toMatch(/the call is \d+ bytes of JSON; toolsrv takes at most \d+/);
    } finally {
      await host.close();
    }
  });

  it('runs tty tools in a terminal, with the arguments in OLLIE_ARGS', async () => {
    env = await startEnv({
      term: {
        meta: {
          description: 'needs a tty',
          tty: true,
          args: { type: 'object', properties: { n: { type: 'number' } } },
        },
        script: '#!/bin/sh\n[ -t 1 ] && echo "tty $OLLIE_ARGS"\nexit 2\n',
      },
    });
    const c = await env.client();
    await c.write('ctl', 'load term');
    const r = await env.call(c, { tool: 'term', args: { n: 1 } });
    expect(r.status).toBe('exited');
    expect(r.exit).toBe(2);
    expect(r.output.replace(/\r/g, '')).toBe('tty {"n":1}\n');
  });

  it('takes keystrokes and a size for a tty tool (proc/{pid}/in, ctl resize); refuses both for a piped one', async () => {
    env = await startEnv({
      ...BASIC,
      asker: {
        meta: { description: 'asks', tty: true, args: { type: 'object', properties: {} } },
        script: '#!/bin/sh\nread line\necho "GOT $line $(stty size)"\n',
      },
    });
    const c = await env.client();
    await c.write('ctl', 'load asker');
    await c.write('ctl', 'load sh');
    const pid = Number((await c.rdwrText('proc/new.bg', JSON.stringify({ tool: 'asker', args: {} }))).trim());
    expect((await stat(c, pid)).tty).toBe('1');
    await c.write(`proc/${pid}/ctl`, 'resize 91 17');
    await expect(c.write(`proc/${pid}/ctl`, 'resize 0 x')).rejects.toThrow(/resize needs COLS ROWS/);
    await c.write(`proc/${pid}/in`, 'hi\r');
    expect((await c.readText(`proc/${pid}/wait`)).trim()).toBe('0');
    expect((await c.readText(`proc/${pid}/out`)).replace(/\r/g, '')).toContain('GOT hi 17 91');
    await expect(c.write(`proc/${pid}/in`, 'late\r')).rejects.toThrow(/exited/);
    const piped = await bg(c, 'sleep 30');
    expect((await stat(c, piped)).tty).toBe('0');
    await expect(c.write(`proc/${piped}/in`, 'x')).rejects.toThrow(/not a terminal/);
    await expect(c.write(`proc/${piped}/ctl`, 'resize 80 24')).rejects.toThrow(/not a terminal/);
    await c.write(`proc/${piped}/ctl`, 'kill');
  });

  it('reports a tool that cannot start', async () => {
    env = await startEnv({
      broken: { meta: { description: 'bad interpreter', scope: 'read' }, script: '#!/nonexistent/interp\n' },
    });
    const c = await env.client();
    await c.write('ctl', 'load broken');
    const r = await env.call(c, { tool: 'broken', args: {} });
    expect(r.status).toBe('refused');
    expect(r.error).toMatch(/cannot start .*broken: .*ENOENT/);
  });

  it('hands tools OLLIE_SESSION_ID, OLLIE_UNAME, OLLIE_ADDR and a private TMPDIR', async () => {
    env = await startEnv(undefined, { sessionId: 'sess-1', ollieAddr: 'unix!/run/ollie.sock' });
    const c = await env.client();
    await c.write('ctl', 'load sh');
    const r = await env.call(c, {
      tool: 'sh',
      args: { command: 'echo "$OLLIE_SESSION_ID $OLLIE_UNAME $OLLIE_ADDR"; echo "$TMPDIR"' },
    });
    const [ids, tmp] = r.output.trim().split('\n');
    expect(ids).toBe('sess-1 tester unix!/run/ollie.sock');
    expect(tmp).toMatch(/ollie-tools-/);
  });
});
