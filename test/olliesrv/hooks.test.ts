/**
 * Lifecycle hooks (src/olliesrv/hooks) against a real olliesrv, a real toolsrv and sandbox helper per session,
 * and the mock LLM over HTTP, whose recorded requests show what the model was sent.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentInWork, cmd, writeHooks } from '../helpers/hooks.js';
import { testHarness, type Block, type Harness } from './agent-harness.js';

const PROFILE = {
  description: 'hooks',
  prompt: 'You are a test agent.',
  autoLoad: ['shell', 'file_read', 'file_write'],
  maxSteps: 20,
};

type Call = { name: string; args: Record<string, unknown> };
/** One model turn per call, then a closing text. */
const script = (...calls: Call[]) => [...calls.map((c) => [{ toolCalls: [c] }]), [{ text: 'done' }]];
const shell = (command: string): Call => ({ name: 'shell', args: { command } });

const toolResults = (blocks: Block[]): string[] => blocks.filter((b) => b.role === 'tool').map((b) => b.content);
const hookBlocks = (blocks: Block[]): string[] =>
  blocks.filter((b) => b.role === 'info' && b.name === 'hook').map((b) => b.content);
/** Every message text the model was sent, in the last request. */
const lastRequest = (hh: Harness): string =>
  JSON.stringify(hh.mock.requests.filter((r) => r.path.includes('chat/completions')).at(-1)?.body ?? {});

