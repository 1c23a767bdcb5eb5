/**
 * The one place a tool's argv is put inside the sandbox (src/toolsrv/sandbox: loadPolicy, landlockStatus,
 * sandboxCommand, which wraps the argv in native/build/ollie-sandbox). It fails closed: when the policy does
 * not load or Landlock cannot enforce it, wrap() answers with the reason and the call is refused. `yolo`
 * (the daemon's --yolo) is the only way to run without it, and says so loudly at start.
 *
 * Tests may substitute another module with the same API (`module`), to exercise wrapping and refusals
 * whatever the kernel offers.
 */
import * as real from '../sandbox/index.js';
import type { ToolsrvInfo } from '../protocol.js';
import type { SandboxExtra } from '../sandbox/index.js';
import type { Limits } from '../sandbox/limits.js';

export interface SandboxDirs {
  configDir: string;
  dataDir: string;
  home: string;
  runtimeDir: string;
  tmpDir: string;
}

export interface ConfinementOptions {
  yolo: boolean;
  dirs: SandboxDirs;
  /** toolsrv's tool directories: tools must be able to run from every one of them inside the sandbox. */
  toolDirs: string[];
  log: (m: string) => void;
  module?: string;
}

/** The parts of the sandbox module used here. */
interface SandboxModule {
  loadPolicy(o: SandboxDirs & { cwd: string }): unknown;
  landlockStatus(): { abi: number; enforces: string[]; reason?: string };
  sandboxCommand(policy: never, argv: string[], extra?: SandboxExtra): { file: string; args: string[]; env?(base: NodeJS.ProcessEnv): Record<string, string> };
}

/** `limits`: the policy's, for a sandboxed call (a bypassed or --yolo one runs outside the policy, limits included). */
export type Wrapped = { file: string; args: string[]; env: Record<string, string>; limits?: Limits } | { refused: string };

export class Confinement {
  /** Policies by cwd: `{CWD}` and a project's .ollie-sandbox.yaml depend on it. Loaded once per cwd. */
  private readonly policies = new Map<string, unknown>();

  private constructor(
    readonly yolo: boolean,
    private readonly mod: SandboxModule | undefined,
    /** Why the sandbox module could not be loaded. */
    private readonly missing: string | undefined,
    private readonly dirs: SandboxDirs,
    private readonly toolDirs: string[],
  ) {}

  static async create(opts: ConfinementOptions): Promise<Confinement> {
    if (opts.yolo) {
      opts.log('WARNING: --yolo: tools run WITHOUT the sandbox; every tool can read, write and connect anywhere this user can');
      return new Confinement(true, undefined, undefined, opts.dirs, opts.toolDirs);
    }
    if (!opts.module) {
      const c = new Confinement(false, real as unknown as SandboxModule, undefined, opts.dirs, opts.toolDirs);
      const s = c.status();
      if (s.unavailable) opts.log(`the sandbox is unavailable (${s.unavailable}); sandboxed tool calls will be refused`);
      return c;
    }
    try {
      const mod = (await import(opts.module)) as SandboxModule;
      if (typeof mod.sandboxCommand !== 'function' || typeof mod.loadPolicy !== 'function') throw new Error('it does not export loadPolicy and sandboxCommand');
      return new Confinement(false, mod, undefined, opts.dirs, opts.toolDirs);
    } catch (e) {
      const why = `the sandbox module ${opts.module} could not be loaded: ${(e as Error).message}`;
      opts.log(`${why}; sandboxed tool calls will be refused`);
      return new Confinement(false, undefined, why, opts.dirs, opts.toolDirs);
    }
  }

  /** Reloads policies on their next use (after `ctl reload`). */
  forget(): void {
    this.policies.clear();
  }

  status(): Pick<ToolsrvInfo, 'landlockAbi' | 'enforces'> & { yolo: boolean; unavailable?: string } {
    if (this.yolo) return { landlockAbi: 0, enforces: [], yolo: true };
    if (!this.mod) return { landlockAbi: 0, enforces: [], yolo: false, unavailable: this.missing! };
    try {
      const s = this.mod.landlockStatus();
      return { landlockAbi: s.abi, enforces: s.enforces, yolo: false, ...(s.reason && { unavailable: s.reason }) };
    } catch (e) {
      return { landlockAbi: 0, enforces: [], yolo: false, unavailable: (e as Error).message };
    }
  }

  /**
   * The command that runs `argv` sandboxed in `cwd` with `env` (filtered by the policy), or why it cannot
   * run. `unconfined` skips the sandbox (an approved bypass); `sandbox` is the tool's own rules (its .meta).
   */
  wrap(argv: string[], cwd: string, env: Record<string, string>, o: { unconfined: boolean; ollieSocket?: boolean; sandbox?: SandboxExtra }): Wrapped {
    if (this.yolo || o.unconfined) return { file: argv[0]!, args: argv.slice(1), env };
    if (!this.mod) return { refused: `sandbox unavailable: ${this.missing}` };
    try {
      let policy = this.policies.get(cwd);
      if (policy === undefined) {
        policy = this.mod.loadPolicy({ ...this.dirs, cwd });
        // The policy grants read+exec on the shipped and the user's tool dirs; toolsrv may have been given others.
        const p = policy as { toolDirs?: unknown };
        if (Array.isArray(p.toolDirs)) p.toolDirs = [...new Set([...(p.toolDirs as string[]), ...this.toolDirs])];
        this.policies.set(cwd, policy);
      }
      const extra: SandboxExtra = { ...o.sandbox, ...(o.ollieSocket && { allowOllieSocket: true }) };
      const cmd = this.mod.sandboxCommand(policy as never, argv, extra);
      const limits = (policy as { limits?: Limits }).limits;
      return { file: cmd.file, args: cmd.args, env: cmd.env ? cmd.env(env) : env, ...(limits && { limits }) };
    } catch (e) {
      return { refused: `sandbox unavailable: ${(e as Error).message}` };
    }
  }
}

/** The sandbox helper's own failures (bad policy, Landlock missing or too weak, setup) are refusals, not tool exits. */
export const SANDBOX_EXIT_CODES = new Set<number>(Object.values(real.SANDBOX_EXIT));
export const SANDBOX_MESSAGE = /^ollie-sandbox: [^\n]*/;
