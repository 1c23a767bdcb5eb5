#!/usr/bin/env node
/**
 * What looking up the protected paths costs each command (src/toolsrv/sandbox/protected.ts, protectedPaths, which
 * sandbox/index.ts's protectArgs calls for every command and every MCP server re-check, in toolsrv's one thread):
 * a workspace without a repository, with one (`git init`), with a few linked worktrees, and filled the way an agent
 * can fill it (thousands of `.git/worktrees` entries, which are looked at up to MAX_ENTRIES and kept read-only as a
 * whole past it; a `.git/config` naming as many includes as is looked at). Prints the median and p95 per lookup.
 *
 *   node bench/protect-lookup.mjs [--n 300] [--warmup 30] [--json]   (after npm run build:node)
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { fromDist } from './lib/dist.mjs';
import { medianP95, timeTogether } from './timing.mjs';

const { protectedPaths, MAX_ENTRIES } = await fromDist('toolsrv/sandbox/protected.js');
const { MAX_NAMED } = await fromDist('toolsrv/sandbox/git-config-paths.js');
const values = benchArgs({ n: 300, warmup: 30, json: false });
const dir = realpathSync(mkdtempSync(join(tmpdir(), 'ollie-bench-protect-lookup-')));
const home = join(dir, 'home');
mkdirSync(home);
const O = { gitHooks: true, startupFiles: true };

function workspace(name, prepare) {
  const ws = join(dir, name);
  mkdirSync(ws);
  prepare?.(ws);
  return ws;
}
const gitInit = (ws) => execFileSync('git', ['init', '-q'], { cwd: ws });
const worktrees = (ws, n) => {
  for (let i = 0; i < n; i++) {
    mkdirSync(join(ws, '.git', 'worktrees', `w${i}`), { recursive: true });
    writeFileSync(join(ws, '.git', 'worktrees', `w${i}`, 'commondir'), '../..\n');
  }
};

try {
  const cases = {
    'no repository': workspace('plain'),
    'a repository': workspace('git', gitInit),
    '3 linked worktrees': workspace('wt3', (ws) => (gitInit(ws), worktrees(ws, 3))),
    [`${MAX_ENTRIES} worktrees (the most)`]: workspace('wtmax', (ws) => (gitInit(ws), worktrees(ws, MAX_ENTRIES))),
    '4000 worktrees (filled)': workspace('wt4000', (ws) => (gitInit(ws), worktrees(ws, 4000))),
    [`${MAX_NAMED - 1} includes`]: workspace('inc', (ws) => {
      gitInit(ws);
      writeFileSync(
        join(ws, '.git', 'config'),
        Array.from({ length: MAX_NAMED - 1 }, (_, i) => `[include]\n\tpath = ../inc${i}\n`).join(''),
      );
    }),
  };
  const r = await timeTogether(
    Object.fromEntries(
      Object.entries(cases).map(([k, ws]) => [k, () => protectedPaths([ws, join(dir, 'tmp')], home, O)]),
    ),
    { warmup: values.warmup, n: values.n },
  );
  if (values.json) console.log(JSON.stringify(r, null, 2));
  else {
    console.log(`protectedPaths per command, ${values.n} lookups each (load ${loadavg()[0].toFixed(2)})`);
    console.log(`${'workspace'.padEnd(28)} ${'ms, median / p95'.padStart(22)}`);
    for (const [k, s] of Object.entries(r)) console.log(`${k.padEnd(28)} ${medianP95(s, 3, 9).padStart(22)}`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
