/**
 * The configured backends of a daemon: loaded from `CONFIG_DIR/backends.conf` (none when absent),
 * looked up by name, reloaded on demand. A reload that fails keeps the running configuration and returns the error;
 * backends whose section did not change survive a reload as the same objects, keeping their cached model lists and
 * context lengths.
 */
import { AnthropicBackend } from './anthropic.js';
import type { BaseBackend } from './base.js';
import { join } from 'node:path';
import { CONFIG_FILE, loadBackendsConfig, type BackendConfig, type BackendsConfig } from './config.js';
import { CopilotBackend } from './copilot.js';
import { GeminiBackend } from './gemini.js';
import { OllamaBackend } from './ollama.js';
import { OpenAIBackend } from './openai.js';
import type { Backend } from './types.js';

/**
 * What every use of a backend says while none is configured: where to configure one. Thrown at once, never retried,
 * so a prompt fails in a moment instead of backing off against a provider that was never set up.
 */
export class NoBackendError extends Error {
  override name = 'NoBackendError';
  constructor(configDir: string) {
    super(
      `no LLM backend is configured: add one in the GUI's Settings (Set up a backend), run \`ollie setup\`, or write ${join(configDir, CONFIG_FILE)} (docs/backends.md)`,
    );
  }
}

export function createBackend(cfg: BackendConfig): BaseBackend {
  switch (cfg.type) {
    case 'openai':
      return new OpenAIBackend(cfg);
    case 'anthropic':
      return new AnthropicBackend(cfg);
    case 'ollama':
      return new OllamaBackend(cfg);
    case 'gemini':
      return new GeminiBackend(cfg);
    case 'copilot':
      return new CopilotBackend(cfg);
  }
}

export interface BackendsOptions {
  /** The config dir holding backends.conf ($XDG_CONFIG_HOME/ollie, or `ollie serve --config DIR`). */
  configDir: string;
  /** Environment for `key = env:NAME` and the per-type key variables; process.env by default. */
  env?: NodeJS.ProcessEnv;
}

/** Two configs of one backend are the same when every field but where it was written is. */
function sameConfig(a: BackendConfig, b: BackendConfig): boolean {
  const strip = ({ source: _s, ...rest }: BackendConfig): Omit<BackendConfig, 'source'> => rest;
  return JSON.stringify(strip(a)) === JSON.stringify(strip(b));
}

export class Backends {
  readonly configDir: string;
  private readonly env: NodeJS.ProcessEnv;
  private byName = new Map<string, BaseBackend>();
  private defaultName = '';
  private cfg!: BackendsConfig;

  /** Loads the config now; throws `PATH:LINE: …` when it is malformed. */
  constructor(opts: BackendsOptions) {
    this.configDir = opts.configDir;
    this.env = opts.env ?? process.env;
    this.apply(loadBackendsConfig(this.configDir, this.env));
  }

  private apply(cfg: BackendsConfig): void {
    const next = new Map<string, BaseBackend>();
    for (const b of cfg.backends) {
      const old = this.byName.get(b.name);
      next.set(b.name, old && sameConfig(old.config, b) ? old : createBackend(b));
    }
    this.byName = next;
    this.defaultName = cfg.defaultName;
    this.cfg = cfg;
  }

  /** The file the configuration came from; undefined when there is none. */
  get path(): string | undefined {
    return this.cfg.path;
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  /** The backend called `name` (the default when empty); unknown names throw, listing the known ones. */
  get(name?: string): Backend {
    if (this.byName.size === 0) throw new NoBackendError(this.configDir);
    const b = this.byName.get(name || this.defaultName);
    if (!b) throw new Error(`unknown backend "${name}" (known: ${this.names().join(', ')})`);
    return b;
  }

  get default(): Backend {
    return this.get(this.defaultName);
  }

  get defaultBackendName(): string {
    return this.defaultName;
  }

  /** Re-read backends.conf. Returns the error (and keeps the running configuration) when the file is malformed. */
  reload(): Error | undefined {
    let cfg: BackendsConfig;
    try {
      cfg = loadBackendsConfig(this.configDir, this.env);
    } catch (e) {
      return e instanceof Error ? e : new Error(String(e));
    }
    this.apply(cfg);
    return undefined;
  }
}
