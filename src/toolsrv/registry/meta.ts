/**
 * The .meta format: one JSON object per tool, next to an optional executable of the same name.
 *
 *   description   string, required: what the model reads in the tool list
 *   prompt        markdown for the system prompt
 *   args          JSON Schema of the arguments (an object schema; default: no arguments)
 *   tier          hot | warm | cold (default warm)
 *   scope         read | write | global (default global: a tool must opt in to running alongside others)
 *   pathArg       for scope write: the argument naming the path the lock is taken on
 *   lockPath      for scope write: a fixed path locked by every call instead (a store the tool writes whatever
 *                 its arguments: memory_remember's "{XDG_DATA_HOME}/ollie/memory"); {XDG_DATA_HOME},
 *                 {XDG_CONFIG_HOME} and {HOME} are expanded with toolsrv's environment
 *   outputFormat  fence language of the output (text, markdown, diff, json, …)
 *   cmd           a shell command string (run with /bin/sh -c): a tool with no executable
 *   timeout       seconds (default DEFAULT_TIMEOUT_S)
 *   tty           run in a pseudo-terminal
 *   host          run in the resident tool host of this name (hosts/NAME.mjs in a tool directory), a long-lived
 *                 process that serves many calls, instead of a process per call (exec/hosts.ts)
 *   variants      a list of objects with the same fields plus host conditions; the first whose conditions
 *                 all hold is laid over the base fields. Conditions (a string or a list of strings, all must hold):
 *                   binary  on PATH        file  exists         os    process.platform is one of
 *                   arch    process.arch is one of              env   NAME set and non-empty, or NAME=VALUE
 *                   nenv    NAME unset or empty, or not NAME=VALUE
 *
 * Fields this module does not know are kept (`extra`) for other readers of the file (the sandbox).
 */
import { accessSync, constants, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, normalize } from 'node:path';
import { configDir, dataDir } from '../../platform/paths.js';
import type { ToolScope, ToolTier } from '../protocol.js';

export const DEFAULT_TIMEOUT_S = 300;

export interface ToolFields {
  description: string;
  prompt: string;
  args: Record<string, unknown>;
  tier: ToolTier;
  scope: ToolScope;
  pathArg?: string;
  /** Absolute, placeholders expanded. */
  lockPath?: string;
  outputFormat?: string;
  cmd?: string;
  timeout: number;
  tty: boolean;
  host?: string;
}

export interface Conditions {
  binary?: string[];
  file?: string[];
  os?: string[];
  arch?: string[];
  env?: string[];
  nenv?: string[];
}

export interface Variant {
  when: Conditions;
  fields: Partial<ToolFields>;
}

/** A parsed, checked .meta: the base fields and the variants, before the host picks one. */
export interface MetaDef {
  name: string;
  /** The .meta file. */
  file: string;
  dir: string;
  /** The executable next to it, when there is one. */
  executable?: string;
  base: ToolFields;
  variants: Variant[];
  extra: Record<string, unknown>;
}

export class MetaError extends Error {
  override name = 'MetaError';
}

