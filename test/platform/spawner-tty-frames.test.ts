/**
 * The spawner's terminal frames ('Y', 'W') at the edges, on the real binary: sizes of 0 and 65535, a resize for an id
 * that is unknown, exited, or not on a terminal, a resize or keystrokes after the output was given up ('C'); and its
 * descriptors after tty calls that end every way they can (exit, a failed exec, given up while running, a terminal
 * closed early, keystrokes dropped past 16 MiB, killed at a limit). Nothing of it may crash the spawner, leak a
 * descriptor (a master kept is a terminal kept) or reach another call.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { SPAWNER, Spawner } from '../../src/platform/spawner.js';
import { endOf } from '../helpers/spawn-end.js';
import { until } from '../toolsrv/helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';

const ENV = ['PATH=/usr/bin:/bin'];

beforeAll(() => buildNative());

/** A frame as toolsrv writes it (native/ollie-spawner.c). */
function frame(type: string, id: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUInt32LE(5 + payload.length, 0);
  head[4] = type.charCodeAt(0);
  head.writeUInt32LE(id, 5);
  return Buffer.concat([head, payload]);
}

const u16s = (a: number, b: number): Buffer => {
  const x = Buffer.alloc(4);
  x.writeUInt16LE(a, 0);
  x.writeUInt16LE(b, 2);
  return x;
};

/** The payload of a spawn frame ('S', 'T'), after the size for a 'Y'. */
function spawnPayload(argv: string[], size?: [number, number]): Buffer {
  const n = (v: number): Buffer => {
    const x = Buffer.alloc(4);
    x.writeUInt32LE(v);
    return x;
  };
  const strings = (xs: string[]): Buffer[] => xs.map((x) => Buffer.from(`${x}\0`));
  return Buffer.concat([
    ...(size ? [u16s(...size)] : []),
    n(argv.length),
    ...strings(argv),
    n(ENV.length),
    ...strings(ENV),
    Buffer.from('/\0'),
    Buffer.alloc(40),
  ]);
}

interface Heard {
  type: string;
  id: number;
  payload: Buffer;
}

/** The spawner binary driven directly: what it answers, frame by frame. */
function raw() {
  const p = spawn(SPAWNER, [], { stdio: ['pipe', 'pipe', 'pipe'] });
  const heard: Heard[] = [];
  let buf = Buffer.alloc(0);
  let err = '';
  p.stdout.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 4 && buf.length - 4 >= buf.readUInt32LE(0)) {
      const len = buf.readUInt32LE(0);
      heard.push({ type: String.fromCharCode(buf[4]!), id: buf.readUInt32LE(5), payload: buf.subarray(9, 4 + len) });
      buf = buf.subarray(4 + len);
    }
  });
  p.stderr.setEncoding('utf8');
  p.stderr.on('data', (d: string) => (err += d));
  const exit = new Promise<number | null>((r) => p.on('close', (code) => r(code)));
  const out = (id: number): string =>
    heard
      .filter((h) => h.id === id && h.type === 'O')
      .map((h) => h.payload.toString())
      .join('')
      .replace(/\r/g, '');
  const has = (id: number, type: string): boolean => heard.some((h) => h.id === id && h.type === type);
  return {
    send: (...fs: Buffer[]) => fs.forEach((f) => p.stdin.write(f)),
    heard,
    out,
    has,
    ended: (id: number) => until(() => has(id, 'X') && has(id, 'E'), `call ${id} to end`),
    stderr: () => err,
    async close() {
      p.stdin.end();
      return exit;
    },
  };
}

let spawner: Spawner | undefined;
afterEach(() => {
  spawner?.close();
  spawner = undefined;
});

