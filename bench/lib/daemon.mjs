// olliesrv for the bench scripts: in this process, its model the mock LLM (src/devtools/mock-llm).
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { fromDist } from './dist.mjs';

const { startDaemon } = await fromDist('olliesrv/daemon.js');
const { dial } = await fromDist('ninep/node.js');

/**
 * Starts olliesrv with its socket and data under `dir`, quiet and without skill matching (the rest of `options`
 * go to startDaemon: configDir, toolsrv, ...), and dials it as this user.
 */
export async function startBenchDaemon(dir, options) {
  const socket = join(dir, 'run', 'ollie.sock');
  const daemon = await startDaemon({
    socket,
    dataDir: join(dir, 'data'),
    skills: false,
    log: () => undefined,
    ...options,
  });
  const client = await dial(`unix!${socket}`, { uname: userInfo().username });
  return { daemon, client };
}

/** A new session in `cwd` with one agent of `profile`: its 9P path and the daemon's Agent object. */
export async function newAgent(client, daemon, cwd, profile = 'default') {
  const session = (await client.rdwrText('session/new', `cwd=${cwd}`)).trim();
  const name = (await client.rdwrText(`session/${session}/agent/new`, `agent=${profile}`)).trim();
  const path = `session/${session}/agent/${name}`;
  const id = (await client.readText(`${path}/id`)).trim();
  return { session, path, agent: daemon.agents.all().find((a) => a.id === id) };
}
