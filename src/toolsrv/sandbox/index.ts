/**
 * The sandbox as toolsrv uses it: load the policy for a project, ask what the kernel can enforce, and turn a
 * tool's argv into the argv of native/build/ollie-sandbox running it under that policy.
 *
 *   const policy = loadPolicy({ configDir, dataDir, cwd, home, runtimeDir, tmpDir });
 *   const cmd = sandboxCommand(policy, [toolPath, ...toolArgs], { allowOllieSocket: meta.sandbox?.ollieSocket });
 *   await launcher.launch({ file: cmd.file, args: cmd.args, cwd, env: cmd.env(toolEnv), stdin }, handlers);   // src/platform/launcher.ts
 *
 * Fails closed: sandboxCommand throws SandboxUnavailableError (with the exact reason) when the helper is
 * missing or the kernel's Landlock cannot enforce the policy. The helper checks the same again at run time
 * and exits with SANDBOX_EXIT.unavailable, in case the kernel differs from what was probed.
 */
import { execFile, execFileSync } from 'node:child_process';
import { accessSync, constants, mkdirSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import {
  canonical,
  PACKAGE_ROOT,
  sealedPackageDirs,
  withResolvedRules,
  type Access,
  type SandboxPolicy,
} from './policy.js';
import { ALLOW_PRIVATE_ENV } from '../../tools/web/address.js';
import { protectedPaths } from './protected.js';

export {
  loadPolicy,
  parsePolicyFile,
  narrow,
  alwaysDenied,
  canonical,
  PolicyError,
  DEFAULT_POLICY_FILE,
  PROJECT_POLICY_NAME,
  PACKAGE_ROOT,
  USER_BIN_DIRS,
} from './policy.js';
export type { SandboxPolicy, PolicyContext, Access } from './policy.js';

/** The helper, built by scripts/build-native.mjs. */
export const SANDBOX_HELPER = join(PACKAGE_ROOT, 'native', 'build', 'ollie-sandbox');

/** Exit codes of the helper itself (anything else is the tool's). */
export const SANDBOX_EXIT = { policy: 120, unavailable: 121, setup: 122 } as const;

export class SandboxUnavailableError extends Error {
  override name = 'SandboxUnavailableError';
}

/** The helper's system call filter, as --probe reports it. */
export interface SandboxFilter {
  /** The native architecture the filter is written for (x86_64, aarch64). */
  arch?: string;
  /** The other system call ABIs of the process, every call of which fails (i386 and x32; 32-bit arm). */
  refusedAbis?: string;
  /** System calls refused whatever their arguments. */
  refuses?: string[];
  /** System calls allowed or refused by their arguments (socket families and protocols, namespace flags…). */
  byArgument?: string[];
  /** Why there is no filter here (the sandbox is then unavailable). */
  unavailable?: string;
}

/** What the helper does with the capabilities it was started with. */
export interface SandboxPrivileges {
  /** The helper runs with uid 0 (real, effective or saved). */
  root: boolean;
  /** It was started holding capabilities. */
  held: boolean;
  /** The capability sets it empties. */
  drops: string[];
  /** The securebits it sets and locks (when it may: CAP_SETPCAP). */
  securebits?: string[];
  /** Why it cannot drop them (the sandbox is then unavailable). */
  unavailable?: string;
}

export interface LandlockStatus {
  /** Landlock ABI version the helper would use, 0 when there is none. */
  abi: number;
  /** What it can enforce: filesystem, refer, truncate, tcp, ioctl_dev, scope_abstract_unix, scope_signals,
   * audit_log (Landlock, by ABI); socket_families and syscall_filter (the helper's seccomp filter);
   * no_capabilities and no_new_privs. */
  enforces: string[];
  /** Why there is no sandbox, when abi is 0. */
  reason?: string;
  filter?: SandboxFilter;
  capabilities?: SandboxPrivileges;
  /** What the helper applies to keep a tool's processes together, and the resource limits it sets (--probe's
   * `containment` and `limits`; empty when it applies none). */
  containment?: string[];
  limits?: string[];
  /** How the helper keeps .git/hooks and startup files read-only (protected.ts), or why it cannot here. */
  protect?: { how?: string; unavailable?: string };
}

/** The probe's JSON as the helper prints it (snake_case). */
interface ProbeJson {
  abi: number;
  enforces: string[];
  reason?: string;
  filter?: { arch?: string; refused_abis?: string; refuses?: string[]; by_argument?: string[]; unavailable?: string };
  capabilities?: SandboxPrivileges;
  containment?: string[];
  limits?: string[];
  protect?: { how?: string; unavailable?: string };
}

/** Parses `ollie-sandbox --probe`'s output; throws naming what is wrong with it. */
export function parseProbe(out: string): LandlockStatus {
  let p: ProbeJson;
  try {
    p = JSON.parse(out) as ProbeJson;
  } catch (e) {
    throw new Error(
      `${SANDBOX_HELPER} --probe printed something that is not JSON (${(e as Error).message}): ${out.slice(0, 200)}`,
    );
  }
  if (typeof p !== 'object' || p === null || typeof p.abi !== 'number' || !Array.isArray(p.enforces)) {
    throw new Error(`${SANDBOX_HELPER} --probe printed no "abi" and "enforces": ${out.slice(0, 200)}`);
  }
  const f = p.filter;
  return {
    abi: p.abi,
    enforces: p.enforces,
    ...(p.reason && { reason: `Landlock is not available: ${p.reason}` }),
    ...(f && {
      filter: {
        ...(f.arch !== undefined && { arch: f.arch }),
        ...(f.refused_abis !== undefined && { refusedAbis: f.refused_abis }),
        ...(f.refuses && { refuses: f.refuses }),
        ...(f.by_argument && { byArgument: f.by_argument }),
        ...(f.unavailable !== undefined && { unavailable: f.unavailable }),
      },
    }),
    ...(p.capabilities && { capabilities: p.capabilities }),
    ...(p.containment && { containment: p.containment }),
    ...(p.limits && { limits: p.limits }),
    ...(p.protect && { protect: p.protect }),
  };
}

/** One line saying what the sandbox applies here (the daemon logs it at start; Settings shows it). */
export function sandboxSummary(s: LandlockStatus): string {
  const why = s.abi === 0 ? s.reason : (s.filter?.unavailable ?? s.capabilities?.unavailable);
  if (why) return `sandbox unavailable: ${why}; sandboxed tool calls will be refused`;
  const landlock = `Landlock ABI ${s.abi} (${s.enforces.filter((e) => !['socket_families', 'syscall_filter', 'no_capabilities', 'no_new_privs'].includes(e)).join(', ')})`;
  const f = s.filter;
  const filter = f?.refuses
    ? `system call filter for ${f.arch} (${f.refuses.length} calls refused, socket/clone/unshare/ioctl by argument, ${f.refusedAbis} calls refused)`
    : 'no system call filter';
  const c = s.capabilities;
  const caps = c
    ? `${c.root ? 'root: ' : ''}capabilities dropped (${c.drops.join(', ')}${c.securebits ? '; securebits locked' : ''})`
    : 'capabilities: unknown';
  const extra = [...(s.containment ?? []), ...(s.limits ?? [])];
  const kept = s.protect?.how
    ? `; .git/hooks and startup files read-only (${s.protect.how})`
    : s.protect?.unavailable
      ? `; .git/hooks and startup files cannot be kept read-only: ${s.protect.unavailable}`
      : '';
  return `sandbox: ${landlock}; ${filter}; ${caps}; no_new_privs${kept}${extra.length ? `; ${extra.join(', ')}` : ''}`;
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
   *
   * `allowPrivate` (`"allow_private": ["docs.internal", "127.0.0.1:8000", "10.0.0.0/8"]`) is not the kernel's
   * to enforce (Landlock knows ports, not addresses): the tool gets it as $OLLIE_WEB_ALLOW_PRIVATE and web_fetch
   * refuses every non-public address it does not name (src/tools/web/address.ts).
   */
  network?: { connectTcp?: number[]; bindTcp?: number[]; allowPrivate?: string[] };
  /** Absolute directories the tool may read / read and write (`"sandbox": {"rw": ["{XDG_DATA_HOME}/ollie/memory"]}`); rw ones are created. */
  ro?: string[];
  rw?: string[];
  /** Variables the tool keeps beyond the policy's env list. */
  env?: string[];
}

/** A stable key for the helper flags an extra produces (the flags are cached per policy and key). */
export function extraKey(extra: SandboxExtra): string {
  const n = extra.network;
  return `${extra.allowOllieSocket === true ? 'o' : '-'}|${(n?.connectTcp ?? []).join(',')}|${(n?.bindTcp ?? []).join(',')}|${JSON.stringify(n?.allowPrivate ?? [])}|${(extra.ro ?? []).join(':')}|${(extra.rw ?? []).join(':')}|${(extra.env ?? []).join(',')}`;
}

const NODE_DIR = dirname(realpathSync(process.execPath));
const PACKAGE_ROOT_REAL = canonical(PACKAGE_ROOT);

/** Variables every tool gets, whatever the policy's env list says (OLLIE_ARGS: a tty tool's arguments, its stdin being
 * its terminal). */
const ALWAYS_KEPT = ['PATH', 'OLLIE_SESSION_ID', 'OLLIE_UNAME', 'OLLIE_AGENT_ID', 'TMPDIR', 'OLLIE_ARGS'];

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
    status = parseProbe(execFileSync(SANDBOX_HELPER, ['--probe'], { encoding: 'utf8', timeout: 5000 }));
  }
  STATUS_CACHE.value = status;
  return status;
}

