/** Review: token parsing in Principals (no daemon needed). */
import { describe, expect, it } from 'vitest';
import { TokenConversation } from '../../src/ninep/index.js';
import { Principals } from '../../src/olliesrv/auth/principals.js';

const principals = () =>
  new Principals({ uid: process.getuid!(), uname: 'me', confinedRoots: () => [], exists: () => true });

describe('review: tokens', () => {
  it('a non-ASCII token as long as the owner token is simply not a token (no exception from the comparison)', () => {
    const p = principals();
    const odd = `é${p.ownerToken.slice(1)}`;
    expect(odd.length).toBe(p.ownerToken.length);
    expect(p.fromToken(odd)).toBeUndefined();
    // At attach it falls back to what the connection's origin says (here: a local channel, the owner).
    const auth = new TokenConversation(1024);
    auth.write(new TextEncoder().encode(odd));
    expect(p.authorize({ uname: 'x', aname: '', origin: { kind: 'local' }, auth }).principal).toEqual({
      kind: 'owner',
    });
  });

  it('forged and cross-kind tokens are refused', () => {
    const p = principals();
    const agent = p.agentToken('5e551011', 'a9e11701');
    const mac = agent.split('.').at(-1)!;
    expect(p.fromToken(agent)).toEqual({ kind: 'agent', session: '5e551011', agent: 'a9e11701' });
    expect(p.fromToken(`ollie-session.5e551011.${mac}`)).toBeUndefined();
    expect(p.fromToken(`ollie-agent.5e551011.a9e11702.${mac}`)).toBeUndefined();
    expect(p.fromToken(`ollie-agent.5e551011.a9e11701.${mac.toUpperCase()}`)).toBeUndefined();
    expect(p.fromToken(`${agent}\n`)).toBeUndefined();
  });
});
