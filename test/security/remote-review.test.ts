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
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm, type MockLlm } from '../../src/devtools/mock-llm/server.js';
import type { Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { startDaemon, type Daemon } from '../../src/olliesrv/daemon.js';
import { remotePackage } from '../../src/olliesrv/toolclient/remote.js';
import { startSshd, sshdAvailable, type Sshd } from '../helpers/sshd.js';
import { mockBackends, rmrf, socketPath, tempDir, until } from '../../e2e/helpers.js';

describe.skipIf(!sshdAvailable())('remote sessions: review attacks', () => {
  let sshd: Sshd;
  let mock: MockLlm;
  let dir: string;
  let sock: string;
  let daemon: Daemon;
  let c: Client;

  beforeAll(async () => {
    [sshd, mock] = await Promise.all([startSshd(), startMockLlm()]);
    dir = tempDir('ollie-sec-remote-review-');
    mkdirSync(join(dir, 'local'));
    mkdirSync(join(dir, 'config', 'agents'), { recursive: true });
    writeFileSync(join(dir, 'config', 'backends.conf'), mockBackends(mock.url));
    writeFileSync(
      join(dir, 'config', 'agents', 'e2e.json'),
      JSON.stringify({ description: 'e2e agent', prompt: 'You are a test agent.', autoLoad: ['shell'], maxSteps: 20 }),
    );
    sock = socketPath(dir);
    daemon = await startDaemon({
      socket: sock,
      dataDir: join(dir, 'data'),
      configDir: join(dir, 'config'),
      skills: false,
      toolCacheFile: false,
      env: { ...process.env, HOME: join(dir, 'local'), OLLIE_SSH_CONFIG: sshd.sshConfig },
      log: () => undefined,
      retryDelay: () => 10,
    });
    c = await dial(`unix!${sock}`, { uname: userInfo().username });
    // The session works in the remote user's HOME: the cache of toolsrv's package is inside it.
    await c.rdwrText('session/new', `name=home cwd=${sshd.remoteHome} remote=${sshd.host}`);
    await c.rdwrText('session/home/agent/new', 'name=coder agent=e2e backend=mock');
    for (const w of ['a', 'b']) {
      mkdirSync(join(sshd.remoteHome, w));
      await c.rdwrText('session/new', `name=${w} cwd=${join(sshd.remoteHome, w)} remote=${sshd.host}`);
      await c.rdwrText(`session/${w}/agent/new`, 'name=coder agent=e2e backend=mock');
    }
  }, 60_000);
  afterAll(async () => {
    c?.close();
    await daemon?.close();
    await mock?.close();
    await sshd?.stop();
    rmrf(dir);
  });

  /** Starts a turn of session s's agent; `done` resolves with the tool results of that turn. */
  const startTurn = async (s = 'home'): Promise<{ done: Promise<string[]> }> => {
    const aid = (await c.readText(`session/${s}/agent/coder/id`)).trim();
    const a = daemon.agents.all().find((x) => x.id === aid)!;
    const before = a.log.blocks().length;
    const done = a.nextTurn();
    // The write returns once the turn has taken the prompt, which may be after a running call: not awaited.
    const wrote = c.write(`session/${s}/agent/coder/prompt`, 'go');
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
    const marker = join(dir, 'escaped');
    // The package's path there is known to anyone who knows the Ollie build (its version and hash).
    const pkg = join(sshd.remoteHome, '.cache', 'ollie', 'remote', remotePackage().id);
    const swap = [
      `cd ${pkg}/native/build; pwd`,
      'mv ollie-sandbox .real && echo MOVED',
      `printf '#!/bin/sh\\ntouch ${marker}\\nexec %s/.real "$@"\\n' "$PWD" > ollie-sandbox && chmod 755 ollie-sandbox && echo SWAPPED`,
      `echo x >> ${pkg}/dist/toolsrv/main.js && echo APPENDED`,
      `touch ${pkg}/../planted && echo PLANTED`,
      `ls ${pkg}/.. && echo LISTED`,
      'echo end',
    ].join('; ');
    mock.script(
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
    const go = join(sshd.remoteHome, 'a', 'go');
    mock.script([
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
    await until(() => existsSync(join(sshd.remoteHome, 'a', 'holding')) || undefined, 'A holds the lock', 30_000);
    mock.script(
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