/** landlockStatus() without blocking the event loop (the daemon's log at start and its `sandbox` file); shares its cache. */
export async function landlockStatusAsync(): Promise<LandlockStatus> {
  if (STATUS_CACHE.value) return STATUS_CACHE.value;
  const missing = helperReason();
  const status = missing
    ? { abi: 0, enforces: [], reason: missing }
    : parseProbe((await promisify(execFile)(SANDBOX_HELPER, ['--probe'], { encoding: 'utf8', timeout: 5000 })).stdout);
  STATUS_CACHE.value ??= status;
  return STATUS_CACHE.value;
}

/** The Landlock ABI the policy needs, and why (the same rules and words as the helper's fail-closed checks). */
export function requiredAbi(policy: SandboxPolicy): { abi: number; why: string } {
  const n = policy.network;
  if (policy.isolate.signals || policy.isolate.abstractUnix) {
    const what =
      policy.isolate.signals && policy.isolate.abstractUnix
        ? 'signals and abstract Unix sockets'
        : policy.isolate.signals
          ? 'signals'
          : 'abstract Unix sockets';
    return { abi: 6, why: `the policy scopes ${what} (needs ABI 6, Linux 6.12)` };
  }
  if (!n.enabled || n.bindTcp.length || n.connectTcp.length)
    return { abi: 4, why: 'the policy restricts the network (needs ABI 4, Linux 6.7)' };
  return { abi: 3, why: 'read-only files must not be truncatable (needs ABI 3, Linux 6.2)' };
}

