/**
 * Workflows are scripts (`data/workflows/NAME`, overridden by `$XDG_CONFIG_HOME/ollie/workflows/NAME`) that drive
 * a session's namespace through `ollie-9p` like any other client; the daemon only starts one when a goal is set and
 * notices when it ends. No workflow logic lives here.
 *
 * A workflow runs in the session's working directory, which the agents write, and may run what is there (a test
 * suite, a check script): so it runs under the sandbox helper with the tools' policy for that directory, plus the
 * Unix socket it talks to the daemon through. When the sandbox cannot run it is not started (the goal says why),
 * unless the daemon runs with --yolo. It is started by the project's launcher (src/platform/launcher.ts): under the
 * spawner, whatever it starts ends with it, however it detaches.
 */
import { accessSync, constants, mkdirSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { loadPolicy, PACKAGE_ROOT, sandboxCommand, withPaths } from '../../toolsrv/public.js';
import { privateTmpDir } from '../agent/promptcmd.js';
import { confinedLauncher } from '../auth/confined.js';
import { goalState, type Session, type Sessions } from './registry.js';

/** Variables a sandboxed workflow keeps beyond the policy's env list: its own, and its session token. */
const WORKFLOW_ENV = [
  'OLLIE_ADDR',
  'OLLIE_SESSION',
  'OLLIE_SESSION_ID',
  'OLLIE_GOAL_FILE',
  'OLLIE_TOKEN',
  'OLLIE_PANEL',
];

export interface WorkflowsOptions {
  /** Searched in order; the first holding an executable NAME wins (user config before shipped data). */
  dirs: string[];
  /** The 9P address workflows talk to. */
  addr: string;
  /** Where the `ollie`, `ollie-9p` and `o` wrappers are written (put first on the workflows' PATH). */
  binDir: string;
  /** Directory of the built CLIs (dist/cli). */
  cliDir: string;
  sessions: Sessions;
  /** The session token a workflow of session `id` authenticates with. */
  token: (sessionId: string) => string;
  log: (msg: string) => void;
  /** What the sandbox needs (the policy's dirs); `yolo` runs workflows without it. */
  sandbox: { configDir: string; dataDir: string; runtimeDir: string; yolo?: boolean };
}

const TAIL = 2048;

/** A started workflow: its pid once it runs; `stopped` once stop() was asked (before the pid was known, too). */
interface Run {
  pid?: number;
  stopped?: boolean;
}

export class Workflows {
  private readonly running = new Map<string, Run>();

  constructor(private readonly o: WorkflowsOptions) {
    mkdirSync(o.binDir, { recursive: true, mode: 0o700 });
    for (const [name, js] of [
      ['ollie', 'ollie.js'],
      ['ollie-9p', 'ollie-9p.js'],
      ['o', 'o.js'],
    ]) {
      writeFileSync(join(o.binDir, name!), `#!/bin/sh\nexec "${process.execPath}" "${join(o.cliDir, js!)}" "$@"\n`, {
        mode: 0o755,
      });
    }
  }

  /** The executable of workflow `name`; throws naming the places looked in. */
  path(name: string): string {
    if (!/^[\w.-]+$/.test(name)) throw new Error(`bad workflow name ${JSON.stringify(name)}`);
    for (const d of this.o.dirs) {
      const p = join(d, name);
      try {
        accessSync(p, constants.X_OK);
        return p;
      } catch {
        // next directory
      }
    }
    throw new Error(
      `no workflow named ${JSON.stringify(name)} (looked for an executable in ${this.o.dirs.join(', ')}); workflows: ${this.names().join(', ') || 'none'}`,
    );
  }

  names(): string[] {
    const found = new Set<string>();
    for (const d of this.o.dirs) {
      try {
        for (const f of readdirSync(d)) if (!f.startsWith('.') && !f.endsWith('.md')) found.add(f);
      } catch {
        // a missing directory holds none
      }
    }
    return [...found].sort();
  }

  isRunning(sessionId: string): boolean {
    return this.running.has(sessionId);
  }

  /** Starts the session's workflow for its goal (status already set to running by the caller). */
  start(s: Session): void {
    const fail = (why: string) => {
      if (this.o.sessions.has(s.name) && goalState(this.o.sessions.get(s.name).goalstatus) === 'running')
        this.o.sessions.setGoalStatus(s.name, `error\n${why}`);
    };
    let file: string;
    try {
      file = this.path(s.workflow);
    } catch (e) {
      fail((e as Error).message);
      return;
    }
    this.stop(s.id);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      OLLIE_ADDR: this.o.addr,
      // The workflow's credential: it acts as this session, never as the owner (docs/security.md).
      OLLIE_TOKEN: this.o.token(s.id),
      OLLIE_SESSION: s.name,
      OLLIE_SESSION_ID: s.id,
      OLLIE_GOAL_FILE: `session/${s.name}/goal`,
      PATH: `${this.o.binDir}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    };
    let argv0 = file;
    let args: string[] = [];
    let spawnEnv: NodeJS.ProcessEnv = env;
    let tmp: string | undefined;
    if (!this.o.sandbox.yolo) {
      try {
        tmp = privateTmpDir('workflow-');
        const sb = this.o.sandbox;
        const loaded = loadPolicy({
          configDir: sb.configDir,
          dataDir: sb.dataDir,
          cwd: s.cwd,
          home: homedir(),
          runtimeDir: sb.runtimeDir,
          tmpDir: tmp,
        });
        // The script's own directory and the CLI wrappers, although both may lie in denied dirs (the config dir,
        // the runtime dir): a rule naming them explicitly holds. The CLIs run on Ollie's node_modules, which the
        // policy grants under the package root; a linked install (a symlinked node_modules) lies elsewhere.
        const policy = withPaths(loaded, {
          rox: [dirname(file), this.o.binDir],
          ro: [realpathSync(join(PACKAGE_ROOT, 'node_modules'))],
        });
        const cmd = sandboxCommand(policy, [file], { allowOllieSocket: true, env: WORKFLOW_ENV });
        argv0 = cmd.file;
        args = cmd.args;
        spawnEnv = cmd.env(env);
      } catch (e) {
        if (tmp) rmSync(tmp, { recursive: true, force: true });
        fail(
          `workflow ${s.workflow} was not started: the sandbox is unavailable: ${(e as Error).message}; start the daemon with --yolo to run workflows without it`,
        );
        return;
      }
    }
    const run: Run = {};
    this.running.set(s.id, run);
    let tail = '';
    let tag = `workflow ${s.workflow} (session ${s.name})`;
    let partial = '';
    const take = (d: Uint8Array): void => {
      const text = Buffer.from(d).toString();
      tail = (tail + text).slice(-TAIL);
      // Lines are logged whole: the spawner's chunks need not end at a newline.
      const lines = (partial + text).split('\n');
      partial = lines.pop()!;
      for (const l of lines) if (l.trim()) this.o.log(`${tag}: ${l}`);
    };
    const cleanup = (): void => {
      if (tmp) rmSync(tmp, { recursive: true, force: true });
    };
    const launchEnv = Object.fromEntries(
      Object.entries(spawnEnv).filter((e): e is [string, string] => e[1] !== undefined),
    );
    confinedLauncher()
      .launch(
        { file: argv0, args, cwd: s.cwd, env: launchEnv, stdin: '' },
        {
          output: take,
          exited: (code, signal) => {
            if (partial.trim()) this.o.log(`${tag}: ${partial}`);
            partial = '';
            cleanup();
            // A run that was replaced or stopped says nothing about the goal any more (it may be a newer one's).
            if (this.running.get(s.id) !== run) return;
            this.running.delete(s.id);
            if (code === 0) {
              // A workflow that ends without a verdict leaves the goal blocked, with what it said.
              this.settle(
                s,
                `blocked\nworkflow ${s.workflow} ended without setting the goal status${tail.trim() ? `:\n${tail.trim()}` : ''}`,
              );
            } else {
              fail(
                `workflow ${s.workflow} exited with ${signal ?? `code ${code}`}${tail.trim() ? `:\n${tail.trim()}` : ''}`,
              );
            }
          },
          closed: () => undefined,
          lost: (reason) => {
            cleanup();
            if (this.running.get(s.id) !== run) return;
            this.running.delete(s.id);
            fail(`workflow ${s.workflow} was lost: ${reason}`);
          },
        },
      )
      .then(
        (started) => {
          run.pid = started.pid;
          tag = `workflow ${s.workflow}[${started.pid}] (session ${s.name})`;
          if (run.stopped) killGroup(started.pid, 'SIGTERM');
        },
        (e: Error) => {
          cleanup();
          if (this.running.get(s.id) === run) this.running.delete(s.id);
          fail(`workflow ${s.workflow} could not start: ${e.message}`);
        },
      );
  }

  private settle(s: Session, status: string): void {
    if (this.o.sessions.has(s.name) && goalState(this.o.sessions.get(s.name).goalstatus) === 'running')
      this.o.sessions.setGoalStatus(s.name, status);
  }

  stop(sessionId: string): void {
    const run = this.running.get(sessionId);
    if (!run) return;
    this.running.delete(sessionId);
    run.stopped = true;
    if (run.pid) killGroup(run.pid, 'SIGTERM');
  }

  close(): void {
    for (const id of [...this.running.keys()]) this.stop(id);
  }
}

function killGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    // already gone
  }
}
