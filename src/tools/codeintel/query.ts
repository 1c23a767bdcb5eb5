/**
 * code_query and code_rewrite: tree-sitter queries (S-expressions with captures and the standard predicates
 * #eq?, #match?, #any-of?…) over a file or a tree, and structural rewrites: each match's target capture is
 * replaced by a template in which $NAME / ${NAME} stand for the texts of the match's captures. A rewrite is a
 * preview (a unified diff) unless `apply` is true.
 */
import { writeFileSync } from 'node:fs';
import { Query, type QueryMatch } from 'web-tree-sitter';
import { unifiedDiff } from '../common/diff.js';
import { ToolError } from '../hosts/runtime.js';
import { Bounded, isDir, num, readText, resolvePath, show, walk } from './files.js';
import { grammar, hasGrammar, languageByName, languageOf, parse, type LangId } from './languages.js';

const queries = new Map<string, Promise<Query>>();

/** A compiled query (cached per language and source: a resident host compiles a query once). */
function compile(lang: LangId, src: string): Promise<Query> {
  const key = `${lang}\0${src}`;
  let q = queries.get(key);
  if (!q) {
    q = grammar(lang).then((l) => new Query(l, src));
    q.catch(() => queries.delete(key));
    queries.set(key, q);
    if (queries.size > 200) queries.delete(queries.keys().next().value!);
  }
  return q;
}

interface Target {
  files: string[];
  truncated: boolean;
  forced?: LangId;
}

function targets(cwd: string, args: Record<string, unknown>, signal: AbortSignal): Target {
  const root = resolvePath(cwd, args.path);
  let forced: LangId | undefined;
  if (args.language !== undefined) {
    forced = typeof args.language === 'string' ? languageByName(args.language) : undefined;
    if (!forced) throw new ToolError(`unknown language ${JSON.stringify(args.language)}`);
    if (!hasGrammar(forced))
      throw new ToolError(`no tree-sitter grammar for ${forced} is installed here: queries cannot run on it`);
  }
  if (!isDir(root)) {
    readText(root); // the error for a missing or binary file
    return { files: [root], truncated: false, ...(forced && { forced }) };
  }
  const { files, truncated } = walk(root, {
    signal,
    maxFiles: num(args.max_files, 5000),
    accept: (p) => {
      const l = languageOf(p);
      return (
        l !== undefined &&
        hasGrammar(l) &&
        (!forced || l === forced || (forced === 'c' && l === 'cpp') || (forced === 'cpp' && l === 'c'))
      );
    },
  });
  return { files, truncated, ...(forced && { forced }) };
}

/** Runs `src` on each file, calling `each` with its matches; returns the query errors per language. */
async function run(
  t: Target,
  src: string,
  signal: AbortSignal,
  each: (file: string, text: string, lang: LangId, matches: QueryMatch[]) => boolean | void,
): Promise<{ errors: Map<LangId, string>; searched: number }> {
  const errors = new Map<LangId, string>();
  let searched = 0;
  for (const file of t.files) {
    signal.throwIfAborted();
    let text: string;
    try {
      text = readText(file);
    } catch {
      continue;
    }
    const lang = t.forced ?? languageOf(file, text);
    if (!lang) throw new ToolError(`${file}: not a language known here (give language)`);
    if (!hasGrammar(lang))
      throw new ToolError(`${file}: no tree-sitter grammar for ${lang} is installed here: queries cannot run on it`);
    if (errors.has(lang)) continue;
    let q: Query;
    try {
      q = await compile(lang, src);
    } catch (e) {
      errors.set(lang, (e as Error).message);
      continue;
    }
    const tree = await parse(lang, text);
    searched++;
    try {
      if (each(file, text, lang, q.matches(tree.rootNode)) === false) break;
    } finally {
      tree.delete();
    }
  }
  return { errors, searched };
}

function queryErrors(errors: Map<LangId, string>, searched: number): string {
  if (!errors.size) return '';
  const lines = [...errors].map(([l, m]) => `the query does not compile for ${l}: ${m}`);
  if (searched === 0) throw new ToolError(lines.join('; '));
  return lines.map((l) => `[${l}; those files were skipped]\n`).join('');
}

const firstLine = (s: string, max = 160): string => {
  const l = s.split('\n')[0]!;
  return l.length > max ? `${l.slice(0, max - 3)}...` : l;
};

