/**
 * Second review of project policy files (src/toolsrv/sandbox/policy.ts, trust.ts). A trusted `.ollie-sandbox.yaml`
 * narrows the policy — but it lies in the workspace, which the agent writes: one edit (or removing it) made it
 * "changed since it was trusted", and a changed file was ignored, so the next call ran under the broader base
 * policy again. The model undid the narrowing the owner trusted. Real olliesrv, real toolsrv and helper, the mock
 * LLM scripting the calls; the owner is this test, writing config/trust.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { TOOLSRV_ENTRY } from '../../src/olliesrv/toolclient/spawn.js';
import { landlockStatus, loadPolicy } from '../../src/toolsrv/sandbox/index.js';
import { trust } from '../../src/toolsrv/sandbox/trust.js';
import { harness } from '../olliesrv/agent-harness.js';
import { policyContext } from '../toolsrv/sandbox-helpers.js';

const ready = landlockStatus().abi >= 6 && existsSync(TOOLSRV_ENTRY);

describe.skipIf(!ready)('a trusted project file the agent edits or removes', () => {
  for (const [what, tamper] of [
    ['edits', "echo '# harmless' >> .ollie-sandbox.yaml && echo tampered"],
    [
      'replaces',
      'cp .ollie-sandbox.yaml src/p && printf "filesystem:\\n  rw: [\\"{CWD}\\"]\\n" > .ollie-sandbox.yaml && echo tampered',
    ],
  ] as const) {
    test(`the agent ${what} it: its narrowing still holds (calls are refused until the owner trusts again), never the base policy`, async () => {
      const h = await harness();
      try {
        const file = join(h.dir, '.ollie-sandbox.yaml');
        // The owner's narrowing: the project's secrets are out of the agent's reach.
        writeFileSync(file, 'filesystem:\n  deny: ["{CWD}/secrets"]\n');
        mkdirSync(join(h.dir, 'secrets'));
        writeFileSync(join(h.dir, 'secrets', 'key'), 'TOP-SECRET-VALUE\n');
        mkdirSync(join(h.dir, 'src'));
        await h.c.write('config/trust', `trust ${h.dir}\n`);
        const a = await h.agent();
        const call = async (id: string, command: string): Promise<string> => {
          h.mock.script([{ toolCalls: [{ id, name: 'shell', args: { command } }] }], [{ text: 'ok' }]);
          return (await h.turn(a.path, 'go')).filter((b) => b.role === 'tool').at(-1)!.content;
        };
        expect(await call('c1', 'cat secrets/key')).not.toContain('TOP-SECRET-VALUE');
        await call('c2', tamper);
        const after = await call('c3', 'cat secrets/key');
        expect(after).not.toContain('TOP-SECRET-VALUE');
        expect(after).toMatch(
          /was trusted, but it has changed since .*no tool runs here until the owner trusts it again/,
        );
      } finally {
        await h.close();
      }
    }, 60_000);
  }
});

describe('a trusted project file that is gone or a symlink now', () => {
  test('removing it, or putting a symlink in its place, refuses the policy; a file never trusted is still only ignored', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ollie-sec-trust-'));
    try {
      const ctx = policyContext(dir);
      mkdirSync(ctx.cwd);
      mkdirSync(ctx.home);
      const file = join(ctx.cwd, '.ollie-sandbox.yaml');
      writeFileSync(file, 'network:\n  enabled: false\n');
      expect(loadPolicy(ctx).notices.join('\n')).toContain('is not trusted, so it was ignored');
      trust(ctx.configDir, ctx.cwd);
      expect(loadPolicy(ctx).sources).toContain(file);
      unlinkSync(file);
      expect(() => loadPolicy(ctx)).toThrow(`${file} was trusted, but it is gone`);
      writeFileSync(join(dir, 'elsewhere.yaml'), 'network:\n  enabled: false\n');
      symlinkSync(join(dir, 'elsewhere.yaml'), file);
      expect(() => loadPolicy(ctx)).toThrow(`${file} was trusted, but it is a symbolic link now`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * An agent's sub-agent working in a subdirectory (agent/new cwd=src: inside its creator's, so allowed) would, with
 * its own directory's policy, be under the base policy ({CWD} = src, no project file there): out of its
 * project's narrowing. It keeps its creator's policy instead (AgentCfg.sandboxRoot, toolsrv's `root`).
 */
describe.skipIf(!ready)('a sub-agent in a subdirectory of a project with a trusted policy file', () => {
  test("works under the project's narrowing too, not under the base policy", async () => {
    const h = await harness({
      profiles: {
        attacker: {
          description: 'attacker',
          prompt: 'You are a test agent.',
          autoLoad: ['client_9p', 'shell'],
          maxSteps: 20,
        },
      },
    });
    try {
      // The owner's narrowing: src/secrets is out of the agents' reach (and so is the network, were it on).
      writeFileSync(join(h.dir, '.ollie-sandbox.yaml'), 'filesystem:\n  deny: ["{CWD}/src/secrets"]\n');
      mkdirSync(join(h.dir, 'src', 'secrets'), { recursive: true });
      writeFileSync(join(h.dir, 'src', 'secrets', 'key'), 'TOP-SECRET-VALUE\n');
      await h.c.write('config/trust', `trust ${h.dir}\n`);
      const a = await h.agent({ profile: 'attacker' });
      h.mock.script(
        [{ toolCalls: [{ id: 'k0', name: 'shell', args: { command: 'cat src/secrets/key' } }] }],
        [{ text: 'ok' }],
      );
      expect((await h.turn(a.path, 'go')).filter((b) => b.role === 'tool').at(-1)!.content).not.toContain(
        'TOP-SECRET-VALUE',
      );
      // The agent makes a sub-agent working in src (inside its own cwd: allowed), and has it read there.
      h.mock.script(
        [
          {
            toolCalls: [
              {
                id: 'k1',
                name: 'client_9p',
                args: {
                  op: 'rdwr',
                  path: 'session/$OLLIE_SESSION_ID/agent/new',
                  data: 'name=kid cwd=src agent=attacker',
                },
              },
            ],
          },
        ],
        [{ text: 'ok' }],
      );
      const made = (await h.turn(a.path, 'go')).filter((b) => b.role === 'tool').at(-1)!.content;
      expect(made).toContain('kid');
      h.mock.script(
        [{ toolCalls: [{ id: 'k2', name: 'shell', args: { command: 'cat secrets/key' } }] }],
        [{ text: 'ok' }],
      );
      const read = (await h.turn(`session/${a.session}/agent/kid`, 'go'))
        .filter((b) => b.role === 'tool')
        .at(-1)!.content;
      expect(read).not.toContain('TOP-SECRET-VALUE');
    } finally {
      await h.close();
    }
  }, 60_000);
});
