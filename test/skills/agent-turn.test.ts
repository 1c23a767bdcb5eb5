/**
 * The enrich hook end to end: a real daemon (skills from a test dir, the generated model), the mock LLM over
 * HTTP, a real toolsrv running skill_list and skill_load sandboxed, and a 9P client.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { startMockLlm, type MockLlm } from '../../src/devtools/mock-llm/server.js';
import { startDaemon, type Daemon } from '../../src/olliesrv/daemon.js';
import { writeConfig, type Block } from '../olliesrv/agent-harness.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';
import { topicModel } from './fixtures.js';

let dir: string;
let mock: MockLlm;
let daemon: Daemon;
let c: Client;
const logs: string[] = [];

function skill(root: string, name: string, description: string, body: string): void {
  mkdirSync(join(root, name), { recursive: true });
  writeFileSync(join(root, name, 'SKILL.md'), `---\nname: ${name}\ndescription: ${description}\n---\n${body}\n`);
}

beforeAll(async () => {
  buildNative();
  dir = mkdtempSync(join(tmpdir(), 'ollie-enrich-'));
  mock = await startMockLlm();
  const configDir = join(dir, 'config');
  writeConfig(configDir, mock.url, {
    skilled: {
      description: 'skills test',
      prompt: 'You are a test agent.',
      autoLoad: ['skill_list', 'skill_load', 'file_grep', 'shell'],
      maxSteps: 10,
    },
  });
  const shipped = join(dir, 'skills');
  skill(shipped, 'git-workflow', 'Commit, branch, rebase and resolve merge conflicts with git.', 'GIT BODY');
  skill(shipped, 'debugging', 'Find the cause of a crash, an error or a failing test.', 'DEBUG BODY');
  skill(join(configDir, 'skills'), 'writing-tests', 'Write unit tests; fix flaky tests.', 'USER TEST BODY');
  daemon = await startDaemon({
    socket: join(dir, 'run', 'ollie.sock'),
    dataDir: join(dir, 'data'),
    configDir,
    toolsrv: {},
    skills: { modelsDir: topicModel(join(dir, 'models')).modelsDir, shippedDir: shipped },
    log: (m) => logs.push(m),
  });
  c = await dial(`unix!${join(dir, 'run', 'ollie.sock')}`, { uname: userInfo().username });
});

afterAll(async () => {
  c?.close();
  await daemon?.close();
  await mock?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function newAgent(): Promise<{ path: string; id: string }> {
  const s = (await c.rdwrText('session/new', `cwd=${dir}`)).trim();
  const name = (await c.rdwrText(`session/${s}/agent/new`, 'agent=skilled')).trim();
  const path = `session/${s}/agent/${name}`;
  return { path, id: (await c.readText(`${path}/id`)).trim() };
}

async function turn(a: { path: string; id: string }, prompt: string): Promise<Block[]> {
  const agent = daemon.agents.all().find((x) => x.id === a.id)!;
  const done = agent.nextTurn();
  await c.write(`${a.path}/prompt`, prompt);
  await done;
  return agent.log.blocks() as Block[];
}

describe('skills and tool hints in a real agent turn', () => {
  it('injects the matching skill as a context block before the prompt, and the model receives it', async () => {
    const a = await newAgent();
    mock.script([{ text: 'use git rebase --continue' }]);
    const blocks = await turn(a, 'I have a merge conflict after git rebase');
    const ctx = blocks.filter((b) => b.role === 'context');
    expect(ctx.map((b) => b.name)).toEqual(['skill']);
    expect(ctx[0]!.content).toContain('Skill "git-workflow"');
    expect(ctx[0]!.content).toContain('GIT BODY');
    const roles = blocks.map((b) => b.role);
    expect(roles.indexOf('context')).toBeLessThan(roles.indexOf('user'));
    expect(JSON.stringify(mock.requests.at(-1)!.body)).toContain('GIT BODY');
    expect(logs.join('\n')).toMatch(/skills: 3 from .*matching prompts by embeddings/);
    // It says why it matched; asked again, the skill already in the context is not sent a second time.
    expect(ctx[0]!.content).toMatch(
      /matched with score [01]\.\d\d by embeddings; words in common: git, rebase, merge, conflict\)/,
    );
    mock.script([{ text: 'and then git push' }]);
    const again = await turn(a, 'another merge conflict after git rebase');
    expect(again.filter((b) => b.role === 'context')).toHaveLength(1);
    expect(JSON.stringify(mock.requests.at(-1)!.body).match(/GIT BODY/g)).toHaveLength(1);
  });

  it('hints the loaded tools that fit, and skill_list / skill_load run through toolsrv in the sandbox', async () => {
    const a = await newAgent();
    mock.script(
      [
        {
          toolCalls: [
            { name: 'skill_list', args: {} },
            { name: 'skill_load', args: { name: 'writing-tests' } },
          ],
        },
      ],
      [{ text: 'done' }],
    );
    const blocks = await turn(a, 'search the files for this pattern with grep');
    const hint = blocks.find((b) => b.role === 'context' && b.name === 'tools');
    expect(hint?.content).toMatch(/^Tools that fit this request:\n- file_grep: /);
    expect(hint?.content).not.toContain('skill_load');
    // Both are read-scope calls: they run in parallel and may finish in either order.
    const results = blocks.filter((b) => b.role === 'tool').sort((x, y) => x.name!.localeCompare(y.name!));
    expect(results.map((b) => b.name)).toEqual(['skill_list', 'skill_load']);
    expect(results[0]!.content).toMatch(/matching: embeddings \(.*all-MiniLM-L6-v2\)/);
    expect(results[0]!.content).toContain('git-workflow\tCommit, branch, rebase');
    expect(results[0]!.content).toContain('writing-tests\tWrite unit tests; fix flaky tests.');
    expect(results[1]!.content).toContain('USER TEST BODY');
  });

  it('skill_load of an unknown skill says which exist', async () => {
    const a = await newAgent();
    mock.script([{ toolCalls: [{ name: 'skill_load', args: { name: 'nope' } }] }], [{ text: 'ok' }]);
    const blocks = await turn(a, 'load a skill');
    expect(blocks.find((b) => b.role === 'tool')?.content).toMatch(
      /skill_load: .*no skill "nope"; skills: debugging, git-workflow, writing-tests/,
    );
  });

  it('answers the skills ctl command (and /skills NAME)', async () => {
    const a = await newAgent();
    const list = await c.rdwrText(`${a.path}/ctl`, 'skills');
    expect(list.split('\n').slice(1, 4)).toEqual([
      'debugging\tFind the cause of a crash, an error or a failing test.',
      'git-workflow\tCommit, branch, rebase and resolve merge conflicts with git.',
      'writing-tests\tWrite unit tests; fix flaky tests.',
    ]);
    expect(await c.rdwrText(`${a.path}/ctl`, 'skills debugging')).toContain('DEBUG BODY');
  });

  it('adds nothing to an unrelated prompt', async () => {
    const a = await newAgent();
    mock.script([{ text: 'ok' }]);
    const blocks = await turn(a, 'deploy the kubernetes cluster');
    expect(blocks.filter((b) => b.role === 'context')).toEqual([]);
  });
});
