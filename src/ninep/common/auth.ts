/**
 * Shared-secret authentication for 9P: the client writes the secret to its auth fid, then attaches with
 * that afid. Enough for a daemon and the helper it spawned (toolsrv), who share the secret out of band.
 */
import type { AuthConversation, AuthProvider } from './server.js';

const utf8 = new TextEncoder();

/** Compares in time independent of where the inputs first differ. */
function equalConstantTime(a: Uint8Array, b: Uint8Array): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < b.length; i++) diff |= (a[i % Math.max(a.length, 1)] ?? 0) ^ b[i]!;
  return diff === 0;
}

export function sharedSecretAuth(secret: string | Uint8Array): AuthProvider {
  const want = typeof secret === 'string' ? utf8.encode(secret) : secret;
  if (want.length === 0) throw new Error('shared secret must not be empty');
  return {
    start(uname, aname): AuthConversation {
      let got = new Uint8Array(0);
      return {
        read: () => new Uint8Array(0),
        write(data) {
          if (got.length + data.length > want.length * 2 + 1024) throw new Error('auth: secret too long');
          const next = new Uint8Array(got.length + data.length);
          next.set(got);
          next.set(data, got.length);
          got = next;
          return data.length;
        },
        authenticated: (u, a) => u === uname && a === aname && equalConstantTime(got, want),
      };
    },
  };
}

/** The client half: what to write on the auth fid. */
export function sharedSecretResponder(
  secret: string,
): (afidWrite: (data: Uint8Array) => Promise<void>) => Promise<void> {
  return (write) => write(utf8.encode(secret));
}

/**
 * A conversation that only collects what the client writes on its auth fid (a bearer token), for the server's
 * authorize hook to judge with whatever it knows of the connection. It proves nothing by itself.
 */
export class TokenConversation implements AuthConversation {
  private got = new Uint8Array(0);
  constructor(private readonly max: number) {}
  read(): Uint8Array {
    return new Uint8Array(0);
  }
  write(data: Uint8Array): number {
    if (this.got.length + data.length > this.max) throw new Error('auth: token too long');
    const next = new Uint8Array(this.got.length + data.length);
    next.set(this.got);
    next.set(data, this.got.length);
    this.got = next;
    return data.length;
  }
  authenticated(): boolean {
    return false;
  }
  /** What the client wrote, as text (surrounding whitespace dropped). */
  token(): string {
    return new TextDecoder().decode(this.got).trim();
  }
}

/** Offers every client an auth fid that collects a token (see TokenConversation); pair with an authorize hook. */
export function tokenAuth(maxLength = 1024): AuthProvider {
  return { start: () => new TokenConversation(maxLength) };
}
