/**
 * The credentials of a Unix-socket peer (SO_PEERCRED), through native/addon/peercred.c (Node has no getsockopt).
 * Loaded once; when the module is missing, every lookup says why, and olliesrv refuses such connections.
 */
import { createRequire } from 'node:module';
import type net from 'node:net';
import { fileURLToPath } from 'node:url';

export interface PeerCred {
  pid: number;
  uid: number;
  gid: number;
}

let addon: { peerCred(fd: number): PeerCred } | undefined;
let missing: string | undefined;

function load(): typeof addon {
  if (addon || missing) return addon;
  // src/platform/ and dist/platform/ (and the bundle's chunks, whose import.meta.url is rewritten to dist's) are
  // two levels below the package root.
  const path = fileURLToPath(new URL('../../native/build/peercred.node', import.meta.url));
  try {
    addon = createRequire(import.meta.url)(path) as typeof addon;
  } catch (e) {
    missing = `${path} could not be loaded (${(e as Error).message.split('\n')[0]}): run \`node scripts/build-native.mjs\``;
  }
  return addon;
}

/** The peer of a connected Unix socket, or the reason it cannot be known. */
export function peerCredentials(sock: net.Socket): PeerCred | { error: string } {
  const a = load();
  if (!a) return { error: missing! };
  const fd = (sock as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return { error: 'the socket has no descriptor' };
  try {
    return a.peerCred(fd);
  } catch (e) {
    return { error: (e as Error).message };
  }
}

/** Why peers cannot be identified here (the module does not load), or undefined when they can. */
export function peerCredentialsUnavailable(): string | undefined {
  return load() ? undefined : missing;
}
