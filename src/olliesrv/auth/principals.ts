/**
 * Who is at the other end of a 9P connection to olliesrv, decided from facts a client cannot forge — never from
 * the uname it claims (see docs/security.md):
 *   owner    the user's own programs: a Unix-socket peer with our uid that is not a process Ollie started for
 *            an agent or a workflow; the embedding app's own channels (renderer, web UI, gateway); a TCP client
 *            presenting the owner token.
 *   session  a workflow the daemon started for a session's goal, presenting its session token.
 *   agent    a tool run for an agent (client_9p, subagent_spawn, skill tools), presenting its agent token.
 * Tokens are HMACs under a key minted at each start, so they need no storage and die with the daemon.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { NinepError, TokenConversation, type AttachRequest, type User } from '../../ninep/index.js';

export type Principal =
  | { readonly kind: 'owner' }
  | { readonly kind: 'session'; readonly session: string }
  | { readonly kind: 'agent'; readonly session: string; readonly agent: string };

export const OWNER: Principal = Object.freeze({ kind: 'owner' });

/** What the transport knew of a connection (ninep's origin). */
export type Origin =
  /** A channel the embedding process opened itself, after its own checks (MessagePort, web UI, gateway). */
  | { kind: 'local' }
  /** A Unix-socket peer; `confined`: the peer process descends from one Ollie started for agents or workflows. */
  | { kind: 'unix'; peer?: { pid: number; uid: number; gid: number }; confined?: boolean; error?: string }
  | { kind: 'tcp'; remote: string };

export interface PrincipalsOptions {
  /** The daemon's uid: Unix-socket peers with another uid (but root) are refused. */
  uid: number;
  /** The username every principal's fids carry (file modes are checked against it like the owner's). */
  uname: string;
  /** Processes whose descendants are never the owner: toolsrv processes, workflows. */
  confinedRoots: () => Iterable<number>;
  /** Whether the session / agent a token names still exists. */
  exists: (p: Principal) => boolean;
}

const TOKEN = /^ollie-(agent|session|owner)\.([0-9a-f-]{1,64})(?:\.([0-9a-f-]{1,64}))?\.([0-9a-f]{64})$/;

export class Principals {
  private readonly key = randomBytes(32);
  /** Presented by owner clients that cannot be recognised by their socket (TCP). */
  readonly ownerToken = `ollie-owner.${randomBytes(16).toString('hex')}.${randomBytes(32).toString('hex')}`;

  constructor(private readonly o: PrincipalsOptions) {}

  private mac(what: string): string {
    return createHmac('sha256', this.key).update(what).digest('hex');
  }

  agentToken(session: string, agent: string): string {
    return `ollie-agent.${session}.${agent}.${this.mac(`agent ${session} ${agent}`)}`;
  }

  sessionToken(session: string): string {
    return `ollie-session.${session}.${this.mac(`session ${session}`)}`;
  }

  /** The principal a token stands for, or undefined when it is not one of ours (forged, or from another run). */
  fromToken(token: string): Principal | undefined {
    // Bytes, not UTF-16 units: a token with non-ASCII characters may have the owner token's length in one and
    // not the other, and timingSafeEqual throws on buffers of different lengths.
    const bytes = Buffer.from(token);
    const owner = Buffer.from(this.ownerToken);
    if (bytes.length === owner.length && timingSafeEqual(bytes, owner)) return OWNER;
    const m = TOKEN.exec(token);
    if (!m) return undefined;
    const [, kind, a, b, mac] = m;
    const want =
      kind === 'agent' && b
        ? this.mac(`agent ${a} ${b}`)
        : kind === 'session' && !b
          ? this.mac(`session ${a}`)
          : undefined;
    if (!want || !timingSafeEqual(Buffer.from(want), Buffer.from(mac!))) return undefined;
    return kind === 'agent' ? { kind: 'agent', session: a!, agent: b! } : { kind: 'session', session: a! };
  }

  /** What a connection's peer on the Unix socket is; computed when it connects, while its pid is its own. */
  unixOrigin(peer: { pid: number; uid: number; gid: number } | undefined, error?: string): Origin {
    if (!peer) return { kind: 'unix', error: error ?? 'its credentials could not be read' };
    return {
      kind: 'unix',
      peer,
      confined: descendsFrom(peer.pid, new Set(this.o.confinedRoots())) || sandboxMarked(peer.pid),
    };
  }

