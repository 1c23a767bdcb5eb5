/**
 * Imports and includes of a file, from its syntax tree: ES imports/exports-from, require() and import(),
 * Python import/from, Go import specs, Rust use/extern crate/`mod x;`, C/C++ #include. Relative targets that
 * exist are resolved to files, so a model can follow them.
 */
import { existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Query, type Node } from 'web-tree-sitter';
import { grammar, hasGrammar, type LangId } from './languages.js';

export interface Dep {
  /** As written (the module specifier, the header, the path). */
  target: string;
  line: number;
  kind: string;
  /** The file it names, when it is local and exists. */
  resolved?: string;
  /** A system/third-party dependency rather than a file of the project. */
  external: boolean;
}

const QUERIES: Partial<Record<LangId, string>> = {
  typescript: `(import_statement source: (string) @import)
(export_statement source: (string) @export)
(call_expression function: (identifier) @_f arguments: (arguments . (string) @require) (#eq? @_f "require"))
(call_expression function: (import) arguments: (arguments . (string) @dynamic))`,
  python: `(import_statement name: (dotted_name) @import)
(import_statement name: (aliased_import name: (dotted_name) @import))
(import_from_statement module_name: [(dotted_name) (relative_import)] @from)`,
  go: `(import_spec path: (interpreted_string_literal) @import)`,
  rust: `(use_declaration argument: (_) @use)
(extern_crate_declaration name: (identifier) @crate)
(mod_item !body name: (identifier) @mod)`,
  c: `(preproc_include path: [(string_literal) (system_lib_string)] @include)`,
};
QUERIES.php = `(namespace_use_clause [(qualified_name) (name)] @use)
(require_once_expression (_) @require)
(require_expression (_) @require)
(include_expression (_) @include)
(include_once_expression (_) @include)`;
QUERIES.java = `(import_declaration [(scoped_identifier) (identifier)] @import)`;
QUERIES.ruby = `(call method: (identifier) @_m (#any-of? @_m "require" "require_relative" "load") arguments: (argument_list (string (string_content) @require)))`;
QUERIES.csharp = `(using_directive [(qualified_name) (identifier)] @using)`;
QUERIES.tsx = QUERIES.typescript;
QUERIES.javascript = QUERIES.typescript;
QUERIES.cpp = QUERIES.c;

const compiled = new Map<LangId, Promise<Query>>();

function query(lang: LangId): Promise<Query> | undefined {
  const src = QUERIES[lang];
  if (!src || !hasGrammar(lang)) return undefined;
  let q = compiled.get(lang);
  if (!q) {
    q = grammar(lang).then((l) => new Query(l, src));
    compiled.set(lang, q);
  }
  return q;
}

const unquote = (s: string): string => s.replace(/^["'`<]|["'`>]$/g, '');
const isFile = (p: string): boolean => {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
};

const JS_EXTS = [
  '',
  '.ts',
  '.tsx',
  '.mts',
  '.cts',
  '.js',
  '.jsx',
  '.mjs',
  '.cjs',
  '/index.ts',
  '/index.tsx',
  '/index.js',
];

function resolveTarget(
  file: string,
  lang: LangId,
  kind: string,
  target: string,
): { resolved?: string; external: boolean } {
  const dir = dirname(file);
  switch (lang) {
    case 'typescript':
    case 'tsx':
    case 'javascript': {
      if (!target.startsWith('.') && !target.startsWith('/')) return { external: true };
      const base = resolve(dir, target);
      // TypeScript sources import their siblings as .js (NodeNext): try the .ts of a .js.
      const stems = [base, base.replace(/\.(m|c)?js$/, '')];
      for (const s of stems) for (const e of JS_EXTS) if (isFile(s + e)) return { resolved: s + e, external: false };
      return { external: false };
    }
    case 'python': {
      const m = /^(\.*)(.*)$/.exec(target)!;
      const dots = m[1]!.length;
      const rel = m[2]!.split('.').filter(Boolean).join('/');
      let base = dir;
      for (let i = 1; i < dots; i++) base = dirname(base);
      const roots = dots ? [base] : [dir, ...ancestors(dir)];
      for (const r of roots)
        for (const c of [join(r, `${rel}.py`), join(r, rel, '__init__.py')])
          if (rel && isFile(c)) return { resolved: c, external: false };
      return { external: dots === 0 };
    }
    case 'c':
    case 'cpp': {
      if (kind === 'include' && target.startsWith('<')) return { external: true };
      const t = unquote(target);
      for (const r of [dir, ...ancestors(dir).slice(0, 3)])
        for (const c of [join(r, t), join(r, 'include', t)]) if (isFile(c)) return { resolved: c, external: false };
      return { external: false };
    }
    case 'rust': {
      if (kind === 'mod') {
        for (const c of [join(dir, `${target}.rs`), join(dir, target, 'mod.rs')])
          if (isFile(c)) return { resolved: c, external: false };
        return { external: false };
      }
      return { external: !/^(crate|self|super)::/.test(target) };
    }
    case 'go':
      return { external: true };
    case 'php':
    case 'ruby': {
      if (kind === 'use') return { external: true };
      // A file next to this one (require_relative, include 'x.php') is local; Ruby's other requires are gems.
      const t = unquote(target);
      for (const c of [resolve(dir, t), resolve(dir, `${t}.rb`)])
        if (isFile(c)) return { resolved: c, external: false };
      return { external: lang === 'ruby' };
    }
    default:
      return { external: true };
  }
}

function ancestors(dir: string): string[] {
  const out: string[] = [];
  for (let d = dirname(dir); d !== dirname(d) && out.length < 8; d = dirname(d)) {
    out.push(d);
    if (existsSync(join(d, '.git'))) break;
  }
  return out;
}

/** The dependencies of one parsed file. */
export async function depsOf(file: string, lang: LangId, root: Node): Promise<Dep[]> {
  const q = query(lang);
  if (!q) return [];
  const out: Dep[] = [];
  const seen = new Set<string>();
  for (const c of (await q).captures(root)) {
    if (c.name.startsWith('_')) continue;
    let target = c.node.text;
    if (c.name === 'include' && (lang === 'c' || lang === 'cpp'))
      target = c.node.type === 'system_lib_string' ? target : unquote(target);
    else if (!['rust', 'python', 'java', 'csharp'].includes(lang)) target = unquote(target);
    target = target.replace(/\s+/g, ' ');
    const line = c.node.startPosition.row + 1;
    const key = `${line}:${target}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const r = resolveTarget(file, lang, c.name, target);
    out.push({ target, line, kind: c.name, external: r.external, ...(r.resolved && { resolved: r.resolved }) });
  }
  return out.sort((a, b) => a.line - b.line);
}
