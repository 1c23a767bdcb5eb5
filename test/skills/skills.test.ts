import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, parseMatchConfig } from '../../src/olliesrv/skills/config.js';
import { SkillMatcher } from '../../src/olliesrv/skills/matcher.js';
import { loadSkills, parseSkill, SkillError } from '../../src/olliesrv/skills/skills.js';
import { shippedDataDir } from '../../src/platform/paths.js';
import { topicModel } from './fixtures.js';

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'ollie-skills-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function skill(dir: string, name: string, description: string, body = `# ${name}\nbody of ${name}\n`): void {
  mkdirSync(join(dir, name), { recursive: true });
  writeFileSync(join(dir, name, 'SKILL.md'), `---\nname: ${name}\ndescription: ${description}\n---\n${body}`);
}

describe('SKILL.md front matter', () => {
  it('reads name, description and the body', () => {
    const s = parseSkill(
      '/s/SKILL.md',
      '---\nname: t\ndescription: >\n  folded\n  text\nextra: kept out\n---\n\n# T\nbody\n',
    );
    expect(s).toEqual({ name: 't', description: 'folded text', body: '# T\nbody', file: '/s/SKILL.md' });
  });

  it.each([
    ['no front matter', '# title\n', /^F:1: a skill starts with front matter/],
    ['never closed', '---\nname: a\ndescription: b\n', /^F:1: the front matter opened here is never closed/],
    ['bad YAML, at its line', '---\nname: a\ndescription: [unclosed\n---\n', /^F:3: /],
    ['duplicate key, at its line', '---\nname: a\nname: b\ndescription: d\n---\n', /^F:3: /],
    ['missing description', '---\nname: a\n---\nbody\n', /^F:3: description: missing/],
    ['missing name', '---\ndescription: d\n---\n', /^F:3: name: missing/],
    ['empty name', '---\nname: ""\ndescription: d\n---\n', /^F:2: name: must be a non-empty string/],
    [
      'list as description',
      '---\nname: a\ndescription:\n  - x\n---\n',
      /^F:3: description: must be a non-empty string/,
    ],
    ['bad name', '---\nname: has space\ndescription: d\n---\n', /^F:2: name: "has space" must be/],
    ['not a mapping', '---\n- a\n---\n', /^F:2: the front matter must be a mapping/],
  ])('%s → FILE:LINE', (_what, text, re) => {
    expect(() => parseSkill('F', text)).toThrow(SkillError);
    expect(() => parseSkill('F', text)).toThrow(re);
  });

  it('loads directories in precedence order, reporting bad files and keeping the rest', () => {
    const user = join(root, 'user');
    const shipped = join(root, 'shipped');
    skill(user, 'debugging', 'my own way to debug', 'mine');
    skill(shipped, 'debugging', 'the shipped way');
    skill(shipped, 'git-workflow', 'git things');
    mkdirSync(join(user, 'broken'));
    writeFileSync(join(user, 'broken', 'SKILL.md'), '---\nname: broken\n---\n');
    const set = loadSkills([user, join(root, 'missing'), shipped]);
    expect(set.skills.map((s) => [s.name, s.body])).toEqual([
      ['debugging', 'mine'],
      ['git-workflow', '# git-workflow\nbody of git-workflow'],
    ]);
    expect(set.errors).toEqual([
      `${join(user, 'broken', 'SKILL.md')}:3: description: missing from the front matter (matching compares prompts with it)`,
    ]);
  });

  it('ships skills that all parse', () => {
    const set = loadSkills([join(shippedDataDir(), 'skills')]);
    expect(set.errors).toEqual([]);
    expect(set.skills.map((s) => s.name)).toEqual(
      expect.arrayContaining(['code-review', 'debugging', 'git-workflow', 'writing-tests']),
    );
    for (const s of set.skills) expect(s.body.length).toBeGreaterThan(500);
  });
});

describe('embedding.conf', () => {
  it('parses every key and rejects bad lines with FILE:LINE', () => {
    const c = parseMatchConfig(
      'E',
      '# c\nskill_dirs = /a:/b\nmodel = none\nskill_threshold = 0.5 # inline\ntool_threshold=0.2\nmax_skills = 1\nmax_tools = 0\n',
    );
    expect(c).toEqual({
      skillDirs: ['/a', '/b'],
      model: 'none',
      skillThreshold: 0.5,
      toolThreshold: 0.2,
      maxSkills: 1,
      maxTools: 0,
    });
    expect(() => parseMatchConfig('E', '\nmax_skills = 1.5\n')).toThrow(
      new ConfigError('E:2: max_skills: expected a whole number from 0 to 20, not "1.5"'),
    );
    expect(() => parseMatchConfig('E', 'colour = red\n')).toThrow(/^E:1: unknown key colour/);
    expect(() => parseMatchConfig('E', 'skill_dirs = relative\n')).toThrow(
      /^E:1: skill_dirs: relative is not an absolute path/,
    );
    expect(() => parseMatchConfig('E', 'just words\n')).toThrow(/^E:1: expected key = value/);
  });
});

