/**
 * Remote attach (`-a ssh!HOST`) is no way for a model to reach this machine's daemon as its owner: from inside the
 * sandbox, a scripted shell call holding a working ssh config and key (in its own working directory) for a real
 * sshd on loopback dials `ssh!HOST!/the/local/daemon.sock` as ollie-9p does; the sandbox's network rules stop ssh
 * before the daemon is reached, and nothing changes. The control (the same dial outside the sandbox) works.
 */
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { startSshd, type Sshd } from '../helpers/sshd.js';
import { attackerProfile, results } from './scripted-calls.js';

let sshd: Sshd | undefined;
afterEach(async () => {
  await sshd?.stop();
  sshd = undefined;
});

describe('ollie-9p -a ssh! from inside the sandbox', () => {
  it('cannot reach the local daemon through a loopback sshd; the same command outside can', async () => {
    const h = await testHarness({ profiles: { attacker: attackerProfile(['shell']) } });
    sshd = await startSshd();
    const a = await h.agent({ profile: 'attacker' });
    const cli = join(PACKAGE_ROOT, 'dist', 'cli', 'ollie-9p.js');
    const args = ['-a', `ssh!${sshd.host}!${h.socket}`, 'rdwr', 'session/new'];
    // Not spawnSync: the daemon answering it runs in this process.
    const control = spawn(process.execPath, [cli, ...args], {
      env: { ...process.env, OLLIE_SSH_CONFIG: sshd.sshConfig },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    control.stdin.end('name=control');
    let out = '';
    control.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await new Promise((r) => control.once('close', r));
    expect(out).toBe('control\n');

    // The dialling itself, as ollie-9p, o and ollie mcp do it (src/platform/dial.ts).
    const probe = join(h.dir, 'probe.mjs');
    writeFileSync(
      probe,
      [
        `const { dialOllie } = await import(${JSON.stringify(join(PACKAGE_ROOT, 'dist', 'platform', 'dial.js'))});`,
        'try {',
        '  const c = await dialOllie(process.argv[2]);',
        "  process.stdout.write('ATTACHED ' + (await c.rdwrText('session/new', 'name=pwned')));",
        '  c.close();',
        "} catch (e) { process.stdout.write('REFUSED ' + e.message); }",
        '',
      ].join('\n'),
    );
    // The key, known_hosts and config where the agent can read them (its working directory): only the network
    // rules stand in the way.
    const mine = join(h.dir, 'ssh');
    mkdirSync(mine, { mode: 0o700 });
    for (const f of ['user_key', 'known_hosts']) copyFileSync(join(sshd.dir, f), join(mine, f));
    chmodSync(join(mine, 'user_key'), 0o600);
    writeFileSync(join(mine, 'config'), readFileSync(sshd.sshConfig, 'utf8').replaceAll(sshd.dir, mine));
    const command = `OLLIE_SSH_CONFIG=${join(mine, 'config')} node ${probe} 'ssh!${sshd.host}!${h.socket}'`;
    h.mock.script([{ toolCalls: [{ name: 'shell', args: { command } }] }], [{ text: 'done' }]);
    const blocks = await h.turn(a.path, 'become the owner over ssh', 60_000);
    const result = results(blocks).join('\n');
    expect(result).toMatch(/REFUSED ssh!ollie-test-remote!.*connect to host 127\.0\.0\.1 port \d+: Permission denied/);
    expect(result).not.toMatch(/ATTACHED/);
    expect(h.daemon.sessions.has('pwned')).toBe(false);
  });
});