describe("'W' and 'Y' at the edges", () => {
  test('sizes of 0 and 65535 are set as given; a resize for no terminal of a running call is ignored', async () => {
    const s = raw();
    // 1: on a terminal of 0x0, resized to 65535x65535 once it says it runs. 2: on pipes ('T'), sent a resize.
    s.send(
      frame('Y', 1, spawnPayload(['/bin/sh', '-c', 'stty size; read go; stty size'], [0, 0])),
      frame('T', 2, spawnPayload(['/bin/sh', '-c', 'read line; echo "piped $line"'])),
    );
    await until(() => s.out(1).includes('0 0\n'), 'the first size');
    s.send(
      // Unknown ids, a call on pipes: nothing to resize, and nothing else may be.
      frame('W', 99, u16s(10, 10)),
      frame('W', 2, u16s(10, 10)),
      frame('W', 1, u16s(65535, 65535)),
      frame('I', 1, Buffer.from('\r')),
      frame('I', 2, Buffer.from('ok\n')),
    );
    await s.ended(1);
    await s.ended(2);
    expect(s.out(1)).toMatch(/^0 0\n\n65535 65535\n$/);
    expect(s.out(2)).toBe('piped ok\n');
    // A resize, keystrokes and a give-up for the exited call: ignored, the spawner serves on.
    s.send(frame('W', 1, u16s(80, 24)), frame('I', 1, Buffer.from('late\r')), frame('C', 1), frame('D', 1));
    s.send(frame('Y', 3, spawnPayload(['/bin/sh', '-c', 'stty size'], [65535, 1])));
    await s.ended(3);
    expect(s.out(3)).toBe('1 65535\n');
    expect(s.heard.filter((h) => h.id === 1 && h.type === 'O').length).toBeGreaterThan(0);
    expect(await s.close()).toBe(0);
    expect(s.stderr()).toBe('');
  });

  test('given up while it runs, a terminal takes no resize or keystrokes and its call still ends', async () => {
    const s = raw();
    s.send(frame('Y', 1, spawnPayload(['/bin/sh', '-c', 'read x; echo "read $x"; sleep 0.3'], [80, 24])));
    await until(() => s.has(1, 'P'), 'the call to run');
    s.send(frame('C', 1), frame('W', 1, u16s(100, 30)), frame('I', 1, Buffer.from('typed\r')));
    // Its terminal's master closed, the tool reads end of file (or is hung up) and ends; nothing more is relayed.
    await until(() => s.has(1, 'X'), 'its exit');
    expect(s.out(1)).toBe('');
    expect(await s.close()).toBe(0);
    expect(s.stderr()).toBe('');
  });

  test("a 'W' of any length but 4 is a protocol error: said, and the spawner ends with its calls", async () => {
    for (const len of [0, 3, 5, 65535]) {
      const s = raw();
      s.send(frame('Y', 1, spawnPayload(['/bin/sleep', '1013.7'], [80, 24])));
      await until(() => s.has(1, 'P'), 'the call to run');
      const pid = s.heard.find((h) => h.id === 1 && h.type === 'P')!.payload.readUInt32LE(0);
      s.send(frame('W', 1, Buffer.alloc(len)));
      expect(await s.close()).toBe(1);
      expect(s.stderr()).toBe(`ollie-spawner: size frame 1 has ${len} bytes (4 expected)\n`);
      await until(() => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      }, 'its call to be gone');
    }
  });
});

describe('descriptors', () => {
  test('tty calls that end every way leave no descriptor behind in the spawner', async () => {
    spawner = Spawner.find(SPAWNER)!;
    const s = spawner;
    const size = { cols: 80, rows: 24 };
    const req = (script: string) => ({
      file: '/bin/sh',
      args: ['-c', script],
      cwd: '/',
      env: { PATH: '/usr/bin:/bin' },
      stdin: '',
      limits: { processes: 20 },
    });
    const run = async (script: string, act?: (t: Awaited<ReturnType<Spawner['spawnTty']>>) => void) => {
      const events: string[] = [];
      const end = endOf(events);
      const dropped = { n: 0 };
      const t = await s.spawnTty(req(script), size, {
        output: () => undefined,
        errorOutput: () => undefined,
        ...end.handlers,
        inputDropped: () => dropped.n++,
      });
      act?.(t);
      return { t, ended: end.ended, dropped };
    };
    /** SIGKILL to a call's process group, once it leads one (its setsid may not have run yet). */
    const killGroup = async (pid: number) => {
      const group = () => {
        try {
          return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[2]);
        } catch {
          return pid; // gone already
        }
      };
      await until(() => group() === pid, `call ${pid} to lead its own process group`);
      try {
        process.kill(-pid, 'SIGKILL');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
      }
    };
    const first = await run('true');
    await first.ended;
    // The spawner is the guardian's child (spawner.pid is the guardian's).
    const own = (): number => {
      const g = s.pid!;
      const pid = readFileSync(`/proc/${g}/task/${g}/children`, 'utf8').trim().split(' ')[0];
      return readdirSync(`/proc/${pid}/fd`).length;
    };
    const before = own();
    for (let i = 0; i < 3; i++) {
      await (
        await run('echo hi')
      ).ended;
      await expect(
        s.spawnTty({ ...req(''), file: '/nonexistent' }, size, {
          output: () => undefined,
          errorOutput: () => undefined,
          ...endOf([]).handlers,
        }),
      ).rejects.toThrow(/ENOENT/);
      const given = await run('sleep 1013.8');
      given.t.abandonOutput();
      await killGroup(given.t.pid);
      await (
        await run('exec 0<&- 1>&- 2>&-; exec 3<>/dev/tty; echo late >&3', (t) => t.write('x\r'))
      ).ended;
      const deaf = await run('stty raw -echo; sleep 1013.8');
      for (let k = 0; k < 17; k++) deaf.t.write('x'.repeat(1 << 20));
      await until(() => deaf.dropped.n === 1, 'the keystrokes to be dropped', 10000);
      await killGroup(deaf.t.pid);
      await deaf.ended;
      await (
        await run('for i in $(seq 40); do sleep 1013.8 & done; wait')
      ).ended;
    }
    // The given-up calls are forgotten once reaped: their ends come to nobody, so wait for the count itself.
    await until(() => own() === before, `the spawner's descriptors to come back to ${before}`);
  });
});
