/**
 * The one place a tool's argv is put inside the sandbox (src/toolsrv/sandbox: loadPolicy, landlockStatus,
 * sandboxCommand, which wraps the argv in native/build/ollie-sandbox). It fails closed: when the policy does
 * not load or Landlock cannot enforce it, wrap() answers with the reason and the call is refused. `yolo`
 * (the daemon's --yolo) is the only way to run without it, and says so loudly at start.
 *
 * Tests may substitute another module with the same API (`module`), to exercise wrapping and refusals
 * whatever the kernel offers.
 */
import { ALLOW_PRIVATE_ENV } from '../../tools/web/address.js';
import { realpathSync } from 'node:fs';
import { join } from 'node:path';
import { fileStamp } from '../../platform/file-stamp.js';
import { spillDirFor } from '../../platform/paths.js';
import { PROJECT_POLICY_NAME, TRUST_FILE_NAME } from '../sandbox/trust.js';
import { USER_POLICY_NAME } from '../sandbox/policy.js';
import * as real from '../sandbox/index.js';
import type { ToolsrvInfo } from '../protocol.js';
import type { LandlockStatus, SandboxExtra } from '../sandbox/index.js';
import type { Limits } from '../sandbox/limits.js';
import type { SandboxPolicy } from '../sandbox/policy.js';

export interface SandboxDirs {
  configDir: string;
  dataDir: string;
  home: string;
  runtimeDir: string;
  tmpDir: string;
  /** Directories no tool may write, such as the package a remote toolsrv runs from (policy.ts, alwaysDenied). */
  sealed?: string[];
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
  landlockStatus(): LandlockStatus;
  sandboxCommand(
    policy: never,
    argv: string[],
    extra?: SandboxExtra,
  ): { file: string; args: string[]; env?(base: NodeJS.ProcessEnv): Record<string, string> };
}

/**
 * `notice`: said once, with the first call after the cwd's policy was loaded (an ignored project file). `limits`:
 * the policy's, for a sandboxed call (a bypassed or --yolo one runs outside the policy, limits included).
 */
export type Wrapped =
  { file: string; args: string[]; env: Record<string, string>; notice?: string; limits?: Limits } | { refused: string };

export class Confinement {
  /** Policies by cwd: `{CWD}` and a project's .ollie-sandbox.yaml depend on it. Loaded once per cwd. */
  private readonly policies = new Map<string, { policy: unknown; stamp: string }>();

  private constructor(
    readonly yolo: boolean,
    private readonly mod: SandboxModule | undefined,
    /** Why the sandbox module could not be loaded. */
    private readonly missing: string | undefined,
    private readonly dirs: SandboxDirs,
    private readonly toolDirs: string[],
    private readonly log: (m: string) => void = () => undefined,
  ) {}

  static async create(opts: ConfinementOptions): Promise<Confinement> {
    if (opts.yolo) {
      opts.log(
        'WARNING: --yolo: tools run WITHOUT the sandbox; every tool can read, write and connect anywhere this user can',
      );
      return new Confinement(true, undefined, undefined, opts.dirs, opts.toolDirs);
    }
    if (!opts.module) {
      const c = new Confinement(false, real as unknown as SandboxModule, undefined, opts.dirs, opts.toolDirs, opts.log);
      const s = c.status();
      if (s.unavailable)
        opts.log(`the sandbox is unavailable (${s.unavailable}); sandboxed tool calls will be refused`);
      return c;
    }
    try {
      const mod = (await import(opts.module)) as SandboxModule;
      if (typeof mod.sandboxCommand !== 'function' || typeof mod.loadPolicy !== 'function')
        throw new Error('it does not export loadPolicy and sandboxCommand');
      return new Confinement(false, mod, undefined, opts.dirs, opts.toolDirs, opts.log);
    } catch (e) {
      const why = `the sandbox module ${opts.module} could not be loaded: ${(e as Error).message}`;
      opts.log(`${why}; sandboxed tool calls will be refused`);
      return new Confinement(false, undefined, why, opts.dirs, opts.toolDirs);
    }
  }

  /**
   * What a cwd's policy depends on that the owner changes while toolsrv runs: their sandbox.yaml, the trust list
   * and the project file. An edited sandbox.yaml applies from the next call (and to running MCP servers at their
   * next re-check), as a narrowing must: the sessions that run are the ones it is meant to narrow.
   */
  private trustStamp(cwd: string): string {
    return [
      join(this.dirs.configDir, USER_POLICY_NAME),
      join(this.dirs.configDir, TRUST_FILE_NAME),
      join(cwd, PROJECT_POLICY_NAME),
    ]
      .map(fileStamp)
      .join('|');
  }

  /** Reloads policies on their next use (after `ctl reload`). */
  /** Where an agent's spill files live on this machine (the data dir's output/SESSION/AGENT); undefined for bad ids. */
  spillDir(owner: { session?: string; agent: string }): string | undefined {
    return owner.session ? spillDirFor(this.dirs.dataDir, owner.session, owner.agent) : undefined;
  }

  forget(): void {
    this.policies.clear();
  }

