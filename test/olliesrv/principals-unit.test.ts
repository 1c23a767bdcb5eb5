/**
 * Principals.authorize on each kind of origin, without a daemon: what the Unix-socket, TCP and in-process channels
 * get, and how each refusal reads. (The same paths attacked end to end: test/security/principals.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { TokenConversation } from '../../src/ninep/index.js';
import { Principals, type Principal } from '../../src/olliesrv/auth/principals.js';

const uid = process.getuid?.() ?? 1000;
const principals = (exists: (p: Principal) => boolean = () => true) =>
  new Principals({ uid, uname: 'me', confinedRoots: () => [], exists });
const withToken = (t: string): TokenConversation => {
  const c = new TokenConversation(1024);
  c.write(new TextEncoder().encode(t));
  return c;
};

describe('Principals.authorize', () => {
  it('refuses a Unix-socket peer it cannot identify (no peer-credentials module): fails closed, saying why', () => {
    const p = principals();
    expect(() =>
      p.authorize({ uname: 'me', aname: '', origin: p.unixOrigin(undefined, 'peercred.node could not be loaded') }),
    ).toThrow(
      /the peer of this Unix-socket connection is unknown \(peercred.node could not be loaded\), so it cannot be the owner/,
    );
  });

  it('serves our own process as the owner, whatever uname it claims, and refuses another uid', () => {
    const p = principals();
    expect(
      p.authorize({ uname: 'root', aname: '', origin: p.unixOrigin({ pid: process.pid, uid, gid: 0 }) }).principal,
    ).toEqual({ kind: 'owner' });
    const other = uid === 0 ? 65534 : uid + 1;
    expect(() =>
      p.authorize({ uname: 'me', aname: '', origin: p.unixOrigin({ pid: process.pid, uid: other, gid: 0 }) }),
    ).toThrow(new RegExp(`uid ${other} is not the owner`));
  });

  it('refuses TCP without the owner token and serves it with one; the in-process channels are the owner', () => {
    const p = principals();
    const tcp = { kind: 'tcp', remote: '127.0.0.1:1' } as const;
    expect(() => p.authorize({ uname: 'me', aname: '', origin: tcp })).toThrow(/authentication required/);
    expect(p.authorize({ uname: 'me', aname: '', origin: tcp, auth: withToken(p.ownerToken) }).principal).toEqual({
      kind: 'owner',
    });
    expect(p.authorize({ uname: 'x', aname: '', origin: { kind: 'local' } }).principal).toEqual({ kind: 'owner' });
  });

  it('gives a token its principal, refuses a forged one, and one whose agent is gone', () => {
    const p = principals((x) => x.kind !== 'agent' || x.agent !== 'dead');
    const tcp = { kind: 'tcp', remote: '127.0.0.1:1' } as const;
    expect(
      p.authorize({ uname: 'x', aname: '', origin: tcp, auth: withToken(p.agentToken('b1', 'a1')) }).principal,
    ).toEqual({ kind: 'agent', session: 'b1', agent: 'a1' });
    expect(
      p.authorize({ uname: 'x', aname: '', origin: tcp, auth: withToken(p.sessionToken('b1')) }).principal,
    ).toEqual({ kind: 'session', session: 'b1' });
    expect(() =>
      p.authorize({ uname: 'x', aname: '', origin: tcp, auth: withToken(`ollie-agent.b1.a2.${'0'.repeat(64)}`) }),
    ).toThrow(/token is not valid/);
    // An agent token cannot be turned into another agent's by editing its ids.
    const t = p.agentToken('b1', 'a1').replace('.a1.', '.a2.');
    expect(() => p.authorize({ uname: 'x', aname: '', origin: tcp, auth: withToken(t) })).toThrow(/token is not valid/);
    expect(() =>
      p.authorize({ uname: 'x', aname: '', origin: tcp, auth: withToken(p.agentToken('b1', 'dead')) }),
    ).toThrow(/no longer exists/);
    // Another daemon's tokens (another key) are not ours.
    expect(() =>
      p.authorize({ uname: 'x', aname: '', origin: tcp, auth: withToken(principals().agentToken('b1', 'a1')) }),
    ).toThrow(/token is not valid/);
  });
});
