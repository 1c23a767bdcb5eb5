#!/usr/bin/env node
// A tool round over SSH against the same round locally: toolsrv's proc/new for `file_read` of a small file and
// `shell true` (sandboxed), through a toolsrv on the remote host (9P over an SSH channel to its Unix socket) and
// through a local one, round-robin in the same run; and the first-use setup (the package copied there) against a
// start with the package already there. Needs `npm run build:node`.
//
//   node bench/remote.mjs [--n 200] [--warmup 20] [--host ALIAS --ssh-config FILE] [--json]
//
// Without --host it starts a throwaway OpenSSH server on a loopback port (as root: /usr/sbin/sshd, keys made with
// ssh-keygen, its own client config; ~/.ssh is neither read nor written), whose sessions get their own HOME, so
// the first use really copies the package. Goal (issue 19): at most 1 ms added per call on loopback.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { timeTogether } from './timing.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { spawnToolsrv } = await import(join(root, 'dist/olliesrv/toolclient/spawn.js'));
const { spawnRemoteToolsrv, parseRemote } = await import(join(root, 'dist/olliesrv/toolclient/remote.js'));
const { ToolClient } = await import(join(root, 'dist/olliesrv/toolclient/client.js'));

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '200' },
    warmup: { type: 'string', default: '20' },
    host: { type: 'string' },
    'ssh-config': { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const N = Number(values.n);
const WARMUP = Number(values.warmup);

const dir = mkdtempSync(join(tmpdir(), 'bench-remote-'));

const { startSshd } = await import(join(root, 'dist/devtools/sshd.js'));

const sshd = values.host ? undefined : await startSshd({ host: 'bench-remote' });
const host = values.host ?? sshd.host;
const configFile = values['ssh-config'] ?? sshd?.sshConfig;
const ssh = { ...(configFile && { configFile }) };
const results = {};
const servers = [];
try {
  const remote = parseRemote(host);
  let t = performance.now();
  const first = await spawnRemoteToolsrv({ remote, ssh, runtimeDir: join(dir, 'rt'), log: () => undefined });
  const firstMs = performance.now() - t;
  servers.push(first);
  t = performance.now();
  const again = await spawnRemoteToolsrv({ remote, ssh, runtimeDir: join(dir, 'rt'), log: () => undefined });
  const againMs = performance.now() - t;
  await again.stop();
  results.setup = { firstUseMs: firstMs, copyMs: first.setupMs, startWithPackageMs: againMs };

  const local = await spawnToolsrv({
    runtimeDir: join(dir, 'run'),
    name: 'local',
    cwd: dir,
    toolDirs: [join(root, 'data', 'tools')],
    log: () => undefined,
  });
  servers.push(local);
  // The remote side's workspace: on loopback it is this machine's directory too.
  const work = mkdtempSync(join(tmpdir(), 'bench-remote-work-'));
  writeFileSync(
    join(work, 'small.txt'),
    Array.from({ length: 20 }, (_, i) => `line ${i + 1} of a small file`).join('\n') + '\n',
  );
  const hosts = {};
  for (const [name, p] of [
    ['ssh', first],
    ['local', local],
  ]) {
    const h = await ToolClient.connect(p, 'bench');
    await h.ctlLines([`cwd ${work}`, 'load file_read', 'load shell']);
    hosts[name] = h;
  }
  for (const c of [
    { name: 'file_read', tool: 'file_read', args: { path: join(work, 'small.txt') } },
    { name: 'shell true', tool: 'shell', args: { command: 'true' } },
  ]) {
    const req = { tool: c.tool, args: c.args };
    for (const [n, h] of Object.entries(hosts)) {
      const r = await h.call(req);
      if (r.status !== 'exited' || r.exit !== 0) throw new Error(`${n} ${c.name}: ${JSON.stringify(r)}`);
    }
    results[c.name] = await timeTogether(
      { ssh: () => hosts.ssh.call(req), local: () => hosts.local.call(req) },
      { warmup: WARMUP, n: N },
    );
  }
  for (const h of Object.values(hosts)) await h.close();
  rmSync(work, { recursive: true, force: true });
} finally {
  for (const p of servers) await p.stop();
  await sshd?.stop();
  rmSync(dir, { recursive: true, force: true });
}

if (values.json) {
  console.log(JSON.stringify(results, null, 2));
} else {
  const f = (s) => `${s.median.toFixed(2).padStart(6)} / ${s.p95.toFixed(2).padStart(6)}`;
  console.log(
    `toolsrv proc/new over SSH (${values.host ? host : 'loopback sshd'}) vs local (ms, median / p95, n=${N} each, round-robin, after ${WARMUP} warm-up rounds), Node ${process.version}, load ${loadavg()[0].toFixed(2)}`,
  );
  console.log(
    `${''.padEnd(12)} ${'over ssh'.padStart(15)}   ${'local'.padStart(15)}   ${'added (median)'.padStart(15)}`,
  );
  for (const name of ['file_read', 'shell true']) {
    const r = results[name];
    const added = r.ssh.median - r.local.median;
    console.log(
      `${name.padEnd(12)} ${f(r.ssh)}   ${f(r.local)}   ${added.toFixed(2).padStart(12)} ms ${added <= 1 ? '(goal ≤ 1 ms: met)' : '(goal ≤ 1 ms: MISSED)'}`,
    );
  }
  const s = results.setup;
  console.log(
    `\nfirst use on the host: ${s.firstUseMs.toFixed(0)} ms (of which copying the package: ${s.copyMs.toFixed(0)} ms); a start with the package there: ${s.startWithPackageMs.toFixed(0)} ms`,
  );
}
