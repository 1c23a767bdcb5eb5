/**
 * A sandboxed toolsrv as a session runs one, in a fresh directory of its own: the workspace `ws`, the config dir
 * `config`, the data dir `data` and, when asked, a tool dir `tools` (with `tools/hosts`) ahead of the shipped
 * tools. `prepare` writes what the test needs (mcp.json, a policy, tools) before toolsrv starts. For the attack
 * tests of MCP servers and resident hosts, which each start one per test.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '../../src/ninep/index.js';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { startEnv, type Env } from './helpers.js';

export interface WorkspaceDirs {
  base: string;
  cwd: string;
  configDir: string;
  /** The test's own tool dir (with `hosts/`); only made with `ownTools`. */
  tools: string;
}

export interface Workspace extends WorkspaceDirs {
  env: Env;
  /** agent1's client. */
  c: Client;
  /** Ends toolsrv (once, however often called); the directory goes with the test's cleanup. */
  close(): Promise<void>;
}

export async function startWorkspace(
  prefix: string,
  cleanup: Array<() => Promise<void> | void>,
  o: { ownTools?: boolean; prepare?: (d: WorkspaceDirs) => void } = {},
): Promise<Workspace> {
  const base = mkdtempSync(join(tmpdir(), prefix));
  const d: WorkspaceDirs = { base, cwd: join(base, 'ws'), configDir: join(base, 'config'), tools: join(base, 'tools') };
  mkdirSync(d.cwd);
  if (o.ownTools) mkdirSync(join(d.tools, 'hosts'), { recursive: true });
  o.prepare?.(d);
  const env = await startEnv(
    {},
    {
      yolo: false,
      toolDirs: o.ownTools ? [d.tools, SHIPPED_TOOLS] : [SHIPPED_TOOLS],
      cwd: d.cwd,
      configDir: d.configDir,
      dataDir: join(base, 'data'),
    },
  );
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => (closing ??= env.close());
  cleanup.push(async () => {
    await close();
    rmSync(base, { recursive: true, force: true });
  });
  return { ...d, env, c: await env.client('agent1'), close };
}