  /** ninep's authorize hook: the User an attach acts as, or a refusal that says why and what to do. */
  authorize(req: AttachRequest): User {
    const token = req.auth instanceof TokenConversation ? req.auth.token() : '';
    const o = (req.origin ?? { kind: 'tcp', remote: 'unknown' }) as Origin;
    let p: Principal | undefined;
    if (token) {
      p = this.fromToken(token);
      // A client that runs its own authentication (plan9port's 9p tries p9any whenever offered) leaves garbage
      // or nothing on the afid; only a token that looks like ours and fails is an error.
      if (!p && token.startsWith('ollie-'))
        throw new NinepError(
          'authentication failed: the token is not valid (tokens last as long as the daemon that issued them)',
        );
      if (p && !this.o.exists(p))
        throw new NinepError(`authentication failed: the ${p.kind} this token was issued to no longer exists`);
    }
    p ??= this.originPrincipal(o);
    return { name: this.o.uname, groups: [], principal: p };
  }

  private originPrincipal(o: Origin): Principal {
    if (o.kind === 'local') return OWNER;
    if (o.kind === 'tcp') {
      throw new NinepError(
        `authentication required: 9P over TCP (from ${o.remote}) is served to the owner only, who presents the owner token (ollie-9p and o read it from the runtime directory's owner.token, or $OLLIE_TOKEN)`,
      );
    }
    if (!o.peer)
      throw new NinepError(
        `refused: the peer of this Unix-socket connection is unknown (${o.error}), so it cannot be the owner`,
      );
    if (o.peer.uid !== this.o.uid && o.peer.uid !== 0)
      throw new NinepError(`refused: uid ${o.peer.uid} is not the owner (uid ${this.o.uid})`);
    if (o.confined) {
      throw new NinepError(
        `refused: pid ${o.peer.pid} is a process Ollie started for an agent or a workflow (or a sandboxed one); such processes reach the namespace only as their agent or session, with the token in $OLLIE_TOKEN`,
      );
    }
    return OWNER;
  }
}

/** The marks a sandbox leaves in /proc/PID/status; undefined when the file cannot be read. */
function marks(pid: number | 'self'): { noNewPrivs?: boolean; filters?: number } | undefined {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'latin1');
  } catch {
    return undefined;
  }
  const nnp = /^NoNewPrivs:\s*(\d)/m.exec(status);
  const filters = /^Seccomp_filters:\s*(\d+)/m.exec(status);
  return { ...(nnp && { noNewPrivs: nnp[1] === '1' }), ...(filters && { filters: Number(filters[1]) }) };
}

const daemonMarks = marks('self') ?? {};

/**
 * Whether `pid` carries the marks of Ollie's sandbox, whoever its parent is now. The ancestry check alone is not
 * enough: a tool that detaches (a double fork, setsid) is reparented to init or the nearest subreaper and no
 * longer descends from toolsrv. ollie-sandbox always sets no_new_privs and installs a seccomp filter before it
 * restricts itself; neither can ever be undone, by the tool or its descendants. So a peer that has no_new_privs
 * while the daemon does not, or more seccomp filters than the daemon (Linux 5.9+ reports the count), is a
 * sandboxed tool or a child of one. A mark the daemon's own status lacks (it runs with no_new_privs itself, in a
 * hardened unit or a container; an older kernel) says nothing and is skipped. An unreadable status fails closed.
 */
export function sandboxMarked(pid: number): boolean {
  const m = marks(pid);
  if (!m) return true;
  if (daemonMarks.noNewPrivs === false && m.noNewPrivs !== false) return true;
  return daemonMarks.filters !== undefined && (m.filters === undefined || m.filters > daemonMarks.filters);
}

/** The parent pid from /proc/PID/stat (the field after the command name, which may itself hold spaces and ')'). */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(rest[1]);
  } catch {
    return undefined;
  }
}

/**
 * Whether `pid` is one of `roots` or descends from one. A process that cannot be followed up to init (it exited
 * since it connected, /proc is hidden) counts as descending: the check fails closed.
 */
export function descendsFrom(pid: number, roots: ReadonlySet<number>): boolean {
  // 0: the kernel could not name the peer in our pid namespace.
  if (pid <= 0) return true;
  let p = pid;
  for (let i = 0; i < 4096; i++) {
    if (roots.has(p)) return true;
    if (p <= 1) return false;
    const parent = parentOf(p);
    if (parent === undefined) return true;
    p = parent;
  }
  return true;
}
