/**
 * Keystrokes for a tty tool that never reads them (proc/{pid}/in, the owner's): the spawner keeps at most 16 MiB
 * waiting, then stops typing into that terminal for good ('Q'). From then on a write to proc/{pid}/in is refused,
 * saying why, rather than answered as if the keys had reached the terminal. Real toolsrv, real spawner, a real
 * pseudo-terminal.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startEnv, until, type Env } from './helpers.js';
import { buildNative } from './sandbox-helpers.js';

let env: Env | undefined;
beforeAll(() => buildNative());
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe('a tty tool that never reads its keystrokes', () => {
  it('once more than 16 MiB waited, proc/{pid}/in refuses further keystrokes, saying why', async () => {
    env = await startEnv({
      deaf: {
        meta: { description: 'reads nothing', tty: true, args: { type: 'object', properties: {} } },
        // Raw and without echo: nothing it is sent comes back as output, and the terminal's queue fills.
        script: '#!/bin/sh\nstty raw -echo\n: > ready\nexec sleep 60\n',
      },
    });
    const dir = join(env.dir, 'proj');
    mkdirSync(dir);
    const c = await env.client();
    await c.write('ctl', `load deaf\ncwd ${dir}`);
    const pid = Number((await c.rdwrText('proc/new.bg', JSON.stringify({ tool: 'deaf', args: {} }))).trim());
    await until(() => existsSync(join(dir, 'ready')), 'the tool to set its terminal raw');
    const mib = new Uint8Array(1 << 20).fill(0x61);
    for (let i = 0; i < 17; i++) await c.write(`proc/${pid}/in`, mib);
    // The spawner's 'Q' comes back asynchronously: a keystroke is refused once it has.
    await until(
      async () =>
        c.write(`proc/${pid}/in`, 'x').then(
          () => false,
          (e: Error) => /no more keystrokes/.test(e.message),
        ),
      'keystrokes to be refused',
      10000,
    );
    await expect(c.write(`proc/${pid}/in`, 'y')).rejects.toThrow(
      /the terminal takes no more keystrokes: more than 16 MiB of them waited for the process to read them/,
    );
    // The tool itself runs on: only the typing stopped.
    expect((await c.readText(`proc/${pid}/stat`)).includes('state=running')).toBe(true);
    await c.write(`proc/${pid}/ctl`, 'kill');
  });
});