export async function codeQuery(args: Record<string, unknown>, cwd: string, signal: AbortSignal): Promise<string> {
  if (typeof args.query !== 'string' || !args.query.trim())
    throw new ToolError('query is required (a tree-sitter S-expression with @captures)');
  const t = targets(cwd, args, signal);
  const max = num(args.max_results, 200);
  const out = new Bounded(num(args.max_bytes, 32 * 1024, 1024, 1 << 20));
  let n = 0;
  let more = 0;
  const { errors, searched } = await run(t, args.query, signal, (file, _text, _lang, matches) => {
    for (const m of matches) {
      for (const c of m.captures) {
        if (c.name.startsWith('_')) continue;
        if (n >= max) {
          more++;
          continue;
        }
        n++;
        const s = c.node.startPosition;
        const e = c.node.endPosition;
        const span = e.row > s.row ? ` [lines ${s.row + 1}-${e.row + 1}]` : '';
        out.push(
          `${show(cwd, file)}:${s.row + 1}:${s.column + 1}: @${c.name} ${c.node.type}${span}: ${firstLine(c.node.text)}`,
        );
      }
    }
  });
  const notes = queryErrors(errors, searched);
  if (n === 0)
    return `${notes}no matches in ${searched} file${searched === 1 ? '' : 's'}${t.truncated ? ' (the walk stopped at max_files)' : ''}\n`;
  return `${out.done()}${more ? `[${more} more captures not shown: raise max_results or narrow the query]\n` : ''}${t.truncated ? '[the walk stopped at max_files: narrow the path]\n' : ''}${notes}`;
}

/** Fills `template` with the texts of a match's captures: $NAME or ${NAME}; $$ is a dollar sign. */
export function fill(template: string, captures: Map<string, string>): string {
  return template.replace(
    /\$\$|\$\{([A-Za-z_][\w.-]*)\}|\$([A-Za-z_][\w-]*)/g,
    (m, a: string | undefined, b: string | undefined) => {
      if (m === '$$') return '$';
      const name = a ?? b!;
      const v = captures.get(name);
      if (v === undefined)
        throw new ToolError(
          `the template names $${name}, which the query does not capture (captures: ${[...captures.keys()].map((k) => `@${k}`).join(', ') || 'none'})`,
        );
      return v;
    },
  );
}

export async function codeRewrite(args: Record<string, unknown>, cwd: string, signal: AbortSignal): Promise<string> {
  if (typeof args.query !== 'string' || !args.query.trim())
    throw new ToolError('query is required (a tree-sitter S-expression with @captures)');
  if (typeof args.template !== 'string')
    throw new ToolError('template is required ($NAME for the text of capture @NAME)');
  const want = typeof args.capture === 'string' && args.capture ? args.capture.replace(/^@/, '') : undefined;
  const apply = args.apply === true;
  const t = targets(cwd, args, signal);
  const results: Array<{ file: string; before: string; after: string; count: number }> = [];
  let overlaps = 0;
  const { errors, searched } = await run(t, args.query, signal, (file, text, _lang, matches) => {
    const edits: Array<{ start: number; end: number; text: string }> = [];
    for (const m of matches) {
      const caps = new Map<string, string>();
      for (const c of m.captures) if (!caps.has(c.name)) caps.set(c.name, c.node.text);
      // The node replaced: the capture named by `capture`, else @match, else the widest capture of the match.
      const target = want
        ? m.captures.find((c) => c.name === want)
        : (m.captures.find((c) => c.name === 'match') ??
          [...m.captures].sort(
            (a, b) => b.node.endIndex - b.node.startIndex - (a.node.endIndex - a.node.startIndex),
          )[0]);
      if (!target) {
        if (want) throw new ToolError(`the query has no capture @${want}`);
        continue;
      }
      edits.push({
        start: target.node.startIndex,
        end: target.node.endIndex,
        text: fill(args.template as string, caps),
      });
    }
    if (!edits.length) return;
    edits.sort((a, b) => a.start - b.start || b.end - a.end);
    let after = '';
    let pos = 0;
    let count = 0;
    for (const e of edits) {
      // Overlapping matches (a node inside one already replaced) are left alone: rewriting both is ambiguous.
      if (e.start < pos) {
        overlaps++;
        continue;
      }
      after += text.slice(pos, e.start) + e.text;
      pos = e.end;
      count++;
    }
    after += text.slice(pos);
    if (after !== text) results.push({ file, before: text, after, count });
  });
  const notes = queryErrors(errors, searched);
  if (!results.length)
    return `${notes}no changes: the query matched nothing to rewrite in ${searched} file${searched === 1 ? '' : 's'}\n`;
  const out = new Bounded(num(args.max_bytes, 64 * 1024, 1024, 1 << 20));
  for (const r of results)
    for (const l of unifiedDiff(r.before, r.after, `a/${show(cwd, r.file)}`, `b/${show(cwd, r.file)}`)
      .split('\n')
      .slice(0, -1))
      out.push(l);
  const total = results.reduce((n, r) => n + r.count, 0);
  if (apply) for (const r of results) writeFileSync(r.file, r.after);
  const summary = `${total} replacement${total === 1 ? '' : 's'} in ${results.length} file${results.length === 1 ? '' : 's'}${overlaps ? ` (${overlaps} overlapping match${overlaps === 1 ? '' : 'es'} skipped)` : ''}: ${apply ? 'applied' : 'preview only, nothing written (call again with apply: true to write)'}`;
  return `${out.done((n) => `[… ${n} more diff lines not shown]`)}${notes}${summary}\n`;
}
