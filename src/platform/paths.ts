/**
 * Where Ollie keeps things, per the XDG base directory spec: config in $XDG_CONFIG_HOME/ollie, state in
 * $XDG_DATA_HOME/ollie, sockets in $XDG_RUNTIME_DIR/ollie. Without XDG_RUNTIME_DIR (containers, CI, su)
 * sockets go to a private per-user directory under the system temp dir.
 */
import { homedir, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const env = (k: string): string | undefined => {
  const v = process.env[k];
  return v && v.startsWith('/') ? v : undefined;
};

export function configDir(): string {
  return join(env('XDG_CONFIG_HOME') ?? join(homedir(), '.config'), 'ollie');
}

export function dataDir(): string {
  return join(env('XDG_DATA_HOME') ?? join(homedir(), '.local', 'share'), 'ollie');
}

/** Things worth keeping but safe to lose ($XDG_CACHE_HOME/ollie): remembered tool schemas. */
export function cacheDir(): string {
  return join(env('XDG_CACHE_HOME') ?? join(homedir(), '.cache'), 'ollie');
}

/**
 * Where long tool outputs are saved whole for the model to page through: `output/` in the data dir (owner-only,
 * denied to tools), one directory per session and agent, which only that agent's sandbox may read.
 */
export function spillRoot(dataDir: string): string {
  return join(dataDir, 'output');
}

/** An agent's own spill directory, or undefined when an id could name another place (`..`, a slash). */
export function spillDirFor(dataDir: string, sessionId: string, agentId: string): string | undefined {
  const ok = (id: string): boolean => /^[\w.-]+$/.test(id) && id !== '.' && id !== '..';
  return ok(sessionId) && ok(agentId) ? join(spillRoot(dataDir), sessionId, agentId) : undefined;
}

export function runtimeDir(): string {
  const xdg = env('XDG_RUNTIME_DIR');
  if (xdg) return join(xdg, 'ollie');
  const uid = typeof process.getuid === 'function' ? process.getuid() : userInfo().username;
  return join(tmpdir(), `ollie-${uid}`);
}

export function defaultSocketPath(): string {
  return join(runtimeDir(), 'ollie.sock');
}

/** The address clients dial by default: $OLLIE_ADDR, else the user's socket. */
export function defaultAddress(): string {
  return process.env.OLLIE_ADDR || `unix!${defaultSocketPath()}`;
}

/** The defaults shipped with Ollie (`data/` at the package root: agents, tools, prompts, skills). */
export function shippedDataDir(): string {
  // src/platform/ and dist/platform/ are both two levels below the package root.
  return fileURLToPath(new URL('../../data', import.meta.url));
}
