/**
 * Open files of a real olliesrv over its Unix socket: a fid is bound to the session or agent it was opened on,
 * not to the name it walked (it keeps working through renames, and says so once the object is gone); the
 * session plan takes appends; a stat of a generated file (help, an agent's log) runs no read handler.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Namespace, OREAD, ORDWR, OWRITE } from '../../src/ninep/index.js';
import { ChatLog } from '../../src/olliesrv/agent/chatlog.js';
import { harness, type Harness } from './agent-harness.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

describe('open files of olliesrv', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness({ tools: false });
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await h.close();
  });

  it('an open plan fid keeps working after its session is renamed; an append to plan extends it', async () => {
    const { c } = h;
    await c.rdwr('session/new', `name=one cwd=${h.dir}`);
    await c.write('session/one/plan', '- [ ] first\n', { truncate: true });
    const appender = await c.open('session/one/plan', OWRITE);
    const rewriter = await c.open('session/one/plan', ORDWR);
    await c.rename('session/one', 'two');
    await expect(c.stat('session/one/plan')).rejects.toThrow('file not found');

    // As `echo >> plan` through a mount: stat for the length, write there.
    const len = Number((await c.stat('session/two/plan')).length);
    expect(len).toBe(12);
    await appender.write(len, enc.encode('- [ ] second\n'));
    await appender.clunk();
    expect(await c.readText('session/two/plan')).toBe('- [ ] first\n- [ ] second\n');

    expect(dec.decode(await rewriter.read(0, 100))).toBe('- [ ] first\n- [ ] second\n');
    await rewriter.write(0, enc.encode('- [x] all done\n'));
    expect(dec.decode(await rewriter.read(0, 100))).toBe('- [x] all done\n');
    await rewriter.clunk();
    expect(await c.readText('session/two/plan')).toBe('- [x] all done\n');
  });

  it("an agent's open files follow it through a session rename and its own rename; once it is gone they say so", async () => {
    const { c } = h;
    const a = await h.agent();
    const prompt = await c.open(`${a.path}/prompt`, OWRITE);
    const name = await c.open(`${a.path}/name`, OREAD);
    const log = await c.open(`${a.path}/log`, OREAD);
    const state = await c.open(`${a.path}/state`, OREAD);

    await c.rename(`session/${a.session}`, 'moved');
    await c.rename(`session/moved/agent/${a.name}`, 'renamed');

    h.mock.script([{ text: 'the reply after the renames' }]);
    const agent = h.daemon.agents.all().find((x) => x.id === a.aid)!;
    const turn = agent.nextTurn();
    await prompt.write(0, enc.encode('hello after the renames'));
    await prompt.clunk();
    await turn;
    expect(dec.decode(await name.read(0, 100))).toBe('renamed\n');
    const text = dec.decode(await log.read(0, 65536));
    expect(text).toContain('hello after the renames');
    expect(text).toContain('the reply after the renames');
    expect(dec.decode(await state.read(0, 100))).toBe('idle\n');

    await c.write('session/moved/ctl', 'kill');
    await expect(state.read(0, 100)).rejects.toThrow(/the session it was opened in is gone/);
    await Promise.all([name.clunk(), log.clunk(), state.clunk()]);
  });

  it("stat of a generated file (help, an agent's log) runs no read handler; reading it runs one", async () => {
    const { c } = h;
    const a = await h.agent();
    const help = vi.spyOn(Namespace.prototype, 'help');
    const rendered = vi.spyOn(ChatLog.prototype, 'rendered');
    for (let i = 0; i < 10; i++) {
      await c.stat('help');
      await c.stat(`${a.path}/log`);
    }
    await c.ls(a.path);
    const f = await c.open(`${a.path}/log`, OREAD);
    await f.stat();
    expect(help).not.toHaveBeenCalled();
    expect(rendered).not.toHaveBeenCalled();
    await f.read(0, 100);
    await f.clunk();
    expect(await c.readText('help')).toContain('/session/{session}/plan');
    expect(help).toHaveBeenCalledTimes(1);
    expect(rendered).toHaveBeenCalledTimes(1);
  });
});
