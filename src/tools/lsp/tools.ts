/**
 * The lsp_* tools over the warm servers of client.ts. Positions are 1-based lines and columns for the model
 * (columns count UTF-16 code units, as LSP does), converted to LSP's 0-based ones here; locations come back as
 * path:line:col with the line's text.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type {
  CompletionItem,
  CompletionList,
  Diagnostic,
  DocumentSymbol,
  Hover,
  Location,
  LocationLink,
  MarkedString,
  MarkupContent,
  Range,
  SymbolInformation,
  TextEdit,
  WorkspaceEdit,
} from 'vscode-languageserver-protocol';
import { unifiedDiff } from '../common/diff.js';
import { Bounded, num, resolvePath, show } from '../codeintel/files.js';
import { ToolError, type CallContext, type Handler } from '../hosts/runtime.js';
import { pathOf, Servers, type Server } from './client.js';

const SYMBOL_KINDS = [
  '',
  'file',
  'module',
  'namespace',
  'package',
  'class',
  'method',
  'property',
  'field',
  'constructor',
  'enum',
  'interface',
  'function',
  'variable',
  'constant',
  'string',
  'number',
  'boolean',
  'array',
  'object',
  'key',
  'null',
  'enum member',
  'struct',
  'event',
  'operator',
  'type parameter',
];
const COMPLETION_KINDS = [
  '',
  'text',
  'method',
  'function',
  'constructor',
  'field',
  'variable',
  'class',
  'interface',
  'module',
  'property',
  'unit',
  'value',
  'enum',
  'keyword',
  'snippet',
  'color',
  'file',
  'reference',
  'folder',
  'enum member',
  'constant',
  'struct',
  'event',
  'operator',
  'type parameter',
];
const SEVERITY = ['', 'error', 'warning', 'info', 'hint'];

interface Target {
  server: Server;
  file: string;
  uri: string;
  /** Diagnostics generation before this call's sync. */
  gen: number;
  /** The file's text was sent to the server by this call (opened, or changed on disk). */
  sent: boolean;
}

async function open(servers: Servers, args: Record<string, unknown>, ctx: CallContext): Promise<Target> {
  if (typeof args.path !== 'string' || !args.path) throw new ToolError('path is required (the file)');
  const file = resolvePath(ctx.cwd, args.path);
  const server = await servers.get(file, ctx.cwd, ctx.env);
  const gen = server.diagGeneration();
  try {
    const { uri, sent } = await server.sync(file);
    return { server, file, uri, gen, sent };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ToolError(code === 'ENOENT' ? `${show(ctx.cwd, file)}: no such file` : (e as Error).message);
  }
}

function position(args: Record<string, unknown>, text: string): { line: number; character: number } {
  const line = num(args.line, NaN);
  const col = num(args.column, NaN);
  if (!Number.isFinite(line) || !Number.isFinite(col)) throw new ToolError('line and column are required (1-based)');
  const lines = text.split('\n');
  if (line > lines.length) throw new ToolError(`line ${line} is past the end of the file (${lines.length} lines)`);
  return { line: line - 1, character: Math.min(col - 1, lines[line - 1]!.length) };
}

const fileLines = new Map<string, string[]>();
function lineText(path: string, line0: number): string {
  let lines = fileLines.get(path);
  if (!lines) {
    try {
      lines = readFileSync(path, 'utf8').split('\n');
    } catch {
      lines = [];
    }
    fileLines.set(path, lines);
  }
  const t = (lines[line0] ?? '').trim();
  return t.length > 160 ? `${t.slice(0, 157)}...` : t;
}

function where(cwd: string, uri: string, r: Range, withText = true): string {
  const p = pathOf(uri);
  return `${show(cwd, p)}:${r.start.line + 1}:${r.start.character + 1}${withText ? `: ${lineText(p, r.start.line)}` : ''}`;
}

function locations(v: Location | Location[] | LocationLink[] | null): Array<{ uri: string; range: Range }> {
  if (!v) return [];
  const list = Array.isArray(v) ? v : [v];
  return list.map((l) =>
    'targetUri' in l
      ? { uri: l.targetUri, range: l.targetSelectionRange ?? l.targetRange }
      : { uri: l.uri, range: l.range },
  );
}

function hoverText(h: Hover | null): string {
  if (!h) return '';
  const one = (c: MarkupContent | MarkedString): string =>
    typeof c === 'string' ? c : 'kind' in c ? c.value : `\`\`\`${c.language}\n${c.value}\n\`\`\``;
  return (Array.isArray(h.contents) ? h.contents.map(one) : [one(h.contents)]).filter(Boolean).join('\n\n').trim();
}

