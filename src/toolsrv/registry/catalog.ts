/**
 * The tools on disk: every NAME.meta of the tool directories, parsed and checked once per scan, with the
 * argument validators compiled then, so a call does no file reads and no schema compilation. Directories are
 * given highest precedence first (the user's before the shipped ones); a name found in an earlier directory
 * hides the same name in later ones, even when the earlier .meta is invalid (the user meant to replace it).
 */
import { Validator, type OutputUnit } from '@cfworker/json-schema';
import { DRAFT_07 } from './draft07.js';
import { accessSync, constants, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { CatalogEntry, ProcFlags, ToolInfo } from '../protocol.js';
import type { SandboxExtra } from '../sandbox/index.js';
import { MetaError, parseMeta, resolveVariant, type HostFacts, type MetaDef, type ToolFields } from './meta.js';
import { parseToolSandbox } from './sandbox-rules.js';

/**
 * The dispatch flags every tool accepts. They are not added to each tool's schema (in every schema they were
 * 42 % of the bytes an agent sent about its tools): the agent describes them to the model once.
 */
const FLAG_NAMES: Array<keyof ProcFlags> = ['bypass', 'timeout', 'background'];

/** A tool as one scope runs it: the host's variant chosen, its validator and its argv ready. */
export interface Tool {
  name: string;
  def: MetaDef;
  fields: ToolFields;
  variant: number;
  validate: ArgsValidator;
  info: ToolInfo;
  /** What to exec; JSON arguments go to stdin. */
  argv: string[];
  /** Flags the tool's own schema does not declare, so they may be lifted out of the arguments. */
  liftable: Array<keyof ProcFlags>;
  /** The .meta's `"sandbox": {"ollieSocket": true}`: the sandbox lets it reach the Ollie socket. */
  ollieSocket: boolean;
  /** The .meta's own sandbox rules (`"sandbox": {…}`, registry/sandbox-rules.ts), laid over the policy for it. */
  sandbox: SandboxExtra;
  /** For a hosted tool (`"host": NAME`): the host and the program that serves it (exec/hosts.ts). */
  host?: { name: string; program: string };
}

/**
 * Checks a tool's arguments against its schema; `errors` says what was wrong with the last arguments it rejected.
 * (@cfworker/json-schema interprets schemas instead of generating code: it loads in a few ms where ajv took ~80 ms
 * of every toolsrv start, which is on the path of an agent's first request.)
 */
export interface ArgsValidator {
  (args: unknown): boolean;
  errors: string;
}

const metaSchema = new Validator(DRAFT_07 as unknown as Record<string, unknown>, '7', false);

/** The innermost failures, in words: where, and what was wrong. */
function leafErrors(units: OutputUnit[]): OutputUnit[] {
  // cfworker reports each failing keyword and its parents ("properties", "allOf"…); the deepest say the most.
  return units.filter((u) => !units.some((o) => o !== u && o.keywordLocation.startsWith(`${u.keywordLocation}/`)));
}

/** One failure as the model should read it. */
function say(e: OutputUnit): string | undefined {
  const where =
    e.instanceLocation === '#' ? 'arguments' : `argument ${e.instanceLocation.slice(2).replace(/\//g, '.')}`;
  let m: RegExpExecArray | null;
  if ((m = /^Instance does not have required property "(.*)"\.$/.exec(e.error)))
    return `missing required argument "${m[1]}"`;
  if ((m = /^Property "(.*)" does not match additional properties schema\.$/.exec(e.error)))
    return `unknown argument "${m[1]}"`;
  // The boolean schema `false` under additionalProperties: already said as "unknown argument".
  if (e.keyword === 'false') return undefined;
  if ((m = /^Instance type "(.*)" is invalid\. Expected "(.*)"\.$/.exec(e.error)))
    return `${where} must be ${m[2]}, not ${m[1]}`;
  return `${where}: ${e.error.replace(/\.$/, '')}`;
}

/** `draft`: the .meta schemas are draft 7; MCP servers' are 2020-12 unless they say otherwise. */
export function validatorFor(schema: Record<string, unknown>, draft: '7' | '2020-12' = '7'): ArgsValidator {
  const v = new Validator(schema, draft, false);
  const f = ((args: unknown) => {
    const r = v.validate(args);
    f.errors = r.valid ? '' : [...new Set(leafErrors(r.errors).flatMap((e) => say(e) ?? []))].join('; ');
    return r.valid;
  }) as ArgsValidator;
  f.errors = '';
  return f;
}

export class Catalog {
  private defs = new Map<string, MetaDef>();
  private bad = new Map<string, CatalogEntry>();
  /** Validators by def and variant index (+1, so the base is 0); compiled once per scan. */
  private validators = new WeakMap<MetaDef, ArgsValidator[]>();
  private sandboxes = new WeakMap<MetaDef, SandboxExtra>();

  /** @param dirs tool directories, highest precedence first */
  constructor(readonly dirs: string[]) {
    this.scan();
  }

  /** Re-reads every directory. Returns the names whose definition changed (added, removed or edited). */
  scan(): Set<string> {
    const before = new Map([...this.defs].map(([n, d]) => [n, JSON.stringify([d.base, d.variants, d.executable])]));
    const beforeBad = new Set(this.bad.keys());
    this.defs = new Map();
    this.bad = new Map();
    for (const dir of this.dirs) {
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch {
        continue;
      }
      for (const f of names.sort()) {
        if (!f.endsWith('.meta')) continue;
        const name = f.slice(0, -'.meta'.length);
        if (this.defs.has(name) || this.bad.has(name)) continue;
        const file = join(dir, f);
        try {
          if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(name))
            throw new MetaError('tool names are letters, digits, _ . and - (and start with a letter, digit or _)');
          const def = parseMeta(name, file, dir, readFileSync(file, 'utf8'), executableAt(join(dir, name)));
          const all = [def.base, ...def.variants.map((v) => ({ ...def.base, ...v.fields }))];
          this.validators.set(
            def,
            all.map((fl, i) => this.compile(fl.args, i)),
          );
          this.sandboxes.set(def, parseToolSandbox(def.extra.sandbox));
          for (const fl of all)
            if (fl.host && !this.hostProgram(fl.host, dir))
              throw new MetaError(
                `host ${fl.host}: no hosts/${fl.host}.mjs in ${[dir, ...this.dirs.filter((d) => d !== dir)].join(', ')}`,
              );
          this.defs.set(name, def);
        } catch (e) {
          this.bad.set(name, { name, file, error: (e as Error).message });
        }
      }
    }
    const changed = new Set<string>();
    for (const [n, d] of this.defs)
      if (before.get(n) !== JSON.stringify([d.base, d.variants, d.executable])) changed.add(n);
    for (const n of before.keys()) if (!this.defs.has(n)) changed.add(n);
    for (const n of beforeBad) if (!this.bad.has(n)) changed.add(n);
    return changed;
  }

  private compile(schema: Record<string, unknown>, variant: number): ArgsValidator {
    const r = metaSchema.validate(schema);
    if (!r.valid) {
      const why = leafErrors(r.errors)
        .map((e) => `${e.instanceLocation.slice(1) || '/'}: ${e.error}`)
        .join('; ');
      throw new MetaError(`${variant ? `variants[${variant - 1}].` : ''}args: not a valid JSON Schema: ${why}`);
    }
    return validatorFor(schema);
  }

  /** The program of host `name`: hosts/NAME.mjs next to the tool's .meta, else in the tool dirs in order. */
  hostProgram(name: string, dir: string): string | undefined {
    for (const d of [dir, ...this.dirs]) {
      const p = join(d, 'hosts', `${name}.mjs`);
      try {
        if (statSync(p).isFile()) return p;
      } catch {
        // not in this directory
      }
    }
    return undefined;
  }

  get(name: string): MetaDef | undefined {
    return this.defs.get(name);
  }

  /** Why `name` cannot be loaded, in words. */
  whyNot(name: string): string {
    const b = this.bad.get(name);
    if (b) return `${b.file}: ${b.error}`;
    return `no tool ${JSON.stringify(name)} (looked for ${name}.meta in ${this.dirs.join(', ')})`;
  }

  entries(): CatalogEntry[] {
    const good: CatalogEntry[] = [...this.defs.values()].map((d) => ({
      name: d.name,
      file: d.file,
      description: d.base.description,
      tier: d.base.tier,
    }));
    return [...good, ...this.bad.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Problems found by the last scan, one line each: `file: reason`. */
  errors(): string[] {
    return [...this.bad.values()].map((b) => `${b.file}: ${b.error}`);
  }

  /** The tool as a scope with these host facts runs it. */
  resolve(name: string, host: HostFacts): Tool {
    const def = this.defs.get(name);
    if (!def) throw new Error(this.whyNot(name));
    const { fields, variant } = resolveVariant(def, host);
    const validate = this.validators.get(def)![variant + 1]!;
    const own = (fields.args.properties ?? {}) as Record<string, unknown>;
    const liftable = FLAG_NAMES.filter((f) => !(f in own));
    const parameters = { ...fields.args, type: 'object', properties: own };
    const info: ToolInfo = {
      name,
      description: fields.description,
      prompt: fields.prompt,
      parameters,
      scope: fields.scope,
      tier: fields.tier,
      ...(fields.pathArg !== undefined && { pathArg: fields.pathArg }),
      ...(fields.outputFormat !== undefined && { outputFormat: fields.outputFormat }),
    };
    // A cmd wins over an executable: a variant may swap the script for a one-liner over a CLI that is present.
    const program = fields.host ? this.hostProgram(fields.host, def.dir) : undefined;
    if (fields.host && !program)
      throw new Error(`${def.file}: host ${fields.host}: no hosts/${fields.host}.mjs in the tool directories`);
    const argv = fields.host ? [] : fields.cmd ? ['/bin/sh', '-c', fields.cmd] : [def.executable!];
    const sandbox = this.sandboxes.get(def) ?? {};
    return {
      name,
      def,
      fields,
      variant,
      validate,
      info,
      argv,
      liftable,
      ollieSocket: sandbox.allowOllieSocket === true,
      sandbox,
      ...(fields.host && program && { host: { name: fields.host, program } }),
    };
  }
}

function executableAt(p: string): string | undefined {
  try {
    if (!statSync(p).isFile()) return undefined;
    accessSync(p, constants.X_OK);
    return p;
  } catch {
    return undefined;
  }
}

/** What was wrong with the arguments `validate` last rejected, in a sentence for the model. */
export function describeErrors(validate: ArgsValidator): string {
  return validate.errors;
}