/** Why `policy` cannot be enforced with `status` (the kernel's Landlock), or undefined when it can. */
export function unavailableReason(policy: SandboxPolicy, status: LandlockStatus): string | undefined {
  if (status.abi === 0) return status.reason ?? 'Landlock is not available';
  // The helper exits 121/122 on these too; refusing before the spawn says why once, in the call's result.
  if (status.filter?.unavailable) return status.filter.unavailable;
  if (status.capabilities?.unavailable) return status.capabilities.unavailable;
  const need = requiredAbi(policy);
  if (status.abi < need.abi) return `${need.why}, but the kernel offers Landlock ABI ${status.abi}`;
  return undefined;
}

const within = (p: string, dir: string): boolean => dir === '/' || p === dir || p.startsWith(dir + '/');

/**
 * The filesystem rules the helper gets, resolved (the helper grants a rule only if its path still resolves to
 * itself), with the execution rule applied: in the exec roots (workspace, private tmp, user-local bin dirs),
 * whatever is readable is executable too. A rule inside a root gains execute; a root below a broader rule gets
 * a rule of its own with that rule's rights plus execute — unless the root lies in a denied path, where an
 * explicit rule would hold (the helper honours rules naming paths inside denied ones) and open a way in.
 */
function filesystemRules(policy: SandboxPolicy, extra: SandboxExtra): Array<[Access, string]> {
  let out = RULES_CACHE.get(policy);
  // Resolving is a few dozen realpath calls: once per policy, not once per agent (whose spill rule differs).
  if (!out) RULES_CACHE.set(policy, (out = policyRules(policy)));
  return [
    ...out,
    ...(['ro', 'rw'] as const).flatMap((level) =>
      (extra[level] ?? []).map((p): [Access, string] => [level, canonical(p)]),
    ),
  ];
}

