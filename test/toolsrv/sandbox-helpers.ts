/**
 * Shared by the sandbox and core-tool tests: a throwaway "world" (fake HOME with ~/.ssh, a project, Ollie's
 * config, data and runtime dirs, a private tmp), the native build, and running commands and tools the way
 * toolsrv does (the helper's argv from sandboxCommand, JSON on stdin, stdout and stderr merged).
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import {
  loadPolicy,
  PACKAGE_ROOT,
  sandboxCommand,
  type PolicyContext,
  type SandboxExtra,
  type SandboxPolicy,
} from '../../src/toolsrv/sandbox/index.js';
import { trust } from '../../src/toolsrv/sandbox/trust.js';

export const TOOLS_DIR = join(PACKAGE_ROOT, 'data', 'tools');

/** Compiles what is stale in native/ (a no-op when everything is up to date). */
export function buildNative(): void {
  execFileSync(process.execPath, [join(PACKAGE_ROOT, 'scripts', 'build-native.mjs'), '--quiet'], { stdio: 'inherit' });
}

export interface World extends PolicyContext {
  root: string;
  cleanup(): void;
}

/** A fake HOME under a fresh temp dir, with secrets where the sandbox must not let tools look. */
export function makeWorld(): World {
  const root = mkdtempSync(join(tmpdir(), 'ollie-sbx-'));
  const home = join(root, 'home');
  const w: World = {
    root,
    home,
    cwd: join(home, 'proj'),
    configDir: join(home, '.config', 'ollie'),
    dataDir: join(home, '.local', 'share', 'ollie'),
    runtimeDir: join(root, 'run', 'ollie'),
    tmpDir: join(root, 'private-tmp'),
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
  for (const d of [
    join(home, '.ssh'),
    join(home, '.gnupg'),
    join(home, 'other'),
    w.cwd,
    w.configDir,
    w.dataDir,
    w.runtimeDir,
  ]) {
    mkdirSync(d, { recursive: true });
  }
  writeFileSync(join(home, '.ssh', 'id_ed25519'), 'PRIVATE KEY\n');
  writeFileSync(join(home, '.gnupg', 'secring'), 'GPG\n');
  writeFileSync(join(home, 'other', 'notes.txt'), 'notes\n');
  writeFileSync(join(w.configDir, 'backends.json'), '{"apiKey":"sk-secret"}\n');
  writeFileSync(join(w.cwd, 'README.md'), 'project\n');
  // A link to ~/.ssh from an allowed place must not become a way in.
  symlinkSync(join(home, '.ssh'), join(home, 'ssh-link'));
  return w;
}

/**
 * Writes the user's sandbox.yaml (or a project's .ollie-sandbox.yaml) and returns its path. A project file is
 * trusted as written (as `ollie trust` would), unless `trusted: false`: an untrusted one is ignored.
 */
export function writePolicy(
  w: World,
  text: string,
  where: 'user' | 'project' = 'user',
  o: { trusted?: boolean } = {},
): string {
  const file = where === 'user' ? join(w.configDir, 'sandbox.yaml') : join(w.cwd, '.ollie-sandbox.yaml');
  writeFileSync(file, text);
  if (where === 'project' && o.trusted !== false) trust(w.configDir, file);
  return file;
}

/** The shipped default policy with extra YAML lines merged in by replacing sections (for tests that widen it). */
export function shippedPolicyText(): string {
  return readFileSync(join(PACKAGE_ROOT, 'data', 'sandbox.yaml'), 'utf8');
}

/** The shipped policy with Unix sockets allowed to every tool: an owner letting tools reach local daemons. */
export function policyWithUnixSockets(): string {
  const text = shippedPolicyText().replace(/unix: false/, 'unix: true');
  if (!/unix: true/.test(text)) throw new Error('data/sandbox.yaml has no `unix: false` to turn on');
  return text;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** stdout and stderr, interleaved as written. */
  out: string;
}

/** Runs file/args with stdout and stderr merged into one pipe, as toolsrv does. */
export function run(
  file: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    // One pipe for both streams keeps their order; bash's 2>&1 would change what the tool itself does.
    const child = spawn('/bin/sh', ['-c', 'exec "$@" 2>&1', 'sh', file, ...args], {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.on('error', reject);
    // A command that exits without reading its stdin is not an error of the test.
    child.stdin.on('error', () => undefined);
    child.on('close', (code, signal) => resolve({ code, signal, out }));
    child.stdin.end(opts.input ?? '');
  });
}

/** Runs argv inside the sandbox for `policy` (or, with `unsandboxed`, as after an approved bypass). */
export function runSandboxed(
  policy: SandboxPolicy | null,
  argv: string[],
  opts: { cwd: string; env?: NodeJS.ProcessEnv; input?: string; extra?: SandboxExtra },
): Promise<RunResult> {
  const env = opts.env ?? process.env;
  if (policy === null) return run(argv[0]!, argv.slice(1), { cwd: opts.cwd, env, input: opts.input });
  const cmd = sandboxCommand(policy, argv, opts.extra);
  return run(cmd.file, cmd.args, { cwd: opts.cwd, env: cmd.env(env), input: opts.input });
}

export interface ToolMeta {
  cmd?: string;
  sandbox?: { ollieSocket?: boolean };
  [k: string]: unknown;
}

export function readMeta(name: string): ToolMeta {
  return JSON.parse(readFileSync(join(TOOLS_DIR, `${name}.meta`), 'utf8')) as ToolMeta;
}

/**
 * Runs a core tool as toolsrv would: its executable (or its .meta `cmd` with /bin/sh -c) in the agent's cwd,
 * the tools dir first on PATH, the JSON arguments on stdin, inside the sandbox unless `unsandboxed`.
 */
export function runTool(
  w: World,
  name: string,
  args: unknown,
  opts: { policy?: SandboxPolicy; unsandboxed?: boolean; env?: NodeJS.ProcessEnv; argv?: string[] } = {},
): Promise<RunResult> {
  const meta = readMeta(name);
  const argv = opts.argv ?? (meta.cmd ? ['/bin/sh', '-c', meta.cmd] : [join(TOOLS_DIR, name)]);
  const env = {
    ...process.env,
    ...opts.env,
    PATH: `${TOOLS_DIR}${delimiter}${opts.env?.PATH ?? process.env.PATH ?? ''}`,
  };
  const policy = opts.unsandboxed ? null : (opts.policy ?? loadPolicy(w));
  return runSandboxed(policy, argv, {
    cwd: w.cwd,
    env,
    input: JSON.stringify(args),
    extra: { allowOllieSocket: meta.sandbox?.ollieSocket === true },
  });
}

/** A policy context whose config, data, runtime and tmp dirs lie in `dir`; the workspace and home default to dir/ws and dir/home. */
export function policyContext(dir: string, o: { cwd?: string; home?: string } = {}): PolicyContext {
  return {
    configDir: join(dir, 'config'),
    dataDir: join(dir, 'data'),
    cwd: o.cwd ?? join(dir, 'ws'),
    home: o.home ?? join(dir, 'home'),
    runtimeDir: join(dir, 'run'),
    tmpDir: join(dir, 'tmp'),
  };
}
