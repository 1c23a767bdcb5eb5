/**
 * The sandbox as toolsrv uses it: load the policy for a project, ask what the kernel can enforce, and turn a
 * tool's argv into the argv of native/build/ollie-sandbox running it under that policy.
 *
 *   const policy = loadPolicy({ configDir, dataDir, cwd, home, runtimeDir, tmpDir });
 *   const cmd = sandboxCommand(policy, [toolPath, ...toolArgs], { allowOllieSocket: meta.sandbox?.ollieSocket });
 *   spawn(cmd.file, cmd.args, { cwd, env: cmd.env(toolEnv), detached: true });
 *
 * Fails closed: sandboxCommand throws SandboxUnavailableError (with the exact reason) when the helper is
 * missing or the kernel's Landlock cannot enforce the policy. The helper checks the same again at run time
 * and exits with SANDBOX_EXIT.unavailable, in case the kernel differs from what was probed.
 */
import { execFileSync } from 'node:child_process';
import { accessSync, constants, mkdirSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { PACKAGE_ROOT, type SandboxPolicy } from './policy.js';

export { loadPolicy, parsePolicyFile, narrow, alwaysDenied, PolicyError, DEFAULT_POLICY_FILE, PROJECT_POLICY_NAME, PACKAGE_ROOT } from './policy.js';
export type { SandboxPolicy, PolicyContext, Access } from './policy.js';

/** The helper, built by scripts/build-native.mjs. */
export const SANDBOX_HELPER = join(PACKAGE_ROOT, 'native', 'build', 'ollie-sandbox');

/** Exit codes of the helper itself (anything else is the tool's). */
export const SANDBOX_EXIT = { policy: 120, unavailable: 121, setup: 122 } as const;

export class SandboxUnavailableError extends Error {
  override name = 'SandboxUnavailableError';
}

export interface LandlockStatus {
  /** Landlock ABI version the helper would use, 0 when there is none. */
  abi: number;
  /** What it can enforce: filesystem, refer, truncate, tcp, ioctl_dev, scope_abstract_unix, scope_signals,
   * audit_log (Landlock, by ABI) and socket_families (the helper's seccomp filter). */
  enforces: string[];
  /** Why there is no sandbox, when abi is 0. */
  reason?: string;
}

export interface SandboxCommand {
  /** The program to spawn (the helper). */
  file: string;
  args: string[];
  /**
   * The environment to spawn it with: `base` (what toolsrv would give the tool) filtered by the policy's env
   * list, with $TMPDIR set to the private tmp. The helper filters again (--env-keep), so a caller passing
   * process.env unfiltered leaks nothing.
   */
  env(base: NodeJS.ProcessEnv): Record<string, string>;
}

/**
 * What one tool's .meta adds to the policy for that tool alone (`"sandbox": {…}`, parsed in
 * registry/sandbox-rules.ts). Each field widens the policy narrowly; a tool without them gets the policy as is.
 */
export interface SandboxExtra {
  /** The tool may reach the Ollie socket ($OLLIE_ADDR): its .meta says `"sandbox": {"ollieSocket": true}`. */
  allowOllieSocket?: boolean;
  /**
   * TCP ports the tool may connect to (or bind), `"sandbox": {"network": {"connect_tcp": [80, 443]}}`. With the
   * policy's network off, the tool gets exactly these ports (Landlock); with the policy's port lists, the union;
   * with the policy's network open, nothing changes. UDP is not governed by Landlock, so a tool with a network
   * rule can resolve names (and send UDP) like any tool under `network: {enabled: true}`.
   */
  network?: { connectTcp?: number[]; bindTcp?: number[] };
  /** Absolute directories the tool may read / read and write (`"sandbox": {"rw": ["{XDG_DATA_HOME}/ollie/memory"]}`); rw ones are created. */
  ro?: string[];
  rw?: string[];
  /** Variables the tool keeps beyond the policy's env list. */
  env?: string[];
}

/** A stable key for the helper flags an extra produces (the flags are cached per policy and key). */
export function extraKey(extra: SandboxExtra): string {
  const n = extra.network;
  return `${extra.allowOllieSocket === true ? 'o' : '-'}|${(n?.connectTcp ?? []).join(',')}|${(n?.bindTcp ?? []).join(',')}|${(extra.ro ?? []).join(':')}|${(extra.rw ?? []).join(':')}|${(extra.env ?? []).join(',')}`;
}

const NODE_DIR = dirname(realpathSync(process.execPath));

/** Variables every tool gets, whatever the policy's env list says. */
const ALWAYS_KEPT = ['PATH', 'OLLIE_SESSION_ID', 'OLLIE_UNAME', 'OLLIE_AGENT_ID', 'TMPDIR'];

const STATUS_CACHE: { value?: LandlockStatus } = {};

function helperReason(): string | undefined {
  if (process.platform !== 'linux') return `Landlock is Linux only; this is ${process.platform}`;
  try {
    accessSync(SANDBOX_HELPER, constants.X_OK);
    return undefined;
  } catch {
    return `the sandbox helper ${SANDBOX_HELPER} is missing: run \`node scripts/build-native.mjs\` (it needs a C compiler)`;
  }
}

/** What the kernel's Landlock can enforce (asks the helper's --probe once, then cached). */
export function landlockStatus(): LandlockStatus {
  if (STATUS_CACHE.value) return STATUS_CACHE.value;
  const missing = helperReason();
  let status: LandlockStatus;
  if (missing) {
    status = { abi: 0, enforces: [], reason: missing };
  } else {
    const out = execFileSync(SANDBOX_HELPER, ['--probe'], { encoding: 'utf8', timeout: 5000 });
    const probe = JSON.parse(out) as LandlockStatus;
    status = { abi: probe.abi, enforces: probe.enforces, ...(probe.reason ? { reason: `Landlock is not available: ${probe.reason}` } : {}) };
  }
  STATUS_CACHE.value = status;
  return status;
}

/** The Landlock ABI the policy needs, and why (the same rules and words as the helper's fail-closed checks). */
export function requiredAbi(policy: SandboxPolicy): { abi: number; why: string } {
  const n = policy.network;
  if (policy.isolate.signals || policy.isolate.abstractUnix) {
    const what = policy.isolate.signals && policy.isolate.abstractUnix ? 'signals and abstract Unix sockets' : policy.isolate.signals ? 'signals' : 'abstract Unix sockets';
    return { abi: 6, why: `the policy scopes ${what} (needs ABI 6, Linux 6.12)` };
  }
  if (!n.enabled || n.bindTcp.length || n.connectTcp.length) return { abi: 4, why: 'the policy restricts the network (needs ABI 4, Linux 6.7)' };
  return { abi: 3, why: 'read-only files must not be truncatable (needs ABI 3, Linux 6.2)' };
}

/** Why `policy` cannot be enforced with `status` (the kernel's Landlock), or undefined when it can. */
export function unavailableReason(policy: SandboxPolicy, status: LandlockStatus): string | undefined {
  if (status.abi === 0) return status.reason ?? 'Landlock is not available';
  const need = requiredAbi(policy);
  if (status.abi < need.abi) return `${need.why}, but the kernel offers Landlock ABI ${status.abi}`;
  return undefined;
}

/** The helper's command-line flags for a policy (without the tool's argv). */
export function policyArgs(policy: SandboxPolicy, extra: SandboxExtra = {}): string[] {
  const a: string[] = [];
  const fs = policy.filesystem;
  for (const level of ['ro', 'rox', 'rw', 'rwx'] as const) for (const p of fs[level]) a.push(`--${level}`, p);
  for (const level of ['ro', 'rw'] as const) for (const p of extra[level] ?? []) a.push(`--${level}`, p);
  // The tools themselves and what they run on: Ollie's own files (dist/ for client_9p's ollie-9p, node_modules)
  // are readable, the tool directories executable. The user's tools live inside the denied config dir: a rule
  // naming them explicitly holds (only broader rules are cut around denied paths).
  a.push('--ro', PACKAGE_ROOT, '--rox', join(PACKAGE_ROOT, 'data', 'tools'), '--rox', join(PACKAGE_ROOT, 'native', 'build'));
  // The Node that runs Ollie runs its Node tools too, wherever it is installed (nvm, a tarball in HOME…).
  a.push('--rox', NODE_DIR);
  for (const d of policy.toolDirs) a.push('--rox', d);
  for (const d of fs.deny) a.push('--deny', d);
  const n = policy.network;
  const toolNet = extra.network && ((extra.network.connectTcp?.length ?? 0) > 0 || (extra.network.bindTcp?.length ?? 0) > 0) ? extra.network : undefined;
  if (!n.enabled && !toolNet) a.push('--no-net');
  else if (!n.enabled || n.bindTcp.length || n.connectTcp.length) {
    // Ports only: the policy's lists (when its network is on) and the tool's own rule.
    const on = n.enabled;
    for (const p of new Set([...(on ? n.bindTcp : []), ...(toolNet?.bindTcp ?? [])])) a.push('--net-bind', String(p));
    for (const p of new Set([...(on ? n.connectTcp : []), ...(toolNet?.connectTcp ?? [])])) a.push('--net-connect', String(p));
  }
  a.push(n.unix || extra.allowOllieSocket ? '--allow-unix' : '--deny-unix');
  if (policy.isolate.signals) a.push('--scope-signals');
  if (policy.isolate.abstractUnix) a.push('--scope-abstract-unix');
  for (const v of [...new Set([...policy.env, ...ALWAYS_KEPT, ...(extra.allowOllieSocket ? ['OLLIE_ADDR'] : []), ...(extra.env ?? [])])]) a.push('--env-keep', v);
  a.push('--env-set', `TMPDIR=${policy.tmpDir}`);
  return a;
}

/**
 * `policy` made read-only and offline, for what the daemon runs on an agent's behalf outside any tool call (a
 * profile's prompt commands): what it could read stays readable (its writable paths become read-only, its
 * executable ones read-and-execute), `ro`/`rox` add paths, and nothing is writable but the private tmp and
 * /dev/null. No network, no Unix sockets. Its deny list and isolation stay; the always-denied paths are cut out
 * by the helper as for any policy.
 */
export function readOnlyPolicy(policy: SandboxPolicy, add: { ro?: string[]; rox?: string[] } = {}): SandboxPolicy {
  const fs = policy.filesystem;
  const writable = new Set([policy.tmpDir, '/dev/null']);
  return {
    ...policy,
    filesystem: {
      ro: [...fs.ro, ...fs.rw.filter((p) => !writable.has(p)), ...(add.ro ?? [])],
      rox: [...fs.rox, ...fs.rwx, ...(add.rox ?? [])],
      rw: [...writable],
      rwx: [],
      deny: [...fs.deny],
    },
    network: { enabled: false, bindTcp: [], connectTcp: [], unix: false },
  };
}

const ARGS_CACHE = new WeakMap<SandboxPolicy, Map<string, string[]>>();

function keep(name: string, patterns: string[]): boolean {
  return patterns.some((p) => (p.endsWith('*') ? name.startsWith(p.slice(0, -1)) : p === name));
}

/**
 * The command that runs `argv` (argv[0] a path, or a name looked up on the filtered PATH) under `policy`.
 * Throws SandboxUnavailableError when the sandbox cannot enforce the policy here: the call must fail, never run
 * unsandboxed.
 */
export function sandboxCommand(policy: SandboxPolicy, argv: string[], extra: SandboxExtra = {}): SandboxCommand {
  if (argv.length === 0) throw new Error('sandboxCommand: empty argv');
  const why = unavailableReason(policy, landlockStatus());
  if (why) throw new SandboxUnavailableError(why);

  const ollie = extra.allowOllieSocket === true;
  let perPolicy = ARGS_CACHE.get(policy);
  if (!perPolicy) ARGS_CACHE.set(policy, (perPolicy = new Map()));
  const key = extraKey(extra);
  let flags = perPolicy.get(key);
  if (!flags) {
    // The helper grants only paths that exist: a tool's rw directory (the memory store's) is made on first use.
    for (const d of extra.rw ?? []) mkdirSync(d, { recursive: true, mode: 0o700 });
    perPolicy.set(key, (flags = policyArgs(policy, extra)));
  }

  const patterns = [...policy.env, ...ALWAYS_KEPT, ...(ollie ? ['OLLIE_ADDR'] : []), ...(extra.env ?? [])];
  return {
    file: SANDBOX_HELPER,
    args: [...flags, '--', ...argv],
    env(base) {
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(base)) if (v !== undefined && keep(k, patterns)) out[k] = v;
      out.TMPDIR = policy.tmpDir;
      return out;
    },
  };
}
