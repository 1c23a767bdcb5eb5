/**
 * End to end: the built `ollie serve` daemon in its own process, driven by the built `ollie-9p` CLI, as a
 * user would from a shell. Needs `npm run build:node` first (npm test does it).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');
const OLLIE = join(root, 'dist/cli/ollie.js');
const NINEP = join(root, 'dist/cli/ollie-9p.js');
const run = promisify(execFile);

interface Served {
  proc: ChildProcess;
  stdout: string;
  stderr: string;
  exited: Promise<number | null>;
}

function serve(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Served> {
  const proc = spawn(process.execPath, [OLLIE, 'serve', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const s: Served = { proc, stdout: '', stderr: '', exited: new Promise((r) => proc.once('exit', (code) => r(code))) };
  proc.stderr!.on('data', (d) => (s.stderr += d));
  return new Promise((resolveServed, reject) => {
    proc.stdout!.on('data', (d) => {
      s.stdout += d;
      if (s.stdout.includes('serving 9P on')) resolveServed(s);
    });
    void s.exited.then((code) => reject(new Error(`ollie serve exited ${code}: ${s.stderr}`)));
  });
}

describe('ollie serve + ollie-9p', () => {
  let dir: string;
  let sock: string;
  let args: string[];
  let daemon: Served | undefined;
  const p9 = async (cmd: string[], input?: string): Promise<string> => {
    const child = run(process.execPath, [NINEP, '-a', `unix!${sock}`, ...cmd], { encoding: 'utf8' });
    if (input !== undefined) {
      child.child.stdin!.end(input);
    } else child.child.stdin!.end();
    return (await child).stdout;
  };
  const p9fails = async (cmd: string[], input = ''): Promise<string> => {
    try {
      await p9(cmd, input);
    } catch (e) {
      const err = e as { code: number; stderr: string };
      expect(err.code).not.toBe(0);
      return err.stderr;
    }
    throw new Error(`ollie-9p ${cmd.join(' ')} succeeded`);
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ollie-e2e-'));
    sock = join(dir, 'run', 'ollie.sock');
    args = ['--socket', sock, '--data', join(dir, 'data'), '--config', join(dir, 'config')];
  });
  afterEach(async () => {
    if (daemon && daemon.proc.exitCode === null) {
      daemon.proc.kill('SIGKILL');
      await daemon.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves sessions that survive kill -9, and shuts down cleanly on SIGTERM', async () => {
    daemon = await serve(args);
    expect(daemon.stdout).toBe(`ollie: serving 9P on unix!${sock}\n`);
    expect(statSync(sock).mode & 0o777).toBe(0o600);
    expect((await p9(['ls'])).split('\n')).toEqual(expect.arrayContaining(['backends', 'event', 'session/', 'help']));
    expect(await p9(['rdwr', 'session/new'], `name=work cwd=${dir}\n`)).toBe('work\n');
    await p9(['write', 'session/work/plan'], '- [ ] survive kill -9\n');
    await p9(['mv', 'session/work', 'renamed']);
    expect(await p9(['read', 'session/renamed/name'])).toBe('renamed\n');
    expect(await p9(['ls', '-l', 'session/renamed'])).toMatch(/-rw-rw-rw- \S+ \S+ +\d+ .* plan\n/);
    expect(await p9(['stat', 'session/renamed/id'])).toMatch(/qid=\(/);

    daemon.proc.kill('SIGKILL');
    await daemon.exited;
    daemon = await serve(args); // replaces the stale socket
    expect(await p9(['read', 'session/renamed/plan'])).toBe('- [ ] survive kill -9\n');
    expect((await p9(['read', 'session/idx'])).split('\t')[1]).toBe('renamed');

    daemon.proc.kill('SIGTERM');
    expect(await daemon.exited).toBe(0);
    expect(existsSync(sock)).toBe(false);
  });

  it('refuses a second daemon on a live socket with a clear error', async () => {
    daemon = await serve(args);
    await expect(serve(args)).rejects.toThrow(/another server is already listening on/);
  });

  it('gives clear errors and a non-zero exit for bad requests and missing servers', async () => {
    daemon = await serve(args);
    expect(await p9fails(['rdwr', 'session/new'], 'colour=red')).toMatch(
      /ollie-9p: session\/new: unknown key "colour"; valid keys: name, cwd/,
    );
    expect(await p9fails(['read', 'no/such/file'])).toMatch(/ollie-9p: file not found: \/no\n/);
    daemon.proc.kill('SIGTERM');
    await daemon.exited;
    expect(await p9fails(['ls'])).toMatch(/cannot connect to .*ollie.sock.*is the server running/);
  });

  it('streams events with rdwrs until interrupted', async () => {
    daemon = await serve(args);
    const child = spawn(process.execPath, [NINEP, '-a', `unix!${sock}`, 'rdwrs', 'event', 'session.*.new'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    // The subscriber needs a moment to start (longer on a loaded machine): create sessions until one is seen.
    for (let i = 0; i < 50 && !out.includes('streamed'); i++) {
      await p9(['rdwr', 'session/new'], `name=streamed-${i}`);
      for (let j = 0; j < 10 && !out.includes('streamed'); j++) await new Promise((r) => setTimeout(r, 20));
    }
    expect(out).toMatch(/^(session\.[0-9a-f-]+\.new streamed-\d+\n)+$/);
    child.kill('SIGINT');
    expect(await new Promise((r) => child.once('exit', r))).toBe(0);
  });

  it('serves TCP on loopback when asked', async () => {
    daemon = await serve([...args, '--tcp', '127.0.0.1:0']);
    const tcp =
      /serving 9P on tcp!127\.0\.0\.1!(\d+)/.exec(daemon.stdout) ??
      (await new Promise<RegExpExecArray>((r) => {
        daemon!.proc.stdout!.on('data', () => {
          const m = /serving 9P on tcp!127\.0\.0\.1!(\d+)/.exec(daemon!.stdout);
          if (m) r(m);
        });
      }));
    const addr = `tcp!127.0.0.1!${tcp[1]}`;
    // TCP serves the owner only: a client without the owner token is refused; with it (the daemon writes it
    // beside its socket, 0600), served.
    const env = { ...process.env, XDG_RUNTIME_DIR: dir };
    await expect(
      run(process.execPath, [NINEP, '-a', addr, 'read', 'session/idx'], { encoding: 'utf8', env }),
    ).rejects.toThrow(/authentication required: 9P over TCP/);
    const token = readFileSync(join(dirname(sock), 'owner.token'), 'utf8').trim();
    const { stdout } = await run(process.execPath, [NINEP, '-a', addr, 'read', 'session/idx'], {
      encoding: 'utf8',
      env: { ...env, OLLIE_TOKEN: token },
    });
    expect(stdout).toBe('');
  });
});