const RULES_CACHE = new WeakMap<SandboxPolicy, Array<[Access, string]>>();

function policyRules(policy: SandboxPolicy): Array<[Access, string]> {
  const fs = policy.filesystem;
  const denied = fs.deny.map(canonical);
  const roots = (policy.resolved?.exec ?? policy.execRoots.map(canonical)).filter(
    (r) => !denied.some((d) => within(r, d)),
  );
  const rules: Array<[Access, string]> = [];
  for (const level of ['ro', 'rox', 'rw', 'rwx'] as const)
    for (const p of policy.resolved?.[level] ?? fs[level].map(canonical)) rules.push([level, p]);
  const exec = (a: Access): Access => (a === 'ro' ? 'rox' : a === 'rw' ? 'rwx' : a);
  const out: Array<[Access, string]> = rules.map(([a, p]) => [roots.some((r) => within(p, r)) ? exec(a) : a, p]);
  for (const r of roots) {
    const above = rules.filter(([, p]) => within(r, p) && p !== r);
    if (above.length === 0) continue;
    // The rules above already grant the root their rights (Landlock adds rights up): this adds execute only.
    const writable = above.some(([a]) => a === 'rw' || a === 'rwx');
    out.push([writable ? 'rwx' : 'rox', r]);
  }
  for (const d of policy.toolDirs) out.push(['rox', canonical(d)]);
  return out;
}

/** The helper's command-line flags for a policy (without the tool's argv). */
export function policyArgs(policy: SandboxPolicy, extra: SandboxExtra = {}): string[] {
  return [...fixedArgs(policy, extra), ...protectArgs(policy, extra)];
}

/**
 * The flags that keep what exists now read-only (protected.ts, which looks at the disk): made for every command,
 * never cached with the policy's other flags, so that a `.git` an agent makes in one call is protected from its
 * next call on, not only once the policy is loaded again.
 */
function protectArgs(policy: SandboxPolicy, extra: SandboxExtra): string[] {
  const writable = filesystemRules(policy, extra)
    .filter(([level]) => level === 'rw' || level === 'rwx')
    .map(([, p]) => p);
  const home = canonical(policy.home ?? homedir());
  const key = JSON.stringify([writable, home, policy.isolate.gitHooks, policy.isolate.startupFiles]);
  if (!PROTECT_NOW) {
    PROTECT_NOW = new Map();
    queueMicrotask(() => (PROTECT_NOW = undefined));
  }
  let args = PROTECT_NOW.get(key);
  if (!args) {
    const kept = protectedPaths(writable, home, policy.isolate);
    args = [...kept.pin.flatMap((p) => ['--pin', p]), ...kept.protect.flatMap((p) => ['--protect', p])];
    PROTECT_NOW.set(key, args);
  }
  // Outside the memo: it depends on every rule (not the writable ones alone) and on the mount table.
  return [...args, ...terminalArgs(policy, extra)];
}

/**
 * A rule that reaches a devpts mount would reach every terminal of the machine: /dev/pts, and wherever else the
 * machine's devpts is mounted (a build chroot's dev/pts in the project, bound there by schroot or mock, is reached
 * by the rule on the project). The tool then gets an instance of its own, bound over each of them. A rule that
 * covers a devtmpfs mount (/dev, or the machine's /dev bound in a chroot without its pts: `mount --bind /dev`)
 * would reach the consoles and serial lines, which the helper denies under --private-pts. Looked up per call, as
 * the protected paths are: a chroot mounted after the policy was loaded counts from the next call on.
 */
