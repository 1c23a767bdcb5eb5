/**
 * The code intelligence tools, as handlers of the codeintel host (src/tools/hosts/codeintel.ts):
 * codebase_overview, code_outline, code_symbols, code_dependencies, code_query, code_rewrite.
 * Output is plain text, bounded (each tool has a max_bytes or max_results), paths relative to the cwd.
 */
import { extname, relative, sep } from 'node:path';
import type { Handler } from '../hosts/runtime.js';
import { ToolError } from '../hosts/runtime.js';
import { depsOf, type Dep } from './deps.js';
import { Bounded, isDir, num, readText, resolvePath, show, walk } from './files.js';
import { hasGrammar, languageOf, parse, type LangId } from './languages.js';
import { outlineOf, type Outline, type Sym } from './outline.js';
import { codeQuery, codeRewrite } from './query.js';

const isSource = (p: string): boolean => languageOf(p) !== undefined;
const plural = (n: number, w: string): string => `${n} ${w}${n === 1 ? '' : 's'}`;

/** A declaration's head as written says what it is (`class X`, `def f`); others get their kind in front. */
const SAYS_KIND =
  /^(export|default|declare|async|pub|def|func|fn|static|public|private|protected|abstract|const|let|var|type|interface|class|struct|enum|union|impl|trait|mod|namespace|template|typedef|function|#)\b/;

function symLine(s: Sym, width: number): string {
  const range = s.endLine > s.line ? `${s.line}-${s.endLine}` : `${s.line}`;
  let text: string;
  if (s.kind === 'key') text = s.name;
  else if (/^h\d$/.test(s.kind)) text = s.signature;
  else if (!s.signature.includes(s.name) || s.signature === `${s.name} ${s.kind}`) text = `${s.kind} ${s.name}`;
  else
    text =
      SAYS_KIND.test(s.signature) || s.signature.startsWith(`${s.kind} `) || s.signature.startsWith(`${s.kind}(`)
        ? s.signature
        : `${s.kind} ${s.signature}`;
  return `${range.padEnd(width)}  ${'  '.repeat(s.depth)}${text}`;
}

export const codeOutline: Handler = async (args, ctx) => {
  const file = resolvePath(ctx.cwd, args.path);
  if (isDir(file))
    throw new ToolError(
      `${show(ctx.cwd, file)} is a directory: code_outline takes one file (codebase_overview shows a tree)`,
    );
  const text = readText(file);
  if (!languageOf(file, text))
    throw new ToolError(
      `${show(ctx.cwd, file)}: ${extname(file) || 'this file'} is not a language known here (known: TypeScript, TSX, JavaScript, Python, Go, Rust, C, C++, PHP, Java, Ruby, C#, JSON, YAML, Markdown, shell)`,
    );
  const o = (await outlineOf(file))!;
  const maxDepth = num(args.max_depth, 99, 0);
  const syms = o.symbols.filter((s) => s.depth <= maxDepth);
  const width = Math.max(...syms.map((s) => `${s.line}-${s.endLine}`.length), 1);
  const out = new Bounded(num(args.max_bytes, 32 * 1024, 1024, 1 << 20));
  out.push(
    `${show(ctx.cwd, file)}: ${o.lang}, ${plural(o.lines, 'line')}, ${plural(syms.length, 'symbol')}${o.errors ? ' (syntax errors: the outline may be incomplete)' : ''}`,
  );
  for (const s of syms) out.push(symLine(s, width));
  return out.done();
};

export const codebaseOverview: Handler = async (args, ctx) => {
  const root = resolvePath(ctx.cwd, args.path);
  if (!isDir(root)) throw new ToolError(`${show(ctx.cwd, root)} is not a directory`);
  const perFile = num(args.symbols_per_file, 8, 0, 100);
  const { files, truncated } = walk(root, { signal: ctx.signal, maxFiles: num(args.max_files, 3000) });
  const counts = new Map<string, number>();
  for (const f of files) {
    const l = languageOf(f) ?? 'other';
    counts.set(l, (counts.get(l) ?? 0) + 1);
  }
  const out = new Bounded(num(args.max_bytes, 24 * 1024, 256, 1 << 20));
  const summary = [...counts]
    .sort((a, b) => b[1] - a[1])
    .map(([l, n]) => `${l} ${n}`)
    .join(', ');
  out.push(
    `${show(ctx.cwd, root)}: ${plural(files.length, 'file')}${truncated ? '+ (walk stopped at max_files)' : ''}${summary ? ` (${summary})` : ''}`,
  );
  let lastDir: string[] = [];
  const others = new Map<string, string[]>();
  const flushOthers = (dir: string, depth: number): void => {
    const o = others.get(dir);
    if (!o?.length) return;
    others.delete(dir);
    const shown = o.slice(0, 12).join(', ');
    out.push(`${'  '.repeat(depth)}${shown}${o.length > 12 ? `, +${o.length - 12} more` : ''}`);
  };
  for (const f of files) {
    ctx.signal.throwIfAborted();
    if (out.full) break;
    const rel = relative(root, f).split(sep);
    const dirs = rel.slice(0, -1);
    let common = 0;
    while (common < dirs.length && common < lastDir.length && dirs[common] === lastDir[common]) common++;
    if (common < lastDir.length || dirs.length !== lastDir.length) flushOthers(lastDir.join('/'), lastDir.length);
    for (let i = common; i < dirs.length; i++) out.push(`${'  '.repeat(i)}${dirs[i]}/`);
    lastDir = dirs;
    const name = rel[rel.length - 1]!;
    const depth = dirs.length;
    if (!isSource(f)) {
      const key = dirs.join('/');
      others.set(key, [...(others.get(key) ?? []), name]);
      continue;
    }
    let o: Outline | undefined;
    try {
      o = await outlineOf(f);
    } catch {
      o = undefined;
    }
    if (!o) {
      out.push(`${'  '.repeat(depth)}${name}`);
      continue;
    }
    const top = o.symbols.filter((s) => s.depth === 0 && s.kind !== 'key');
    const names = top.slice(0, perFile).map((s) => (/^h\d$/.test(s.kind) ? s.signature : `${s.kind} ${s.name}`));
    const more = top.length > perFile ? `, +${top.length - perFile} more` : '';
    out.push(`${'  '.repeat(depth)}${name} (${o.lines})${names.length ? `: ${names.join(', ')}${more}` : ''}`);
  }
  flushOthers(lastDir.join('/'), lastDir.length);
  // The walk stops once the output is full, so how much is left is not known: say where to look instead.
  return out.done(() => `[… the rest of the tree is not shown: give a subdirectory as path, or raise max_bytes]`);
};

export const codeSymbols: Handler = async (args, ctx) => {
  if (typeof args.query !== 'string' || !args.query)
    throw new ToolError('query is required (a name, part of one, or /regex/)');
  const q = args.query;
  let test: (name: string) => number;
  const rx = /^\/(.+)\/([a-z]*)$/.exec(q);
  if (rx) {
    let re: RegExp;
    try {
      re = new RegExp(rx[1]!, rx[2]);
    } catch (e) {
      throw new ToolError(`bad regex: ${(e as Error).message}`);
    }
    test = (n) => (re.test(n) ? 1 : 0);
  } else {
    const lq = q.toLowerCase();
    // Rank: exact, exact ignoring case, prefix, substring.
    test = (n) =>
      n === q
        ? 4
        : n.toLowerCase() === lq
          ? 3
          : n.toLowerCase().startsWith(lq)
            ? 2
            : n.toLowerCase().includes(lq)
              ? 1
              : 0;
  }
  const kinds = Array.isArray(args.kind)
    ? (args.kind as unknown[]).map(String)
    : typeof args.kind === 'string'
      ? [args.kind]
      : undefined;
  const root = resolvePath(ctx.cwd, args.path);
  const files = isDir(root)
    ? walk(root, { signal: ctx.signal, maxFiles: num(args.max_files, 20_000), accept: isSource }).files
    : [root];
  const hits: Array<{ rank: number; file: string; s: Sym }> = [];
  for (const f of files) {
    ctx.signal.throwIfAborted();
    let o: Outline | undefined;
    try {
      o = await outlineOf(f);
    } catch {
      continue;
    }
    for (const s of o?.symbols ?? []) {
      if (kinds && !kinds.includes(s.kind)) continue;
      if (s.kind === 'key' && !kinds) continue; // JSON/YAML keys only when asked for
      const r = test(s.name);
      if (r) hits.push({ rank: r, file: f, s });
    }
  }
  if (!hits.length) return `no symbol matching ${JSON.stringify(q)} in ${plural(files.length, 'file')}\n`;
  hits.sort(
    (a, b) =>
      b.rank - a.rank || a.s.depth - b.s.depth || (a.file < b.file ? -1 : a.file > b.file ? 1 : a.s.line - b.s.line),
  );
  const max = num(args.max_results, 100);
  const out = new Bounded(num(args.max_bytes, 32 * 1024, 1024, 1 << 20));
  for (const h of hits.slice(0, max)) {
    out.push(
      `${show(ctx.cwd, h.file)}:${h.s.line}:${h.s.col}: ${h.s.kind} ${h.s.name}${h.s.container ? ` (in ${h.s.container})` : ''} — ${h.s.signature}`,
    );
  }
  return `${out.done()}${hits.length > max ? `[${hits.length - max} more matches not shown: raise max_results or narrow the query]\n` : ''}`;
};

async function fileDeps(file: string): Promise<{ lang: LangId; deps: Dep[] } | undefined> {
  const text = readText(file);
  const lang = languageOf(file, text);
  if (!lang || !hasGrammar(lang)) return undefined;
  const tree = await parse(lang, text);
  try {
    return { lang, deps: await depsOf(file, lang, tree.rootNode) };
  } finally {
    tree.delete();
  }
}

export const codeDependencies: Handler = async (args, ctx) => {
  const target = resolvePath(ctx.cwd, args.path);
  const out = new Bounded(num(args.max_bytes, 32 * 1024, 1024, 1 << 20));
  const line = (d: Dep): string =>
    `${d.line}: ${d.kind} ${d.target}${d.resolved ? ` -> ${show(ctx.cwd, d.resolved)}` : d.external ? ' (external)' : ' (not found)'}`;
  if (args.importers === true) {
    // Who imports this file: every file under the search root whose resolved dependencies name it.
    if (isDir(target)) throw new ToolError('importers needs a file as path');
    const root = resolvePath(ctx.cwd, args.root);
    const { files } = walk(root, { signal: ctx.signal, accept: isSource });
    let n = 0;
    for (const f of files) {
      ctx.signal.throwIfAborted();
      const r = await fileDeps(f).catch(() => undefined);
      for (const d of r?.deps ?? [])
        if (d.resolved === target) {
          n++;
          out.push(`${show(ctx.cwd, f)}:${d.line}: ${d.kind} ${d.target}`);
        }
    }
    return n ? out.done() : `no file under ${show(ctx.cwd, root)} imports ${show(ctx.cwd, target)}\n`;
  }
  if (!isDir(target)) {
    const r = await fileDeps(target);
    if (!r)
      throw new ToolError(
        `${show(ctx.cwd, target)}: imports are known for TypeScript, JavaScript, Python, Go, Rust, C, C++, PHP, Java, Ruby and C# files`,
      );
    out.push(
      `${show(ctx.cwd, target)}: ${r.lang}, ${`${r.deps.length} ${r.deps.length === 1 ? 'dependency' : 'dependencies'}`}`,
    );
    for (const d of r.deps) out.push(line(d));
    return out.done();
  }
  const { files, truncated } = walk(target, {
    signal: ctx.signal,
    maxFiles: num(args.max_files, 5000),
    accept: isSource,
  });
  const external = new Map<string, number>();
  const body: string[] = [];
  for (const f of files) {
    ctx.signal.throwIfAborted();
    const r = await fileDeps(f).catch(() => undefined);
    if (!r?.deps.length) continue;
    body.push(`${show(ctx.cwd, f)}:`);
    for (const d of r.deps) {
      body.push(`  ${line(d)}`);
      if (d.external) {
        // Count packages, not deep paths: `react-dom/client` is react-dom, `@scope/pkg/x` is @scope/pkg.
        const parts = d.target.split(d.target.includes('::') ? '::' : '/');
        const pkg = d.target.startsWith('@') ? parts.slice(0, 2).join('/') : r.lang === 'go' ? d.target : parts[0]!;
        external.set(pkg, (external.get(pkg) ?? 0) + 1);
      }
    }
  }
  const ext = [...external].sort((a, b) => b[1] - a[1]);
  out.push(
    `${show(ctx.cwd, target)}: ${plural(files.length, 'source file')}${truncated ? '+' : ''}; external: ${
      ext.length
        ? ext
            .slice(0, 40)
            .map(([p, n]) => `${p} (${n})`)
            .join(', ')
        : 'none'
    }`,
  );
  for (const l of body) out.push(l);
  return out.done();
};

export const CODEINTEL_TOOLS: Record<string, Handler> = {
  codebase_overview: codebaseOverview,
  code_outline: codeOutline,
  code_symbols: codeSymbols,
  code_dependencies: codeDependencies,
  code_query: (args, ctx) => codeQuery(args, ctx.cwd, ctx.signal),
  code_rewrite: (args, ctx) => codeRewrite(args, ctx.cwd, ctx.signal),
};
