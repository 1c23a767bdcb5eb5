/**
 * How Ollie's own clients (ollie-9p, o, ollie run) reach olliesrv: on the Unix socket the daemon knows its owner
 * by the peer's credentials and nothing is sent; elsewhere (TCP) they present the owner token the daemon wrote
 * to the runtime directory. $OLLIE_TOKEN, set for workflows and for the tools that dial back, wins over both.
 */
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { parseAddress, type Client } from '../ninep/index.js';
import { dial } from '../ninep/node.js';
import { runtimeDir } from './paths.js';

/** The credential to present on `addr`, if any. */
export function credentialFor(addr: string): string | undefined {
  const env = process.env.OLLIE_TOKEN?.trim();
  if (env) return env;
  if (parseAddress(addr).kind === 'unix') return undefined;
  try {
    return readFileSync(join(runtimeDir(), 'owner.token'), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

export function dialOllie(addr: string): Promise<Client> {
  const token = credentialFor(addr);
  return dial(addr, { uname: userInfo().username, ...(token !== undefined && { authData: token }) });
}
