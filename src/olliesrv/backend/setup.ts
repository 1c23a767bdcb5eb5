/**
 * Setting up a backend from a few answers (provider, URL, key, model) rather than INI: what the GUI's onboarding
 * (through the namespace's `config/check` and `config/backend`) and `ollie setup` share. Both check a candidate live
 * by listing its models, then merge it into backends.conf as a commented section a person can read and edit.
 *
 * The request is `key=value` lines: provider, name, url, key, key_env, model, default (yes/no).
 */
import { BACKEND_SETUP } from '../../formats/olliesrv.js';
import { DEFAULT_KEY_ENV, DEFAULT_MODELS, DEFAULT_URLS, parseBackendsConfig, type BackendConfig } from './config.js';
import { createBackend } from './pool.js';
import type { BackendType, ModelInfo } from './types.js';

export interface Provider {
  /** The backends.conf type it is written as. */
  type: BackendType;
  label: string;
  /** Its public endpoint; undefined when the user must give one (any OpenAI-compatible server). */
  url?: string;
  /** The environment variable its key is usually kept in. */
  keyEnv?: string;
  /** Whether requests need a key (Ollama and most local servers do not). */
  needsKey: boolean;
  /** The section name it gets unless the user names one. */
  name: string;
}

export const PROVIDERS = {
  openai: {
    type: 'openai',
    label: 'OpenAI',
    url: DEFAULT_URLS.openai,
    keyEnv: 'OPENAI_API_KEY',
    needsKey: true,
    name: 'openai',
  },
  anthropic: {
    type: 'anthropic',
    label: 'Anthropic',
    url: DEFAULT_URLS.anthropic,
    keyEnv: 'ANTHROPIC_API_KEY',
    needsKey: true,
    name: 'anthropic',
  },
  openrouter: {
    type: 'openai',
    label: 'OpenRouter',
    url: 'https://openrouter.ai/api/v1',
    keyEnv: 'OPENROUTER_API_KEY',
    needsKey: true,
    name: 'openrouter',
  },
  ollama: { type: 'ollama', label: 'Ollama', url: DEFAULT_URLS.ollama, needsKey: false, name: 'ollama' },
  gemini: {
    type: 'gemini',
    label: 'Google Gemini',
    url: DEFAULT_URLS.gemini,
    keyEnv: 'GEMINI_API_KEY',
    needsKey: true,
    name: 'gemini',
  },
  copilot: {
    type: 'copilot',
    label: 'GitHub Copilot',
    url: DEFAULT_URLS.copilot,
    keyEnv: 'GH_COPILOT_TOKEN',
    needsKey: true,
    name: 'copilot',
  },
  compatible: {
    type: 'openai',
    label: 'OpenAI-compatible server (LM Studio, vLLM, llama.cpp, a gateway…)',
    needsKey: false,
    name: 'local',
  },
} as const satisfies Record<string, Provider>;

export type ProviderId = keyof typeof PROVIDERS;
export const PROVIDER_IDS = Object.keys(PROVIDERS) as ProviderId[];

export interface BackendSetup {
  provider: ProviderId;
  name: string;
  url: string;
  /** A literal key (written into the 0600 file). */
  key?: string;
  /** Or the environment variable holding it (`key = env:NAME`). */
  keyEnv?: string;
  model?: string;
  /** Make it the default backend (a first backend always is). */
  makeDefault: boolean;
}

export class SetupError extends Error {
  override name = 'SetupError';
}

type Field = 'provider' | 'name' | 'url' | 'key' | 'key_env' | 'model' | 'default';

