/**
 * Review: what an agent's view shows, through direct 9P with its token (what client_9p does).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { dial } from '../../src/ninep/node.js';
import { harness, type Harness } from '../olliesrv/agent-harness.js';

const ATTACKER = { description: 'attacker', prompt: 'You are a test agent.', autoLoad: ['client_9p'], maxSteps: 20 };
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('review: an agent\'s view of its session', () => {
  it('search does not show a sibling\'s log, which the agent may not read', async () => {
    h = await harness({ profiles: { attacker: ATTACKER } });
    const a = await h.agent({ profile: 'attacker' });
    const sibling = (await h.c.rdwrText(`session/${a.session}/agent/new`, 'agent=test name=sibling')).trim();
    h.mock.script([{ text: 'the sibling secret is swordfish' }]);
    await h.turn(`session/${a.session}/agent/${sibling}`, 'tell me the secret');
    const view = await dial(`unix!${h.socket}`, { uname: 'x', authData: h.daemon.principals.agentToken(a.sid, a.aid) });
    try {
      await expect(view.readText(`session/${a.session}/agent/${sibling}/log`)).rejects.toThrow(/may reach only itself/);
      expect(await view.rdwrText('search', 'swordfish')).toBe('');
      // Its own sub-agent's log is searchable (it may read it).
      const kid = (await view.rdwrText(`session/${a.session}/agent/new`, 'name=kid')).trim();
      h.mock.script([{ text: 'kid says marlin' }]);
      await h.turn(`session/${a.session}/agent/${kid}`, 'hi');
      expect(await view.rdwrText('search', 'marlin')).toMatch(/\tkid\t/);
      // The owner finds both.
      expect(await h.c.rdwrText('search', 'swordfish')).toMatch(/\tsibling\t/);
    } finally {
      view.close();
    }
  });
});
