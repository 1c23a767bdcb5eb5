/**
 * The namespace's remote-host requests (spec.ts): `session/new … remote=HOST`, a session's `ctl remote`, and the
 * connected column of session/idx. The owner alone reaches both files (their nodes give no one else a rule).
 */
import { NinepError } from '../../ninep/index.js';
import type { Session } from '../session/registry.js';
import type { SessionTools } from '../toolclient/host.js';
import { parseRemote } from '../toolclient/remote.js';
import type { Olliesrv } from './spec.js';

/** Creates a session; with `remote=`, its tools run on that host and `cwd=` (required) is a path there. */
export function newSession(o: Olliesrv, kv: { name?: string; cwd?: string; remote?: string }): Session {
  const { remote, ...rest } = kv;
  if (remote === undefined || remote.trim() === '' || remote.trim() === '-') return o.sessions.create(rest);
  if (!o.remotes) throw new NinepError('remote sessions are not available here (no tool server)');
  const label = parseRemote(remote).label;
  if (rest.cwd === undefined)
    throw new NinepError(`remote=${label}: give cwd= too, the absolute path of the working directory on ${label}`);
  const s = o.sessions.create({ ...rest, remote: true });
  o.remotes.set(s.id, label);
  return s;
}

/** `remote` shows the session's host; `remote HOST` moves its tools there, `remote -` back to this machine. */
export function remoteCtl(o: Olliesrv, name: string, args: string): string {
  const s = o.sessions.get(name);
  if (!o.remotes) throw new NinepError('remote sessions are not available here (no tool server)');
  if (!args) return `${o.remotes.get(s.id) ?? '-'}\n`;
  return `remote ${o.remotes.set(s.id, args) ?? '-'}\n`;
}

/** Whether a session's tool server serves it and is reachable now. */
export function toolsConnected(st: SessionTools | undefined): boolean {
  return st !== undefined && st.connected !== false;
}
