/**
 * The access rules of olliesrv's namespace: which principal (owner, session, agent; see principals.ts) may reach
 * each file, and how. The namespace's default is OWNER_ONLY, so a file declared without a rule is the owner's
 * alone. The rules here only say who; what an allowed principal may ask for inside a request (an agent's
 * agent/new, its ctl commands) is checked by the handlers with the helpers at the end.
 */
import { AGENT_CTL } from '../../formats/olliesrv.js';
import type { Access, AccessOp, Ctx } from '../../ninep/index.js';
import type { Agent } from '../agent/agent.js';
import type { Agents } from '../session/agents.js';
import type { Sessions } from '../session/registry.js';
import type { Principal } from './principals.js';

/** The principal a request acts as; a fid without one (no authorize hook ran) is nobody. */
export function principalOf(ctx: Pick<Ctx, 'user'>): Principal | undefined {
  return ctx.user.principal as Principal | undefined;
}

const describe = (p: Principal | undefined): string =>
  !p
    ? 'an unauthenticated client'
    : p.kind === 'owner'
      ? 'the owner'
      : p.kind === 'session'
        ? `session ${p.session}'s workflow`
        : `agent ${p.agent}`;

/** The default: the owner only. */
export const OWNER_ONLY: Access = (ctx) =>
  principalOf(ctx)?.kind === 'owner'
    ? undefined
    : `only the owner may use this file, not ${describe(principalOf(ctx))}`;

/** Everyone authenticated (the root directory, help, the profile names). */
export const ANYONE: Access = (ctx) => (principalOf(ctx) ? undefined : 'unauthenticated');

/** Reading for everyone; anything else for the owner. */
export const ANYONE_READS: Access = (ctx, op) =>
  op === 'walk' || op === 'read' ? ANYONE(ctx, op) : OWNER_ONLY(ctx, op);

export interface Scope {
  sessions: Sessions;
  agents: Agents;
}

/** The session (by id) the template parameter names, or undefined when it names none. */
function sessionIdOf(s: Scope, ctx: Ctx): string | undefined {
  const name = ctx.params.session;
  return name !== undefined && s.sessions.has(name) ? s.sessions.get(name).id : undefined;
}

type InSession = Exclude<Principal, { kind: 'owner' }>;

/**
 * The gate every session rule starts with: the owner passes (undefined), anyone not of this session is refused
 * (a string), and a workflow or agent of the session comes back for the rule to judge.
 */
function sessionGate(s: Scope, ctx: Ctx): undefined | string | InSession {
  const p = principalOf(ctx);
  if (p?.kind === 'owner') return undefined;
  if (!p) return 'unauthenticated';
  return sessionIdOf(s, ctx) === p.session ? p : `${describe(p)} may reach only its own session`;
}

/**
 * A rule for the files of a session: the owner does anything; the session's own workflow and agents do what
 * `ops` lists (by principal kind); everyone else is refused.
 */
export function inSession(s: Scope, ops: { session?: readonly AccessOp[]; agent?: readonly AccessOp[] }): Access {
  return (ctx, op) => {
    const p = sessionGate(s, ctx);
    if (typeof p !== 'object') return p;
    const allowed = p.kind === 'session' ? ops.session : ops.agent;
    return allowed?.includes(op)
      ? undefined
      : `${describe(p)} may not ${op === 'walk' ? 'reach' : op} ${ctx.path} (the owner's alone)`;
  };
}

/** How an agent principal relates to another agent of its session. */
export type Relation = 'self' | 'descendant' | 'peer' | 'none';

/**
 * The relation of agent `callerId` to `target` in the same session: itself, one of the sub-agents it created
 * (directly or through them), a peer it was linked with, or none.
 */
export function relate(s: Scope, sessionName: string, callerId: string, target: Agent): Relation {
  if (target.id === callerId) return 'self';
  const byId = new Map(s.agents.list(sessionName).map((a) => [a.id, a]));
  for (let a: Agent | undefined = byId.get(target.parent), i = 0; a && i < 64; a = byId.get(a.parent), i++) {
    if (a.id === callerId) return 'descendant';
  }
  const caller = byId.get(callerId);
  return caller && (caller.cfg.peers ?? []).includes(target.id) ? 'peer' : 'none';
}

/**
 * A rule for an agent's files: the owner and the session's workflow do what `session` lists (everything when
 * absent); an agent of the session does what `agent` lists for its relation to the target agent.
 */
export function onAgent(
  s: Scope,
  rules: { session?: readonly AccessOp[]; agent: Partial<Record<Exclude<Relation, 'none'>, readonly AccessOp[]>> },
): Access {
  return (ctx, op) => {
    const p = sessionGate(s, ctx);
    if (typeof p !== 'object') return p;
    if (p.kind === 'session')
      return !rules.session || rules.session.includes(op)
        ? undefined
        : `a session's workflow may not ${op} ${ctx.path} (the owner's alone)`;
    const name = ctx.params.agent!;
    let target: Agent;
    try {
      target = s.agents.find(ctx.params.session!, name);
    } catch {
      return undefined; // the walk itself says "not found"
    }
    const rel = relate(s, ctx.params.session!, p.agent, target);
    if (rel === 'none')
      return `${describe(p)} may reach only itself, the sub-agents it started and its peers, not ${name}`;
    return rules.agent[rel]?.includes(op)
      ? undefined
      : `${describe(p)} may not ${op === 'walk' ? 'reach' : op} ${ctx.path} (${rel === 'self' ? 'its own' : `its ${rel}'s`} file; the owner's alone)`;
  };
}

/**
 * The agent commands (ctl, and /cmd typed as a prompt) an agent may give itself or its sub-agents: the ones that
 * neither widen what it may do (cwd, profile, backend, model, peers) nor reach beyond it. Without arguments, the
 * read-only forms of the others are allowed (`cwd` prints the working directory). Which is which is declared with
 * the command table (formats/olliesrv.ts AGENT_CTL: agent always, bare or never).
 */
const AGENT_COMMANDS = new Set(AGENT_CTL.commands.filter((c) => c.agent === 'always').map((c) => c.name));
const READ_FORMS = new Set(AGENT_CTL.commands.filter((c) => c.agent === 'bare').map((c) => c.name));

/**
 * The refusal when principal `p` may not run `command` (as written to ctl) on an agent. The command is read as the
 * dispatcher reads it (AGENT_CTL: quoting undone), so what is checked is what would run; a command that does not
 * read is refused for an agent by its first word.
 */
export function checkAgentCommand(p: Principal | undefined, command: string): string | undefined {
  if (!p) return 'unauthenticated';
  if (p.kind !== 'agent') return undefined;
  let name: string;
  let bare: boolean;
  try {
    const c = AGENT_CTL.parse(command);
    name = c.name;
    bare = c.args.length === 0;
  } catch {
    const t = command.trim();
    const sp = t.search(/\s/);
    name = sp === -1 ? t : t.slice(0, sp);
    bare = sp === -1;
  }
  if (AGENT_COMMANDS.has(name) || (bare && READ_FORMS.has(name))) return undefined;
  return `an agent may not run "${name}${bare ? '' : ' …'}" (agents may: ${[...AGENT_COMMANDS].join(', ')}, and ${[...READ_FORMS].join(', ')} without arguments)`;
}
