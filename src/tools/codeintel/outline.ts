/**
 * Declarations of a file: one walk over its syntax tree with a table of node types per language. Containers
 * (classes, interfaces, impls, namespaces, modules, traits) are walked into and their members nested under
 * them; functions are not (their locals are not the file's outline). Nodes the table does not name are walked
 * through, so declarations inside `export`, `#ifdef`, `extern "C"`, decorators and the like are found.
 *
 * Outlines are cached by path, size and mtime: in a resident host a workspace is parsed once and re-parsed only
 * where files changed.
 */
import { statSync } from 'node:fs';
import type { Node } from 'web-tree-sitter';
import { readText } from './files.js';
import { hasGrammar, languageOf, parse, type LangId } from './languages.js';

export interface Sym {
  kind: string;
  name: string;
  /** 1-based. */
  line: number;
  col: number;
  endLine: number;
  depth: number;
  /** The enclosing declaration's name. */
  container?: string;
  /** The declaration's head (up to its body), whitespace collapsed. */
  signature: string;
}

interface Rule {
  /** The kind, or a function of the node and the enclosing declaration's kind (a function in a class is a method). */
  kind: string | ((n: Node, containerKind: string | undefined) => string);
  container?: boolean;
  name?: (n: Node) => string | undefined;
  /** Several symbols from one node (`const a = 1, b = 2`). */
  many?: (n: Node) => Array<{ node: Node; name: string; kind: string }>;
}

/** Kinds whose functions are methods. */
const TYPES = new Set(['class', 'struct', 'interface', 'impl', 'trait', 'union']);
const fnOrMethod =
  (fn: string) =>
  (_n: Node, c: string | undefined): string =>
    c && TYPES.has(c) ? 'method' : fn;

/** A C/C++ declarator down to the declared name. */
function declName(n: Node | null): string | undefined {
  for (let d = n, i = 0; d && i < 12; i++) {
    if (
      [
        'identifier',
        'field_identifier',
        'type_identifier',
        'qualified_identifier',
        'destructor_name',
        'operator_name',
        'primitive_type',
      ].includes(d.type)
    )
      return d.text;
    d =
      d.childForFieldName('declarator') ??
      d.namedChildren.find((c) => c !== null && /declarator|identifier/.test(c.type)) ??
      null;
  }
  return undefined;
}

function hasFunctionDeclarator(n: Node | null): boolean {
  for (let d = n, i = 0; d && i < 12; i++) {
    if (d.type === 'function_declarator') return true;
    d = d.childForFieldName('declarator');
  }
  return false;
}

const jsDeclarators = (n: Node): Array<{ node: Node; name: string; kind: string }> => {
  const keyword = n.child(0)?.text ?? 'var';
  return n.namedChildren.flatMap((d) => {
    if (!d || d.type !== 'variable_declarator') return [];
    const name = d.childForFieldName('name');
    if (!name) return [];
    const value = d.childForFieldName('value');
    const isFn =
      value && ['arrow_function', 'function_expression', 'function', 'generator_function'].includes(value.type);
    return [{ node: d, name: name.text, kind: isFn ? 'function' : keyword }];
  });
};

const JS: Record<string, Rule> = {
  function_declaration: { kind: 'function' },
  generator_function_declaration: { kind: 'function' },
  function_signature: { kind: 'function' },
  class_declaration: { kind: 'class', container: true },
  abstract_class_declaration: { kind: 'class', container: true },
  interface_declaration: { kind: 'interface', container: true },
  type_alias_declaration: { kind: 'type' },
  enum_declaration: { kind: 'enum' },
  method_definition: { kind: (n) => (n.childForFieldName('name')?.text === 'constructor' ? 'constructor' : 'method') },
  method_signature: { kind: 'method' },
  abstract_method_signature: { kind: 'method' },
  property_signature: { kind: 'property' },
  public_field_definition: { kind: 'field' },
  field_definition: {
    kind: 'field',
    name: (n) => (n.childForFieldName('property') ?? n.childForFieldName('name'))?.text,
  },
  lexical_declaration: { kind: 'const', many: jsDeclarators },
  variable_declaration: { kind: 'var', many: jsDeclarators },
  internal_module: { kind: 'namespace', container: true },
  module: { kind: 'module', container: true },
};

const PY: Record<string, Rule> = {
  function_definition: { kind: fnOrMethod('function') },
  class_definition: { kind: 'class', container: true },
  assignment: {
    kind: 'variable',
    name: (n) => (n.childForFieldName('left')?.type === 'identifier' ? n.childForFieldName('left')!.text : undefined),
  },
};

