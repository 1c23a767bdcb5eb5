#!/usr/bin/env node
/**
 * Figures of lifecycle hooks (src/olliesrv/hooks):
 *   - the cost of an event with no hooks configured (reading hooks.json and the project file, absent): what every
 *     tool call pays when no hooks are set;
 *   - the same with a hooks.json of 20 entries none of which matches;
 *   - one hook run under the sandbox helper through the process spawner (`true`, the event on stdin): what each
 *     matching hook adds to a call.
 *
 *   node bench/hooks.mjs [RUNS=50]     (after npm run build:node)
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadHooks, matching } from '../dist/olliesrv/hooks/config.js';
import { runHook } from '../dist/olliesrv/hooks/runner.js';
import { Spawner, SPAWNER } from '../dist/toolsrv/public.js';

const RUNS = Number(process.argv[2] ?? 50);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p90 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)];

const dir = mkdtempSync(join(tmpdir(), 'ollie-bench-hooks-'));
const configDir = join(dir, 'config');
const work = join(dir, 'work');
mkdirSync(configDir, { recursive: true });
mkdirSync(work, { recursive: true });
try {
  const time = (f, n) => {
    const xs = [];
    for (let i = 0; i < n; i++) {
      const t = process.hrtime.bigint();
      f();
      xs.push(Number(process.hrtime.bigint() - t) / 1e3);
    }
    return xs;
  };
  const none = time(() => matching(loadHooks(configDir, work).tables[0] ?? new Map(), 'PreToolUse', 'shell'), 2000);
  console.log(
    `event, no hooks configured:        median ${median(none).toFixed(1)} µs, p90 ${p90(none).toFixed(1)} µs`,
  );
  const entries = Array.from({ length: 20 }, (_, i) => ({
    matcher: `tool_${i}`,
    hooks: [{ type: 'command', command: `echo ${i}` }],
  }));
  writeFileSync(join(configDir, 'hooks.json'), JSON.stringify({ hooks: { PreToolUse: entries } }));
  const some = time(() => loadHooks(configDir, work).tables.flatMap((t) => matching(t, 'PreToolUse', 'shell')), 2000);
  console.log(
    `event, 20 hooks none matching:     median ${median(some).toFixed(1)} µs, p90 ${p90(some).toFixed(1)} µs`,
  );

  const o = {
    configDir,
    dataDir: join(dir, 'data'),
    runtimeDir: join(dir, 'run'),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/' },
  };
  const input = JSON.stringify({ hook_event_name: 'PreToolUse', tool_name: 'shell', tool_input: { command: 'ls' } });
  const ms = [];
  const spawner = Spawner.find(SPAWNER);
  for (let i = 0; i < RUNS; i++) {
    const r = await runHook(
      { command: 'true', timeoutSec: 10, cwd: work, policyRoot: work, input, vars: {} },
      o,
      spawner,
    );
    if (r.code !== 0) throw new Error(`the hook did not run: ${r.notRun ?? r.stderr}`);
    ms.push(r.ms);
  }
  spawner?.close();
  console.log(`one sandboxed hook (true), ${RUNS} runs: median ${median(ms)} ms, p90 ${p90(ms)} ms`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
