import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { harness } from './agent-harness.js';
import { until } from '../wait.js';

/** Pids of the processes whose command line mentions `needle`. */
function processesWith(needle: string): number[] {
  const pids: number[] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(needle)) pids.push(Number(p));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

test.each([0, 50, 150])(
  'a daemon closed %i ms into a session opening its toolsrv leaves no toolsrv behind',
  async (delay) => {
    const h = await harness({ turns: [[{ text: 'hi' }], [{ text: 'hi' }]] });
    // A first session's turn fills the tool schema cache, so the next session's first request does not wait for
    // its toolsrv: its turn can end while the toolsrv connection is still opening.
    await h.turn((await h.agent()).path, 'warm up');
    const a = await h.agent();
    // The first prompt starts the session's toolsrv; close before that has finished.
    await h.c.write(`${a.path}/prompt`, 'hello');
    await new Promise((r) => setTimeout(r, delay));
    h.c.close();
    await h.daemon.close();
    const toolsrvs = join(h.dir, 'run', 'toolsrv-');
    // A toolsrv that was still starting is stopped once it is up; give it the time a start takes.
    await until(() => processesWith(toolsrvs).length === 0, 'the toolsrv processes to exit').catch(() => undefined);
    expect(processesWith(toolsrvs)).toEqual([]);
    await h.mock.close();
  },
);
