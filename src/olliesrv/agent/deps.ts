/** What an agent needs from the daemon around it, passed in so that agents can be tested in isolation. */
import type { Backend } from '../backend/types.js';
import type { EventBus } from '../event/bus.js';
import type { AgentStore } from '../store/agents.js';
import type { SessionTools } from '../toolclient/host.js';
import type { ToolInfo } from '../../toolsrv/protocol.js';
import type { Agent } from './agent.js';
import type { Profiles } from './profiles.js';
import type { PromptCommandOptions } from './promptcmd.js';
import type { ToolCache } from './toolcache.js';
import type { Hooks } from '../hooks/hooks.js';
import type { Checkpoints } from '../checkpoint/service.js';

export interface BackendPool {
  names(): string[];
  /** Name of the default backend. */
  readonly defaultName: string;
  /** Throws an error naming the known backends when `name` is unknown. */
  get(name: string): Backend;
}

/** The parts of a session an agent reads. */
export interface SessionView {
  readonly id: string;
  readonly name: string;
  readonly cwd: string;
  readonly env: string;
  readonly plan: string;
  readonly paused: boolean;
}

export interface AgentDeps {
  store: AgentStore;
  bus: EventBus;
  backends: BackendPool;
  profiles: Profiles;
  /** The session's toolsrv, or undefined when tools are unavailable (no toolsrv configured). */
  tools: (sessionId: string) => Promise<SessionTools | undefined>;
  /** Whether the session's tools run on another host (its cwd is a path there, not checked here). */
  remoteSession?: (sessionId: string) => boolean;
  /** Where tool output too long for the model is saved whole. */
  outputDir: string;
  /** The daemon's environment and Ollie's dirs (OLLIE_DATA, OLLIE_CONFIG): what tools get beneath the session's. */
  baseEnv: Record<string, string>;
  /**
   * The credential an agent's tools dial back with ($OLLIE_TOKEN; only the tools whose .meta asks for the Ollie
   * socket get it): it makes their connection that agent, and nothing more. Absent: tools get none.
   */
  token?: (sessionId: string, agentId: string) => string;
  /** How profile prompt commands run: the sandbox's dirs, the daemon's environment, --yolo. */
  promptCommands: PromptCommandOptions;
  log: (msg: string) => void;
  /**
   * Context for a user prompt before it goes to the model (matched skills, tool hints): each item becomes a
   * `context` block (name = its kind) sent with the prompt. Failures are logged, never fatal to the turn.
   */
  /** `present`: the skills already in the agent's context (not to be sent again). */
  enrich?: (req: {
    agent: Agent;
    prompt: string;
    tools: readonly ToolInfo[];
    cwd: string;
    present: ReadonlySet<string>;
  }) => Promise<Array<{ name: string; text: string }>>;
  /** The skills behind the `skills` ctl command (src/olliesrv/skills/matcher.ts: SkillMatcher.command). */
  skills?: { command(args: string): Promise<string> };
  /** Tool schemas remembered from earlier runs, so a first request need not wait for toolsrv to start. */
  toolCache?: ToolCache;
  /** Lifecycle hooks (olliesrv/hooks): absent, none run. */
  hooks?: Hooks;
  /** The retry policy (backend/retry.ts by default; tests shorten the waits). */
  retryDelay?: (err: unknown, attempt: number) => number | null;
  /** Checkpoints of the writable roots around each tool round that can write (checkpoint/service.ts). */
  checkpoints?: Checkpoints;
  /** Renames an agent (names are unique in a session, so the registry does it). */
  rename: (agent: Agent, name: string) => void;
  /** Peer links live in the registry: they join two agents. */
  peers: {
    add(agent: Agent, name: string): void;
    del(agent: Agent, name: string): void;
    names(agent: Agent): string[];
  };
}
