/**
 * The languages code intelligence knows: file extensions, and the tree-sitter grammar (a .wasm shipped by an
 * npm package) of each. A grammar is loaded on its first use and kept for the life of the process — in a
 * resident host, once for all calls (`loads` counts real loads; the host's stats show it).
 *
 * Markdown has no grammar that ships a .wasm for web-tree-sitter here: its headings come from a line scanner
 * (outline.ts), and code_query/code_rewrite say so for .md files.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { Language, Parser, type Tree } from 'web-tree-sitter';

const require = createRequire(import.meta.url);
const pkgDir = (name: string): string => dirname(require.resolve(`${name}/package.json`));

export type LangId =
  | 'typescript'
  | 'tsx'
  | 'javascript'
  | 'python'
  | 'go'
  | 'rust'
  | 'c'
  | 'cpp'
  | 'json'
  | 'yaml'
  | 'markdown'
  | 'bash'
  | 'php'
  | 'java'
  | 'ruby'
  | 'csharp';

interface LangDef {
  exts: string[];
  /** The grammar's .wasm; none for languages handled without a grammar. */
  wasm?: () => string;
}

const vscode = (n: string) => (): string => join(pkgDir('@vscode/tree-sitter-wasm'), 'wasm', `tree-sitter-${n}.wasm`);

export const LANGUAGES: Record<LangId, LangDef> = {
  typescript: { exts: ['.ts', '.mts', '.cts'], wasm: vscode('typescript') },
  tsx: { exts: ['.tsx'], wasm: vscode('tsx') },
  javascript: { exts: ['.js', '.mjs', '.cjs', '.jsx'], wasm: vscode('javascript') },
  python: { exts: ['.py', '.pyi'], wasm: vscode('python') },
  go: { exts: ['.go'], wasm: vscode('go') },
  rust: { exts: ['.rs'], wasm: vscode('rust') },
  c: { exts: ['.c', '.h'], wasm: () => join(pkgDir('tree-sitter-c'), 'tree-sitter-c.wasm') },
  cpp: { exts: ['.cc', '.cpp', '.cxx', '.c++', '.hpp', '.hh', '.hxx', '.h++', '.ipp'], wasm: vscode('cpp') },
  json: { exts: ['.json', '.jsonc', '.json5'], wasm: () => join(pkgDir('tree-sitter-json'), 'tree-sitter-json.wasm') },
  yaml: {
    exts: ['.yaml', '.yml'],
    wasm: () => join(pkgDir('@tree-sitter-grammars/tree-sitter-yaml'), 'tree-sitter-yaml.wasm'),
  },
  markdown: { exts: ['.md', '.markdown'] },
  bash: { exts: ['.sh', '.bash'], wasm: vscode('bash') },
  php: { exts: ['.php', '.phtml'], wasm: vscode('php') },
  java: { exts: ['.java'], wasm: vscode('java') },
  ruby: { exts: ['.rb', '.rake'], wasm: vscode('ruby') },
  csharp: { exts: ['.cs'], wasm: vscode('c-sharp') },
};

const BY_EXT = new Map<string, LangId>();
for (const [id, d] of Object.entries(LANGUAGES) as Array<[LangId, LangDef]>) for (const e of d.exts) BY_EXT.set(e, id);

/** Names the model may use for `language` arguments, mapped to ours. */
const ALIASES: Record<string, LangId> = {
  ts: 'typescript',
  js: 'javascript',
  jsx: 'javascript',
  py: 'python',
  rs: 'rust',
  'c++': 'cpp',
  cc: 'cpp',
  yml: 'yaml',
  md: 'markdown',
  sh: 'bash',
  golang: 'go',
  rb: 'ruby',
  'c#': 'csharp',
  cs: 'csharp',
  'c-sharp': 'csharp',
};

export function languageByName(name: string): LangId | undefined {
  const n = name.toLowerCase();
  return n in LANGUAGES ? (n as LangId) : ALIASES[n];
}

/**
 * The language of a file by its name (and, for .h, a look at its text: C++ headers use the C++ grammar).
 * Undefined for files we do not parse.
 */
export function languageOf(path: string, text?: string): LangId | undefined {
  const id = BY_EXT.get(extname(path).toLowerCase());
  if (
    id === 'c' &&
    path.endsWith('.h') &&
    text !== undefined &&
    /^\s*(class|namespace|template\s*<)|\bstd::|^\s*(public|private|protected):/m.test(text)
  )
    return 'cpp';
  return id;
}

export const hasGrammar = (id: LangId): boolean => LANGUAGES[id].wasm !== undefined;

/** Counters for the host's stats: how often the runtime and each grammar were really loaded. */
export const loads: Record<string, number> = {};

let init: Promise<void> | undefined;
const languages = new Map<LangId, Promise<Language>>();
const parsers = new Map<LangId, Parser>();

export function grammar(id: LangId): Promise<Language> {
  const def = LANGUAGES[id];
  if (!def.wasm) return Promise.reject(new Error(`no tree-sitter grammar for ${id} is installed (outline only)`));
  let p = languages.get(id);
  if (!p) {
    init ??= Parser.init().then(() => void (loads.runtime = (loads.runtime ?? 0) + 1));
    p = init.then(async () => {
      const lang = await Language.load(readFileSync(def.wasm!()));
      loads[id] = (loads[id] ?? 0) + 1;
      return lang;
    });
    // A failed load is not cached: the next call tries again (and reports the same error if it persists).
    p.catch(() => languages.delete(id));
    languages.set(id, p);
  }
  return p;
}

/** Parses `text` as `id`. The caller deletes the tree when done (trees live in the wasm heap). */
export async function parse(id: LangId, text: string): Promise<Tree> {
  const lang = await grammar(id);
  let parser = parsers.get(id);
  if (!parser) {
    parser = new Parser();
    parser.setLanguage(lang);
    parsers.set(id, parser);
  }
  const tree = parser.parse(text);
  if (!tree) throw new Error(`the ${id} parser gave no tree`);
  return tree;
}