const FIELD_KEYS = [
  'description',
  'prompt',
  'args',
  'tier',
  'scope',
  'pathArg',
  'lockPath',
  'outputFormat',
  'cmd',
  'timeout',
  'tty',
  'host',
] as const;
const COND_KEYS = ['binary', 'file', 'os', 'arch', 'env', 'nenv'] as const;
const TIERS: readonly string[] = ['hot', 'warm', 'cold'];
const SCOPES: readonly string[] = ['read', 'write', 'global'];

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Checks the field values present in `o` (at `where`, for messages) and returns them typed. */
function parseFields(o: Record<string, unknown>, where: string): Partial<ToolFields> {
  const out: Partial<ToolFields> = {};
  const str = (k: string): string | undefined => {
    const v = o[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw new MetaError(`${where}${k}: must be a string, not ${JSON.stringify(v)}`);
    return v;
  };
  const set = <K extends keyof ToolFields>(k: K, v: ToolFields[K] | undefined): void => {
    if (v !== undefined) out[k] = v;
  };
  set('description', str('description'));
  set('prompt', str('prompt'));
  set('pathArg', str('pathArg'));
  const lockPath = str('lockPath');
  if (lockPath !== undefined) {
    const vars: Record<string, string> = {
      XDG_DATA_HOME: dirname(dataDir()),
      XDG_CONFIG_HOME: dirname(configDir()),
      HOME: homedir(),
    };
    const p = lockPath.replace(/\{([A-Z_]+)\}/g, (m, k: string) => vars[k] ?? m);
    if (!isAbsolute(p) || /\{[A-Z_]+\}/.test(p))
      throw new MetaError(
        `${where}lockPath: ${JSON.stringify(lockPath)} must be an absolute path (placeholders: {XDG_DATA_HOME}, {XDG_CONFIG_HOME}, {HOME})`,
      );
    out.lockPath = normalize(p);
  }
  set('outputFormat', str('outputFormat'));
  const cmd = str('cmd');
  if (cmd !== undefined && cmd.trim() === '') throw new MetaError(`${where}cmd: must not be empty`);
  set('cmd', cmd);
  const host = str('host');
  if (host !== undefined && !/^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(host))
    throw new MetaError(`${where}host: ${JSON.stringify(host)} is not a host name (letters, digits, _ . -)`);
  set('host', host);
  const tier = str('tier');
  if (tier !== undefined && !TIERS.includes(tier))
    throw new MetaError(`${where}tier: ${JSON.stringify(tier)} is not one of ${TIERS.join(', ')}`);
  set('tier', tier as ToolTier | undefined);
  const scope = str('scope');
  if (scope !== undefined && !SCOPES.includes(scope))
    throw new MetaError(`${where}scope: ${JSON.stringify(scope)} is not one of ${SCOPES.join(', ')}`);
  set('scope', scope as ToolScope | undefined);
  if (o.timeout !== undefined) {
    if (typeof o.timeout !== 'number' || !(o.timeout > 0))
      throw new MetaError(`${where}timeout: must be a positive number of seconds, not ${JSON.stringify(o.timeout)}`);
    out.timeout = o.timeout;
  }
  if (o.tty !== undefined) {
    if (typeof o.tty !== 'boolean') throw new MetaError(`${where}tty: must be true or false`);
    out.tty = o.tty;
  }
  if (o.args !== undefined) {
    if (!isObject(o.args)) throw new MetaError(`${where}args: must be a JSON Schema object`);
    if (o.args.type !== undefined && o.args.type !== 'object')
      throw new MetaError(
        `${where}args: the arguments schema must have type "object", not ${JSON.stringify(o.args.type)}`,
      );
    out.args = o.args;
  }
  return out;
}

function parseConditions(o: Record<string, unknown>, where: string): Conditions {
  const c: Conditions = {};
  for (const k of COND_KEYS) {
    const v = o[k];
    if (v === undefined) continue;
    const list = typeof v === 'string' ? [v] : v;
    if (!Array.isArray(list) || list.length === 0 || !list.every((x) => typeof x === 'string' && x !== '')) {
      throw new MetaError(`${where}${k}: must be a non-empty string or a list of them`);
    }
    c[k] = list as string[];
  }
  return c;
}

/** Parses the text of NAME.meta. Throws MetaError with the reason; the caller adds the file name. */
export function parseMeta(
  name: string,
  file: string,
  dir: string,
  text: string,
  executable: string | undefined,
): MetaDef {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new MetaError(`not valid JSON: ${(e as Error).message}`);
  }
  if (!isObject(json)) throw new MetaError('must be a JSON object');
  const fields = parseFields(json, '');
  if (fields.description === undefined)
    throw new MetaError('description: missing (the model needs it to choose the tool)');
  const variants: Variant[] = [];
  if (json.variants !== undefined) {
    if (!Array.isArray(json.variants)) throw new MetaError('variants: must be a list');
    json.variants.forEach((v: unknown, i: number) => {
      const where = `variants[${i}].`;
      if (!isObject(v)) throw new MetaError(`variants[${i}]: must be an object`);
      for (const k of Object.keys(v)) {
        if (!(FIELD_KEYS as readonly string[]).includes(k) && !(COND_KEYS as readonly string[]).includes(k)) {
          throw new MetaError(
            `${where}${k}: unknown field (fields: ${FIELD_KEYS.join(', ')}; conditions: ${COND_KEYS.join(', ')})`,
          );
        }
      }
      variants.push({ when: parseConditions(v, where), fields: parseFields(v, where) });
    });
  }
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(json))
    if (!(FIELD_KEYS as readonly string[]).includes(k) && k !== 'variants') extra[k] = v;
  const base: ToolFields = {
    description: fields.description,
    prompt: fields.prompt ?? '',
    args: fields.args ?? { type: 'object', properties: {} },
    tier: fields.tier ?? 'warm',
    scope: fields.scope ?? 'global',
    timeout: fields.timeout ?? DEFAULT_TIMEOUT_S,
    tty: fields.tty ?? false,
    ...(fields.pathArg !== undefined && { pathArg: fields.pathArg }),
    ...(fields.lockPath !== undefined && { lockPath: fields.lockPath }),
    ...(fields.outputFormat !== undefined && { outputFormat: fields.outputFormat }),
    ...(fields.cmd !== undefined && { cmd: fields.cmd }),
    ...(fields.host !== undefined && { host: fields.host }),
  };
  const def: MetaDef = { name, file, dir, base, variants, extra, ...(executable && { executable }) };
  // Every variant must make a runnable tool, so a host that picks it never meets a broken definition.
  checkResolved(def, base, '');
  variants.forEach((v, i) => checkResolved(def, { ...base, ...v.fields }, `variants[${i}]: `));
  return def;
}

