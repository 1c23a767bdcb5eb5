// A toolsrv of this checkout's build for the bench scripts, and calls through it.
import { join } from 'node:path';
import { fromDist, root } from './dist.mjs';

const { spawnToolsrv } = await fromDist('olliesrv/toolclient/spawn.js');
const { ToolClient } = await fromDist('olliesrv/toolclient/client.js');

/** Starts a quiet toolsrv with the shipped tools (data/tools), its runtime directory `dir`/run. */
export function startToolsrv(dir, { name = 'bench', cwd = dir, yolo } = {}) {
  return spawnToolsrv({
    runtimeDir: join(dir, 'run'),
    name,
    ...(yolo !== undefined && { yolo }),
    cwd,
    toolDirs: [join(root, 'data', 'tools')],
    log: () => undefined,
  });
}

/** Connects to a toolsrv (local or remote) and sends it the ctl lines (`load TOOL`, `cwd DIR`). */
export async function connectTools(server, ctl) {
  const host = await ToolClient.connect(server, 'bench');
  await host.ctlLines(ctl);
  return host;
}

/** Calls a tool and throws, naming `what`, unless it ran and exited 0. */
export async function callOk(host, req, what) {
  const r = await host.call(req);
  if (r.status !== 'exited' || r.exit !== 0) throw new Error(`${what}: ${JSON.stringify(r)}`);
  return r;
}
