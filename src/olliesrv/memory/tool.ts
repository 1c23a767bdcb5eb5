/**
 * The memory tools, as toolsrv runs them (data/tools/memory_*: `await runTool('remember')`): JSON arguments on
 * stdin, the result on stdout, `memory_NAME: message` and exit 1 for a problem the model should read. The agent's
 * cwd (the tool's cwd) picks the project. Imports only the store and, when a model is installed, the embedder:
 * no AI SDK, so a call costs Node's start-up plus a few milliseconds (a model adds its load time).
 */
import { basename } from 'node:path';
import { findModel, type OnnxEmbedder } from '../skills/embed.js';
import { MemoryStore, projectOf, type Memory, type RecallScope } from './store.js';

export type MemoryTool = 'remember' | 'recall' | 'wake' | 'zoom';

export class ToolInputError extends Error {
  override name = 'ToolInputError';
}

const date = (ms: number): string => new Date(ms).toISOString().slice(0, 16).replace('T', ' ');

export function formatMemory(m: Memory, project: string, mark = ''): string {
  const where = m.project === '' ? 'global' : m.project === project ? 'project' : m.project;
  return `${mark}#${m.id} (${where}, ${date(m.created)}${m.tags.length ? `, tags: ${m.tags.join(' ')}` : ''})\n${m.text}\n`;
}

function str(args: Record<string, unknown>, k: string, required: boolean): string | undefined {
  const v = args[k];
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'string' || !v.trim()) throw new ToolInputError(`argument ${k} must be a non-empty string`);
  return v;
}

function int(args: Record<string, unknown>, k: string, def: number, max: number): number {
  const v = args[k];
  if (v === undefined) return def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max)
    throw new ToolInputError(`argument ${k} must be a whole number from 1 to ${max}`);
  return v;
}

export interface ToolContext {
  cwd: string;
  session?: string;
  agent?: string;
  /** The store (default: the user's memory.db). */
  store?: MemoryStore;
  /** The embedder, or null for none (default: the installed model, if any). */
  embedder?: OnnxEmbedder | null;
}

async function defaultEmbedder(): Promise<OnnxEmbedder | null> {
  const dir = findModel();
  if (!dir) return null;
  const { OnnxEmbedder } = await import('../skills/embed.js');
  // A model that does not load must not cost the memory: full-text search still works.
  return OnnxEmbedder.load(dir).catch(() => null);
}

