/**
 * Which daemon the owner's GUI talks to: this machine's (served in-process) or another machine's, reached as
 * `ssh![user@]host[:port][!/path/to.sock]` (src/platform/dial.ts). The choice comes from the GUI over an owner-only
 * path (the front door's token-checked WebSocket, or the Electron window's IPC) and is carried out here, on the
 * owner's side: the GUI's 9P byte channel is bridged to the raw 9P stream ssh forwards to the remote daemon's Unix
 * socket, so the daemon there judges the peer by its own rules (the remote user's sshd session). Nothing of this
 * machine's (no token) is sent there.
 */
import type { ByteChannel } from '../ninep/index.js';
import { parseSshAddress, sshChannel, type SshAddress, type SshChannel } from './dial.js';

/**
 * The daemon a GUI asked for: undefined for this machine (an empty or absent choice); throws, naming what is
 * wrong, for anything but an ssh address (which dial.ts's parser checks, so no ssh option can be smuggled in).
 */
export function parseDaemonChoice(to: string | null | undefined): SshAddress | undefined {
  if (!to) return undefined;
  if (!to.startsWith('ssh!'))
    throw new Error(
      `bad daemon ${JSON.stringify(to.slice(0, 200))}: "Connect to" takes ssh![user@]host[:port][!/path/to.sock]`,
    );
  return parseSshAddress(to);
}

/**
 * Bridges `gui` to the daemon at `to`, byte for byte. What the GUI sends while ssh is still connecting is kept and
 * sent once it is. `fail` gets ssh's words when the daemon cannot be reached or the connection drops; the caller
 * closes the GUI's channel with them. Either side closing closes the other.
 */
export function bridgeToDaemon(
  gui: ByteChannel,
  to: SshAddress,
  fail: (why: string) => void,
  dial: (a: SshAddress) => Promise<SshChannel> = sshChannel,
): void {
  const early: Uint8Array[] = [];
  let remote: SshChannel | undefined;
  let ended = false;
  gui.start(
    (d) => (remote ? remote.send(d) : early.push(d)),
    () => {
      ended = true;
      remote?.close();
    },
  );
  dial(to).then(
    (r) => {
      if (ended) return r.close();
      remote = r;
      r.start(
        (d) => gui.send(d),
        (e) => {
          if (ended) return;
          ended = true;
          fail(e?.message ?? 'the connection to the daemon closed');
        },
      );
      for (const d of early.splice(0)) r.send(d);
    },
    (e: Error) => {
      if (ended) return;
      ended = true;
      fail(e.message);
    },
  );
}

/** A WebSocket close reason holds at most 123 bytes (UTF-8): `why`, cut to fit. */
export function closeReason(why: string): string {
  let s = why.replace(/\s+/g, ' ').trim();
  if (Buffer.byteLength(s) <= 123) return s;
  while (Buffer.byteLength(s) > 120) s = s.slice(0, -1);
  return `${s}…`;
}
