/**
 * Errors a 9P server answers with Rerror. The strings follow lib9p's, so that clients that match on them
 * (plan9port's `9p`, v9fs) see what they expect.
 */
export const Ename = {
  badFid: 'unknown fid',
  dupFid: 'duplicate fid',
  dupTag: 'duplicate tag',
  badOffset: 'bad offset',
  badCount: 'count exceeds msize',
  isDir: 'is a directory',
  notDir: 'not a directory',
  notFound: 'file not found',
  perm: 'permission denied',
  opened: 'fid already opened',
  notOpen: 'fid not opened for I/O',
  badMode: 'bad open mode',
  noAuth: 'no auth required',
  authFailed: 'authentication failed',
  noCreate: 'create prohibited',
  noRemove: 'remove prohibited',
  noWstat: 'wstat prohibited',
  noVersion: 'version not negotiated',
  walkDone: 'fid already walked to an open file',
  tooManyNames: 'too many names in walk',
  exists: 'file already exists',
  interrupted: 'interrupted',
  botch: 'unexpected message',
} as const;

/** An error meant for the client: its message becomes the Rerror string. */
export class NinepError extends Error {
  override name = 'NinepError';
}

/**
 * A frame that cannot be decoded. When `tag` is known the frame boundary is intact and the server answers
 * Rerror; `fatal` means the byte stream itself can no longer be trusted and the connection must close.
 */
export class ProtocolError extends Error {
  override name = 'ProtocolError';
  constructor(
    message: string,
    readonly tag: number | undefined,
    readonly fatal = false,
  ) {
    super(message);
  }
}

/** The error string to send for anything thrown by a handler. */
export function errorString(e: unknown): string {
  if (e instanceof Error) return e.message || e.name;
  return String(e);
}
