/**
 * What the rest of Ollie (olliesrv, the CLI) may use of toolsrv besides its wire protocol (protocol.ts): running a
 * command under the sandbox, reading and checking policies, the list of trusted project policies, and what the
 * sandbox and the spawner enforce on this machine. Everything else under src/toolsrv is toolsrv's own; the lint
 * (eslint.config.js) holds other code to these two files.
 */
export {
  landlockStatusAsync,
  loadPolicy,
  PACKAGE_ROOT,
  parsePolicyFile,
  readOnlyPolicy,
  sandboxCommand,
  sandboxSummary,
  withPaths,
  type LandlockStatus,
  type SandboxPolicy,
} from './sandbox/index.js';
export {
  applyTrustCommands,
  listTrusted,
  PROJECT_HOOKS_FILE_NAME,
  projectPolicy,
  readTrusted,
  sha256,
  trust,
  TrustError,
} from './sandbox/trust.js';
export { containmentStatus, describeContainment } from './exec/containment.js';
export { SPAWNER } from '../platform/spawner.js';
export { GLOBAL_MCP_FILE, parseMcpFile } from './mcp/config.js';
export { canonical } from './sandbox/policy.js';
export { DEFAULT_CHECKPOINT_RULES, type CheckpointRules } from './sandbox/checkpoint-rules.js';
export { PROJECT_POLICY_NAME, TRUST_FILE_NAME } from './sandbox/trust.js';
