/**
 * Running one round of tool calls. Calls are grouped into batches by each tool's scope (.meta `scope`, docs/tools.md):
 * read never conflicts; write conflicts only with a write to the same path; global (or an unknown tool) runs
 * alone. Batches run one after another, the calls of a batch in parallel, results kept in call order.
 */
import { join, relative } from 'node:path';
import { privateDir, writePrivateFile } from '../../platform/private.js';
import type { ToolCall } from '../backend/types.js';
import type { ProcFlags, ProcResult, ToolInfo } from '../../toolsrv/protocol.js';

/** What the model sees of a tool's output, at most. */
export const MODEL_OUTPUT_CAP = 32 * 1024;

export interface PreparedCall {
  call: ToolCall;
  tool?: ToolInfo;
  args?: Record<string, unknown>;
  flags: ProcFlags;
  /** Set when the call cannot run at all (bad JSON); the text is the result for the model. */
  invalid?: string;
}

const FLAG_KEYS = ['bypass', 'timeout', 'background'] as const;

export function prepare(call: ToolCall, tools: ReadonlyMap<string, ToolInfo>): PreparedCall {
  const tool = tools.get(call.name);
  let parsed: unknown;
  try {
    parsed = call.args.trim() ? JSON.parse(call.args) : {};
  } catch (e) {
    return {
      call,
      tool,
      flags: {},
      invalid: `error: the arguments of ${call.name} are not valid JSON (${(e as Error).message}); send them again as a JSON object`,
    };
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return { call, tool, flags: {}, invalid: `error: the arguments of ${call.name} must be a JSON object` };
  }
  const args = { ...(parsed as Record<string, unknown>) };
  const flags: ProcFlags = {};
  for (const k of FLAG_KEYS) {
    if (k in args) {
      (flags as Record<string, unknown>)[k] = args[k];
      delete args[k];
    }
  }
  if (!tool)
    return {
      call,
      args,
      flags,
      invalid: `error: no tool named ${call.name} is loaded; loaded tools: ${[...tools.keys()].join(', ') || 'none'}`,
    };
  return { call, tool, args, flags };
}

function lockKey(p: PreparedCall): string | undefined {
  const scope = p.tool?.scope ?? 'global';
  if (p.invalid || scope === 'read') return undefined;
  if (scope === 'write' && p.tool?.pathArg) {
    const v = p.args?.[p.tool.pathArg];
    if (typeof v === 'string') return `path:${v}`;
  }
  return '*';
}

/** Splits calls (in order) into batches that may run in parallel. */
export function batches(calls: PreparedCall[]): PreparedCall[][] {
  const out: PreparedCall[][] = [];
  let cur: PreparedCall[] = [];
  let keys = new Set<string>();
  for (const c of calls) {
    const k = lockKey(c);
    const conflict = k !== undefined && (k === '*' ? cur.length > 0 : keys.has(k) || keys.has('*'));
    const afterGlobal = keys.has('*');
    if (cur.length && (conflict || afterGlobal)) {
      out.push(cur);
      cur = [];
      keys = new Set();
    }
    cur.push(c);
    if (k) keys.add(k);
  }
  if (cur.length) out.push(cur);
  return out;
}

export interface ModelResult {
  content: string;
  isError: boolean;
  format?: string;
  /** The output as the user sees it in the log (whole). */
  full: string;
}

/**
 * Where a long output is saved: `root` is the spill directory (the data dir's `output/`), `dir` the agent's own
 * below it (`root/SESSION/AGENT`), which that agent's sandbox may read (toolsrv grants it: spillDirFor in platform/paths).
 */
export interface SpillTarget {
  root: string;
  dir: string;
  name: string;
}

/** Where a long result went: saved here (SpillTarget), or already saved on the tools' host (its path there). */
export type SpillTo = SpillTarget | { saved: string } | { failed: string };

/**
 * Saves `body` whole in the agent's spill directory: every level owner-only and vetted (no planted symlink, no
 * other user's directory), the file created new, 0600, without following a link. Returns its path.
 */
function spill(body: string, to: SpillTarget): string {
  let d = privateDir(to.root, 'the spill directory');
  for (const part of relative(to.root, to.dir).split('/').filter(Boolean))
    d = privateDir(join(d, part), 'the spill directory');
  const path = join(d, `${to.name}.txt`);
  writePrivateFile(path, body);
  return path;
}

/**
 * Turns a toolsrv result into what the model reads. Output over MODEL_OUTPUT_CAP keeps its head and tail, and
 * the whole output is saved to a file the model can page through with file_read.
 */
export function forModel(r: ProcResult, to: SpillTo): ModelResult {
  const isError = r.status !== 'exited' && r.status !== 'background' ? true : (r.exit ?? 0) !== 0;
  let body = r.output;
  if (r.status === 'refused') body = `error: ${r.error ?? 'the tool did not run'}`;
  else if (r.status === 'background')
    body = `started in the background as process ${r.pid}; its exit will arrive as a <system-proc-interrupt> message.${r.output ? `\n${r.output}` : ''}`;
  else {
    if (r.status === 'timeout') body += `\n[timed out${r.error ? `: ${r.error}` : ''}]`;
    else if (r.status === 'killed') body += `\n[killed${r.error ? `: ${r.error}` : ''}]`;
    else if (r.exit) body += `\n[exit code ${r.exit}]`;
    if (r.outputBytes > Buffer.byteLength(r.output))
      body += `\n[toolsrv kept only the first ${Buffer.byteLength(r.output)} of ${r.outputBytes} bytes of output]`;
  }
  // The model relays it: only the owner can act on it (trusting a project file is not a tool's business).
  if (r.notice) body += `\n[sandbox: ${r.notice}]`;
  const full = body;
  if (Buffer.byteLength(body) <= MODEL_OUTPUT_CAP) return { content: body, isError, format: r.format, full };
  let where: string;
  try {
    if ('failed' in to) throw new Error(to.failed);
    const path = 'saved' in to ? to.saved : spill(body, to);
    where = `The whole output is in ${path} — read the part you need with file_read (offset, limit) or search it with file_grep.`;
  } catch (e) {
    where = `The whole output could not be saved: ${(e as Error).message}.`;
  }
  const half = MODEL_OUTPUT_CAP / 2 - 256;
  const head = Buffer.from(body)
    .subarray(0, half)
    .toString('utf8')
    .replace(/\uFFFD+$/, '');
  const tail = Buffer.from(body)
    .subarray(-half)
    .toString('utf8')
    .replace(/^\uFFFD+/, '');
  const lines = body.split('\n').length;
  const content =
    `${head}\n\n[output truncated: ${Buffer.byteLength(body)} bytes, ${lines} lines; shown: the first and last ${half} bytes. ` +
    `${where}]\n\n${tail}`;
  return { content, isError, format: r.format, full };
}
