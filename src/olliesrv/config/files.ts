/**
 * The user's configuration files as the namespace's `config/` serves them (the GUI's settings, or any editor):
 * each write is checked by the same parser that reads the file, and lands on disk only when it parses — a bad
 * write gets the parser's `file:line` error and changes nothing.
 */
import { CHECKED_MODELS } from '../../formats/olliesrv.js';
import { existsSync, readFileSync, renameSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseBackendsConfig } from '../backend/config.js';
import { candidateConfig, checkCandidate, mergeSetup, parseSetupRequest, SetupError } from '../backend/setup.js';
import type { Profiles } from '../agent/profiles.js';
import { shippedDataDir } from '../../platform/paths.js';
import { privateDir, writePrivateFile } from '../../platform/private.js';
import {
  applyTrustCommands,
  containmentStatus,
  describeContainment,
  landlockStatusAsync,
  listTrusted,
  parsePolicyFile,
  sandboxSummary,
  SPAWNER,
  TrustError,
  type LandlockStatus,
  GLOBAL_MCP_FILE,
  parseMcpFile,
} from '../../toolsrv/public.js';
import { HOOKS_FILE, HookConfigError, parseHooks } from '../hooks/config.js';

export const DEFAULT_PROFILE_FILE = 'default-profile';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export interface ConfigFilesOptions {
  configDir: string;
  dataDir: string;
  env: NodeJS.ProcessEnv;
  profiles: Profiles;
  /** Re-reads backends.conf in the running daemon; returns an error when it does not load. */
  reloadBackends: () => Error | undefined;
  /** Tools run without the sandbox (`--yolo`). */
  yolo?: boolean;
}

/** What the tool sandbox applies here, as the root `sandbox` file serves it. */
export type SandboxReport = LandlockStatus & { summary: string; yolo: boolean };

export class ConfigFiles {
  constructor(private readonly o: ConfigFilesOptions) {}

  private path(name: string): string {
    return join(this.o.configDir, name);
  }