function terminalArgs(policy: SandboxPolicy, extra: SandboxExtra): string[] {
  if (!policy.isolate.terminals) return [];
  const mounts = terminalMounts();
  const reaches = ([, p]: [Access, string]): boolean =>
    p === '/dev/ptmx' ||
    mounts.devpts.some((m) => within(m, p) || within(p, m)) ||
    mounts.devtmpfs.some((m) => within(m, p));
  return filesystemRules(policy, extra).some(reaches) ? ['--private-pts'] : [];
}

/** Where devpts (/dev/pts always) and devtmpfs are mounted, from /proc/self/mountinfo (octal escapes undone). */
function terminalMounts(): { devpts: string[]; devtmpfs: string[] } {
  const devpts = new Set(['/dev/pts']);
  const devtmpfs = new Set<string>();
  let text = '';
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return { devpts: [...devpts], devtmpfs: [] };
  }
  for (const line of text.split('\n')) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const into = line.startsWith('devpts ', sep + 3) ? devpts : line.startsWith('devtmpfs ', sep + 3) ? devtmpfs : null;
    const at = into && line.slice(0, sep).split(' ')[4];
    if (into && at) into.add(at.replace(/\\([0-3][0-7]{2})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))));
  }
  return { devpts: [...devpts], devtmpfs: [...devtmpfs] };
}

/**
 * protectArgs of the same writable roots within one synchronous run, forgotten at its end: a re-check of N MCP
 * servers (mcp/manager.ts, at every tool call's end) looks the disk up once, not N times, and every command, made
 * in a run of its own, still looks it up anew. Nothing of toolsrv's changes the disk within the run, and what other
 * processes change meanwhile is as if they had changed it a moment after the lookup.
 */
let PROTECT_NOW: Map<string, string[]> | undefined;

/** The flags that depend on the policy and the tool's rules alone (cached per policy: ARGS_CACHE). */
function fixedArgs(policy: SandboxPolicy, extra: SandboxExtra): string[] {
  const a: string[] = [];
  const fs = policy.filesystem;
  const rules = filesystemRules(policy, extra);
  for (const [level, p] of rules) a.push(`--${level}`, p);
  // The tools themselves and what they run on: Ollie's own files (dist/ for client_9p's ollie-9p, node_modules)
  // are readable, the tool directories executable. The user's tools live inside the denied config dir: a rule
  // naming them explicitly holds (only broader rules are cut around denied paths).
  a.push(
    '--ro',
    PACKAGE_ROOT_REAL,
    '--rox',
    join(PACKAGE_ROOT_REAL, 'data', 'tools'),
    '--rox',
    join(PACKAGE_ROOT_REAL, 'native', 'build'),
  );
  // The package's runtime dirs are denied (policy.ts, sealedPackageDirs), so that no rule can make them writable;
  // a rule naming a denied path holds, so these give them back read-only.
  for (const d of sealedPackageDirs()) if (d !== join(PACKAGE_ROOT_REAL, 'native', 'build')) a.push('--ro', d);
  // The Node that runs Ollie runs its Node tools too, wherever it is installed (nvm, a tarball in HOME…).
  a.push('--rox', NODE_DIR);
  for (const d of fs.deny) a.push('--deny', d);
  for (const d of systemSecrets()) a.push('--deny', d);
  const n = policy.network;
  const toolNet =
    extra.network && ((extra.network.connectTcp?.length ?? 0) > 0 || (extra.network.bindTcp?.length ?? 0) > 0)
      ? extra.network
      : undefined;
  if (!n.enabled && !toolNet) a.push('--no-net');
  else if (!n.enabled || n.bindTcp.length || n.connectTcp.length) {
    // Ports only: the policy's lists (when its network is on) and the tool's own rule.
    const on = n.enabled;
    for (const p of new Set([...(on ? n.bindTcp : []), ...(toolNet?.bindTcp ?? [])])) a.push('--net-bind', String(p));
    for (const p of new Set([...(on ? n.connectTcp : []), ...(toolNet?.connectTcp ?? [])]))
      a.push('--net-connect', String(p));
  }
  a.push(n.unix || extra.allowOllieSocket ? '--allow-unix' : '--deny-unix');
  if (policy.isolate.signals) a.push('--scope-signals');
  if (policy.isolate.abstractUnix) a.push('--scope-abstract-unix');
  for (const v of [
    ...new Set([
      ...policy.env,
      ...ALWAYS_KEPT,
      ...(extra.allowOllieSocket ? OLLIE_SOCKET_ENV : []),
      ...(extra.env ?? []),
    ]),
  ])
    a.push('--env-keep', v);
  a.push('--env-set', `TMPDIR=${policy.tmpDir}`);
  if (extra.network) a.push('--env-set', `${ALLOW_PRIVATE_ENV}=${JSON.stringify(extra.network.allowPrivate ?? [])}`);
  return a;
}

