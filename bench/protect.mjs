#!/usr/bin/env node
// What keeping a repository's .git/hooks and .git/config read-only, and the machine's terminals out of reach,
// costs a tool call: the sandbox helper starting `true` in a git workspace with the protection (its own mount
// namespace, plus a user namespace when not root), with only the terminals kept private (a devpts of its own: the
// namespace and one mount), and without either (`isolate: {git_hooks: false, startup_files: false, terminals:
// false}`), and a bare spawn, round-robin in one run; as this user and, when run as root, as `nobody` too (the
// user-namespace path). Needs `npm run build:node`.
//
//   node bench/protect.mjs [--n 200] [--warmup 20] [--json]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './lib/args.mjs';
import { fromDist } from './lib/dist.mjs';
import { medianP95, timeTogether } from './timing.mjs';

const { loadPolicy, sandboxCommand } = await fromDist('toolsrv/sandbox/index.js');
const values = benchArgs({ n: 200, warmup: 20, json: false });

const dir = mkdtempSync(join(tmpdir(), 'bench-protect-'));
try {
  const ws = join(dir, 'ws');
  mkdirSync(ws);
  execFileSync('git', ['init', '-q'], { cwd: ws });
  const ctx = (configDir) => ({
    configDir,
    dataDir: join(dir, 'data'),
    cwd: ws,
    home: join(dir, 'home'),
    runtimeDir: join(dir, 'run'),
    tmpDir: join(dir, 'tmp'),
  });
  const off = join(dir, 'config-off');
  mkdirSync(off);
  const shipped = readFileSync(fileURLToPath(new URL('../data/sandbox.yaml', import.meta.url)), 'utf8');
  const noGit = shipped
    .replace('git_hooks: true', 'git_hooks: false')
    .replace('startup_files: true', 'startup_files: false');
  writeFileSync(join(off, 'sandbox.yaml'), noGit.replace('terminals: true', 'terminals: false'));
  const terminals = join(dir, 'config-terminals');
  mkdirSync(terminals);
  writeFileSync(join(terminals, 'sandbox.yaml'), noGit);
  const withIt = sandboxCommand(loadPolicy(ctx(join(dir, 'config'))), ['/bin/true']);
  const without = sandboxCommand(loadPolicy(ctx(off)), ['/bin/true']);
  const ptsOnly = sandboxCommand(loadPolicy(ctx(terminals)), ['/bin/true']);
  if (
    !withIt.args.includes('--protect') ||
    without.args.includes('--protect') ||
    without.args.includes('--private-pts')
  )
    throw new Error('the policies do not differ in the protection: nothing to compare');
  if (!ptsOnly.args.includes('--private-pts') || ptsOnly.args.includes('--protect'))
    throw new Error('the terminals-only policy is not what it says');
  const root = process.getuid?.() === 0;
  if (root) execFileSync('chown', ['-R', 'nobody:nogroup', dir]);
  const run = (cmd, as) => () => {
    const [file, args] = as
      ? ['setpriv', [`--reuid=${as}`, '--regid=nogroup', '--clear-groups', cmd.file, ...cmd.args]]
      : [cmd.file, cmd.args];
    const r = spawnSync(file, args, { env: cmd.env({ PATH: '/usr/bin:/bin' }), stdio: 'ignore' });
    if (r.status !== 0) throw new Error(`${file} exited ${r.status}`);
  };
  const runners = {
    'bare spawn': run({ file: '/bin/true', args: [], env: () => ({}) }),
    'sandboxed, not protected': run(without),
    'sandboxed, terminals only': run(ptsOnly),
    'sandboxed, protected': run(withIt),
    ...(root && {
      'nobody: not protected': run(without, 'nobody'),
      'nobody: terminals only': run(ptsOnly, 'nobody'),
      'nobody: protected (userns)': run(withIt, 'nobody'),
    }),
  };
  const r = await timeTogether(runners, { warmup: values.warmup, n: values.n });
  if (values.json) console.log(JSON.stringify(r));
  else {
    console.log(`load ${loadavg()[0].toFixed(1)}; n=${values.n}; median / p95 ms`);
    for (const [name, s] of Object.entries(r)) console.log(`${name.padEnd(28)} ${medianP95(s, 2, 6)}`);
    const added = (a, b) => (r[a].median - r[b].median).toFixed(2);
    console.log(
      `protection adds ${added('sandboxed, protected', 'sandboxed, not protected')} ms (median); the terminals alone ${added('sandboxed, terminals only', 'sandboxed, not protected')} ms`,
    );
    if (root)
      console.log(
        `as nobody it adds ${added('nobody: protected (userns)', 'nobody: not protected')} ms (median); the terminals alone ${added('nobody: terminals only', 'nobody: not protected')} ms`,
      );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
