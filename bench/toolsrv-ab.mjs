#!/usr/bin/env node
// A/B of toolsrv's proc/new: the same sandboxed calls (`file_read` of a small file, `shell true`) through a
// toolsrv of this checkout and one of another built checkout (`--base DIR`, e.g. a `git worktree` of the commit
// before a change, after `npm run build:node` there), interleaved in one process so that the load of the
// machine falls on both alike. Prints the medians and the difference.
//
//   node bench/toolsrv-ab.mjs --base DIR [--n 800] [--warmup 30]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { root } from './lib/dist.mjs';

const { base, n: N, warmup: WARMUP } = benchArgs({ base: undefined, n: 800, warmup: 30 });
if (!base) {
  console.error('usage: node bench/toolsrv-ab.mjs --base DIR (a built checkout to compare with)');
  process.exit(2);
}
const builds = { base: resolve(base), this: root };
const dir = mkdtempSync(join(tmpdir(), 'bench-ab-'));
const file = join(dir, 'small.txt');
writeFileSync(file, Array.from({ length: 20 }, (_, i) => `line ${i + 1} of a small file`).join('\n') + '\n');
const hosts = {};
const servers = [];
try {
  for (const [name, root] of Object.entries(builds)) {
    const { spawnToolsrv } = await import(join(root, 'dist/olliesrv/toolclient/spawn.js'));
    const { ToolClient } = await import(join(root, 'dist/olliesrv/toolclient/client.js'));
    const p = await spawnToolsrv({
      runtimeDir: join(dir, `run-${name}`),
      name,
      cwd: dir,
      toolDirs: [join(root, 'data/tools')],
      log: () => undefined,
    });
    servers.push(p);
    const host = await ToolClient.connect(p, 'bench');
    await host.ctl('load file_read');
    await host.ctl('load shell');
    hosts[name] = host;
  }
  const cases = {
    file_read: { tool: 'file_read', args: { path: file } },
    'shell true': { tool: 'shell', args: { command: 'true' } },
  };
  const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  console.log(`toolsrv proc/new, sandboxed, ms median, n=${N} each, interleaved; base ${builds.base}`);
  for (const [name, req] of Object.entries(cases)) {
    const xs = { base: [], this: [] };
    for (let i = 0; i < N + WARMUP; i++) {
      for (const k of i % 2 ? ['base', 'this'] : ['this', 'base']) {
        const t = process.hrtime.bigint();
        const r = await hosts[k].call(req);
        if (r.status !== 'exited' || r.exit !== 0) throw new Error(`${k} ${name}: ${JSON.stringify(r)}`);
        if (i >= WARMUP) xs[k].push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }
    const [b, t] = [median(xs.base), median(xs.this)];
    console.log(
      `${name.padEnd(11)} base ${b.toFixed(3)}   this ${t.toFixed(3)}   ${t >= b ? '+' : ''}${((t / b - 1) * 100).toFixed(1)} %   (load ${loadavg()[0].toFixed(1)})`,
    );
  }
  for (const h of Object.values(hosts)) await h.close();
} finally {
  for (const p of servers) await p.stop();
  rmSync(dir, { recursive: true, force: true });
}
