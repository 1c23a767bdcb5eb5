/** What an agent is configured with, what its turns return, and the states it reports. */
import type { GenerationParams } from '../backend/types.js';

export type AgentState = 'idle' | 'thinking' | 'calling' | 'paused' | 'compacting';
/** How the agent's last turn ended: `-` before its first. Kept apart from the state, which stays `idle` after any turn. */
export type TurnOutcome = '-' | 'ok' | 'error' | 'stopped';

export interface AgentCfg {
  profile: string;
  backend: string;
  /** Empty: the backend's default model. */
  model: string;
  cwd: string;
  /** Overrides of the profile's generation parameters. */
  params: GenerationParams;
  /** Overrides of the profile's limits. */
  maxSteps?: number;
  compactAt?: number;
  /** Tools loaded with tool_load, reloaded when toolsrv restarts. */
  tools: string[];
  /** Ids of the agents linked as peers (links are both ways; see Agents.peerAdd). */
  peers?: string[];
  /**
   * The directory whose sandbox policy the agent's tools get, when it is not `cwd`: an agent's sub-agent keeps its
   * creator's policy (see fs/spec.ts confineNewAgent), never the one its own subdirectory would give.
   */
  sandboxRoot?: string;
}

/** Limits of a sub-agent's turn. */
export interface Budget {
  steps?: number;
  tokens?: number;
}

export interface TurnResult {
  /** The model's last text of the turn. */
  reply: string;
  error?: string;
  stopped?: boolean;
}

/** A background process an agent started, as its proc/ directory shows it. */
export interface BackgroundProc {
  pid: number;
  tool: string;
  /** The call's arguments, as the model wrote them. */
  args: string;
  started: number;
  /** Set when it has exited. */
  status?: string;
  exit?: number | null;
}