/** Applies LSP text edits to a text (from the end, so earlier offsets stay valid). */
export function applyEdits(text: string, edits: TextEdit[]): string {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === '\n') starts.push(i + 1);
  const off = (p: { line: number; character: number }): number =>
    p.line >= starts.length ? text.length : Math.min(starts[p.line]! + p.character, text.length);
  const sorted = edits
    .map((e) => ({ s: off(e.range.start), e: off(e.range.end), t: e.newText }))
    .sort((a, b) => b.s - a.s || b.e - a.e);
  let out = text;
  for (const e of sorted) out = out.slice(0, e.s) + e.t + out.slice(e.e);
  return out;
}

export function lspTools(servers: Servers): Record<string, Handler> {
  const withText = async (t: Target): Promise<string> => t.server.docs.get(t.uri)!.text;
  const refresh = (): void => fileLines.clear();

  return {
    lsp_hover: async (args, ctx) => {
      refresh();
      const t = await open(servers, args, ctx);
      const pos = position(args, await withText(t));
      const h = await t.server.request<Hover | null>(
        'textDocument/hover',
        { textDocument: { uri: t.uri }, position: pos },
        ctx.signal,
      );
      const text = hoverText(h);
      return text
        ? `${show(ctx.cwd, t.file)}:${pos.line + 1}:${pos.character + 1}\n\n${text}\n`
        : `nothing to show at ${show(ctx.cwd, t.file)}:${pos.line + 1}:${pos.character + 1}\n`;
    },

    lsp_definition: async (args, ctx) => {
      refresh();
      const t = await open(servers, args, ctx);
      const pos = position(args, await withText(t));
      const locs = locations(
        await t.server.request('textDocument/definition', { textDocument: { uri: t.uri }, position: pos }, ctx.signal),
      );
      if (!locs.length)
        return `no definition found for ${show(ctx.cwd, t.file)}:${pos.line + 1}:${pos.character + 1}\n`;
      return `${locs.map((l) => where(ctx.cwd, l.uri, l.range)).join('\n')}\n`;
    },

    lsp_references: async (args, ctx) => {
      refresh();
      const t = await open(servers, args, ctx);
      const pos = position(args, await withText(t));
      const refs = locations(
        await t.server.request(
          'textDocument/references',
          {
            textDocument: { uri: t.uri },
            position: pos,
            context: { includeDeclaration: args.include_declaration !== false },
          },
          ctx.signal,
        ),
      );
      if (!refs.length) return 'no references found\n';
      const max = num(args.max_results, 200);
      const out = new Bounded(32 * 1024);
      out.push(`${refs.length} reference${refs.length === 1 ? '' : 's'}:`);
      for (const r of refs.slice(0, max)) out.push(where(ctx.cwd, r.uri, r.range));
      return `${out.done()}${refs.length > max ? `[${refs.length - max} more not shown]\n` : ''}`;
    },

    lsp_symbols: async (args, ctx) => {
      refresh();
      const t = await open(servers, args, ctx);
      const out = new Bounded(num(args.max_bytes, 32 * 1024, 1024, 1 << 20));
      if (typeof args.query === 'string' && args.query) {
        const res = await t.server.request<SymbolInformation[] | null>(
          'workspace/symbol',
          { query: args.query },
          ctx.signal,
        );
        const max = num(args.max_results, 100);
        for (const s of (res ?? []).slice(0, max))
          out.push(
            `${where(ctx.cwd, s.location.uri, (s.location as Location).range ?? { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, false)}: ${SYMBOL_KINDS[s.kind] ?? s.kind} ${s.name}${s.containerName ? ` (in ${s.containerName})` : ''}`,
          );
        return (res ?? []).length ? out.done() : `no workspace symbol matches ${JSON.stringify(args.query)}\n`;
      }
      const res = await t.server.request<Array<DocumentSymbol | SymbolInformation> | null>(
        'textDocument/documentSymbol',
        { textDocument: { uri: t.uri } },
        ctx.signal,
      );
      const walk = (list: DocumentSymbol[], depth: number): void => {
        for (const s of list) {
          out.push(
            `${s.selectionRange.start.line + 1}:${s.selectionRange.start.character + 1}  ${'  '.repeat(depth)}${SYMBOL_KINDS[s.kind] ?? s.kind} ${s.name}${s.detail ? ` ${s.detail}` : ''}`,
          );
          if (s.children) walk(s.children, depth + 1);
        }
      };
      const list = res ?? [];
      if (list.length && 'location' in list[0]!)
        for (const s of list as SymbolInformation[])
          out.push(
            `${s.location.range.start.line + 1}:${s.location.range.start.character + 1}  ${SYMBOL_KINDS[s.kind] ?? s.kind} ${s.name}${s.containerName ? ` (in ${s.containerName})` : ''}`,
          );
      else walk(list as DocumentSymbol[], 0);
      return list.length ? `${show(ctx.cwd, t.file)}:\n${out.done()}` : `no symbols in ${show(ctx.cwd, t.file)}\n`;
    },

    lsp_diagnostics: async (args, ctx) => {
      refresh();
      const t = await open(servers, args, ctx);
      // A file just opened or changed gets fresh diagnostics; an unchanged one keeps what was published for it.
      const known = t.sent ? undefined : t.server.diags.get(t.uri);
      const items: Diagnostic[] | undefined = known
        ? known.items
        : await t.server.diagnostics(t.uri, t.gen, ctx.signal);
      if (items === undefined)
        return `the ${t.server.spec.id} server published no diagnostics for ${show(ctx.cwd, t.file)} in time\n`;
      if (!items.length) return `${show(ctx.cwd, t.file)}: no problems\n`;
      const out = new Bounded(32 * 1024);
      const sorted = [...items].sort(
        (a, b) => (a.severity ?? 1) - (b.severity ?? 1) || a.range.start.line - b.range.start.line,
      );
      for (const d of sorted) {
        const code =
          d.code !== undefined
            ? ` [${d.source ?? ''}${d.source ? ' ' : ''}${d.code}]`
            : d.source
              ? ` [${d.source}]`
              : '';
        out.push(
          `${show(ctx.cwd, t.file)}:${d.range.start.line + 1}:${d.range.start.character + 1}: ${SEVERITY[d.severity ?? 1]}${code}: ${d.message.replace(/\n\s*/g, ' ')}`,
        );
      }
      return out.done();
    },

    lsp_completion: async (args, ctx) => {
      refresh();
      const t = await open(servers, args, ctx);
      const pos = position(args, await withText(t));
      const res = await t.server.request<CompletionList | CompletionItem[] | null>(
        'textDocument/completion',
        { textDocument: { uri: t.uri }, position: pos, context: { triggerKind: 1 } },
        ctx.signal,
      );
      const items = (Array.isArray(res) ? res : (res?.items ?? []))
        .slice()
        .sort((a, b) => (a.sortText ?? a.label).localeCompare(b.sortText ?? b.label));
      if (!items.length) return 'no completions\n';
      const max = num(args.max_results, 50);
      const lines = items
        .slice(0, max)
        .map(
          (c) =>
            `${c.label}${c.kind ? ` (${COMPLETION_KINDS[c.kind] ?? c.kind})` : ''}${c.detail ? ` ${c.detail.replace(/\s+/g, ' ').slice(0, 120)}` : ''}`,
        );
      return `${lines.join('\n')}\n${items.length > max ? `[${items.length - max} more not shown]\n` : ''}`;
    },

    lsp_rename: async (args, ctx) => {
      refresh();
      if (typeof args.new_name !== 'string' || !args.new_name) throw new ToolError('new_name is required');
      const t = await open(servers, args, ctx);
      const pos = position(args, await withText(t));
      const edit = await t.server.request<WorkspaceEdit | null>(
        'textDocument/rename',
        { textDocument: { uri: t.uri }, position: pos, newName: args.new_name },
        ctx.signal,
      );
      const byUri = new Map<string, TextEdit[]>();
      for (const [u, es] of Object.entries(edit?.changes ?? {})) byUri.set(u, [...(byUri.get(u) ?? []), ...es]);
      for (const dc of edit?.documentChanges ?? []) {
        if ('textDocument' in dc)
          byUri.set(dc.textDocument.uri, [...(byUri.get(dc.textDocument.uri) ?? []), ...(dc.edits as TextEdit[])]);
        else
          throw new ToolError(
            `the rename also ${dc.kind}s a file (${'uri' in dc ? dc.uri : dc.oldUri}): not supported here`,
          );
      }
      if (!byUri.size) return `nothing to rename at ${show(ctx.cwd, t.file)}:${pos.line + 1}:${pos.character + 1}\n`;
      const out = new Bounded(num(args.max_bytes, 64 * 1024, 1024, 1 << 20));
      const results: Array<{ file: string; after: string }> = [];
      let count = 0;
      for (const [u, edits] of byUri) {
        const file = pathOf(u);
        const before = readFileSync(file, 'utf8');
        const after = applyEdits(before, edits);
        count += edits.length;
        results.push({ file, after });
        for (const l of unifiedDiff(before, after, `a/${show(ctx.cwd, file)}`, `b/${show(ctx.cwd, file)}`)
          .split('\n')
          .slice(0, -1))
          out.push(l);
      }
      if (args.apply === true) {
        for (const r of results) writeFileSync(r.file, r.after);
        // The server sees the new texts at once, so a following request does not work on stale ones.
        for (const r of results) await t.server.sync(r.file).catch(() => undefined);
      }
      return `${out.done()}${count} edit${count === 1 ? '' : 's'} in ${results.length} file${results.length === 1 ? '' : 's'}: ${args.apply === true ? 'applied' : 'preview only, nothing written (call again with apply: true to write)'}\n`;
    },
  };
}