describe('hooks', () => {
  it('a PreToolUse hook blocks rm -rf with exit 2: the command never runs and the model gets the reason', async () => {
    const h = await testHarness({
      profiles: { hooks: PROFILE },
      turns: script(shell('rm -rf victim'), shell('echo still-works')) as never,
    });
    writeHooks(h.configDir, {
      PreToolUse: [
        {
          matcher: 'shell',
          hooks: [
            cmd(
              `input=$(cat); case "$input" in *'rm -rf'*) echo "rm -rf is not allowed in this project" >&2; exit 2;; esac; exit 0`,
            ),
          ],
        },
      ],
    });
    const a = await agentInWork(h, 'hooks');
    mkdirSync(join(a.work, 'victim'));
    writeFileSync(join(a.work, 'victim', 'keep'), 'x');
    const blocks = await h.turn(a.path, 'clean up');
    const [first, second] = toolResults(blocks);
    expect(first).toContain('blocked by a PreToolUse hook: rm -rf is not allowed in this project');
    expect(second).toContain('still-works');
    expect(existsSync(join(a.work, 'victim', 'keep'))).toBe(true);
    // The model saw the reason in the tool result of its next request.
    expect(h.mock.requests.some((r) => JSON.stringify(r.body).includes('rm -rf is not allowed in this project'))).toBe(
      true,
    );
    // The user sees it too: a hook block in the chat, and a line in the session's hooks file.
    expect(hookBlocks(blocks).some((t) => t.startsWith('PreToolUse hook') && t.includes('exit 2'))).toBe(true);
    const lines = (await h.c.readText(`session/${a.session}/hooks`))
      .trim()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(lines[0]).toEqual([
      expect.stringMatching(/^\d+$/),
      a.aid,
      'PreToolUse',
      'shell',
      '2',
      expect.stringMatching(/^\d+$/),
      expect.stringContaining('rm -rf'),
      'rm -rf is not allowed in this project',
    ]);
    expect(lines[1]![4]).toBe('0');
  });

  it('a PostToolUse formatter rewrites the file the tool wrote (proven on disk)', async () => {
    const h = await testHarness({
      profiles: { hooks: PROFILE },
      turns: script({ name: 'file_write', args: { path: 'a.txt', content: 'one   \ntwo\t\t\n' } }) as never,
    });
    // A formatter: strips trailing whitespace from the file named in tool_input.path.
    writeHooks(h.configDir, {
      PostToolUse: [
        {
          matcher: 'file_write|file_edit',
          hooks: [cmd(`f=$(sed -n 's/.*"path":"\\([^"]*\\)".*/\\1/p'); sed -i 's/[[:space:]]*$//' "$f"`)],
        },
      ],
    });
    const a = await agentInWork(h, 'hooks');
    const blocks = await h.turn(a.path, 'write it');
    expect(readFileSync(join(a.work, 'a.txt'), 'utf8')).toBe('one\ntwo\n');
    expect(hookBlocks(blocks).some((t) => t.startsWith('PostToolUse hook') && t.includes('(file_write): exit 0'))).toBe(
      true,
    );
  });

  it('a SessionStart hook adds context the model receives; UserPromptSubmit (alias) adds context too', async () => {
    const h = await testHarness({ profiles: { hooks: PROFILE }, turns: [[{ text: 'ok' }]] as never });
    writeHooks(h.configDir, {
      SessionStart: [
        {
          hooks: [cmd('echo "Project codename: BLUEBIRD (source $(sed -n \'s/.*"source":"\\([a-z]*\\)".*/\\1/p\'))"')],
        },
      ],
      UserPromptSubmit: [
        {
          hooks: [
            cmd(
              `printf '%s' '{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "Today is CHECKED-DAY"}}'`,
            ),
          ],
        },
      ],
    });
    const a = await agentInWork(h, 'hooks');
    await h.turn(a.path, 'hello');
    const sent = lastRequest(h);
    expect(sent).toContain('Project codename: BLUEBIRD (source startup)');
    expect(sent).toContain('Today is CHECKED-DAY');
    // Once per runtime: a second turn does not add it again.
    h.mock.script([{ text: 'ok' }]);
    await h.turn(a.path, 'again');
    expect(lastRequest(h).split('BLUEBIRD').length - 1).toBe(1);
  });

  it('a hook that outlives its timeout is killed and reported; the agent goes on', async () => {
    const h = await testHarness({ profiles: { hooks: PROFILE }, turns: script(shell('echo ran-anyway')) as never });
    const marker = `31.${process.pid}`;
    writeHooks(h.configDir, { PreToolUse: [{ matcher: '.*', hooks: [cmd(`sleep ${marker}`, 1)] }] });
    const a = await agentInWork(h, 'hooks');
    const started = Date.now();
    const blocks = await h.turn(a.path, 'go');
    expect(Date.now() - started).toBeLessThan(15000);
    expect(toolResults(blocks)[0]).toContain('ran-anyway');
    expect(
      hookBlocks(blocks).some((t) => t.includes(`sleep ${marker}`) && t.includes('killed (timed out after 1000 ms)')),
    ).toBe(true);
    const line = (await h.c.readText(`session/${a.session}/hooks`)).trim().split('\t');
    expect(line[4]).toBe('timeout');
    // Its whole process group is gone.
    let ps = '';
    try {
      ps = execFileSync('pgrep', ['-f', `sleep ${marker}`], { encoding: 'utf8' });
    } catch {
      // pgrep exits 1 when nothing matches.
    }
    expect(ps.trim()).toBe('');
  });

  it('a PreToolUse hook rewrites the arguments (updatedInput), and cannot turn on bypass through them', async () => {
    const h = await testHarness({ profiles: { hooks: PROFILE }, turns: script(shell('echo original')) as never });
    writeHooks(h.configDir, {
      PreToolUse: [
        {
          matcher: 'shell',
          hooks: [
            cmd(
              `printf '%s' '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "echo rewritten-by-hook", "bypass": true}}}'`,
            ),
          ],
        },
      ],
    });
    const a = await agentInWork(h, 'hooks');
    const blocks = await h.turn(a.path, 'go');
    const r = toolResults(blocks)[0]!;
    expect(r).toContain('rewritten-by-hook');
    expect(r).not.toContain('original');
    expect(blocks.some((b) => b.name === 'hook' && b.content.includes('rewrote the arguments of shell'))).toBe(true);
    // No approval was asked for: the bypass key was dropped, the call ran sandboxed.
    expect(await h.c.readText(`session/${a.session}/bypass`)).toBe('');
  });

  it('a PreToolUse "ask" raises an approval; approved it runs (sandboxed), denied it does not; it is never remembered', async () => {
    const h = await testHarness({
      profiles: { hooks: PROFILE },
      turns: [...script(shell('echo deployed > deployed.txt')), ...script(shell('echo second > second.txt'))] as never,
    });
    writeHooks(h.configDir, {
      PreToolUse: [
        {
          matcher: 'shell',
          hooks: [
            cmd(
              `printf '%s' '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "this deploys"}}'`,
            ),
          ],
        },
      ],
      // Told when the agent waits for a person.
      Notification: [{ hooks: [cmd('cat >> notified.jsonl; echo >> notified.jsonl')] }],
    });
    const a = await agentInWork(h, 'hooks');
    const loop = h.daemon.agents.all().find((x) => x.id === a.aid)!;
    const pendingLine = async (): Promise<string[]> => {
      for (;;) {
        const line = (await h.c.readText(`session/${a.session}/bypass`)).split('\n').find(Boolean);
        if (line) return line.split('\t');
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    let done = loop.nextTurn();
    await h.c.write(`${a.path}/prompt`, 'deploy');
    const req = await pendingLine();
    expect(req[5]).toContain('a hook asks for your approval (the call runs inside the sandbox): this deploys');
    expect(req[6]).toBe('once');
    expect(existsSync(join(a.work, 'deployed.txt'))).toBe(false);
    await expect(h.c.write(`session/${a.session}/bypass`, `${req[0]} approve always`)).rejects.toThrow(
      /a hook asked for this approval/,
    );
    await h.c.write(`session/${a.session}/bypass`, `${req[0]} approve`);
    await done;
    expect(readFileSync(join(a.work, 'deployed.txt'), 'utf8')).toBe('deployed\n');
    // The notification runs beside the call (nothing waits for it): wait for its line.
    const notified = join(a.work, 'notified.jsonl');
    while (!(existsSync(notified) && readFileSync(notified, 'utf8').includes('\n')))
      await new Promise((r) => setTimeout(r, 20));
    const note = JSON.parse(readFileSync(notified, 'utf8').split('\n')[0]!) as Record<string, string>;
    expect(note).toMatchObject({ hook_event_name: 'Notification', session_id: a.sid, agent_id: a.aid });
    expect(note.message).toContain('this deploys');

    done = loop.nextTurn();
    await h.c.write(`${a.path}/prompt`, 'again');
    const req2 = await pendingLine();
    await h.c.write(`session/${a.session}/bypass`, `${req2[0]} deny`);
    const blocks = (await done, await h.blocks(a.path));
    expect(toolResults(blocks).at(-1)).toContain('denied by user');
    expect(existsSync(join(a.work, 'second.txt'))).toBe(false);
  });

  it('a UserPrompt hook blocks a prompt with exit 2; a Stop hook keeps the turn going once', async () => {
    const h = await testHarness({
      profiles: { hooks: PROFILE },
      turns: [[{ text: 'first answer' }], [{ text: 'second answer' }]] as never,
    });
    writeHooks(h.configDir, {
      UserPrompt: [{ hooks: [cmd(`grep -q secret && { echo "no secrets in prompts" >&2; exit 2; }; exit 0`)] }],
      // Blocks the first Stop only (stop_hook_active is true the second time).
      Stop: [
        { hooks: [cmd(`grep -q '"stop_hook_active":false' && { echo "run the tests first" >&2; exit 2; }; exit 0`)] },
      ],
    });
    const a = await agentInWork(h, 'hooks');
    let blocks = await h.turn(a.path, 'my secret is 42');
    expect(blocks.some((b) => b.role === 'error' && b.content.includes('no secrets in prompts'))).toBe(true);
    expect(blocks.some((b) => b.role === 'user')).toBe(false);
    expect(h.mock.requests.filter((r) => r.path.includes('chat/completions'))).toHaveLength(0);
    blocks = await h.turn(a.path, 'hello');
    expect(blocks.filter((b) => b.role === 'assistant').map((b) => b.content)).toEqual([
      'first answer',
      'second answer',
    ]);
    expect(lastRequest(h)).toContain('A Stop hook did not let the turn end yet: run the tests first');
  });

  it('a Stop guard that fails closed and keeps failing ends the turn in error after one more round, not at the step limit', async () => {
    const h = await testHarness({
      profiles: { hooks: PROFILE },
      turns: [[{ text: 'first answer' }], [{ text: 'second answer' }], [{ text: 'third answer' }]] as never,
    });
    // The guard reads a file the workspace lacks: it fails (exit 1) every time it runs.
    writeHooks(h.configDir, { Stop: [{ hooks: [{ ...cmd('cat .guard/rules >/dev/null'), failClosed: true }] }] });
    const a = await agentInWork(h, 'hooks');
    const blocks = await h.turn(a.path, 'hello');
    expect(blocks.filter((b) => b.role === 'assistant').map((b) => b.content)).toEqual([
      'first answer',
      'second answer',
    ]);
    expect(h.mock.requests.filter((r) => r.path.includes('chat/completions'))).toHaveLength(2);
    expect(lastRequest(h)).toMatch(
      /A Stop hook did not let the turn end yet: Stop hook .* failed \(exit 1\) and fails closed/,
    );
    expect(
      blocks.some((b) => b.role === 'error' && /the turn ends unconfirmed: .*fails closed, again/.test(b.content)),
    ).toBe(true);
    // agent/idx's last column: how the turn ended.
    const idx = await h.c.readText(`session/${a.session}/agent/idx`);
    expect(idx.trim().split('\n').at(-1)!.split('\t').at(-1)).toBe('error');
  });

  it('a Stop guard that failed once and then passes (the agent mended what it reads) lets the turn end', async () => {
    const h = await testHarness({
      profiles: { hooks: PROFILE },
      turns: [
        [{ text: 'first answer' }],
        [{ toolCalls: [shell('mkdir -p .guard && echo ok > .guard/rules')] }],
        [{ text: 'done' }],
      ] as never,
    });
    writeHooks(h.configDir, { Stop: [{ hooks: [{ ...cmd('cat .guard/rules >/dev/null'), failClosed: true }] }] });
    const a = await agentInWork(h, 'hooks');
    const blocks = await h.turn(a.path, 'hello');
    expect(blocks.some((b) => b.role === 'error')).toBe(false);
    expect(blocks.filter((b) => b.role === 'assistant').map((b) => b.content)).toEqual(['first answer', 'done']);
    expect(h.mock.requests.filter((r) => r.path.includes('chat/completions'))).toHaveLength(3);
    const idx = await h.c.readText(`session/${a.session}/agent/idx`);
    expect(idx.trim().split('\n').at(-1)!.split('\t').at(-1)).toBe('ok');
  });

  it('PreCompact runs before a compaction; SubagentStop when a sub-agent ends', async () => {
    const h = await testHarness({ profiles: { hooks: PROFILE }, turns: [[{ text: 'first' }]] as never });
    writeHooks(h.configDir, {
      PreCompact: [{ hooks: [cmd('cat > precompact.json')] }],
      SubagentStop: [{ hooks: [cmd('cat > subagentstop.json')] }],
      Stop: [{ hooks: [cmd('cat > stop.json')] }],
    });
    const a = await agentInWork(h, 'hooks');
    await h.turn(a.path, 'hello');
    expect(JSON.parse(readFileSync(join(a.work, 'stop.json'), 'utf8'))).toMatchObject({
      hook_event_name: 'Stop',
      stop_hook_active: false,
    });
    // The summary request gets the mock's default reply.
    expect(await h.c.rdwrText(`${a.path}/ctl`, 'compact')).toMatch(/Compacted/);
    expect(JSON.parse(readFileSync(join(a.work, 'precompact.json'), 'utf8'))).toMatchObject({
      hook_event_name: 'PreCompact',
      trigger: 'manual',
    });
    h.mock.script([{ text: 'sub done' }]);
    expect(await h.c.rdwrText(`session/${a.session}/agent/new`, 'agent=hooks prompt=do a small thing')).toContain(
      'sub done',
    );
    expect(JSON.parse(readFileSync(join(a.work, 'subagentstop.json'), 'utf8'))).toMatchObject({
      hook_event_name: 'SubagentStop',
    });
  });

  it('a malformed hooks.json is an error naming the file and the field, and the agent keeps working; config/hooks.json refuses it', async () => {
    const h = await testHarness({ profiles: { hooks: PROFILE }, turns: script(shell('echo fine')) as never });
    writeFileSync(
      join(h.configDir, 'hooks.json'),
      JSON.stringify({
        hooks: { PreToolUse: [{ matcher: 'shell', hooks: [{ type: 'command', command: 'true', timeout: -1 }] }] },
      }),
    );
    const a = await agentInWork(h, 'hooks');
    const blocks = await h.turn(a.path, 'go');
    expect(toolResults(blocks)[0]).toContain('fine');
    const note = hookBlocks(blocks).find((t) => t.includes('hooks.json'))!;
    expect(note).toContain(`${join(h.configDir, 'hooks.json')}: hooks.PreToolUse[0].hooks[0].timeout`);
    await expect(h.c.write('config/hooks.json', '{"hooks": {"PreToolUsage": []}}')).rejects.toThrow(
      /hooks\.PreToolUsage: unknown event/,
    );
    await expect(
      h.c.write('config/hooks.json', '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}'),
    ).resolves.toBeUndefined();
    expect(JSON.parse(await h.c.readText('config/hooks.json')).hooks.Stop).toHaveLength(1);
  });

  it("ctl hooks off turns the session's hooks off, on turns them back on", async () => {
    const h = await testHarness({
      profiles: { hooks: PROFILE },
      turns: [...script(shell('echo a')), ...script(shell('echo b'))] as never,
    });
    writeHooks(h.configDir, { PreToolUse: [{ hooks: [cmd('echo blocked >&2; exit 2')] }] });
    const a = await agentInWork(h, 'hooks');
    expect(await h.c.rdwrText(`session/${a.session}/ctl`, 'hooks off')).toBe('hooks off\n');
    let blocks = await h.turn(a.path, 'go');
    expect(toolResults(blocks)[0]).toContain('a');
    expect(await h.c.rdwrText(`session/${a.session}/ctl`, 'hooks on')).toBe('hooks on\n');
    blocks = await h.turn(a.path, 'go');
    expect(toolResults(blocks).at(-1)).toContain('blocked by a PreToolUse hook: blocked');
  });

  it("a project's .ollie-hooks.json runs only once the owner trusts it; changed, it refuses tool calls until the owner decides", async () => {
    const h = await testHarness({
      profiles: { hooks: PROFILE },
      turns: [...script(shell('echo one')), ...script(shell('echo two')), ...script(shell('echo blocked'))] as never,
    });
    const a = await agentInWork(h, 'hooks');
    const file = join(a.work, '.ollie-hooks.json');
    const project = (text: string) =>
      writeFileSync(file, JSON.stringify({ hooks: { PreToolUse: [{ hooks: [cmd(`echo ${text} >&2; exit 2`)] }] } }));
    project('project-says-no');
    let blocks = await h.turn(a.path, 'go');
    expect(toolResults(blocks)[0]).toContain('one');
    expect(hookBlocks(blocks).some((t) => t.includes('is not applied: the owner has not trusted it'))).toBe(true);
    await h.c.write('config/trust', `trust ${file}\n`);
    blocks = await h.turn(a.path, 'go');
    expect(toolResults(blocks).at(-1)).toContain('blocked by a PreToolUse hook: project-says-no');
    project('changed');
    blocks = await h.turn(a.path, 'go');
    // Not its hooks, and no tool call either: the file may have held the owner's guard.
    expect(toolResults(blocks).at(-1)).toContain('changed since the owner trusted it; tool calls are refused');
    expect(toolResults(blocks).at(-1)).not.toContain('changed\n');
    expect(hookBlocks(blocks).some((t) => t.includes('changed since the owner trusted it'))).toBe(true);
    await h.c.write('config/trust', `untrust ${file}\n`);
    expect(await h.c.readText('config/trust')).toBe('');
    h.mock.script(...script(shell('echo three')));
    blocks = await h.turn(a.path, 'go');
    expect(toolResults(blocks).at(-1)).toContain('three');
  });
});