/** Parses the `key=value` lines of a request (BACKEND_SETUP); `where` names the input in errors (e.g. `config/check`). */
export function parseSetupRequest(text: string, where: string): BackendSetup {
  const fields = BACKEND_SETUP.keys.map((k) => k.name);
  const v: Partial<Record<Field, string>> = {};
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const eq = line.indexOf('=');
    if (!fields.includes(eq > 0 ? line.slice(0, eq) : ''))
      throw new SetupError(
        `${where}:${i + 1}: expected one of ${fields.join(', ')} as "key=value", got ${JSON.stringify(eq > 0 ? line.slice(0, eq) : line.slice(0, 30))}`,
      );
    let pairs: Record<string, string>;
    try {
      pairs = BACKEND_SETUP.parse(line);
    } catch (e) {
      throw new SetupError(`${where}:${i + 1}: ${(e as Error).message}`);
    }
    for (const [k, val] of Object.entries(pairs) as Array<[Field, string]>) {
      if (v[k] !== undefined) throw new SetupError(`${where}:${i + 1}: "${k}" given twice`);
      v[k] = val.trim();
    }
  });
  if (!v.provider) throw new SetupError(`${where}: "provider" is required (one of ${PROVIDER_IDS.join(', ')})`);
  return setupFrom(
    {
      provider: v.provider,
      ...(v.name ? { name: v.name } : {}),
      ...(v.url ? { url: v.url } : {}),
      ...(v.key ? { key: v.key } : {}),
      ...(v.key_env ? { keyEnv: v.key_env } : {}),
      ...(v.model ? { model: v.model } : {}),
      makeDefault: v.default === undefined ? true : /^(yes|true|1)$/i.test(v.default),
    },
    where,
  );
}

/** Checks and completes a setup (the provider's URL and section name when not given). */
export function setupFrom(
  o: {
    provider: string;
    name?: string;
    url?: string;
    key?: string;
    keyEnv?: string;
    model?: string;
    makeDefault: boolean;
  },
  where: string,
): BackendSetup {
  if (!(o.provider in PROVIDERS))
    throw new SetupError(`${where}: unknown provider "${o.provider}" (one of ${PROVIDER_IDS.join(', ')})`);
  const p: Provider = PROVIDERS[o.provider as ProviderId];
  const name = o.name || p.name;
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name) || name === 'default')
    throw new SetupError(`${where}: bad backend name "${name}" (letters, digits, _ . -; not "default")`);
  const url = (o.url || p.url || '').replace(/\/+$/, '');
  if (!url) throw new SetupError(`${where}: "url" is required for ${p.label} (e.g. http://localhost:1234/v1)`);
  if (!/^https?:\/\/[^\s/]+/.test(url))
    throw new SetupError(`${where}: bad url "${url}" (expected http:// or https://)`);
  if (o.key && o.keyEnv) throw new SetupError(`${where}: give "key" or "key_env", not both`);
  if (o.keyEnv && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(o.keyEnv))
    throw new SetupError(`${where}: bad key_env "${o.keyEnv}" (an environment variable name)`);
  // A newline in a value would end the INI line and start another one the user never wrote.
  for (const [k, val] of [
    ['key', o.key],
    ['model', o.model],
  ] as const) {
    if (val !== undefined && /[\r\n]/.test(val)) throw new SetupError(`${where}: "${k}" holds a line break`);
  }
  return {
    provider: o.provider as ProviderId,
    name,
    url,
    ...(o.key ? { key: o.key } : {}),
    ...(o.keyEnv ? { keyEnv: o.keyEnv } : {}),
    ...(o.model ? { model: o.model } : {}),
    makeDefault: o.makeDefault,
  };
}

/** The section for a setup, commented so that a person reading the file knows where it came from and what it does. */
export function sectionText(s: BackendSetup): string {
  const p: Provider = PROVIDERS[s.provider];
  const lines = [
    `# ${p.label}${s.provider === 'compatible' ? '' : ` (provider ${s.provider})`}, set up ${new Date().toISOString().slice(0, 10)}.`,
  ];
  if (s.keyEnv) lines.push(`# The key is read from $${s.keyEnv} in the daemon's environment when it starts.`);
  else if (s.key) lines.push('# The key is kept here: this file is readable by you alone (0600).');
  else if (p.needsKey) lines.push(`# No key given: $${DEFAULT_KEY_ENV[p.type][0] ?? p.keyEnv} is used when set.`);
  lines.push(`[${s.name}]`, `type = ${p.type}`, `url = ${s.url}`);
  if (s.keyEnv) lines.push(`key = env:${s.keyEnv}`);
  else if (s.key) lines.push(`key = ${s.key}`);
  lines.push(`model = ${s.model ?? DEFAULT_MODELS[p.type]}`);
  return `${lines.join('\n')}\n`;
}

const HEADER = `# LLM backends of Ollie: one [section] per backend, [default] names the one new agents use.
# Every key is described in docs/backends.md. Edit by hand or in the GUI's Settings; \`ollie setup\` adds one.
`;