  /** The user's file; for sandbox.yaml without one, the shipped default (what applies), so an editor starts there. */
  read(name: string): string {
    try {
      return readFileSync(this.path(name), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      return name === 'sandbox.yaml' ? readFileSync(join(shippedDataDir(), 'sandbox.yaml'), 'utf8') : '';
    }
  }

  /** Writes through a temporary file and a rename, so a reader never sees half a file. Private: it may hold keys. */
  private commit(name: string, text: string): void {
    privateDir(this.o.configDir, 'the config directory');
    const tmp = this.path(`.${name}.${process.pid}.tmp`);
    writePrivateFile(tmp, text);
    renameSync(tmp, this.path(name));
  }

  /** `config/trust`: the trusted project policy files, `sha256<TAB>path` lines. */
  readTrust(): string {
    return listTrusted(this.o.configDir);
  }

  /** `trust PATH` / `untrust PATH` lines (a project dir or its .ollie-sandbox.yaml); applies from the next policy load. */
  writeTrust(text: string): string {
    try {
      return applyTrustCommands(this.o.configDir, text);
    } catch (e) {
      throw e instanceof TrustError ? new ConfigError(e.message) : e;
    }
  }

  /** mcp.json: every server checked (toolsrv/mcp/config.ts) before it is written; a problem names the server and field. */
  writeMcp(text: string): string {
    const file = this.path(GLOBAL_MCP_FILE);
    const r = parseMcpFile(file, text);
    const problems = [...(r.error ? [r.error] : []), ...r.bad.map((b) => b.error)];
    if (problems.length) throw new ConfigError(problems.join('; '));
    this.commit(GLOBAL_MCP_FILE, text);
    return file;
  }

  /** backends.conf: parsed (every section, env: keys resolved) before it is written; the daemon reloads it. */
  writeBackends(text: string): string {
    const file = this.path('backends.conf');
    parseBackendsConfig(text, file, this.o.env);
    this.commit('backends.conf', text);
    const err = this.o.reloadBackends();
    if (err) throw new ConfigError(`written, but the daemon could not load it: ${err.message}`);
    return file;
  }

  /**
   * `config/check`: a candidate backend (setup.ts's key=value lines) asked for its models, live, before anything is
   * stored: "ID<TAB>context" lines (the type's usual model first), or `URL: why` (setup.ts's checkCandidate).
   */
  async checkBackend(text: string): Promise<string> {
    try {
      const models = await checkCandidate(this.candidate(text, 'config/check'));
      return CHECKED_MODELS.format(models.map((m) => ({ model: m.id, context: m.contextLength ?? null })));
    } catch (e) {
      throw e instanceof SetupError ? new ConfigError(e.message) : e;
    }
  }

  /**
   * `config/backend`: the candidate merged into backends.conf as a commented section (the default one unless
   * `default=no`), written 0600 and reloaded, as a write of the whole file would be.
   */
  setupBackend(text: string): string {
    const setup = this.candidateSetup(text, 'config/backend');
    this.candidate(text, 'config/backend');
    const merged = mergeSetup(this.read('backends.conf'), setup);
    const file = this.writeBackends(merged);
    // A first backend is the default even when not asked: say what the file says.
    const isDefault = parseBackendsConfig(merged, file, this.o.env).defaultName === setup.name;
    return `saved [${setup.name}] in ${file}${isDefault ? ' (the default backend)' : ''}\n`;
  }

  private candidateSetup(text: string, where: string) {
    try {
      return parseSetupRequest(text, where);
    } catch (e) {
      throw e instanceof SetupError ? new ConfigError(e.message) : e;
    }
  }

  private candidate(text: string, where: string) {
    const setup = this.candidateSetup(text, where);
    try {
      return candidateConfig(setup, this.o.env, where);
    } catch (e) {
      // parseBackendsConfig's `where:LINE:` names a line of a section the client never saw: drop the line.
      throw new ConfigError((e as Error).message.replace(/^([^:]+):\d+:/, '$1:'));
    }
  }

  /** sandbox.yaml: parsed as toolsrv parses it; applies to tool calls of toolsrv processes started from now on. */
  async writeSandbox(text: string): Promise<string> {
    const file = this.path('sandbox.yaml');
    const home = homedir();
    parsePolicyFile(file, text, {
      configDir: this.o.configDir,
      dataDir: this.o.dataDir,
      cwd: home,
      home,
      runtimeDir: tmpdir(),
      tmpDir: join(tmpdir(), 'ollie-policy-check'),
    });
    this.commit('sandbox.yaml', text);
    return file;
  }

  /** What the sandbox helper applies to tools on this machine (its --probe): asked once, then cached. */
  async sandboxStatus(): Promise<SandboxReport> {
    // Never rejects: the daemon logs it without waiting, and a report saying why is more use than an error.
    let s: LandlockStatus;
    let summary: string;
    try {
      // The helper confines; toolsrv's spawner contains and limits: the report says both.
      s = { ...(await landlockStatusAsync()), ...describeContainment(containmentStatus(existsSync(SPAWNER))) };
      summary = sandboxSummary(s);
    } catch (e) {
      s = { abi: 0, enforces: [], reason: `the sandbox helper's probe failed: ${(e as Error).message}` };
      summary = `sandbox unavailable: ${s.reason}; sandboxed tool calls will be refused`;
    }
    if (this.o.yolo) return { ...s, yolo: true, summary: 'sandbox: OFF (--yolo): tools run with all of your rights' };
    return { ...s, yolo: false, summary };
  }

  /** hooks.json: parsed as the hooks read it (hooks/config.ts); applies from the next event. */
  writeHooks(text: string): string {
    const file = this.path(HOOKS_FILE);
    try {
      parseHooks(file, text);
    } catch (e) {
      throw e instanceof HookConfigError ? new ConfigError(e.message) : e;
    }
    this.commit(HOOKS_FILE, text);
    return file;
  }

  /** The profile new agents get when `agent/new` names none. */
  defaultProfile(): string {
    return this.read(DEFAULT_PROFILE_FILE).trim() || 'default';
  }

  writeDefaultProfile(text: string): void {
    const name = text.trim();
    this.o.profiles.get(name);
    this.commit(DEFAULT_PROFILE_FILE, `${name}\n`);
  }
}
