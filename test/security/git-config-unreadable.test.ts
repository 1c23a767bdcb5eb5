/**
 * An agent against toolsrv itself, through the `.git/config` it reads to find what to protect (sandbox/protected.ts,
 * git-config-paths.ts). The protection is looked up at every command and at every re-check of the session's MCP
 * servers (every tool call's end, every 2 s), in toolsrv's one thread: a configuration file that is a FIFO (or
 * includes one, or `/dev/zero`) would be read there, and a read that never ends stops every call, server and
 * session that toolsrv serves. The agent makes `.git` in one call (not protected yet: docs/sandbox.md, "Not
 * covered"); its next calls must still run.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { testHarness } from '../olliesrv/agent-harness.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';
import { ROOT } from '../toolsrv/mcp-helpers.js';
import { attackerProfile, results, script, sh } from './scripted-calls.js';

beforeAll(() => buildNative());

async function attack(make: string): Promise<string[]> {
  const h = await testHarness({ profiles: { attacker: attackerProfile(['shell'], 30) } });
  const ws = join(h.dir, 'ws');
  mkdirSync(ws);
  const a = await h.agent({ profile: 'attacker', session: (await h.c.rdwrText('session/new', `cwd=${ws}`)).trim() });
  h.mock.script(...script(sh('echo first'), sh(`mkdir -p .git/hooks && ${make} && echo made`), sh('echo alive')));
  return results(await h.turn(a.path, 'attack', 30_000));
}

describe('an agent whose .git/config cannot be read to its end', () => {
  it('makes .git/config a FIFO: its next call still runs', async () => {
    const out = await attack('mkfifo .git/config');
    expect(out[1], out.join('\n')).toContain('made');
    expect(out[2], out.join('\n')).toContain('alive');
  }, 60_000);

  it('includes a FIFO of its own from .git/config: its next call still runs', async () => {
    const out = await attack('mkfifo pipe && printf "[include]\\n\\tpath = ../pipe\\n" > .git/config');
    expect(out[1], out.join('\n')).toContain('made');
    expect(out[2], out.join('\n')).toContain('alive');
  }, 60_000);
});

describe('what the git configuration reader reads', () => {
  // In a child with its memory bounded: on a reader that reads /dev/zero to its end, the child fails, not the machine.
  const run = (config: string): { status: number | null; out: string } => {
    const program = `
      const { mkdtempSync, writeFileSync } = await import('node:fs');
      const { join } = await import('node:path');
      const { gitConfigPaths } = await import(${JSON.stringify(join(ROOT, 'dist', 'toolsrv', 'sandbox', 'git-config-paths.js'))});
      const d = mkdtempSync('/tmp/ollie-gitconfig-');
      writeFileSync(join(d, 'config'), ${JSON.stringify(config)});
      console.log(JSON.stringify(gitConfigPaths(join(d, 'config'), d)));`;
    const r = spawnSync(
      '/bin/sh',
      ['-c', 'ulimit -v 2000000; exec "$0" --input-type=module -e "$1"', process.execPath, program],
      {
        encoding: 'utf8',
        timeout: 15_000,
      },
    );
    return { status: r.status, out: r.stdout + r.stderr };
  };

  it('skips an include of /dev/zero (a device never ends), and reads what follows', () => {
    const r = run('[include]\n\tpath = /dev/zero\n[core]\n\thooksPath = githooks\n');
    expect(r.status, r.out).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ includes: ['/dev/zero'], hooksPaths: ['githooks'] });
  }, 30_000);
});
