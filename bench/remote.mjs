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
import { join } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { fromDist } from './lib/dist.mjs';
import { callOk, connectTools, startToolsrv } from './lib/toolsrv.mjs';
import { medianP95, timeTogether } from './timing.mjs';

const { spawnRemoteToolsrv, parseRemote } = await fromDist('olliesrv/toolclient/remote.js');

const values = benchArgs({ n: 200, warmup: 20, host: undefined, 'ssh-config': undefined, json: false });
const N = values.n;
const WARMUP = values.warmup;

const dir = mkdtempSync(join(tmpdir(), 'bench-remote-'));

const { startSshd } = await fromDist('devtools/sshd.js');

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

  const local = await startToolsrv(dir, { name: 'local' });
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
  ])
    hosts[name] = await connectTools(p, [`cwd ${work}`, 'load file_read', 'load shell']);
  for (const c of [
    { name: 'file_read', tool: 'file_read', args: { path: join(work, 'small.txt') } },
    { name: 'shell true', tool: 'shell', args: { command: 'true' } },
  ]) {
    const req = { tool: c.tool, args: c.args };
    for (const [n, h] of Object.entries(hosts)) await callOk(h, req, `${n} ${c.name}`);
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
  const f = (s) => medianP95(s, 2, 6);
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
