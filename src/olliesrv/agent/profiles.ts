/**
 * Agent profiles: `data/agents/NAME.json`, overridden by `$XDG_CONFIG_HOME/ollie/agents/NAME.json`. A profile
 * says who the agent is (its system prompt), what it starts with (tools to load), its limits and its sampling
 * parameters. The prompt is either literal text or a list of shell commands whose stdout is concatenated, run in
 * the agent's cwd under the sandbox (agent/promptcmd.ts), so a prompt can include the repository's own state.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { GenerationParams } from '../backend/types.js';
import { runPromptCommands, type PromptCommandOptions, type ResolvedPrompt } from './promptcmd.js';

export type { ResolvedPrompt };

export interface Profile {
  name: string;
  /** Where it was loaded from, for messages. */
  file: string;
  description: string;
  prompt: string | string[];
  autoLoad: string[];
  maxSteps: number;
  backend?: string;
  model?: string;
  compactionModel?: string;
  /** Fraction of the context window at which the history is compacted. */
  compactAt: number;
  params: GenerationParams;
}

export const DEFAULT_MAX_STEPS = 100;
export const DEFAULT_COMPACT_AT = 0.75;
/** How close to a directory's mtime a listing must not be to be reused (coarse file system clocks). */
const RACY_MS = 1000;

const PARAM_KEYS: Record<keyof GenerationParams, 'number' | 'string' | 'string[]'> = {
  temperature: 'number',
  topP: 'number',
  topK: 'number',
  maxTokens: 'number',
  seed: 'number',
  stop: 'string[]',
  thinkingBudget: 'number',
  reasoningEffort: 'string',
};

const KNOWN = new Set([
  'description',
  'prompt',
  'autoLoad',
  'maxSteps',
  'backend',
  'model',
  'compactionModel',
  'compactAt',
  ...Object.keys(PARAM_KEYS),
]);

export class ProfileError extends Error {
  override name = 'ProfileError';
}

/** Checks one profile's JSON; errors name the file and the field. */
export function parseProfile(name: string, file: string, text: string): Profile {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ProfileError(`${file}: not valid JSON: ${(e as Error).message}`);
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new ProfileError(`${file}: expected a JSON object`);
  const o = raw as Record<string, unknown>;
  const bad = (field: string, want: string): never => {
    throw new ProfileError(`${file}: "${field}" must be ${want}`);
  };
  for (const k of Object.keys(o))
    if (!KNOWN.has(k)) throw new ProfileError(`${file}: unknown field "${k}"; known fields: ${[...KNOWN].join(', ')}`);
  const str = (k: string): string | undefined =>
    o[k] === undefined ? undefined : typeof o[k] === 'string' ? (o[k] as string) : bad(k, 'a string');
  const strs = (k: string): string[] | undefined =>
    o[k] === undefined
      ? undefined
      : Array.isArray(o[k]) && (o[k] as unknown[]).every((x) => typeof x === 'string')
        ? (o[k] as string[])
        : bad(k, 'an array of strings');
  const num = (k: string): number | undefined =>
    o[k] === undefined
      ? undefined
      : typeof o[k] === 'number' && Number.isFinite(o[k])
        ? (o[k] as number)
        : bad(k, 'a number');
  const prompt = typeof o.prompt === 'string' ? o.prompt : (strs('prompt') ?? '');
  const params: GenerationParams = {};
  for (const [k, kind] of Object.entries(PARAM_KEYS) as Array<[keyof GenerationParams, string]>) {
    const v = kind === 'number' ? num(k) : kind === 'string' ? str(k) : strs(k);
    if (v !== undefined) (params as Record<string, unknown>)[k] = v;
  }
  if (params.reasoningEffort && !['low', 'medium', 'high'].includes(params.reasoningEffort))
    bad('reasoningEffort', 'low, medium or high');
  const maxSteps = num('maxSteps') ?? DEFAULT_MAX_STEPS;
  if (maxSteps < 1 || !Number.isInteger(maxSteps)) bad('maxSteps', 'a positive integer');
  const compactAt = num('compactAt') ?? DEFAULT_COMPACT_AT;
  if (compactAt <= 0 || compactAt >= 1) bad('compactAt', 'a fraction between 0 and 1');
  return {
    name,
    file,
    description: str('description') ?? '',
    prompt,
    autoLoad: strs('autoLoad') ?? [],
    maxSteps,
    backend: str('backend'),
    model: str('model'),
    compactionModel: str('compactionModel'),
    compactAt,
    params,
  };
}

/**
 * The profiles of the shipped data dir and the user's config dir (which wins), read fresh on each call. A
 * directory is listed again only when its mtime moved (a file added, removed or renamed into place); a listing
 * taken within RACY_MS of the directory's mtime is not trusted, since a change in the same clock tick would not
 * move it (git's racy-index rule). A profile's own file is read on every get, so an edit in place shows at once.
 */
export class Profiles {
  private readonly listings = new Map<string, { mtimeMs: number; at: number; names: string[] }>();

  constructor(private readonly dirs: string[]) {}

  private list(dir: string): string[] {
    let st;
    try {
      st = statSync(dir);
    } catch {
      return [];
    }
    const had = this.listings.get(dir);
    if (had && had.mtimeMs === st.mtimeMs && had.at - had.mtimeMs > RACY_MS) return had.names;
    const at = Date.now();
    let names: string[];
    try {
      names = readdirSync(dir).filter((f) => f.endsWith('.json'));
    } catch {
      return [];
    }
    this.listings.set(dir, { mtimeMs: st.mtimeMs, at, names });
    return names;
  }

  private files(): Map<string, string> {
    const found = new Map<string, string>();
    for (const dir of this.dirs) for (const f of this.list(dir)) found.set(f.slice(0, -5), join(dir, f));
    return found;
  }

  names(): string[] {
    return [...this.files().keys()].sort();
  }

  get(name: string): Profile {
    const file = this.files().get(name);
    if (!file)
      throw new ProfileError(`no agent profile named ${JSON.stringify(name)}; profiles: ${this.names().join(', ')}`);
    return parseProfile(name, file, readFileSync(file, 'utf8'));
  }
}

/**
 * A profile's prompt: literal text as is, or its commands run in `cwd` under the sandbox (agent/promptcmd.ts),
 * their stdout concatenated in order.
 */
export async function resolvePrompt(
  prompt: string | string[],
  cwd: string,
  ollie: Record<string, string>,
  opts: PromptCommandOptions,
): Promise<ResolvedPrompt> {
  if (typeof prompt === 'string') return { text: prompt, warnings: [] };
  return runPromptCommands(prompt, cwd, ollie, opts);
}
