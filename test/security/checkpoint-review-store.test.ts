/**
 * Review attack on the store's limits, the way a model would make it (scripted shell and client_9p calls of a
 * real agent against a real daemon, toolsrv and sandbox): a round whose files pass checkpoint.max_total has no
 * `post` manifest, so reading its checkpoint/ID/diff walks the workspace again; that walk must keep to
 * max_total too, or every read copies the agent's gigabytes into the owner's data dir (beyond keep.size, out
 * of every limit the sandbox puts on the tools). Nor may many reads of the running round's diff, each finding
 * new bytes, add up to more than max_total.
 */
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { harness, type Harness } from '../olliesrv/agent-harness.js';
import { ATTACKER, closeRun, type Call, client9p, results, script, sh } from './scripted-calls.js';

let h: Harness | undefined;
let ws: string | undefined;
afterEach(async () => {
  await closeRun(h, ws);
  [h, ws] = [undefined, undefined];
});

const read = (path: string): Call => client9p('read', path);
const SELF = 'session/$OLLIE_SESSION_ID/agent/$OLLIE_UNAME';

function bytesUnder(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (e.isFile()) n += statSync(join(e.parentPath, e.name)).size;
  return n;
}

/** An attacker agent in a fresh workspace, under a checkpoint.max_total of 64 KiB: the harness and the agent's path. */
async function attackerWithSmallStore(): Promise<{ hh: Harness; path: string }> {
  ws = mkdtempSync(join(tmpdir(), 'ollie-cp-fill-'));
  writeFileSync(join(ws, 'a.txt'), 'one\n');
  h = await harness({ profiles: { attacker: ATTACKER } });
  writeFileSync(
    join(h.configDir, 'sandbox.yaml'),
    `${readFileSync(join(process.cwd(), 'data', 'sandbox.yaml'), 'utf8')}\ncheckpoint:\n  max_total: 64 KiB\n`,
  );
  const session = (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim();
  return { hh: h, path: (await h.agent({ session, profile: 'attacker' })).path };
}

describe('an agent filling the checkpoint store', () => {
  it("cannot make reads of an unfinished checkpoint's diff copy more than max_total into the store", async () => {
    const { hh, path } = await attackerWithSmallStore();
    const fill = sh('mkdir -p fill && for i in 1 2 3 4 5 6 7 8; do head -c 131072 /dev/urandom > fill/$i; done');
    // Round 1 writes 1 MiB: its checkpoint has a `pre` but no `post`. Then, round after round, new random bytes
    // and a read of checkpoint 1's diff.
    hh.mock.script(
      ...script(
        fill,
        read(`${SELF}/checkpoint/1/diff`),
        fill,
        read(`${SELF}/checkpoint/1/diff`),
        fill,
        read(`${SELF}/checkpoint/1/diff`),
      ),
    );
    const r = results(await hh.turn(path, 'fill'));
    expect(r).toHaveLength(6);
    expect(await hh.c.readText(`${path}/checkpoint/1/info`)).toContain('done=0');
    // The store holds the first checkpoint's few bytes, not 3 MiB of the agent's random data.
    expect(bytesUnder(join(hh.dataDir, 'checkpoints', 'objects'))).toBeLessThan(256 * 1024);
    expect(r[1]).toMatch(/no record of the files after its round/);
  });

  it("cannot make many reads of the running round's diff copy more than max_total into the store", async () => {
    const { hh, path } = await attackerWithSmallStore();
    // Round 2, its calls run together: new random bytes (40 KB, under max_total, so every read of the running
    // round's diff stores a new version) and a read of its own diff, eight times over.
    const calls = Array.from({ length: 8 }, (_, i) => [
      sh(`head -c 40000 /dev/urandom > r${i}.t && mv r${i}.t r`),
      read(`${SELF}/checkpoint/2/diff`),
    ]).flat();
    hh.mock.script([{ toolCalls: [sh('echo start > s')] }], [{ toolCalls: calls }], [{ text: 'done' }]);
    const r = results(await hh.turn(path, 'fill'));
    expect(r).toHaveLength(17);
    // The store holds at most max_total of what the reads found (and the rounds' own checkpoints), not 16 × 40 KB.
    expect(bytesUnder(join(hh.dataDir, 'checkpoints', 'objects'))).toBeLessThan(64 * 1024 + 3 * 40_000 + 16 * 1024);
  });
});
