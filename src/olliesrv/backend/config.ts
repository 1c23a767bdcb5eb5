/**
 * backends.conf: an INI file in the config dir ($XDG_CONFIG_HOME/ollie/backends.conf). One section per backend,
 * `[default]` names the default one. See docs/backends.md for the user-facing description.
 *
 *   [default]
 *   backend = claude
 *
 *   [claude]
 *   type = anthropic
 *   key = env:ANTHROPIC_API_KEY
 *   model = claude-sonnet-4-5
 *
 * Every malformed input is an Error whose message is `PATH:LINE: what is wrong`; key values never appear in it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BackendType } from './types.js';

export const BACKEND_TYPES: readonly BackendType[] = ['openai', 'anthropic', 'ollama', 'gemini', 'copilot'];

export const CONFIG_FILE = 'backends.conf';

export interface BackendConfig {
  name: string;
  type: BackendType;
  /** Base URL (see DEFAULT_URLS for what each type expects). */
  url: string;
  /** The resolved API key (env: references resolved); undefined when none is configured or found. */
  key?: string;
  model: string;
  compactionModel: string;
  /** Context window override in tokens. */
  context?: number;
  /** Extra HTTP headers sent with every request. */
  headers: Record<string, string>;
  /** Where it was defined (`PATH:LINE`), for messages. */
  source: string;
}

export interface BackendsConfig {
  backends: BackendConfig[];
  /** Name of the default backend. */
  defaultName: string;
  /** The file read; undefined when there is none. */
  path?: string;
}

/**
 * Where each type sends requests when `url` is not given. OpenAI, Anthropic and Gemini URLs include the API version
 * path (as in the providers' docs), Ollama's is the server root (as OLLAMA_HOST), Copilot's is the GitHub API that
 * hands out Copilot tokens (the chat endpoint comes with the token).
 */
export const DEFAULT_URLS: Record<BackendType, string> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com/v1',
  ollama: 'http://127.0.0.1:11434',
  gemini: 'https://generativelanguage.googleapis.com/v1beta',
  copilot: 'https://api.github.com',
};

export const DEFAULT_MODELS: Record<BackendType, string> = {
  openai: 'gpt-4.1-mini',
  anthropic: 'claude-sonnet-4-5',
  ollama: 'llama3.2',
  gemini: 'gemini-2.5-flash',
  copilot: 'gpt-4.1',
};

/** Environment variables consulted, in order, when a backend has no `key`. */
export const DEFAULT_KEY_ENV: Record<BackendType, string[]> = {
  openai: ['OPENAI_API_KEY'],
  anthropic: ['ANTHROPIC_API_KEY'],
  ollama: [],
  gemini: ['GEMINI_API_KEY', 'GOOGLE_GENERATIVE_AI_API_KEY'],
  copilot: ['GH_COPILOT_TOKEN', 'GITHUB_TOKEN'],
};

const KEYS = new Set(['type', 'url', 'key', 'model', 'compaction_model', 'context', 'headers']);
const SECTION_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * With no backends.conf there is no backend. There used to be an implicit local Ollama here, which hid the fact that
 * nothing was configured: the GUI's "No LLM backend configured" banner never showed and the first prompt retried
 * against a port nobody listened on. Now the first prompt fails at once, saying where to configure one.
 */
export function emptyConfig(): BackendsConfig {
  return { backends: [], defaultName: '' };
}

/** Read `DIR/backends.conf`; no backends when it does not exist. Throws `PATH:LINE: …` when malformed. */
export function loadBackendsConfig(configDir: string, env: NodeJS.ProcessEnv = process.env): BackendsConfig {
  const path = join(configDir, CONFIG_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return emptyConfig();
    throw new Error(`${path}: ${(e as Error).message}`);
  }
  return parseBackendsConfig(text, path, env);
}

interface RawSection {
  name: string;
  line: number;
  values: Map<string, { value: string; line: number }>;
  headers: Record<string, string>;
}

