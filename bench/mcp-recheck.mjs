#!/usr/bin/env node
/**
 * What re-checking running stdio MCP servers against the policy in force costs (src/toolsrv/mcp/connection.ts,
 * recheck): toolsrv does it after every tool call and every RECHECK_MS, and a check is one `launch()` per running
 * server (the sandboxed command computed again: the cached policy's stamp, the workspace's protected paths, the
 * helper's arguments) compared with the one it was started with. Real servers (the SDK-written fixture, stdio,
 * sandboxed through the spawner), real Confinement, in a workspace without a repository, with one (`git init`; the servers may write the workspace, so
 * its hooks and config are looked up for protection), with a trusted project file, and right after a policy edit
 * (the policy read and resolved again). Prints the time of one check per server, and what the periodic check
 * costs a toolsrv with S servers (share of one core).
 *
 *   node bench/mcp-recheck.mjs [--servers 4] [--n 300] [--warmup 30] [--json]   (after npm run build:node)
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { letSandboxReadModules } from './lib/policy.mjs';
import { fromDist, root } from './lib/dist.mjs';
import { medianP95, timeTogether } from './timing.mjs';

const { Confinement } = await fromDist('toolsrv/exec/confine.js');
const { McpManager, RECHECK_MS } = await fromDist('toolsrv/mcp/manager.js');
const { Launcher } = await fromDist('platform/launcher.js');
const { sha256 } = await fromDist('toolsrv/sandbox/trust.js');
const values = benchArgs({ servers: 4, n: 300, warmup: 30, json: false });

const ROOT = realpathSync(root);
const FIXTURE = join(ROOT, 'e2e', 'fixtures', 'mcp-server.mjs');
const dir = realpathSync(mkdtempSync(join(tmpdir(), 'ollie-bench-mcp-recheck-')));
const launcher = Launcher.create();
if (!launcher.native) throw new Error('the spawner is not built (npm run build:node): servers cannot start sandboxed');
const managers = [];

/** A workspace with `values.servers` running servers, its own config dir and Confinement. */
async function setUp(name, prepare) {
  const base = join(dir, name);
  const config = join(base, 'config');
  const ws = join(base, 'ws');
  mkdirSync(config, { recursive: true });
  mkdirSync(ws);
  const mcpServers = {};
  for (let i = 0; i < values.servers; i++)
    mcpServers[`s${i}`] = { command: process.execPath, args: [FIXTURE], ollie: { workspace: 'rw' } };
  writeFileSync(join(config, 'mcp.json'), JSON.stringify({ mcpServers }));
  letSandboxReadModules(ROOT, config);
  prepare?.(ws, config);
  const confinement = await Confinement.create({
    yolo: false,
    dirs: {
      configDir: config,
      dataDir: join(base, 'data'),
      home: join(base, 'home'),
      runtimeDir: join(base, 'run'),
      tmpDir: join(base, 'tmp'),
    },
    toolDirs: [],
    log: () => undefined,
  });
  const m = new McpManager({
    configDir: config,
    confinement,
    launcher,
    baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    recheckMs: 3_600_000, // the periodic check is what is timed here, by hand
    changed: () => undefined,
    log: () => undefined,
  });
  managers.push(m);
  m.start({ session: 'bench', cwd: ws });
  await m.settled(30_000);
  const states = m.status().map((s) => `${s.name} ${s.state} ${s.error}`);
  if (m.status().some((s) => s.state !== 'ready'))
    throw new Error(`servers not ready in ${name}:\n${states.join('\n')}`);
  return { m, confinement, ws };
}

try {
  const plain = await setUp('plain');
  const git = await setUp('git', (ws) => execFileSync('git', ['init', '-q'], { cwd: ws }));
  const project = await setUp('project', (ws, config) => {
    const file = join(ws, '.ollie-sandbox.yaml');
    writeFileSync(file, 'network:\n  enabled: false\n');
    writeFileSync(join(config, 'trust'), `${sha256(readFileSync(file))}\t${file}\n`, { mode: 0o600 });
  });
  const edited = await setUp('edited');
  const pids = () => managers.flatMap((m) => m.status().map((s) => s.pid));
  const before = pids().join(',');
  const r = await timeTogether(
    {
      'no repository': () => plain.m.recheck(),
      'a repository (.git)': () => git.m.recheck(),
      'a trusted project file': () => project.m.recheck(),
      // What the first check after an edit of sandbox.yaml, the trust list or the project file pays.
      'after a policy edit': () => {
        edited.confinement.forget();
        edited.m.recheck();
      },
    },
    { warmup: values.warmup, n: values.n },
  );
  // Nothing changed: every check must have found every server under the policy in force, and left it running.
  if (pids().join(',') !== before) throw new Error('a check restarted a server although nothing changed');
  const perServer = Object.fromEntries(
    Object.entries(r).map(([k, s]) => [
      k,
      { median: (s.median * 1000) / values.servers, p95: (s.p95 * 1000) / values.servers, n: s.n },
    ]),
  );
  if (values.json) {
    console.log(JSON.stringify({ servers: values.servers, recheckMs: RECHECK_MS, perServerUs: perServer }, null, 2));
  } else {
    console.log(
      `MCP policy re-check: ${values.servers} running stdio servers per workspace, ${values.n} checks each (load ${loadavg()[0].toFixed(2)})`,
    );
    console.log(
      `${'workspace'.padEnd(24)} ${'µs per server, median / p95'.padStart(30)} ${'periodic, % of a core'.padStart(24)}`,
    );
    for (const [k, s] of Object.entries(perServer)) {
      // Every RECHECK_MS, each running server is checked once.
      const share = ((s.median / 1000) * values.servers * 100) / RECHECK_MS;
      console.log(
        `${k.padEnd(24)} ${medianP95(s, 1, 8).padStart(30)} ${`${share.toFixed(4)} % (${values.servers} servers)`.padStart(24)}`,
      );
    }
    console.log(
      `A tool call's end pays one check of every running server before its result returns (the median times ${values.servers} above).`,
    );
  }
} finally {
  const running = managers.flatMap((m) => m.status().map((s) => s.pid)).filter((p) => p > 0);
  for (const m of managers) m.close();
  // The servers leave after their stdin closes: wait for them (at most 5 s) before their files go.
  for (const end = Date.now() + 5000; running.some((p) => existsSync(`/proc/${p}`)) && Date.now() < end;)
    await new Promise((r) => setTimeout(r, 20));
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}
