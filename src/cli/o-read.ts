/**
 * What `o` reads from the namespace's files, through the formats declared with it (src/formats/olliesrv.ts):
 * columns by name, so a declaration that changes is followed without an edit here.
 */
import { AGENT_IDX, BYPASS, SESSION_IDX } from '../formats/olliesrv.js';

/** `o sess ls`: name, id, paused, cwd. */
export function sessionRows(idx: string): string[][] {
  return SESSION_IDX.parse(idx).map((r) => [r.name ?? '', r.id ?? '', r.paused === '1' ? 'yes' : 'no', r.cwd ?? '']);
}

/** The name of the session with this id, if any. */
export function sessionNameOf(idx: string, id: string): string | undefined {
  return SESSION_IDX.parse(idx).find((r) => r.id === id)?.name ?? undefined;
}

/** The name of the agent with this id, if any. */
export function agentNameOf(idx: string, id: string): string | undefined {
  return AGENT_IDX.parse(idx).find((r) => r.id === id)?.name ?? undefined;
}

/** `o agent ls`: name, state, depth, parent (by name), id. */
export function agentRows(idx: string): string[][] {
  const rows = AGENT_IDX.parse(idx);
  const names = new Map(rows.map((r) => [r.id ?? '', r.name ?? '']));
  return rows.map((r) => [
    r.name ?? '',
    r.state ?? '',
    r.depth ?? '',
    r.parent === null ? '-' : (names.get(r.parent ?? '') ?? r.parent ?? ''),
    r.id ?? '',
  ]);
}

export interface Pending {
  id: string;
  agent: string;
  tool: string;
  cwd: string;
  cmd: string;
}

/** The pending bypass requests, agents by name. */
export function pendingRequests(bypass: string, agentIdx: string): Pending[] {
  const reqs = BYPASS.parse(bypass);
  const names = new Map(AGENT_IDX.parse(agentIdx).map((r) => [r.id ?? '', r.name ?? '']));
  return reqs.map((r) => ({
    id: r.id ?? '',
    agent: names.get(r.agent ?? '') ?? r.agent ?? '',
    tool: r.tool ?? '',
    cwd: r.cwd ?? '',
    cmd: r.cmd ?? '',
  }));
}
