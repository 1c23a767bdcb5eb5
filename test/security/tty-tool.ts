/** The tty tool the tty attack tests call, and a sandboxed toolsrv (the shipped policy) that has it loaded. */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '../../src/ninep/index.js';
import { startEnv, type Env } from '../toolsrv/helpers.js';

/** A tty tool that runs `command` with /bin/sh on its terminal (its arguments come in OLLIE_ARGS). */
export const TERM_TOOL = {
  term: {
    meta: {
      description: 'run a command on a terminal',
      tty: true,
      args: {
        type: 'object',
        properties: { command: { type: 'string' } },
        required: ['command'],
        additionalProperties: false,
      },
    },
    script:
      '#!/usr/bin/python3\nimport json, os\nos.execv("/bin/sh", ["sh", "-c", json.loads(os.environ["OLLIE_ARGS"])["command"]])\n',
  },
};

/** A sandboxed in-process toolsrv with the tty tool loaded for agent1, which works in `dir`. */
export async function termEnv(): Promise<{ env: Env; dir: string; c: Client }> {
  const env = await startEnv(TERM_TOOL, { yolo: false });
  const dir = join(env.dir, 'proj');
  mkdirSync(dir);
  const c = await env.client('agent1');
  await c.write('ctl', `load term\ncwd ${dir}`);
  return { env, dir, c };
}