function checkResolved(def: MetaDef, f: ToolFields, where: string): void {
  if (f.host) {
    // A hosted tool is a name the host answers to: it has nothing of its own to execute.
    if (f.cmd) throw new MetaError(`${where}host and cmd exclude each other (a hosted tool runs in its host)`);
    if (f.tty) throw new MetaError(`${where}a hosted tool cannot have tty (its host has no terminal per call)`);
  } else if (!f.cmd && !def.executable)
    throw new MetaError(`${where}no cmd and no executable ${def.name} next to the .meta`);
  if (f.scope === 'write' && !f.pathArg && !f.lockPath)
    throw new MetaError(
      `${where}scope write needs pathArg (the argument naming the path to lock) or lockPath (a fixed path)`,
    );
  if (f.pathArg && f.lockPath)
    throw new MetaError(`${where}pathArg and lockPath exclude each other (the lock is on one path)`);
  if (f.pathArg) {
    const props = (f.args.properties ?? {}) as Record<string, unknown>;
    if (!(f.pathArg in props))
      throw new MetaError(`${where}pathArg ${JSON.stringify(f.pathArg)} is not one of the arguments`);
  }
}

export interface HostFacts {
  platform: string;
  arch: string;
  env: Readonly<Record<string, string | undefined>>;
  /** Directories searched for `binary` conditions. */
  path: string[];
}

export function hostFacts(env: Readonly<Record<string, string | undefined>>, extraPath: string[] = []): HostFacts {
  return {
    platform: process.platform,
    arch: process.arch,
    env,
    path: [...extraPath, ...(env.PATH ?? '').split(delimiter).filter(Boolean)],
  };
}

function onPath(bin: string, path: string[]): boolean {
  const candidates = bin.includes('/') ? [bin] : path.map((d) => join(d, bin));
  return candidates.some((p) => {
    try {
      accessSync(p, constants.X_OK);
      return statSync(p).isFile();
    } catch {
      return false;
    }
  });
}

function envHolds(spec: string, env: HostFacts['env']): boolean {
  const eq = spec.indexOf('=');
  if (eq < 0) return !!env[spec];
  return env[spec.slice(0, eq)] === spec.slice(eq + 1);
}

function exists(p: string, env: HostFacts['env']): boolean {
  // `~/` and `$HOME/` are the only expansions: enough for "is this config file there".
  const home = env.HOME ?? '';
  const path = p.startsWith('~/') ? join(home, p.slice(2)) : p.replace(/^\$HOME(?=\/)/, home);
  if (!isAbsolute(path)) return false;
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

export function conditionsHold(c: Conditions, host: HostFacts): boolean {
  return (
    (c.os ?? [host.platform]).includes(host.platform) &&
    (c.arch ?? [host.arch]).includes(host.arch) &&
    (c.binary ?? []).every((b) => onPath(b, host.path)) &&
    (c.file ?? []).every((f) => exists(f, host.env)) &&
    (c.env ?? []).every((e) => envHolds(e, host.env)) &&
    (c.nenv ?? []).every((e) => !envHolds(e, host.env))
  );
}

/** The fields this host runs: the base with the first matching variant laid over it. */
export function resolveVariant(def: MetaDef, host: HostFacts): { fields: ToolFields; variant: number } {
  const i = def.variants.findIndex((v) => conditionsHold(v.when, host));
  return i < 0
    ? { fields: def.base, variant: -1 }
    : { fields: { ...def.base, ...def.variants[i]!.fields }, variant: i };
}