/** Runs one memory tool call; returns the text for the model. Throws ToolInputError for bad arguments. */
export async function memoryTool(tool: MemoryTool, args: Record<string, unknown>, ctx: ToolContext): Promise<string> {
  const project = projectOf(ctx.cwd);
  const store = ctx.store ?? MemoryStore.open();
  const needsModel = tool === 'remember' || tool === 'recall' || (tool === 'wake' && args.task !== undefined);
  const emb = needsModel ? (ctx.embedder !== undefined ? ctx.embedder : await defaultEmbedder()) : null;
  const model = emb ? basename(emb.path) : undefined;
  const vecOf = async (t: string): Promise<Float32Array | undefined> => (emb ? (await emb.embed([t]))[0] : undefined);
  try {
    switch (tool) {
      case 'remember': {
        const text = str(args, 'text', true)!;
        if (text.length > 8000)
          throw new ToolInputError(
            'argument text is longer than 8000 characters: remember the conclusion, not the material',
          );
        const tags = args.tags === undefined ? [] : args.tags;
        if (!Array.isArray(tags) || !tags.every((t) => typeof t === 'string'))
          throw new ToolInputError('argument tags must be a list of strings');
        if (args.global !== undefined && typeof args.global !== 'boolean')
          throw new ToolInputError('argument global must be true or false');
        const m = store.remember({
          text,
          tags,
          project: args.global ? '' : project,
          session: ctx.session,
          agent: ctx.agent,
          vec: await vecOf(`${text} ${tags.join(' ')}`),
          model,
        });
        return `remembered #${m.id} (${m.project ? `project ${m.project}` : 'global'}${emb ? ', with an embedding' : ''})\n`;
      }
      case 'recall': {
        const query = str(args, 'query', true)!;
        const scope = (args.scope ?? 'all') as RecallScope;
        if (!['project', 'global', 'all'].includes(scope))
          throw new ToolInputError('argument scope must be project, global or all');
        const limit = int(args, 'limit', 10, 50);
        const hits = store.recall(query, { project, scope, limit, vec: await vecOf(query), model });
        if (!hits.length)
          return `no memories match ${JSON.stringify(query)} (${scope === 'all' ? `project ${project} and global` : scope})\n`;
        return `${hits.length} ${hits.length === 1 ? 'memory' : 'memories'}, best first (${emb ? 'full text and embeddings' : 'full text'}):\n\n${hits.map((m) => formatMemory(m, project)).join('\n')}`;
      }
      case 'wake': {
        const limit = int(args, 'limit', 8, 50);
        const task = str(args, 'task', false);
        const seen = new Set<number>();
        const picked: Memory[] = [];
        const add = (ms: Memory[]): void => {
          for (const m of ms) {
            if (picked.length >= limit || seen.has(m.id)) continue;
            seen.add(m.id);
            picked.push(m);
          }
        };
        if (task) add(store.recall(task, { project, scope: 'all', limit, vec: await vecOf(task), model }));
        // Then what is newest: this project's first (two thirds of the room), then global conventions.
        add(store.recent({ project, scope: 'project', limit: Math.max(1, Math.ceil((limit * 2) / 3)) }));
        add(store.recent({ project, scope: 'global', limit }));
        add(store.recent({ project, scope: 'project', limit }));
        const total = store.count(project);
        const global = store.count('');
        if (!picked.length)
          return `no memories yet for ${project} (nor global ones). memory_remember keeps what is worth knowing next time.\n`;
        return `Memories for ${project} (${picked.length} shown; ${total} stored for this project, ${global} global; memory_recall searches them all):\n\n${picked.map((m) => formatMemory(m, project)).join('\n')}`;
      }
      case 'zoom': {
        const v = args.id;
        const id = typeof v === 'string' ? Number(v.replace(/^#/, '')) : v;
        if (typeof id !== 'number' || !Number.isInteger(id) || id < 1)
          throw new ToolInputError('argument id must be a memory number (#12 or 12)');
        const radius = args.radius === undefined ? 2 : int(args, 'radius', 2, 10);
        const z = store.zoom(id, radius);
        if (!z) throw new ToolInputError(`no memory #${id}`);
        const parts = [
          ...z.before.map((m) => formatMemory(m, project)),
          formatMemory(z.focus, project, '> '),
          ...z.after.map((m) => formatMemory(m, project)),
        ];
        const sess = z.focus.session ? `, session ${z.focus.session}` : '';
        return `#${id} with the memories stored just before and after it in ${z.focus.project || 'the global scope'}${sess} (marked >):\n\n${parts.join('\n')}`;
      }
    }
    throw new ToolInputError(`unknown memory tool ${String(tool)}`);
  } finally {
    if (!ctx.store) store.close();
    if (ctx.embedder === undefined) await emb?.close();
  }
}

/** The tool process: reads stdin, prints the result or `memory_TOOL: problem` with exit 1. */
export async function runTool(tool: MemoryTool): Promise<void> {
  let input = '';
  for await (const chunk of process.stdin) input += chunk;
  let args: unknown;
  try {
    args = input.trim() ? JSON.parse(input) : {};
  } catch (e) {
    process.stdout.write(`memory_${tool}: arguments are not valid JSON: ${(e as Error).message}\n`);
    process.exit(1);
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    process.stdout.write(`memory_${tool}: arguments must be a JSON object\n`);
    process.exit(1);
  }
  try {
    process.stdout.write(
      await memoryTool(tool, args as Record<string, unknown>, {
        cwd: process.cwd(),
        session: process.env.OLLIE_SESSION_ID,
        agent: process.env.OLLIE_AGENT_ID,
      }),
    );
  } catch (e) {
    process.stdout.write(`memory_${tool}: ${(e as Error).message}\n`);
    process.exit(1);
  }
}
