/**
 * Attacks on checkpoints and rewind from inside the sandbox, the way a model would make them: scripted tool
 * calls (client_9p, shell) of a real agent against a real olliesrv, toolsrv, sandbox helper and mock LLM.
 * An agent may read its own checkpoint/idx, files and diff; it may never rewind (itself or another), mark
 * reviews, read other agents' checkpoints or the store, nor make the owner's rewind write outside the roots or
 * into .git through links it planted.
 */
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { harness, type Harness } from '../olliesrv/agent-harness.js';
import { ATTACKER, closeRun, client9p, results, script, sh } from './scripted-calls.js';

let h: Harness | undefined;
let ws: string | undefined;
afterEach(async () => {
  await closeRun(h, ws);
  [h, ws] = [undefined, undefined];
});

const SELF = 'session/$OLLIE_SESSION_ID/agent/$OLLIE_UNAME';

async function setup(): Promise<{ path: string; session: string; outside: string }> {
  ws = mkdtempSync(join(tmpdir(), 'ollie-cp-attack-'));
  writeFileSync(join(ws, 'a.txt'), 'one\n');
  h = await harness({ profiles: { attacker: ATTACKER } });
  // Outside the workspace, where the sandbox lets no tool write.
  const outside = join(h.dir, 'outside');
  mkdirSync(outside);
  writeFileSync(join(outside, 'f'), 'outside\n');
  const session = (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim();
  const a = await h.agent({ session, profile: 'attacker' });
  return { path: a.path, session, outside };
}

describe('an agent attacking checkpoints', () => {
  it('reads its own checkpoints but cannot rewind, collect, or mark reviews, by ctl or by prompt', async () => {
    const { path } = await setup();
    h!.mock.script(...script(sh("sed -i 's/one/two/' a.txt")));
    await h!.turn(path, 'edit');
    h!.mock.script(
      ...script(
        client9p('read', `${SELF}/checkpoint/idx`),
        client9p('read', `${SELF}/checkpoint/1/diff`),
        client9p('rdwr', `${SELF}/ctl`, 'rewind 1 force'),
        client9p('rdwr', `${SELF}/ctl`, 'checkpoint gc'),
        client9p('write', `${SELF}/prompt`, '/rewind 1 all'),
        client9p('write', `${SELF}/checkpoint/1/reviewed`, 'a.txt'),
      ),
    );
    const r = results(await h!.turn(path, 'attack')).slice(-6);
    expect(r[0]).toMatch(/^1\t1\t/);
    expect(r[1]).toContain('+two');
    expect(r[2]).toMatch(/refused|permission denied/);
    expect(r[3]).toMatch(/refused|permission denied/);
    expect(r[4]).toMatch(/refused|permission denied/);
    expect(r[5]).toMatch(/permission denied/);
    // Nothing was rewound, no review was marked, and the rounds of the attack were checkpointed like any other.
    expect(readFileSync(join(ws!, 'a.txt'), 'utf8')).toBe('two\n');
    expect(await h!.c.readText(`${path}/checkpoint/1/reviewed`)).toBe('');
    expect(await h!.c.readText(`${path}/checkpoint/idx`)).not.toContain('rewind');
    // The owner may.
    expect(await h!.c.rdwrText(`${path}/ctl`, 'rewind 1')).toContain('rewound to checkpoint 1');
    expect(readFileSync(join(ws!, 'a.txt'), 'utf8')).toBe('one\n');
  });

  it("cannot read another agent's checkpoints, nor the store in the data dir", async () => {
    const { path, session } = await setup();
    const other = (await h!.c.rdwrText(`session/${session}/agent/new`, 'agent=attacker name=victim')).trim();
    const vpath = `session/${session}/agent/${other}`;
    h!.mock.script(...script(sh('echo secret > victim.txt')));
    await h!.turn(vpath, 'write');
    expect(await h!.c.readText(`${vpath}/checkpoint/idx`)).toMatch(/^1\t/);
    h!.mock.script(
      ...script(
        client9p('read', `session/$OLLIE_SESSION_ID/agent/${other}/checkpoint/idx`),
        client9p('read', `session/$OLLIE_SESSION_ID/agent/${other}/checkpoint/1/diff`),
        client9p('rdwr', `session/$OLLIE_SESSION_ID/agent/${other}/ctl`, 'rewind 1'),
        sh(
          `ls ${join(h!.dataDir, 'checkpoints')} && cat ${join(h!.dataDir, 'checkpoints', 'objects')}/*/* || echo DENIED`,
        ),
      ),
    );
    const r = results(await h!.turn(path, 'attack')).slice(-4);
    expect(r[0]).toMatch(/permission denied/);
    expect(r[1]).toMatch(/permission denied/);
    expect(r[2]).toMatch(/permission denied|refused/);
    expect(r[3]).toContain('DENIED');
    expect(r[3]).not.toContain('secret');
    expect(existsSync(join(ws!, 'victim.txt'))).toBe(true);
  });

  it("cannot make the owner's rewind write through a link it planted, outside the roots or into .git", async () => {
    const { path, outside } = await setup();
    mkdirSync(join(ws!, '.git'));
    writeFileSync(join(ws!, '.git', 'config'), '[core]\n');
    // Round 1 makes d/f; round 2 swaps d for a link to a directory outside and plants a hook in .git; round 3
    // links the checkpointed file to a file outside.
    h!.mock.script(
      ...script(
        sh('mkdir d && echo mine > d/f && ln -s /etc etc-link'),
        sh(
          `rm -rf d && ln -s ${outside} d && echo evil > .git/description; echo evil > .git/hooks/post-checkout; true`,
        ),
        sh(`rm a.txt && ln -s ${join(outside, 'f')} a.txt`),
      ),
    );
    await h!.turn(path, 'plant');
    expect(lstatSync(join(ws!, 'd')).isSymbolicLink()).toBe(true);
    // The walk recorded the links as links: nothing of /etc or of the outside dir is in a checkpoint.
    expect(await h!.c.readText(`${path}/checkpoint/1/files`)).toBe('A\td/f\nA\tetc-link\n');
    expect(await h!.c.readText(`${path}/checkpoint/2/files`)).toBe('T\td\nD\td/f\n');
    // The owner rewinds to before round 2: d must become a directory again with f in it, and the outside stay.
    await h!.c.rdwrText(`${path}/ctl`, 'rewind 2');
    expect(lstatSync(join(ws!, 'd')).isDirectory()).toBe(true);
    expect(readFileSync(join(ws!, 'd', 'f'), 'utf8')).toBe('mine\n');
    expect(readFileSync(join(ws!, 'a.txt'), 'utf8')).toBe('one\n');
    expect(lstatSync(join(ws!, 'a.txt')).isFile()).toBe(true);
    expect(readFileSync(join(outside, 'f'), 'utf8')).toBe('outside\n');
    expect(existsSync(join(outside, 'd'))).toBe(false);
    // .git is neither checkpointed nor rewound: what the agent wrote there is still there for the owner to see
    // (its hooks it could not write: they stay read-only to tools, test/security/git-hooks.test.ts).
    expect(readFileSync(join(ws!, '.git', 'description'), 'utf8')).toBe('evil\n');
    expect(existsSync(join(ws!, '.git', 'hooks', 'post-checkout'))).toBe(false);
    // Rewinding to before everything removes the agent's link to /etc and leaves /etc alone.
    await h!.c.rdwrText(`${path}/ctl`, 'rewind 1');
    expect(existsSync(join(ws!, 'etc-link'))).toBe(false);
    expect(existsSync('/etc/passwd')).toBe(true);
  });
});
