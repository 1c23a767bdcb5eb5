/**
 * The one place a tool's argv is put inside the sandbox. It uses the sandbox module (src/toolsrv/sandbox,
 * owned by the sandbox work: loadPolicy, landlockStatus, sandboxCommand) and fails closed: when the module,
 * the policy or Landlock is missing, wrap() answers with the reason and the call is refused. `yolo` (the
 * daemon's --yolo) is the only way to run without it, and says so loudly at start.
 */
import type { ToolsrvInfo } from '../protocol.js';

export interface SandboxDirs {
  configDir: string;
  dataDir: string;
  home: string;
  runtimeDir: string;
  tmpDir: string;
}

/** The sandbox module's API, as agreed with its authors. */
interface SandboxModule {
  loadPolicy(o: SandboxDirs & { cwd: string }): unknown;
  landlockStatus(): { abi: number; enforces: string[] };
  sandboxCommand(policy: unknown, argv: string[]): { file: string; args: string[] };
}

export type Wrapped = { file: string; args: string[] } | { refused: string };

export class Confinement {
  /** Policies by cwd: `{CWD}` and a project's .ollie-sandbox.yaml depend on it. Loaded once per cwd. */
  private readonly policies = new Map<string, unknown>();

  private constructor(
    readonly yolo: boolean,
    private readonly mod: SandboxModule | undefined,
    /** Why the sandbox module could not be loaded. */
    private readonly missing: string | undefined,
    private readonly dirs: SandboxDirs,
  ) {}

  static async create(opts: { yolo: boolean; dirs: SandboxDirs; log: (m: string) => void; module?: string }): Promise<Confinement> {
    if (opts.yolo) {
      opts.log('WARNING: --yolo: tools run WITHOUT the sandbox; every tool can read, write and connect anywhere this user can');
      return new Confinement(true, undefined, undefined, opts.dirs);
    }
    // Resolved at run time, so toolsrv builds and runs (refusing sandboxed calls) before the module exists.
    const specifier = opts.module ?? '../sandbox/index.js';
    try {
      const mod = (await import(specifier)) as SandboxModule;
      if (typeof mod.sandboxCommand !== 'function' || typeof mod.loadPolicy !== 'function') throw new Error('it does not export loadPolicy and sandboxCommand');
      return new Confinement(false, mod, undefined, opts.dirs);
    } catch (e) {
      const why = `the sandbox module (src/toolsrv/sandbox) could not be loaded: ${(e as Error).message}`;
      opts.log(`${why}; sandboxed tool calls will be refused`);
      return new Confinement(false, undefined, why, opts.dirs);
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
      return { landlockAbi: s.abi, enforces: s.enforces, yolo: false };
    } catch (e) {
      return { landlockAbi: 0, enforces: [], yolo: false, unavailable: (e as Error).message };
    }
  }

  /** The command that runs `argv` sandboxed in `cwd`, or why it cannot run. `unconfined` skips the sandbox (bypass). */
  wrap(argv: string[], cwd: string, unconfined: boolean): Wrapped {
    if (this.yolo || unconfined) return { file: argv[0]!, args: argv.slice(1) };
    if (!this.mod) return { refused: `sandbox unavailable: ${this.missing}` };
    try {
      let policy = this.policies.get(cwd);
      if (policy === undefined) {
        policy = this.mod.loadPolicy({ ...this.dirs, cwd });
        this.policies.set(cwd, policy);
      }
      return this.mod.sandboxCommand(policy, argv);
    } catch (e) {
      return { refused: `sandbox unavailable: ${(e as Error).message}` };
    }
  }
}

/** The sandbox helper's own failures (bad policy, Landlock missing or too weak, setup) are refusals, not tool exits. */
export const SANDBOX_EXIT_CODES = new Set([120, 121, 122]);
export const SANDBOX_MESSAGE = /^ollie-sandbox: [^\n]*/;
