/**
 * Review attacks on remote sessions (real sshd on loopback, the real daemon, scripted tool calls):
 *
 * - the package toolsrv runs from on the remote (~/.cache/ollie/remote/ID: its helpers run unsandboxed) lies in
 *   the remote HOME, which a session whose cwd is that HOME may write: an agent replaces `ollie-sandbox` with a
 *   script of its own, and the next tool call runs it outside the sandbox. Refused: the cache is never writable.
 * - on the toolsrv the sessions of a host share, session A's agent holds the global lock with a foreground call
 *   that waits forever (a timeout flag of its choosing): session B's calls must not wait behind it.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { remotePackage } from '../../src/olliesrv/toolclient/remote.js';
import { sshdAvailable, useRemoteRig } from '../helpers/sshd.js';
import { until } from '../../e2e/helpers.js';

describe.skipIf(!sshdAvailable())('remote sessions: review attacks', () => {
  const r = useRemoteRig({ prefix: 'ollie-sec-remote-review-' });

  beforeAll(async () => {
    // The session works in the remote user's HOME: the cache of toolsrv's package is inside it.
    await r.remoteSession('home', r.sshd.remoteHome);
    for (const w of ['a', 'b']) {
      mkdirSync(join(r.sshd.remoteHome, w));
      await r.remoteSession(w, join(r.sshd.remoteHome, w));
    }
  });

  /** Starts a turn of session s's agent; `done` resolves with the tool results of that turn. */
  const startTurn = async (s = 'home'): Promise<{ done: Promise<string[]> }> => {
    const a = await r.agent(`session/${s}/agent/coder`);
    const before = a.log.blocks().length;
    const done = a.nextTurn();
    // The write returns once the turn has taken the prompt, which may be after a running call: not awaited.
    const wrote = r.c.write(`session/${s}/agent/coder/prompt`, 'go');
    return {
      done: Promise.all([done, wrote]).then(() =>
        a.log
          .blocks()
          .slice(before)
          .filter((b) => b.role === 'tool')
          .map((b) => b.content),
      ),
    };
  };
  const turn = async (s = 'home'): Promise<string[]> => await (await startTurn(s)).done;

  it('an agent working in the remote HOME cannot replace the sandbox helper toolsrv runs there', async () => {
    const marker = join(r.dir, 'escaped');
    // The package's path there is known to anyone who knows the Ollie build (its version and hash).
    const pkg = join(r.sshd.remoteHome, '.cache', 'ollie', 'remote', remotePackage().id);
    const swap = [
      `cd ${pkg}/native/build; pwd`,
      'mv ollie-sandbox .real && echo MOVED',
      `printf '#!/bin/sh\\ntouch ${marker}\\nexec %s/.real "$@"\\n' "$PWD" > ollie-sandbox && chmod 755 ollie-sandbox && echo SWAPPED`,
      `echo x >> ${pkg}/dist/toolsrv/main.js && echo APPENDED`,
      `touch ${pkg}/../planted && echo PLANTED`,
      `ls ${pkg}/.. && echo LISTED`,
      'echo end',
    ].join('; ');
    r.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: swap } }] }],
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo next-call' } }] }],
      [{ text: 'done' }],
    );
    const [swapped, next] = await turn();
    expect(swapped).toContain('end');
    expect(next).toContain('next-call');
    // The helper runs outside the sandbox: a replaced one would have left this file here.
    expect(existsSync(marker)).toBe(false);
    expect(swapped).not.toMatch(/MOVED|SWAPPED|APPENDED|PLANTED|LISTED/);
  }, 90_000);

  it('session A holding the global lock of the shared toolsrv forever does not stall session B', async () => {
    const go = join(r.sshd.remoteHome, 'a', 'go');
    r.mock.script([
      {
        toolCalls: [
          {
            name: 'shell',
            args: { command: 'touch holding; while [ ! -e go ]; do sleep 0.05; done; echo a-released', timeout: 86400 },
          },
        ],
      },
    ]);
    const aDone = (await startTurn('a')).done;
    await until(() => existsSync(join(r.sshd.remoteHome, 'a', 'holding')) || undefined, 'A holds the lock', 30_000);
    r.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo b-ran' } }] }],
      [{ text: 'b done' }],
      [{ text: 'a done' }],
    );
    const bDone = startTurn('b').then((t) => t.done);
    // B's call must go through while A still waits; the race gives up well before A's release.
    const b = await Promise.race([
      bDone,
      new Promise<string[]>((r) => setTimeout(() => r(['B still waiting']), 20_000)),
    ]);
    writeFileSync(go, '');
    expect(b.join('\n')).toContain('b-ran');
    expect((await aDone).join('\n')).toContain('a-released');
    await bDone;
  }, 90_000);
});
