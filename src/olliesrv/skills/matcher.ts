/**
 * Skills and tool hints for a user prompt (the agent's `enrich` hook). The prompt is embedded once and compared
 * with every skill's description (an index built once per process, on first use) and with the descriptions of
 * the tools the agent has loaded (an index per turn; tool vectors are cached by text, so only a new or changed
 * tool is embedded). Up to `max_skills` skills scoring at least `skill_threshold` come back as `skill` blocks
 * (the whole skill), up to `max_tools` tools as one `tools` block. Without an installed model the same
 * happens by BM25, and the log and `/skills` say so.
 *
 *   const m = new SkillMatcher({ configDir, log });
 *   deps.enrich = (r) => m.enrich(r);        // AgentDeps
 *   deps.skills = m;                         // the `skills` ctl command
 */
import { join } from 'node:path';
import { shippedDataDir } from '../../platform/paths.js';
import { loadMatchConfig, type MatchConfig } from './config.js';
import { findModel, modelsDir, OnnxEmbedder, type Embedder } from './embed.js';
import { Index, words, type Method } from './index.js';
import { loadSkills, type Skill } from './skills.js';

/** What a tool hint needs of a loaded tool (ToolInfo has more). */
export interface ToolLike {
  name: string;
  description: string;
}

export interface ContextItem {
  name: string;
  text: string;
}

/** Skills scoring under this share of the best match are left out. */
const RELATIVE_SCORE = 0.6;

/** A skill's text is injected whole up to this size; past it, the head and a pointer to skill_load. */
const SKILL_TEXT_MAX = 12 * 1024;

/** Remembers vectors by text: the tools an agent has loaded change rarely, turns come often. */
class CachedEmbedder implements Embedder {
  private readonly cache = new Map<string, Float32Array>();
  constructor(private readonly inner: Embedder) {}
  get dim(): number {
    return this.inner.dim;
  }
  get path(): string {
    return this.inner.path;
  }
  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    const missing = [...new Set(texts.filter((t) => !this.cache.has(t)))];
    if (missing.length) {
      const vecs = await this.inner.embed(missing);
      missing.forEach((t, i) => this.cache.set(t, vecs[i]!));
      // Bounded: descriptions of tools and skills, not prompts, are what repeats.
      while (this.cache.size > 4096) this.cache.delete(this.cache.keys().next().value!);
    }
    return texts.map((t) => this.cache.get(t)!);
  }
}

/**
 * The embedder for `model` (a name under `dir`, an absolute directory, or "none"), or why there is none, in
 * words for logs. Loading errors are reported, not thrown: matching then falls back to BM25.
 */
export async function openEmbedder(
  model: string,
  dir = modelsDir(),
): Promise<{ embedder?: OnnxEmbedder; why: string }> {
  if (model === 'none') return { why: 'model = none in embedding.conf' };
  const found = findModel(model, dir);
  if (!found)
    return {
      why: `no embedding model at ${model.startsWith('/') ? model : join(dir, model)} (model.onnx and tokenizer.json; \`ollie models install\` fetches it)`,
    };
  try {
    return { embedder: await OnnxEmbedder.load(found), why: '' };
  } catch (e) {
    return { why: `the embedding model at ${found} does not load: ${(e as Error).message}` };
  }
}

export interface SkillMatcherOptions {
  /** Ollie's config dir: embedding.conf and skills/ there. */
  configDir: string;
  /** Where models live (default $XDG_DATA_HOME/ollie/models). */
  modelsDir?: string;
  /** The shipped skills (default data/skills). */
  shippedDir?: string;
  /** Overrides embedding.conf (tests). */
  config?: Partial<MatchConfig>;
  log?: (m: string) => void;
}

interface Ready {
  config: MatchConfig;
  dirs: string[];
  embedder?: Embedder;
  /** Why there is no embedder. */
  why: string;
  skills: Index<Skill>;
  errors: string[];
  loadMs: number;
}

export class SkillMatcher {
  private ready?: Promise<Ready>;
  private readonly log: (m: string) => void;

  constructor(private readonly o: SkillMatcherOptions) {
    this.log = o.log ?? (() => undefined);
  }

