/**
 * Skills: markdown instructions for a kind of task, one per directory as `NAME/SKILL.md`, opening with YAML
 * front matter that names and describes it:
 *
 *   ---
 *   name: writing-tests
 *   description: How to write focused, deterministic tests …   (what matching compares the prompt with)
 *   ---
 *   # Writing tests
 *   …
 *
 * Directories are searched highest precedence first (the configured ones, then $XDG_CONFIG_HOME/ollie/skills,
 * then the shipped data/skills); a name found earlier hides the same name later, as tools do. A bad file is
 * reported as `FILE:LINE: what is wrong` and skipped; the others load.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { isMap, isScalar, LineCounter, parseDocument } from 'yaml';

export interface Skill {
  name: string;
  description: string;
  /** The markdown after the front matter. */
  body: string;
  /** The SKILL.md file. */
  file: string;
}

export class SkillError extends Error {
  override name = 'SkillError';
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** Parses one SKILL.md. Throws SkillError with `file:line: reason` (lines of the file, front matter included). */
export function parseSkill(file: string, text: string): Skill {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  const fail = (line: number, what: string): never => {
    throw new SkillError(`${file}:${line}: ${what}`);
  };
  if (lines[0]?.trim() !== '---')
    fail(1, 'a skill starts with front matter: a line "---", then name: and description:, then "---"');
  const end = lines.findIndex((l, i) => i > 0 && l.trim() === '---');
  if (end < 0) fail(1, 'the front matter opened here is never closed by a line "---"');
  const lc = new LineCounter();
  const doc = parseDocument(lines.slice(1, end).join('\n'), { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  // Lines in the YAML are counted from the line after the opening ---.
  const at = (pos: number): number => lc.linePos(pos).line + 1;
  const first = doc.errors[0];
  if (first) fail(at(first.pos[0]), first.message.split('\n')[0]!);
  const root = doc.contents;
  if (!isMap(root)) return fail(2, 'the front matter must be a mapping with name: and description:');
  const fields: Record<string, { value: string; line: number }> = {};
  for (const pair of root.items) {
    const k = isScalar(pair.key) ? String(pair.key.value) : '';
    const line = isScalar(pair.key) && pair.key.range ? at(pair.key.range[0]) : 2;
    const v = pair.value;
    if ((k === 'name' || k === 'description') && !(isScalar(v) && typeof v.value === 'string' && v.value.trim()))
      fail(line, `${k}: must be a non-empty string`);
    if (isScalar(v)) fields[k] = { value: String(v.value ?? ''), line };
  }
  if (!fields.name) fail(end + 1, 'name: missing from the front matter');
  if (!fields.description)
    fail(end + 1, 'description: missing from the front matter (matching compares prompts with it)');
  const name = fields.name!.value.trim();
  if (!NAME.test(name))
    fail(
      fields.name!.line,
      `name: ${JSON.stringify(name)} must be letters, digits, _ . and - (starting with a letter or digit)`,
    );
  return {
    name,
    description: fields.description!.value.trim().replace(/\s+/g, ' '),
    body: lines
      .slice(end + 1)
      .join('\n')
      .trim(),
    file,
  };
}

export interface SkillSet {
  skills: Skill[];
  /** One line per file that could not be loaded: `FILE:LINE: reason`. */
  errors: string[];
}

/** Every skill of `dirs` (highest precedence first): DIR/NAME/SKILL.md. Missing directories are skipped. */
export function loadSkills(dirs: readonly string[]): SkillSet {
  const byName = new Map<string, Skill>();
  const errors: string[] = [];
  const seen = new Set<string>();
  for (const dir of dirs) {
    let entries: string[];
    try {
      entries = readdirSync(dir).sort();
    } catch {
      continue;
    }
    for (const e of entries) {
      const file = join(dir, e, 'SKILL.md');
      let text: string;
      try {
        if (!statSync(file).isFile()) continue;
        text = readFileSync(file, 'utf8');
      } catch {
        continue;
      }
      try {
        const s = parseSkill(file, text);
        // The directory's name and the skill's may differ; the skill's name is what hides and is loaded.
        if (seen.has(s.name)) continue;
        seen.add(s.name);
        byName.set(s.name, s);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
  }
  return { skills: [...byName.values()].sort((a, b) => a.name.localeCompare(b.name)), errors };
}