describe('SkillMatcher (the enrich hook)', () => {
  const TOOLS = [
    { name: 'file_grep', description: 'Search file contents with a pattern.' },
    { name: 'shell', description: 'Run a shell command with bash.' },
    { name: 'memory_recall', description: 'Recall a memory or a decision.' },
  ];

  function setup(o: { model: boolean; config?: string }): SkillMatcher {
    const shipped = join(root, 'shipped');
    skill(shipped, 'writing-tests', 'How to write unit tests and fix flaky tests.', 'TEST BODY');
    skill(shipped, 'git-workflow', 'Commit, branch, rebase, resolve merge conflicts with git.', 'GIT BODY');
    skill(shipped, 'debugging', 'Find the cause of a crash, an error or a failing test.', 'DEBUG BODY');
    const configDir = join(root, 'config');
    mkdirSync(configDir, { recursive: true });
    if (o.config) writeFileSync(join(configDir, 'embedding.conf'), o.config);
    const modelsDir = o.model ? topicModel(join(root, 'models')).modelsDir : join(root, 'no-models');
    const logs: string[] = [];
    const m = new SkillMatcher({ configDir, shippedDir: shipped, modelsDir, log: (l) => logs.push(l) });
    (m as unknown as { logs: string[] }).logs = logs;
    return m;
  }

  it('injects the matching skill whole and hints the matching tools, by embeddings', async () => {
    const m = setup({ model: true });
    const items = await m.enrich({ prompt: 'I have a merge conflict after git rebase', tools: TOOLS });
    expect(items.filter((i) => i.name === 'skill')).toHaveLength(1);
    expect(items[0]!.text).toContain('Skill "git-workflow"');
    expect(items[0]!.text).toContain('GIT BODY');
    expect(await m.method()).toEqual({ method: 'embeddings', detail: join(root, 'models', 'all-MiniLM-L6-v2') });
    const t = await m.enrich({ prompt: 'grep the files for this pattern', tools: TOOLS });
    expect(t.find((i) => i.name === 'tools')?.text).toBe(
      'Tools that fit this request:\n- file_grep: Search file contents with a pattern.',
    );
    expect((m as unknown as { logs: string[] }).logs.join('\n')).toMatch(
      /skills: 3 from .*matching prompts by embeddings \(.*all-MiniLM-L6-v2, 16-d\)/,
    );
  });

  it('injects nothing for an unrelated prompt', async () => {
    const m = setup({ model: true });
    expect(await m.enrich({ prompt: 'deploy the kubernetes cluster', tools: TOOLS })).toEqual([]);
  });

  it('caps skills and tools at max_skills and max_tools and honours the thresholds', async () => {
    const m = setup({
      model: true,
      config: 'max_skills = 1\nmax_tools = 1\nskill_threshold = 0\ntool_threshold = 0\n',
    });
    const items = await m.enrich({ prompt: 'failing unit test crash', tools: TOOLS });
    expect(items.map((i) => i.name)).toEqual(['skill', 'tools']);
    expect(items[1]!.text.split('\n')).toHaveLength(2);
  });

  it('falls back to BM25 without a model and says so', async () => {
    const m = setup({ model: false });
    const items = await m.enrich({ prompt: 'How do I fix flaky unit tests?', tools: TOOLS });
    expect(items[0]?.text).toContain('Skill "writing-tests"');
    const mm = await m.method();
    expect(mm.method).toBe('bm25');
    expect(mm.detail).toMatch(/no embedding model at .*no-models\/all-MiniLM-L6-v2/);
    expect(await m.command('')).toMatch(/^matching: bm25 \(no embedding model at .*\)\ndebugging\tFind the cause/);
    expect((m as unknown as { logs: string[] }).logs.join('\n')).toMatch(
      /matching prompts by BM25: no embedding model/,
    );
  });

  it('uses BM25 when embedding.conf says model = none, and lists and prints skills', async () => {
    const m = setup({ model: true, config: 'model = none\n' });
    expect((await m.method()).method).toBe('bm25');
    expect(await m.command('git-workflow')).toBe(
      `# skill git-workflow (${join(root, 'shipped', 'git-workflow', 'SKILL.md')})\n\nGIT BODY\n`,
    );
    await expect(m.command('nope')).rejects.toThrow('no skill "nope"; skills: debugging, git-workflow, writing-tests');
  });
});
