/**
 * Review: what an agent's view shows, through direct 9P with its token (what client_9p does).
 */
import { describe, expect, it } from 'vitest';
import { dial } from '../../src/ninep/node.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { attackerProfile } from './scripted-calls.js';

const ATTACKER = attackerProfile(['client_9p']);
describe("review: an agent's view of its session", () => {
  it("search does not show a sibling's log, which the agent may not read", async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
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

  it("a sub-agent cannot take its parent's id as a name: the parent keeps its token and its address", async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const a = await h.agent({ profile: 'attacker' });
    const parentView = await dial(`unix!${h.socket}`, {
      uname: 'x',
      authData: h.daemon.principals.agentToken(a.sid, a.aid),
    });
    const kid = (await parentView.rdwrText(`session/${a.session}/agent/new`, 'name=kid')).trim();
    parentView.close();
    const kidId = h.daemon.agents.get(a.session, kid).id;
    const kidView = await dial(`unix!${h.socket}`, {
      uname: 'x',
      authData: h.daemon.principals.agentToken(a.sid, kidId),
    });
    try {
      // The kid learns its parent's id from agent/idx (its own line) and names its own sub-agent so.
      const idx = await kidView.readText(`session/${a.session}/agent/idx`);
      expect(idx).toContain(a.aid);
      await expect(kidView.rdwrText(`session/${a.session}/agent/new`, `name=${a.aid}`)).rejects.toThrow(
        /is the id of an agent of session/,
      );
      // The parent still authenticates, and its id still addresses it (for the owner, workflows, its own tools).
      const again = await dial(`unix!${h.socket}`, {
        uname: 'x',
        authData: h.daemon.principals.agentToken(a.sid, a.aid),
      });
      again.close();
      await h.c.write(`session/${a.session}/agent/${a.aid}/prompt`, '/stop');
      expect((await h.c.readText(`session/${a.session}/agent/${a.aid}/id`)).trim()).toBe(a.aid);
    } finally {
      kidView.close();
    }
  });

  it('an agent cannot load tools its profile does not list (a read-only profile giving itself shell or web_fetch)', async () => {
    const READER = { description: 'reader', prompt: 'read only', autoLoad: ['client_9p', 'file_read'], maxSteps: 20 };
    const h = await testHarness({ profiles: { reader: READER } });
    const a = await h.agent({ profile: 'reader' });
    const view = await dial(`unix!${h.socket}`, { uname: 'x', authData: h.daemon.principals.agentToken(a.sid, a.aid) });
    try {
      const ctl = `session/${a.session}/agent/${a.aid}/ctl`;
      await expect(view.rdwrText(ctl, 'tool_load shell')).rejects.toThrow(
        /refused: an agent may load only the tools of its profile \(client_9p, file_read\), not shell/,
      );
      await expect(view.write(`session/${a.session}/agent/${a.aid}/prompt`, '/tool_load web_fetch')).rejects.toThrow(
        /not web_fetch/,
      );
      expect(await view.rdwrText(ctl, 'tools')).not.toMatch(/^(shell|web_fetch)\t/m);
      // Its own profile's tools it may (re)load; the owner may load anything.
      expect(await view.rdwrText(ctl, 'tool_load file_read')).toMatch(/loaded file_read/);
      expect(await h.c.rdwrText(`${a.path}/ctl`, 'tool_load shell')).toMatch(/loaded shell/);
    } finally {
      view.close();
    }
  });
});