const GO: Record<string, Rule> = {
  function_declaration: { kind: 'func' },
  method_declaration: { kind: 'method' },
  type_spec: {
    kind: (n) =>
      (({ struct_type: 'struct', interface_type: 'interface' }) as Record<string, string>)[
        n.childForFieldName('type')?.type ?? ''
      ] ?? 'type',
  },
  type_alias: { kind: 'type' },
  const_spec: {
    kind: 'const',
    name: (n) => n.childForFieldName('name')?.text ?? n.namedChildren.find((c) => c?.type === 'identifier')?.text,
  },
  var_spec: {
    kind: 'var',
    name: (n) => n.childForFieldName('name')?.text ?? n.namedChildren.find((c) => c?.type === 'identifier')?.text,
  },
};

const RUST: Record<string, Rule> = {
  function_item: { kind: fnOrMethod('fn') },
  function_signature_item: { kind: fnOrMethod('fn') },
  struct_item: { kind: 'struct' },
  enum_item: { kind: 'enum' },
  union_item: { kind: 'union' },
  type_item: { kind: 'type' },
  const_item: { kind: 'const' },
  static_item: { kind: 'static' },
  macro_definition: { kind: 'macro' },
  trait_item: { kind: 'trait', container: true },
  impl_item: {
    kind: 'impl',
    container: true,
    name: (n) => {
      const t = n.childForFieldName('type')?.text;
      const tr = n.childForFieldName('trait')?.text;
      return t && (tr ? `${tr} for ${t}` : t);
    },
  },
  mod_item: { kind: 'mod', container: true },
};

const C_FAMILY: Record<string, Rule> = {
  function_definition: { kind: fnOrMethod('function'), name: (n) => declName(n.childForFieldName('declarator')) },
  declaration: {
    kind: 'function',
    name: (n) =>
      hasFunctionDeclarator(n.childForFieldName('declarator'))
        ? declName(n.childForFieldName('declarator'))
        : undefined,
  },
  field_declaration: {
    kind: (n) => (hasFunctionDeclarator(n.childForFieldName('declarator')) ? 'method' : 'field'),
    name: (n) => declName(n.childForFieldName('declarator')),
  },
  struct_specifier: {
    kind: 'struct',
    container: true,
    name: (n) => (n.childForFieldName('body') ? n.childForFieldName('name')?.text : undefined),
  },
  union_specifier: {
    kind: 'union',
    container: true,
    name: (n) => (n.childForFieldName('body') ? n.childForFieldName('name')?.text : undefined),
  },
  class_specifier: {
    kind: 'class',
    container: true,
    name: (n) => (n.childForFieldName('body') ? n.childForFieldName('name')?.text : undefined),
  },
  enum_specifier: {
    kind: 'enum',
    name: (n) => (n.childForFieldName('body') ? n.childForFieldName('name')?.text : undefined),
  },
  type_definition: { kind: 'typedef', name: (n) => declName(n.childForFieldName('declarator')) },
  alias_declaration: { kind: 'type' },
  namespace_definition: {
    kind: 'namespace',
    container: true,
    name: (n) => n.childForFieldName('name')?.text ?? '(anonymous)',
  },
  preproc_def: { kind: 'macro' },
  preproc_function_def: { kind: 'macro' },
};

