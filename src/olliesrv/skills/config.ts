/**
 * `$XDG_CONFIG_HOME/ollie/embedding.conf`: where skills come from and how prompts are matched. `key = value`
 * lines, `#` comments; every key is optional.
 *
 *   skill_dirs = ~/skills:/srv/team/skills   more skill directories, searched before the user's and shipped ones
 *   model = all-MiniLM-L6-v2                 a directory under $XDG_DATA_HOME/ollie/models, an absolute path,
 *                                            or "none" (always BM25)
 *   skill_threshold = 0.35                   least score for a skill to be injected (cosine or normalized BM25)
 *   tool_threshold = 0.3                     least score for a tool hint
 *   max_skills = 3                           skills injected per prompt
 *   max_tools = 5                            tool hints per prompt
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { DEFAULT_MODEL } from './embed.js';

export interface MatchConfig {
  skillDirs: string[];
  model: string;
  skillThreshold: number;
  toolThreshold: number;
  maxSkills: number;
  maxTools: number;
}

export const DEFAULT_MATCH_CONFIG: MatchConfig = {
  skillDirs: [],
  model: DEFAULT_MODEL,
  skillThreshold: 0.35,
  toolThreshold: 0.3,
  maxSkills: 3,
  maxTools: 5,
};

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export const CONFIG_NAME = 'embedding.conf';

/** Reads `configDir/embedding.conf` (defaults when it does not exist). Throws ConfigError `FILE:LINE: reason`. */
export function loadMatchConfig(configDir: string): MatchConfig {
  const file = join(configDir, CONFIG_NAME);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return { ...DEFAULT_MATCH_CONFIG };
  }
  return parseMatchConfig(file, text);
}

export function parseMatchConfig(file: string, text: string): MatchConfig {
  const c: MatchConfig = { ...DEFAULT_MATCH_CONFIG, skillDirs: [] };
  text.split('\n').forEach((raw, i) => {
    const line = raw.replace(/(^|\s)#.*$/, '').trim();
    if (!line) return;
    const fail = (what: string): never => {
      throw new ConfigError(`${file}:${i + 1}: ${what}`);
    };
    const eq = line.indexOf('=');
    if (eq < 0) fail('expected key = value');
    const key = line.slice(0, eq).trim();
    const value = line.slice(eq + 1).trim();
    const num = (lo: number, hi: number, int: boolean): number => {
      const n = Number(value);
      if (value === '' || !Number.isFinite(n) || n < lo || n > hi || (int && !Number.isInteger(n)))
        fail(
          `${key}: expected ${int ? 'a whole number' : 'a number'} from ${lo} to ${hi}, not ${JSON.stringify(value)}`,
        );
      return n;
    };
    switch (key) {
      case 'skill_dirs':
        c.skillDirs = value
          .split(':')
          .filter(Boolean)
          .map((d) => {
            const p = d.replace(/^~(?=\/|$)/, homedir());
            if (!isAbsolute(p)) fail(`skill_dirs: ${d} is not an absolute path`);
            return p;
          });
        break;
      case 'model':
        if (!value) fail('model: expected a model name, an absolute path or none');
        c.model = value;
        break;
      case 'skill_threshold':
        c.skillThreshold = num(0, 1, false);
        break;
      case 'tool_threshold':
        c.toolThreshold = num(0, 1, false);
        break;
      case 'max_skills':
        c.maxSkills = num(0, 20, true);
        break;
      case 'max_tools':
        c.maxTools = num(0, 50, true);
        break;
      default:
        fail(`unknown key ${key} (known: skill_dirs, model, skill_threshold, tool_threshold, max_skills, max_tools)`);
    }
  });
  return c;
}