/**
 * backends.conf with the setup's section added, or put in place of a section of the same name (with the comment
 * lines right above it, which a previous setup wrote), and `[default]` pointing at it when asked or when it is the
 * first backend. Everything else in the file stays as the user wrote it.
 */
export function mergeSetup(existing: string, s: BackendSetup): string {
  const lines = existing.split(/\r?\n/);
  if (lines.at(-1) === '') lines.pop();
  const header = (l: string): string | undefined => /^\s*\[\s*([^\]]*?)\s*\]\s*$/.exec(l)?.[1];
  /** [start, end) of a section, the comment lines just above its header included. */
  const span = (name: string): [number, number] | undefined => {
    const at = lines.findIndex((l) => header(l) === name);
    if (at < 0) return undefined;
    let start = at;
    while (start > 0 && /^\s*[#;]/.test(lines[start - 1]!)) start--;
    let end = at + 1;
    while (end < lines.length && header(lines[end]!) === undefined) end++;
    // The comments above the next section belong to it.
    while (end > at + 1 && /^\s*[#;]/.test(lines[end - 1]!)) end--;
    return [start, end];
  };
  const hadBackends = lines.some((l) => {
    const h = header(l);
    return h !== undefined && h !== 'default';
  });
  const own = span(s.name);
  const section = sectionText(s).trimEnd().split('\n');
  if (own) lines.splice(own[0], own[1] - own[0], ...section, '');
  else lines.push(...(lines.length && lines.at(-1)!.trim() !== '' ? [''] : []), ...section);
  if (s.makeDefault || !hadBackends) {
    const d = span('default');
    const block = ['[default]', `backend = ${s.name}`];
    if (d) lines.splice(d[0], d[1] - d[0], ...block, '');
    else lines.unshift(...block, '');
  }
  const text = `${lines
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim()}\n`;
  return text.startsWith('#') ? text : `${HEADER}\n${text}`;
}

/** The backend config a setup stands for, parsed as backends.conf would parse it (env: keys resolved from `env`). */
export function candidateConfig(s: BackendSetup, env: NodeJS.ProcessEnv, where: string): BackendConfig {
  return parseBackendsConfig(sectionText(s), where, env).backends[0]!;
}

/** How long a check waits for a provider to list its models. */
export const CHECK_TIMEOUT_MS = 15_000;

/**
 * Why a request failed, in the words of the deepest cause: undici says only "fetch failed", and a refused connection
 * to a name with several addresses hides its code inside an AggregateError.
 */
function reason(e: unknown): string {
  const seen = new Set<unknown>();
  let msg = e instanceof Error ? e.message : String(e);
  let deepest = '';
  let code: string | undefined;
  for (let c: unknown = e; c instanceof Error && !seen.has(c);) {
    seen.add(c);
    const x = c as Error & { code?: unknown; errors?: unknown[]; cause?: unknown };
    if (typeof x.code === 'string') code = x.code;
    if (x.message) deepest = x.message;
    c = x.cause ?? (Array.isArray(x.errors) ? x.errors[0] : undefined);
  }
  if (deepest && !msg.includes(deepest)) msg = `${msg}: ${deepest}`;
  if (code && !msg.includes(code)) msg = `${msg} (${code})`;
  return msg;
}

/**
 * Lists a candidate backend's models, live (never the cached list), within CHECK_TIMEOUT_MS; the type's usual model
 * first when the provider serves it, so a client can offer the first as the choice. Throws `URL: why` (never the
 * key: it is in no URL, and backend errors leave it out).
 */
export async function checkCandidate(cfg: BackendConfig): Promise<ModelInfo[]> {
  const b = createBackend(cfg);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_r, reject) => {
    timer = setTimeout(
      () => reject(new SetupError(`${b.url} did not answer within ${CHECK_TIMEOUT_MS / 1000} s`)),
      CHECK_TIMEOUT_MS,
    );
  });
  let models: ModelInfo[];
  try {
    models = await Promise.race([b.models(true), timeout]);
  } catch (e) {
    throw e instanceof SetupError ? e : new SetupError(`${b.url}: ${reason(e)}`);
  } finally {
    clearTimeout(timer);
  }
  if (models.length === 0) throw new SetupError(`${b.url} answered, but lists no models`);
  const usual = models.findIndex((m) => m.id === DEFAULT_MODELS[cfg.type]);
  if (usual > 0) models.unshift(...models.splice(usual, 1));
  return models;
}