const keyText = (n: Node | null): string | undefined => n?.text.replace(/^["']|["']$/g, '');
const JSON_RULES: Record<string, Rule> = {
  pair: { kind: 'key', container: true, name: (n) => keyText(n.childForFieldName('key')) },
};
const YAML_RULES: Record<string, Rule> = {
  block_mapping_pair: { kind: 'key', container: true, name: (n) => keyText(n.childForFieldName('key')) },
  flow_pair: { kind: 'key', container: true, name: (n) => keyText(n.childForFieldName('key')) },
};
const BASH: Record<string, Rule> = { function_definition: { kind: 'function' } };

/** Each named child of type `type` of a declaration, named by `name` (a field, or the first child of that type). */
const each =
  (type: string, kind: string, name: string) =>
  (n: Node): Array<{ node: Node; name: string; kind: string }> =>
    n.namedChildren.flatMap((c) => {
      if (!c || c.type !== type) return [];
      const nm = c.childForFieldName(name) ?? c.namedChildren.find((x) => x?.type === name) ?? null;
      return nm ? [{ node: c, name: nm.text, kind }] : [];
    });

const PHP: Record<string, Rule> = {
  namespace_definition: { kind: 'namespace', container: true },
  function_definition: { kind: 'function' },
  class_declaration: { kind: 'class', container: true },
  interface_declaration: { kind: 'interface', container: true },
  trait_declaration: { kind: 'trait', container: true },
  enum_declaration: { kind: 'enum', container: true },
  enum_case: { kind: 'case' },
  method_declaration: { kind: 'method' },
  property_declaration: { kind: 'property', many: each('property_element', 'property', 'name') },
  const_declaration: { kind: 'const', many: each('const_element', 'const', 'name') },
};

const JAVA: Record<string, Rule> = {
  class_declaration: { kind: 'class', container: true },
  interface_declaration: { kind: 'interface', container: true },
  enum_declaration: { kind: 'enum', container: true },
  enum_constant: { kind: 'constant' },
  record_declaration: { kind: 'record', container: true },
  annotation_type_declaration: { kind: 'annotation' },
  method_declaration: { kind: 'method' },
  constructor_declaration: { kind: 'constructor' },
  field_declaration: { kind: 'field', many: each('variable_declarator', 'field', 'name') },
};

const RUBY: Record<string, Rule> = {
  module: { kind: 'module', container: true },
  class: { kind: 'class', container: true },
  method: { kind: (_n, c) => (c ? 'method' : 'def') },
  singleton_method: { kind: 'method' },
};

const CSHARP: Record<string, Rule> = {
  namespace_declaration: { kind: 'namespace', container: true },
  file_scoped_namespace_declaration: { kind: 'namespace' },
  class_declaration: { kind: 'class', container: true },
  interface_declaration: { kind: 'interface', container: true },
  struct_declaration: { kind: 'struct', container: true },
  record_declaration: { kind: 'record', container: true },
  enum_declaration: { kind: 'enum' },
  delegate_declaration: { kind: 'delegate' },
  method_declaration: { kind: 'method' },
  constructor_declaration: { kind: 'constructor' },
  property_declaration: { kind: 'property' },
  field_declaration: {
    kind: 'field',
    many: (n) =>
      n.namedChildren.flatMap((c) =>
        c?.type === 'variable_declaration' ? each('variable_declarator', 'field', 'name')(c) : [],
      ),
  },
};

interface Table {
  rules: Record<string, Rule>;
  /** Never walked into: bodies of functions written as expressions, sequences of data. */
  stop: Set<string>;
  maxDepth: number;
}

const TABLES: Partial<Record<LangId, Table>> = {
  typescript: { rules: JS, stop: new Set(['arrow_function', 'function_expression', 'function', 'class']), maxDepth: 8 },
  tsx: {
    rules: JS,
    stop: new Set(['arrow_function', 'function_expression', 'function', 'class', 'jsx_element']),
    maxDepth: 8,
  },
  javascript: {
    rules: JS,
    stop: new Set(['arrow_function', 'function_expression', 'function', 'class', 'jsx_element']),
    maxDepth: 8,
  },
  python: { rules: PY, stop: new Set(['lambda', 'call', 'list', 'dictionary']), maxDepth: 8 },
  go: { rules: GO, stop: new Set(['func_literal', 'block']), maxDepth: 4 },
  rust: { rules: RUST, stop: new Set(['closure_expression', 'block']), maxDepth: 8 },
  c: { rules: C_FAMILY, stop: new Set(['compound_statement']), maxDepth: 8 },
  cpp: { rules: C_FAMILY, stop: new Set(['compound_statement', 'lambda_expression']), maxDepth: 8 },
  json: { rules: JSON_RULES, stop: new Set(['array']), maxDepth: 2 },
  yaml: { rules: YAML_RULES, stop: new Set(['block_sequence', 'flow_sequence']), maxDepth: 2 },
  bash: { rules: BASH, stop: new Set(['compound_statement']), maxDepth: 2 },
  php: { rules: PHP, stop: new Set(['compound_statement', 'anonymous_function', 'arrow_function']), maxDepth: 6 },
  java: { rules: JAVA, stop: new Set(['block', 'lambda_expression', 'object_creation_expression']), maxDepth: 8 },
  ruby: { rules: RUBY, stop: new Set(['block', 'do_block', 'lambda']), maxDepth: 8 },
  csharp: { rules: CSHARP, stop: new Set(['block', 'lambda_expression', 'accessor_list']), maxDepth: 8 },
};

function signature(n: Node, text: string): string {
  const body = n.childForFieldName('body') ?? n.childForFieldName('value');
  let head =
    body && body.startIndex > n.startIndex ? text.slice(n.startIndex, body.startIndex) : n.text.split('\n')[0]!;
  head = head
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/\s*[{:=]$/, '');
  return head.length > 160 ? `${head.slice(0, 157)}...` : head;
}

function walkTree(root: Node, table: Table, text: string): Sym[] {
  const out: Sym[] = [];
  const visit = (n: Node, depth: number, container: string | undefined, containerKind: string | undefined): void => {
    for (const c of n.namedChildren) {
      if (!c) continue;
      const rule = table.rules[c.type];
      if (rule) {
        if (rule.many) {
          for (const m of rule.many(c)) out.push(sym(m.node, m.kind, m.name, depth, container, text));
          continue;
        }
        const name = rule.name ? rule.name(c) : c.childForFieldName('name')?.text;
        if (name) {
          const kind = typeof rule.kind === 'string' ? rule.kind : rule.kind(c, containerKind);
          out.push(sym(c, kind, name, depth, container, text));
          if (rule.container && depth < table.maxDepth) visit(c, depth + 1, name, kind);
          continue;
        }
        // A nameless match (an anonymous struct, a declaration that is not a prototype): look inside.
      }
      if (!table.stop.has(c.type)) visit(c, depth, container, containerKind);
    }
  };
  visit(root, 0, undefined, undefined);
  return out;
}

function sym(n: Node, kind: string, name: string, depth: number, container: string | undefined, text: string): Sym {
  return {
    kind,
    name: name.replace(/\s+/g, ' '),
    line: n.startPosition.row + 1,
    col: n.startPosition.column + 1,
    // A node that ends with its line's newline (a #define) ends on that line, not at column 0 of the next.
    endLine:
      n.endPosition.column === 0 && n.endPosition.row > n.startPosition.row ? n.endPosition.row : n.endPosition.row + 1,
    depth,
    ...(container && { container }),
    signature: signature(n, text),
  };
}

/** Markdown headings (ATX `#`… and setext underlines), outside fenced code blocks. */
export function markdownHeadings(text: string): Sym[] {
  const out: Sym[] = [];
  const lines = text.split('\n');
  let fence: string | undefined;
  const stack: string[] = [];
  const add = (level: number, title: string, line: number): void => {
    stack.length = level - 1;
    const container = stack.filter(Boolean).at(-1);
    out.push({
      kind: `h${level}`,
      name: title,
      line,
      col: 1,
      endLine: line,
      depth: level - 1,
      ...(container && { container }),
      signature: `${'#'.repeat(level)} ${title}`,
    });
    stack[level - 1] = title;
  };
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    const f = /^ {0,3}(`{3,}|~{3,})/.exec(l);
    if (f) {
      if (!fence) fence = f[1]![0]!.repeat(f[1]!.length);
      else if (f[1]!.startsWith(fence)) fence = undefined;
      continue;
    }
    if (fence) continue;
    const atx = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/.exec(l);
    if (atx) {
      add(atx[1]!.length, (atx[2] ?? '').trim(), i + 1);
      continue;
    }
    const next = lines[i + 1];
    if (l.trim() && next !== undefined && /^ {0,3}(=+|-+)[ \t]*$/.test(next) && !/^ {0,3}([-*+]|\d+[.)])\s/.test(l)) {
      add(next.trim()[0] === '=' ? 1 : 2, l.trim(), i + 1);
      i++;
    }
  }
  return out;
}

export interface Outline {
  path: string;
  lang: LangId;
  lines: number;
  symbols: Sym[];
  /** The tree had syntax errors (symbols may be incomplete). */
  errors: boolean;
}

const cache = new Map<string, { size: number; mtimeMs: number; outline: Outline }>();
export const outlineStats = { parsed: 0, cached: 0 };

/** The outline of one file (undefined when its language is not one we know). Cached by size and mtime. */
export async function outlineOf(path: string, text?: string): Promise<Outline | undefined> {
  let st: { size: number; mtimeMs: number } | undefined;
  if (text === undefined) {
    try {
      st = statSync(path);
    } catch {
      st = undefined;
    }
    const hit = st && cache.get(path);
    if (hit && st && hit.size === st.size && hit.mtimeMs === st.mtimeMs) {
      outlineStats.cached++;
      return hit.outline;
    }
    text = readText(path);
  }
  const lang = languageOf(path, text);
  if (!lang) return undefined;
  const lines = text.length === 0 ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  let outline: Outline;
  if (lang === 'markdown' || !hasGrammar(lang))
    outline = { path, lang, lines, symbols: markdownHeadings(text), errors: false };
  else {
    const tree = await parse(lang, text);
    try {
      outline = {
        path,
        lang,
        lines,
        symbols: walkTree(tree.rootNode, TABLES[lang]!, text),
        errors: tree.rootNode.hasError,
      };
    } finally {
      tree.delete();
    }
  }
  outlineStats.parsed++;
  if (st) {
    cache.set(path, { size: st.size, mtimeMs: st.mtimeMs, outline });
    if (cache.size > 50_000) cache.delete(cache.keys().next().value!);
  }
  return outline;
}

export const cacheSize = (): number => cache.size;