  status(): Omit<ToolsrvInfo, 'platform' | 'arch' | 'pid'> & { yolo: boolean } {
    if (this.yolo) return { landlockAbi: 0, enforces: [], yolo: true };
    if (!this.mod) return { landlockAbi: 0, enforces: [], yolo: false, unavailable: this.missing! };
    try {
      const s = this.mod.landlockStatus();
      const unavailable = s.reason ?? s.filter?.unavailable ?? s.capabilities?.unavailable;
      return {
        landlockAbi: s.abi,
        enforces: s.enforces,
        yolo: false,
        ...(unavailable && { unavailable }),
        ...(s.filter && { filter: s.filter }),
        ...(s.capabilities && { capabilities: s.capabilities }),
        summary: real.sandboxSummary(s),
      };
    } catch (e) {
      return { landlockAbi: 0, enforces: [], yolo: false, unavailable: (e as Error).message };
    }
  }

  /**
   * The command that runs `argv` sandboxed in `cwd` with `env` (filtered by the policy), or why it cannot
   * run. `unconfined` skips the sandbox (an approved bypass); `sandbox` is the tool's own rules (its .meta);
   * `owner` the session and agent calling, whose own spill files (long outputs saved whole) the tool may read.
   */
  wrap(
    argv: string[],
    cwd: string,
    env: Record<string, string>,
    o: {
      unconfined: boolean;
      ollieSocket?: boolean;
      sandbox?: SandboxExtra;
      owner?: { session?: string; agent: string };
      adjust?: (policy: SandboxPolicy) => SandboxPolicy;
    },
  ): Wrapped {
    if (this.yolo || o.unconfined) {
      const out = { ...env };
      // Out of the sandbox too, only the tools that dial back carry the agent's credential.
      if (!o.ollieSocket) delete out.OLLIE_TOKEN;
      // Unsandboxed, the tool's allow-list still comes from its rule alone, as the helper's --env-set does it.
      delete out[ALLOW_PRIVATE_ENV];
      if (o.sandbox?.network) out[ALLOW_PRIVATE_ENV] = JSON.stringify(o.sandbox.network.allowPrivate ?? []);
      return { file: argv[0]!, args: argv.slice(1), env: out };
    }
    if (!this.mod) return { refused: `sandbox unavailable: ${this.missing}` };
    // The tools may rewrite their working directory: one swapped for a symlink (to /, to ~/.ssh) after olliesrv
    // checked and resolved it would become {CWD}. olliesrv gives agents their directories resolved, so an honest
    // one is its own real path; the helper then re-checks every rule at the call (a swap after this point grants
    // nothing either).
    let real: string;
    try {
      real = realpathSync(cwd);
    } catch (e) {
      return { refused: `the working directory ${cwd} cannot be used: ${(e as Error).message}` };
    }
    if (real !== cwd)
      return {
        refused: `the working directory ${cwd} now leads to ${real} (a symlink put in its place): refused; set the agent's cwd again if that is meant`,
      };
    try {
      // Trusting (or editing) the project's policy file takes effect on the next call, not the next toolsrv.
      const stamp = this.trustStamp(cwd);
      const cached = this.policies.get(cwd);
      let policy = cached?.stamp === stamp ? cached.policy : undefined;
      let notice: string | undefined;
      if (policy === undefined) {
        policy = this.mod.loadPolicy({ ...this.dirs, cwd });
        // The policy grants read+exec on the shipped and the user's tool dirs; toolsrv may have been given others.
        const p = policy as { toolDirs?: unknown };
        if (Array.isArray(p.toolDirs)) p.toolDirs = [...new Set([...(p.toolDirs as string[]), ...this.toolDirs])];
        this.policies.set(cwd, { policy, stamp });
        const notices = (policy as { notices?: string[] }).notices ?? [];
        for (const n of notices) this.log(n);
        if (notices.length) notice = notices.join('\n');
      }
      // The spill dir lies in the data dir, which no policy grants: the agent's own directory alone is added.
      const spill = o.owner?.session ? spillDirFor(this.dirs.dataDir, o.owner.session, o.owner.agent) : undefined;
      const extra: SandboxExtra = {
        ...o.sandbox,
        ...(o.ollieSocket && { allowOllieSocket: true }),
        ...(spill && { ro: [...(o.sandbox?.ro ?? []), spill] }),
      };
      // `adjust` narrows a copy for one kind of process (an MCP server: workspace read only, no network).
      const cmd = this.mod.sandboxCommand(
        (o.adjust ? o.adjust(policy as SandboxPolicy) : policy) as never,
        argv,
        extra,
      );
      const limits = (policy as { limits?: Limits }).limits;
      return {
        file: cmd.file,
        args: cmd.args,
        env: cmd.env ? cmd.env(env) : env,
        ...(notice && { notice }),
        ...(limits && { limits }),
      };
    } catch (e) {
      return { refused: `sandbox unavailable: ${(e as Error).message}` };
    }
  }
}

/** The sandbox helper's own failures (bad policy, Landlock missing or too weak, setup) are refusals, not tool exits. */
export const SANDBOX_EXIT_CODES = new Set<number>(Object.values(real.SANDBOX_EXIT));
export const SANDBOX_MESSAGE = /^ollie-sandbox: [^\n]*/;
