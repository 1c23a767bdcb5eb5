/**
 * A listening TCP socket with the network off (review of the kernel branch). listen(2) on a socket that was
 * never bound binds it to an ephemeral port on every address, and Landlock enforces its port rules in the bind
 * hook only (measured on Linux 6.18, Landlock ABI 7): with the network off a tool served connections from the
 * machine — and, on 0.0.0.0, from the LAN. Where neither a TCP port may be bound nor a Unix socket made, the
 * filter refuses listen(2); tried with the built helper, outside the sandbox first so that the test can fail.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { loadPolicy, sandboxCommand, type SandboxExtra, type SandboxPolicy } from '../../src/toolsrv/sandbox/index.js';
import { buildNative, makeWorld, shippedPolicyText, writePolicy, type World } from '../toolsrv/sandbox-helpers.js';

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

function policy(): SandboxPolicy {
  writePolicy(w, shippedPolicyText());
  return loadPolicy(w);
}

const SERVER = `import socket, sys
s = socket.socket()
try:
    s.listen(1)
except OSError as e:
    print("listen refused", e.errno, flush=True); sys.exit(0)
print("port", s.getsockname()[1], flush=True)
s.settimeout(5)
c, _ = s.accept()
c.sendall(b"served from the tool\\n")`;

/** Runs the listener (inside the sandbox for `p`, outside with null) and connects to it from here. */
async function tryServe(p: SandboxPolicy | null, extra?: SandboxExtra): Promise<string> {
  const env = { ...process.env, HOME: w.home };
  const cmd = p
    ? sandboxCommand(p, ['/usr/bin/python3', '-c', SERVER], extra)
    : { file: '/usr/bin/python3', args: ['-c', SERVER], env: (e: NodeJS.ProcessEnv) => e };
  const child = spawn(cmd.file, cmd.args, { cwd: w.cwd, env: cmd.env(env), stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const first = await new Promise<string>((ok) => {
      let line = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        line += d;
        if (line.includes('\n')) ok(line.split('\n')[0]!);
      });
    });
    const m = /^port (\d+)$/.exec(first);
    if (!m) return first;
    return await new Promise<string>((ok, ko) => {
      let got = '';
      net
        .connect(Number(m[1]), '127.0.0.1')
        .setEncoding('utf8')
        .on('data', (d: string) => (got += d))
        .on('end', () => ok(got.trim()))
        .on('error', ko);
    });
  } finally {
    child.kill('SIGKILL');
  }
}

describe('listening without bind', () => {
  test('a tool cannot serve TCP connections with the network off, nor with a connect-only port rule', async () => {
    expect(await tryServe(null)).toBe('served from the tool');
    expect(await tryServe(policy())).toBe('listen refused 13');
    expect(await tryServe(policy(), { network: { connectTcp: [443] } })).toBe('listen refused 13');
  });
});