export function parseBackendsConfig(text: string, path: string, env: NodeJS.ProcessEnv = process.env): BackendsConfig {
  const fail = (line: number, msg: string): never => {
    throw new Error(`${path}:${line}: ${msg}`);
  };
  const sections: RawSection[] = [];
  let cur: RawSection | undefined;
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    const line = lines[i]!.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    if (line.startsWith('[')) {
      const m = /^\[\s*([^\]]*?)\s*\]$/.exec(line);
      if (!m) fail(n, `bad section header: ${line}`);
      const name = m![1]!;
      if (!SECTION_NAME.test(name)) fail(n, `bad section name "${name}" (letters, digits, _ . -)`);
      const prev = sections.find((s) => s.name === name);
      if (prev) fail(n, `duplicate section [${name}] (first at line ${prev.line})`);
      cur = { name, line: n, values: new Map(), headers: {} };
      sections.push(cur);
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0)
      fail(n, `expected "key = value" or "[section]", got: ${line.length > 60 ? line.slice(0, 60) + '…' : line}`);
    const key = line.slice(0, eq).trim().toLowerCase();
    const value = line.slice(eq + 1).trim();
    if (!cur) fail(n, `"${key}" outside any section`);
    const sec = cur!;
    if (sec.name === 'default') {
      if (key !== 'backend') fail(n, `unknown key "${key}" in [default] (only "backend")`);
    } else if (!KEYS.has(key)) fail(n, `unknown key "${key}" in [${sec.name}] (known: ${[...KEYS].join(', ')})`);
    if (key === 'headers') {
      // Repeatable: each line adds `Name: value` pairs separated by ";".
      for (const pair of value
        .split(';')
        .map((p) => p.trim())
        .filter(Boolean)) {
        const c = pair.indexOf(':');
        const hn = c > 0 ? pair.slice(0, c).trim() : '';
        if (!HEADER_NAME.test(hn))
          fail(n, `bad header "${pair.length > 40 ? pair.slice(0, 40) + '…' : pair}" (expected "Name: value")`);
        sec.headers[hn] = pair.slice(c + 1).trim();
      }
      continue;
    }
    const prev = sec.values.get(key);
    if (prev) fail(n, `duplicate key "${key}" in [${sec.name}] (first at line ${prev.line})`);
    if (value === '') fail(n, `empty value for "${key}"`);
    sec.values.set(key, { value, line: n });
  }

  const backends: BackendConfig[] = [];
  let defaultEntry: { value: string; line: number } | undefined;
  for (const sec of sections) {
    if (sec.name === 'default') {
      defaultEntry = sec.values.get('backend');
      if (!defaultEntry) fail(sec.line, '[default] needs "backend = NAME"');
      continue;
    }
    const get = (k: string): { value: string; line: number } | undefined => sec.values.get(k);
    const t = get('type');
    if (!t) fail(sec.line, `[${sec.name}] has no "type" (one of ${BACKEND_TYPES.join(', ')})`);
    const type = t!.value.toLowerCase() as BackendType;
    if (!BACKEND_TYPES.includes(type)) fail(t!.line, `unknown type "${t!.value}" (one of ${BACKEND_TYPES.join(', ')})`);

    let url = DEFAULT_URLS[type];
    const u = get('url');
    if (u) {
      try {
        const parsed = new URL(u.value);
        if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('not http');
      } catch {
        fail(u.line, `bad url "${u.value}" (expected http:// or https://)`);
      }
      url = u.value.replace(/\/+$/, '');
    }

    let key: string | undefined;
    const k = get('key');
    if (k) {
      const ref = /^env:\s*([A-Za-z_][A-Za-z0-9_]*)$/.exec(k.value);
      if (ref) {
        key = env[ref[1]!];
        if (key === undefined || key === '')
          fail(k.line, `environment variable ${ref[1]} (key of [${sec.name}]) is not set`);
      } else if (k.value.startsWith('env:')) fail(k.line, `bad env reference in "key" (expected env:VARNAME)`);
      else key = k.value;
    } else {
      for (const v of DEFAULT_KEY_ENV[type]) {
        if (env[v]) {
          key = env[v];
          break;
        }
      }
    }

    let context: number | undefined;
    const c = get('context');
    if (c) {
      const v = c.value.replace(/_/g, '');
      const mult = /k$/i.test(v) ? 1024 : 1;
      const num = Number(mult === 1 ? v : v.slice(0, -1));
      if (!/^\d+k?$/i.test(v) || !Number.isSafeInteger(num * mult) || num <= 0)
        fail(c.line, `bad context "${c.value}" (a positive integer of tokens, e.g. 131072 or 128k)`);
      context = num * mult;
    }

    const model = get('model')?.value ?? DEFAULT_MODELS[type];
    backends.push({
      name: sec.name,
      type,
      url,
      ...(key !== undefined ? { key } : {}),
      model,
      compactionModel: get('compaction_model')?.value ?? model,
      ...(context !== undefined ? { context } : {}),
      headers: sec.headers,
      source: `${path}:${sec.line}`,
    });
  }

  if (backends.length === 0) fail(Math.max(1, lines.length), 'no backend sections');
  let defaultName = backends[0]!.name;
  if (defaultEntry) {
    if (!backends.some((b) => b.name === defaultEntry!.value))
      fail(
        defaultEntry.line,
        `default backend "${defaultEntry.value}" is not defined (defined: ${backends.map((b) => b.name).join(', ')})`,
      );
    defaultName = defaultEntry.value;
  }
  return { backends, defaultName, path };
}
