/**
 * What the model is told about tools, kept lean (every schema sent costs tokens on every request). Of the tools an
 * agent has loaded, only the `hot` ones (the .meta tier: shell and the file tools) are sent with their schemas on
 * every request. `warm` tools are listed by name and one line in the system prompt; `cold` ones are not listed.
 * Either kind is loaded by `tool_search` (their schemas are sent from the next request on) or simply by calling it by
 * name: the call is validated by toolsrv against the tool's schema and run, and the tool's schema is sent from then
 * on. The dispatch flags every tool takes (bypass, timeout, background) are described once here, not in each schema.
 */
import type { ToolSpec } from '../backend/types.js';
import type { ToolInfo } from '../../toolsrv/protocol.js';
import { Index } from '../skills/index.js';
import { mcpSummary } from '../mcp/tools.js';

export const TOOL_SEARCH = 'tool_search';

export const TOOL_SEARCH_SPEC: ToolSpec = {
  name: TOOL_SEARCH,
  description:
    'Load tools listed under "More tools" (or find others by what they do): their schemas are sent from your next step on.',
  parameters: {
    type: 'object',
    properties: {
      query: { type: 'string', description: 'Tool names (comma-separated), or words saying what you need.' },
    },
    required: ['query'],
    additionalProperties: false,
  },
};

export const FLAGS_PROMPT = `Every tool also takes these optional arguments: \`background: true\` runs it in the background (you get a pid at once, and the tail of its output as a later prompt when it exits); \`timeout: N\` kills it after N seconds; \`bypass: true\` runs it outside the sandbox after a person approves (ask only when the sandbox blocked something the task needs).`;

/** How many tools a word query loads at most, and how well a tool must match (BM25 score in [0, 1]). */
const SEARCH_LIMIT = 4;
const SEARCH_THRESHOLD = 0.2;

const firstLine = (s: string): string => {
  const line = s.split('\n')[0]!.trim();
  const dot = line.search(/\.(\s|$)/);
  return dot > 0 ? line.slice(0, dot + 1) : line;
};

export const spec = (t: ToolInfo): ToolSpec => ({ name: t.name, description: t.description, parameters: t.parameters });

/** The system prompt's part about tools: the flags, the prompts of the tools sent, the index of the others. */
export function toolsPrompt(active: readonly ToolInfo[], deferred: readonly ToolInfo[]): string {
  const out: string[] = [];
  const prompts = active.filter((t) => t.prompt.trim()).map((t) => `### ${t.name}\n${t.prompt.trim()}`);
  if (active.length || deferred.length) out.push(`## Tools\n\n${FLAGS_PROMPT}`);
  if (prompts.length) out.push(prompts.join('\n\n'));
  const listed = deferred.filter((t) => t.tier !== 'cold');
  if (deferred.length) {
    out.push(
      `## More tools\n\nCall one by name, or load several with \`${TOOL_SEARCH}\`${listed.length < deferred.length ? ' (it also finds tools not listed here)' : ''}:\n` +
        listed.map((t) => `- ${t.name}: ${firstLine(t.description)}`).join('\n') +
        mcpSummary(deferred),
    );
  }
  return out.join('\n\n');
}

/** The deferred tools a tool_search query asks for: the names it gives, else the best matches of its words. */
export async function searchTools(query: string, deferred: readonly ToolInfo[]): Promise<ToolInfo[]> {
  const names = query.split(/[\s,]+/).filter(Boolean);
  const byName = deferred.filter((t) => names.includes(t.name));
  if (byName.length) return byName;
  const idx = await Index.build(deferred, (t) => `${t.name.replace(/_/g, ' ')} ${t.description}`);
  return idx.match(await idx.query(query), { limit: SEARCH_LIMIT, threshold: SEARCH_THRESHOLD }).map((m) => m.item);
}

/** tool_search's answer: what was loaded, with each tool's own usage notes. */
export function describeLoaded(found: readonly ToolInfo[], query: string, deferred: readonly ToolInfo[]): string {
  if (!found.length) {
    return `no tool matches "${query}". Tools you can load: ${deferred.map((t) => t.name).join(', ') || 'none (all are loaded)'}`;
  }
  return found
    .map((t) => `loaded ${t.name}: ${t.description}${t.prompt.trim() ? `\n${t.prompt.trim()}` : ''}`)
    .join('\n\n');
}