  /** Loads the config, the skills and the model once (on first use), and says in the log what matching uses. */
  private state(): Promise<Ready> {
    this.ready ??= (async () => {
      const t0 = performance.now();
      let config: MatchConfig;
      try {
        config = { ...loadMatchConfig(this.o.configDir), ...this.o.config };
      } catch (e) {
        this.log(`${(e as Error).message}; using the defaults`);
        config = { ...loadMatchConfig('/nonexistent'), ...this.o.config };
      }
      const dirs = [
        ...config.skillDirs,
        join(this.o.configDir, 'skills'),
        this.o.shippedDir ?? join(shippedDataDir(), 'skills'),
      ];
      const set = loadSkills(dirs);
      for (const e of set.errors) this.log(`skill not loaded: ${e}`);
      const opened = await openEmbedder(config.model, this.o.modelsDir);
      let { embedder, why } = opened;
      let cached = embedder && new CachedEmbedder(embedder);
      const text = (s: Skill): string => `${s.name.replace(/[-_]/g, ' ')}: ${s.description}`;
      let skills: Index<Skill>;
      try {
        skills = await Index.build(set.skills, text, cached);
      } catch (e) {
        // A model that loads but fails on real input must not leave every later prompt without matching.
        why = `the embedding model at ${embedder?.path} failed: ${(e as Error).message}`;
        embedder = undefined;
        cached = undefined;
        skills = await Index.build(set.skills, text);
      }
      const loadMs = performance.now() - t0;
      this.log(
        `skills: ${set.skills.length} from ${dirs.join(', ')}; matching prompts by ${embedder ? `embeddings (${embedder.path}, ${embedder.dim}-d)` : `BM25: ${why}`} (ready in ${loadMs.toFixed(0)} ms)`,
      );
      return { config, dirs, ...(cached && { embedder: cached }), why, skills, errors: set.errors, loadMs };
    })();
    return this.ready;
  }

  /** Forgets the skills and the model: the next use reloads them (after installing a model or editing skills). */
  reload(): void {
    this.ready = undefined;
  }

  async method(): Promise<{ method: Method; detail: string }> {
    const s = await this.state();
    return s.embedder ? { method: 'embeddings', detail: s.embedder.path } : { method: 'bm25', detail: s.why };
  }

  async list(): Promise<Skill[]> {
    return [...(await this.state()).skills.entries];
  }

  /** The `skills` ctl command: no argument lists them (and the matching method); a name prints that skill. */
  async command(args: string): Promise<string> {
    const s = await this.state();
    const name = args.trim();
    if (name) {
      const sk = s.skills.entries.find((k) => k.name === name);
      if (!sk)
        throw new Error(
          `no skill ${JSON.stringify(name)}; skills: ${s.skills.entries.map((k) => k.name).join(', ') || 'none'}`,
        );
      return `# skill ${sk.name} (${sk.file})\n\n${sk.body}\n`;
    }
    const head = s.embedder ? `matching: embeddings (${s.embedder.path})` : `matching: bm25 (${s.why})`;
    const lines = s.skills.entries.map((k) => `${k.name}\t${k.description}\n`);
    const errs = s.errors.map((e) => `error\t${e}\n`);
    return `${head}\n${lines.join('') || 'no skills\n'}${errs.join('')}`;
  }

  /**
   * Context for one user prompt: matched skills (`skill` blocks, each saying why it matched) and tool hints
   * (one `tools` block). Skills named in `present` are already in the agent's context and are not sent again.
   */
  async enrich(req: {
    prompt: string;
    tools: readonly ToolLike[];
    present?: ReadonlySet<string>;
  }): Promise<ContextItem[]> {
    const s = await this.state();
    const c = s.config;
    const out: ContextItem[] = [];
    const q = await s.skills.query(req.prompt);
    const present = req.present ?? new Set<string>();
    const matches = s.skills.match(q, { limit: c.maxSkills + present.size, threshold: c.skillThreshold });
    const best = matches[0]?.score ?? 0;
    const asked = new Set(words(req.prompt));
    for (const m of matches) {
      const sk = m.item;
      // A match far below the best one is a stray word in common, not a second relevant skill.
      if (present.has(sk.name) || m.score < best * RELATIVE_SCORE) continue;
      if (out.length >= c.maxSkills) break;
      const shared = [...new Set(words(`${sk.name} ${sk.description}`))].filter((w) => asked.has(w));
      const why = `score ${m.score.toFixed(2)} by ${s.embedder ? 'embeddings' : 'BM25'}${shared.length ? `; words in common: ${shared.join(', ')}` : ''}`;
      const body =
        sk.body.length > SKILL_TEXT_MAX
          ? `${sk.body.slice(0, SKILL_TEXT_MAX)}\n\n[the skill continues: skill_load ${sk.name} prints all of it]`
          : sk.body;
      out.push({
        name: 'skill',
        text: `Skill "${sk.name}" matches this request (${sk.description.replace(/\.$/, '')}; matched with ${why}). Follow it where it applies:\n\n${body}`,
      });
    }
    if (c.maxTools > 0 && req.tools.length) {
      const tools = await Index.build(req.tools, (t) => `${t.name.replace(/_/g, ' ')}: ${t.description}`, s.embedder);
      const hits = tools.match(q, { limit: c.maxTools, threshold: c.toolThreshold });
      if (hits.length) {
        out.push({
          name: 'tools',
          text: `Tools that fit this request:\n${hits.map((h) => `- ${h.item.name}: ${h.item.description.split('\n')[0]}`).join('\n')}`,
        });
      }
    }
    return out;
  }
}