/** What a tool that may reach the Ollie socket gets: the address, and the agent's token to present there. */
const OLLIE_SOCKET_ENV = ['OLLIE_ADDR', 'OLLIE_TOKEN'];

/**
 * The machine's secrets a tool could read by file mode alone: the password and group shadow files, TLS and SSH
 * host private keys. Dropping capabilities keeps root from reading what the modes do not grant it, but these
 * are root's own files (0640 root:shadow, 0600 root), which root reads as their owner; and a user in the
 * shadow group reads /etc/shadow by its group. Each one this user can read by its mode is denied, whatever
 * the policy.
 */
function systemSecrets(): string[] {
  const candidates = ['/etc/shadow', '/etc/shadow-', '/etc/gshadow', '/etc/gshadow-', '/etc/ssl/private'];
  try {
    for (const f of readdirSync('/etc/ssh')) if (/^ssh_host_.*_key$/.test(f)) candidates.push(join('/etc/ssh', f));
  } catch {
    // No /etc/ssh: no host keys.
  }
  return candidates.filter(readableByMode);
}

/**
 * Whether this user could read `path` by its mode bits alone, as a tool (no capabilities) can. access(2) would
 * not do: it answers for toolsrv, which as root reads everything. (Fedora's /etc/shadow is 0000: nothing to
 * deny there, and /etc is not split into its entries for it.)
 */
function readableByMode(path: string): boolean {
  let st;
  try {
    st = statSync(path);
  } catch {
    return false;
  }
  const uid = process.getuid?.() ?? -1;
  const gids = [process.getgid?.() ?? -1, ...(process.getgroups?.() ?? [])];
  const bits = st.uid === uid ? (st.mode >> 6) & 7 : gids.includes(st.gid) ? (st.mode >> 3) & 7 : st.mode & 7;
  return (bits & 4) !== 0;
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
  return withResolvedRules({
    ...policy,
    filesystem: {
      ro: [...fs.ro, ...fs.rw.filter((p) => !writable.has(p)), ...(add.ro ?? [])],
      rox: [...fs.rox, ...fs.rwx, ...(add.rox ?? [])],
      rw: [...writable],
      rwx: [],
      deny: [...fs.deny],
    },
    network: { enabled: false, bindTcp: [], connectTcp: [], unix: false },
  });
}

/** `policy` with paths added (read-only, read and execute), e.g. a workflow's own directory. */
export function withPaths(policy: SandboxPolicy, add: { ro?: string[]; rox?: string[] }): SandboxPolicy {
  const fs = policy.filesystem;
  return withResolvedRules({
    ...policy,
    filesystem: { ...fs, ro: [...fs.ro, ...(add.ro ?? [])], rox: [...fs.rox, ...(add.rox ?? [])] },
  });
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
    perPolicy.set(key, (flags = fixedArgs(policy, extra)));
  }

  const patterns = [...policy.env, ...ALWAYS_KEPT, ...(ollie ? OLLIE_SOCKET_ENV : []), ...(extra.env ?? [])];
  return {
    file: SANDBOX_HELPER,
    args: [...flags, ...protectArgs(policy, extra), '--', ...argv],
    env(base) {
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(base)) {
        // The agent's credential goes to the tools that dial back, whatever the policy's patterns say.
        if (k === 'OLLIE_TOKEN' && !ollie) continue;
        if (v !== undefined && keep(k, patterns)) out[k] = v;
      }
      out.TMPDIR = policy.tmpDir;
      return out;
    },
  };
}
