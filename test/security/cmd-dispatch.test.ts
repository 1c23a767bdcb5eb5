/**
 * The one `/cmd` dispatcher from inside the sandbox: an agent (scripted tool calls of a real agent, real olliesrv,
 * toolsrv, sandbox and mock LLM) disguises a command that widens what it may do with the quoting the command table
 * reads (quoted or escaped command words, tabs, an empty quoted argument), through its ctl and as a `/cmd` prompt.
 * What is checked is what would run, so each is refused and nothing changes; the controls show that the commands
 * an agent may give still work.
 */
import { describe, expect, it } from 'vitest';
import { testHarness } from '../olliesrv/agent-harness.js';
import { attackerProfile, client9p, results, script } from './scripted-calls.js';

const ATTACKER = attackerProfile(['client_9p'], 30);

describe("an agent disguising a command through the command table's quoting", () => {
  it('is refused through ctl and through a /cmd prompt alike; what agents may run still runs', async () => {
    const h = await testHarness({ profiles: { attacker: ATTACKER } });
    const a = await h.agent({ profile: 'attacker' });
    const ctl = 'session/$OLLIE_SESSION_ID/agent/attacker/ctl';
    const prompt = 'session/$OLLIE_SESSION_ID/agent/attacker/prompt';
    const attacks = [
      client9p('rdwr', ctl, "'cwd' /"),
      client9p('rdwr', ctl, '"cwd" /tmp'),
      client9p('rdwr', ctl, 'c\\wd /'),
      client9p('rdwr', ctl, "cwd ''"),
      client9p('rdwr', ctl, 'backend\tclaude'),
      client9p('rdwr', ctl, "'peeradd' other"),
      client9p('write', prompt, "/'backend' claude"),
      client9p('write', prompt, '/model\tgpt-evil'),
      client9p('write', prompt, '/"cwd" /'),
      client9p('write', prompt, "/na'me' pwned"),
    ];
    // Two turns: ten failing rounds in a row would end one (the safety net), and each turn ends with a control.
    h.mock.script(...script(...attacks.slice(0, 5), client9p('rdwr', ctl, "'help'")));
    h.mock.script(...script(...attacks.slice(5), client9p('rdwr', ctl, 'cwd')));
    const first = results(await h.turn(a.path, 'attack'));
    const second = results(await h.turn(a.path, 'attack again')).slice(first.length);
    const out = [...first.slice(0, 5), ...second.slice(0, 5)];
    expect(first).toHaveLength(6);
    expect(second).toHaveLength(6);
    for (const [i, o] of out.entries())
      expect(o, JSON.stringify(attacks[i]!.args.data)).toMatch(
        /refused: an agent may not run "(cwd|backend|peeradd|model|name) …"/,
      );
    // The controls: help (quoted, read as help) and the read-only form of cwd.
    expect(first[5]).toMatch(/^stop\t/m);
    expect(second[5]).toContain(h.dir);
    // Nothing changed.
    const agent = h.daemon.agents.get(a.session, a.name);
    expect(agent.cfg.cwd).toBe(h.dir);
    expect(agent.cfg.backend).toBe('mock');
    expect(agent.cfg.model).not.toBe('gpt-evil');
    expect(agent.name).toBe('attacker');
    expect(h.daemon.agents.peerNames(agent)).toEqual([]);
  });
});
