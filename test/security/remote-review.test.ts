/**
 * Review attacks on remote sessions (real sshd on loopback, the real daemon, scripted tool calls):
 *
 * - the package toolsrv runs from on the remote (~/.cache/ollie/remote/ID: its helpers run unsandboxed) lies in
 *   the remote HOME, which a session whose cwd is that HOME may write: an agent replaces `ollie-sandbox` with a
 *   script of its own, and the next tool call runs it outside the sandbox. Refused: the cache is never writable.
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
import { mockBackends, rmrf, socketPath, tempDir } from '../../e2e/helpers.js';

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
    writeFileSync(join(dir, 'config', 'agents', 'e2e.json'), JSON.stringify({ description: 'e2e agent', prompt: 'You are a test agent.', autoLoad: ['shell'], maxSteps: 20 }));
    sock = socketPath(dir);
    daemon = await startDaemon({
      socket: sock, dataDir: join(dir, 'data'), configDir: join(dir, 'config'), skills: false, toolCacheFile: false,
      env: { ...process.env, HOME: join(dir, 'local'), OLLIE_SSH_CONFIG: sshd.sshConfig },
      log: () => undefined, retryDelay: () => 10,
    });
    c = await dial(`unix!${sock}`, { uname: userInfo().username });
    // The session works in the remote user's HOME: the cache of toolsrv's package is inside it.
    await c.rdwrText('session/new', `name=home cwd=${sshd.remoteHome} remote=${sshd.host}`);
    await c.rdwrText('session/home/agent/new', 'name=coder agent=e2e backend=mock');
  }, 60_000);
  afterAll(async () => {
    c?.close();
    await daemon?.close();
    await mock?.close();
    await sshd?.stop();
    rmrf(dir);
  });

  const turn = async (): Promise<string[]> => {
    const aid = (await c.readText('session/home/agent/coder/id')).trim();
    const a = daemon.agents.all().find((x) => x.id === aid)!;
    const before = a.log.blocks().length;
    const done = a.nextTurn();
    await c.write('session/home/agent/coder/prompt', 'go');
    await done;
    return a.log.blocks().slice(before).filter((b) => b.role === 'tool').map((b) => b.content);
  };

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
});
