/**
 * The sandbox policy: `sandbox.yaml` (the user's, else the shipped `data/sandbox.yaml`), optionally narrowed
 * by the project's `.ollie-sandbox.yaml`. Format and semantics: docs/sandbox.md.
 *
 * A few paths are always denied, whatever the files say: ~/.ssh, ~/.gnupg, Ollie's runtime dir (its sockets),
 * Ollie's config and data dirs (the ones in use, --config/--data, and the XDG defaults). Landlock only allows, so
 * "denied" means no rule may cover them: the native helper replaces a rule on an ancestor by rules on the
 * ancestor's other entries (see grant() in ollie-sandbox.c). A rule naming a path inside one of them is an
 * error in any policy file; only Ollie itself grants there (the user's tool dir, a tool's own data dir, an
 * agent's spill files).
 *
 * Paths are compared after resolving symlinks, and the helper is given the resolved paths: it grants a rule
 * only when the path still resolves to itself, so a symlink swapped in after the policy loaded grants nothing.
 */
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  realpathSync,
} from 'node:fs';
import { basename, dirname, isAbsolute, join, normalize } from 'node:path';
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Node as YamlNode } from 'yaml';
import { configDir as defaultConfigDir, dataDir as defaultDataDir } from '../../platform/paths.js';
import { PROJECT_POLICY_NAME, readTrusted, sha256 } from './trust.js';
import {
  baseCheckpointRules,
  narrowCheckpointRules,
  parseCheckpointRules,
  type CheckpointRules,
} from './checkpoint-rules.js';
import { DEFAULT_LIMITS, LIMIT_KEYS, parseLimit, widenedLimit, type Limits } from './limits.js';

export type Access = 'ro' | 'rox' | 'rw' | 'rwx';
export const ACCESS: readonly Access[] = ['ro', 'rox', 'rw', 'rwx'];

export interface SandboxPolicy {
  /** Absolute paths per access level, placeholders expanded. */
  filesystem: Record<Access, string[]> & { deny: string[] };
  network: {
    /** false: no network at all. true: TCP limited to the port lists when either is non-empty, else open. */
    enabled: boolean;
    bindTcp: number[];
    connectTcp: number[];
    /** May tools create Unix sockets (connect to local daemons)? */
    unix: boolean;
  };
  /**
   * Keep processes inside from signalling processes outside / reaching abstract Unix sockets outside, and from
   * planting what the user runs later outside the sandbox: a writable repository's .git/hooks and .git/config
   * (`gitHooks`), the shell and session startup files of a writable home (`startupFiles`) stay read-only
   * (protected.ts); and from reaching the machine's terminals, the user's own included, through /dev/pts
   * (`terminals`: the tool gets a devpts instance of its own).
   */
  isolate: { signals: boolean; abstractUnix: boolean; gitHooks: boolean; startupFiles: boolean; terminals: boolean };
  /** Environment variables passed to tools (NAME, or PREFIX* ); everything else is dropped. */
  env: string[];
  /** What one call may use (sandbox/limits.ts); 0 is no limit. */
  limits: Limits;
  /** How the writable roots are checkpointed before a tool round (checkpoint-rules.ts). */
  checkpoint?: CheckpointRules;
  /** The private tmp dir ({TMPDIR}), which tools also get as $TMPDIR. */
  tmpDir: string;
  /** The user's home ({HOME}): its startup files are protected where a rule makes it writable. */
  home?: string;
  /** The user's tool dir ($XDG_CONFIG_HOME/ollie/tools): readable and executable although the config dir is denied. */
  toolDirs: string[];
  /**
   * Where whatever is readable is executable too (the workspace, the private tmp, the user-local bin dirs):
   * "writable but not executable" stops no one (`ld.so ./prog` runs it) and breaks `./configure`.
   */
  execRoots: string[];
  /** The files the policy came from, in order (the base, then the project's). */
  sources: string[];
  /** What the owner should know about how the policy was made (an untrusted project file that was ignored). */
  notices: string[];
  /**
   * The filesystem rules resolved when the policy was loaded (loadPolicy), which the helper is given: resolving
   * them later would follow a symlink planted since (a sub-agent's workspace swapped for a link to /).
   */
  resolved?: Record<Access | 'exec', string[]>;
}

export interface PolicyContext {
  /** Ollie's config dir ($XDG_CONFIG_HOME/ollie). */
  configDir: string;
  /** Ollie's data dir ($XDG_DATA_HOME/ollie). */
  dataDir: string;
  /** The agent's working directory (the project). */
  cwd: string;
  home: string;
  /** Ollie's runtime dir (its sockets). */
  runtimeDir: string;
  /** A private tmp dir for this session's tools; created (0700) when missing. */
  tmpDir: string;
  /**
   * More always-denied directories: where the code toolsrv runs outside the sandbox lives when that is inside
   * the user's HOME (a remote toolsrv's package cache, ~/.cache/ollie/remote). A tool that could write there
   * would replace the sandbox helper, and the next call would run its code unsandboxed.
   */
  sealed?: string[];
}

export class PolicyError extends Error {
  override name = 'PolicyError';
}

/** Where the shipped defaults live: data/ at the package root (this file is src|dist/toolsrv/sandbox/). */
export const PACKAGE_ROOT = join(dirname(new URL(import.meta.url).pathname), '..', '..', '..');
export const DEFAULT_POLICY_FILE = join(PACKAGE_ROOT, 'data', 'sandbox.yaml');

/**
 * What of Ollie's own package runs or decides outside the sandbox: the helpers toolsrv execs unsandboxed
 * (native/build), the daemons' code and its dependencies (dist, out, node_modules) and the shipped tools, prompts
 * and default policy (data). A workspace that contains the package (Ollie working on its own checkout, or on a
 * home directory Ollie is installed under) must not make these writable: a tool could replace ollie-sandbox and
 * the next call would run its code unconfined. They stay readable (the helper adds the package read-only);
 * sources, tests and docs stay writable, so an agent can still edit Ollie, and a person rebuilds it.
 */
export function sealedPackageDirs(): string[] {
  const root = canonical(PACKAGE_ROOT);
  return ['native/build', 'dist', 'out', 'node_modules', 'data'].map((d) => join(root, d));
}
export { PROJECT_POLICY_NAME };

/** The user-local bin directories, executable where a policy makes them readable (and listed in the default). */
export const USER_BIN_DIRS = ['.local/bin', '.cargo/bin', 'go/bin', '.npm-global/bin', 'bin'];

/**
 * The paths no rule may cover, whatever the policy files say: the user's keys, Ollie's sockets, Ollie's config
 * and data dirs — those in use and the XDG defaults, which may hold keys and history of their own — and
 * /dev/shm, which is shared by every process of the machine and outlives them: what one session left there
 * another could read, so no session has it.
 */
export function alwaysDenied(ctx: PolicyContext): string[] {
  const dirs = [
    join(ctx.home, '.ssh'),
    join(ctx.home, '.gnupg'),
    ctx.runtimeDir,
    ctx.configDir,
    ctx.dataDir,
    defaultConfigDir(),
    defaultDataDir(),
    '/dev/shm',
    ...sealedPackageDirs(),
    ...(ctx.sealed ?? []),
  ];
  return [...new Set(dirs)];
}

/**
 * `p` with symlinks resolved: the longest prefix that exists, resolved, and the rest appended as written (so
 * a path that does not exist yet compares correctly with resolved ones).
 */
export function canonical(p: string): string {
  let head = p;
  let tail = '';
  for (;;) {
    try {
      const real = realpathSync.native(head);
      return tail ? join(real, tail) : real;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      const parent = dirname(head);
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || parent === head) return p;
      tail = tail ? join(basename(head), tail) : basename(head);
      head = parent;
    }
  }
}

/** The owner's policy file in the config dir. */
export const USER_POLICY_NAME = 'sandbox.yaml';

/** The policy for a project: the user's sandbox.yaml (or the shipped one), narrowed by the project's file once trusted. */
export function loadPolicy(ctx: PolicyContext): SandboxPolicy {
  const userFile = join(ctx.configDir, USER_POLICY_NAME);
  const baseFile = existsSync(userFile) ? userFile : DEFAULT_POLICY_FILE;
  let policy = parsePolicyFile(baseFile, readFileSync(baseFile, 'utf8'), ctx);
  const project = projectFile(ctx);
  if (project?.text !== undefined) policy = narrow(policy, project.file, project.text, ctx);
  else if (project?.notice) policy.notices.push(project.notice);
  mkdirSync(ctx.tmpDir, { recursive: true, mode: 0o700 });
  return withResolvedRules(policy);
}

/**
 * `policy` with its filesystem rules resolved (`resolved`, what the helper is given). Every policy made from
 * another one with other rules must come through here: the helper is given the resolved rules, not `filesystem`.
 */
export function withResolvedRules(policy: SandboxPolicy): SandboxPolicy {
  const resolved: Record<Access | 'exec', string[]> = {
    ro: [],
    rox: [],
    rw: [],
    rwx: [],
    exec: policy.execRoots.map(canonical),
  };
  for (const a of ACCESS) resolved[a] = policy.filesystem[a].map(canonical);
  return { ...policy, resolved };
}

/** Where each session cwd first resolved in this process: a trusted file there is not left behind by a move. */
const firstResolved = new Map<string, string>();

/** The largest project policy file read: a policy is a few lines. */
const MAX_PROJECT_FILE = 1 << 20;

/**
 * The project's policy file, if there is one: its text when the owner trusts this exact file (its SHA-256 at
 * its resolved path), else why it is ignored. What is hashed is what is parsed: the bytes are read once.
 */
function projectFile(ctx: PolicyContext): { file: string; text?: string; notice?: string } | undefined {
  const here = canonical(ctx.cwd);
  const file = join(here, PROJECT_POLICY_NAME);
  const trust = readTrusted(ctx.configDir);
  const trusted = trust.get(file);
  // The cwd resolved elsewhere than before (or than as written): where the agent writes its parent, it renamed the
  // project away and put a link to a directory of its own at its name. A file trusted where it resolved before
  // still narrows this project: looked for only where it resolves now, it would be dropped for the base policy.
  const first = firstResolved.get(ctx.cwd) ?? here;
  firstResolved.set(ctx.cwd, first);
  if (!trusted)
    for (const was of new Set([first, ctx.cwd]))
      if (was !== here && trust.has(join(was, PROJECT_POLICY_NAME)))
        throw new PolicyError(
          `${join(was, PROJECT_POLICY_NAME)} was trusted, but ${ctx.cwd} now resolves to ${here}: the trusted file narrows this project's policy, so no tool runs here until the owner trusts the file where it is now (\`ollie trust ${file}\`) or forgets the old one (\`ollie trust --untrust ${join(was, PROJECT_POLICY_NAME)}\`)`,
        );
  // A trusted file narrows the policy, and it lies in the workspace, which the agent writes: ignoring it once it
  // changed (or went) would hand the agent the broader base policy for one edit. So a trusted file that is no
  // longer what was trusted stops the tools until the owner trusts it again or forgets it.
  const tampered = (what: string): never => {
    throw new PolicyError(
      `${file} was trusted, but ${what}: it narrows this project's policy and the agent can write it, so no tool runs here until the owner trusts it again (\`ollie trust ${file}\`, or "trust ${file}" written to config/trust) or forgets it (\`ollie trust --untrust ${file}\`)`,
    );
  };
  // Opened once, without following a link and without waiting on a FIFO, and read through that descriptor: a
  // name checked and then read again could be swapped in between (for a link to a FIFO, which blocks toolsrv).
  let fd: number | undefined;
  let kind: string | undefined;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const st = fstatSync(fd);
    if (!st.isFile()) kind = 'not a regular file';
    // Read and hashed in toolsrv's one thread whenever it changed (at a call, at every MCP re-check): an agent that
    // grew it to gigabytes and touched it in a loop would have toolsrv read them again and again.
    else if (st.size > MAX_PROJECT_FILE) kind = `larger than ${MAX_PROJECT_FILE} bytes`;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return trusted ? tampered('it is gone') : undefined;
    kind = code === 'ELOOP' ? 'a symbolic link' : `unreadable (${code ?? (e as Error).message})`;
  }
  if (kind) {
    if (fd !== undefined) closeSync(fd);
    if (trusted) tampered(`it is ${kind} now`);
    return { file, notice: `${file} is ${kind}, so it was ignored: a project's policy file must be a regular file` };
  }
  // Read through the descriptor, but never past the bound: the size fstat gave is only what it was then, and the
  // agent can grow the file (a sparse truncate is instant) between that check and this read.
  let bytes: Buffer;
  try {
    const buf = Buffer.allocUnsafe(MAX_PROJECT_FILE + 1);
    let n = 0;
    for (let got = 1; got > 0 && n < buf.length; n += got) got = readSync(fd!, buf, n, buf.length - n, null);
    bytes = buf.subarray(0, n);
  } finally {
    closeSync(fd!);
  }
  if (bytes.length > MAX_PROJECT_FILE) {
    const grown = `larger than ${MAX_PROJECT_FILE} bytes`;
    if (trusted) tampered(`it is ${grown} now`);
    return { file, notice: `${file} is ${grown}, so it was ignored: a project's policy file must be a regular file` };
  }
  const sha = sha256(bytes);
  if (trusted === sha) return { file, text: bytes.toString('utf8') };
  if (trusted) tampered(`it has changed since (sha256 ${sha})`);
  return {
    file,
    notice: `${file} is not trusted, so it was ignored (sha256 ${sha}): to apply it, run \`ollie trust ${file}\` or write "trust ${file}" to config/trust`,
  };
}

// ---- parsing -------------------------------------------------------------------------------------------

/** One policy file as written: only the sections it sets. `at` gives the line of each setting for messages. */
interface PolicyFile {
  file: string;
  filesystem: Partial<Record<Access | 'deny', string[]>>;
  /** The line of each filesystem entry, in the same order. */
  lines: Partial<Record<Access | 'deny', number[]>>;
  network: { enabled?: boolean; bindTcp?: number[]; connectTcp?: number[]; unix?: boolean };
  isolate: {
    signals?: boolean;
    abstractUnix?: boolean;
    gitHooks?: boolean;
    startupFiles?: boolean;
    terminals?: boolean;
  };
  env?: string[];
  limits: Partial<Limits>;
  checkpoint?: ReturnType<typeof parseCheckpointRules>;
  at: Map<string, number>;
}

const PLACEHOLDER = /\{([A-Z_]+)\}/g;

function placeholders(ctx: PolicyContext): Record<string, string> {
  return {
    CWD: ctx.cwd,
    HOME: ctx.home,
    TMPDIR: ctx.tmpDir,
    XDG_CONFIG_HOME: dirname(ctx.configDir),
    XDG_DATA_HOME: dirname(ctx.dataDir),
    RUNTIME: ctx.runtimeDir,
  };
}

function parseFile(file: string, text: string, ctx: PolicyContext): PolicyFile {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  const lineOf = (node: YamlNode | null | undefined): number => (node?.range ? lc.linePos(node.range[0]).line : 1);
  const err = (node: YamlNode | null | undefined, what: string): never => {
    throw new PolicyError(`${file}:${lineOf(node)}: ${what}`);
  };
  const first = doc.errors[0];
  if (first) throw new PolicyError(`${file}:${lc.linePos(first.pos[0]).line}: ${first.message.split('\n')[0]}`);

  const out: PolicyFile = { file, filesystem: {}, lines: {}, network: {}, isolate: {}, limits: {}, at: new Map() };
  const root = doc.contents;
  if (root === null || (isScalar(root) && root.value === null)) return out; // an empty file changes nothing
  if (!isMap(root)) return err(root, 'the policy must be a mapping (filesystem:, network:, isolate:, env:, limits:)');

  const vars = placeholders(ctx);
  const pathOf = (node: YamlNode | null, key: string): string => {
    if (!isScalar(node) || typeof node.value !== 'string' || node.value === '')
      return err(node, `${key}: each entry must be a path`);
    let p = node.value.replace(/^~(?=\/|$)/, '{HOME}');
    p = p.replace(
      PLACEHOLDER,
      (_m, name: string) =>
        vars[name] ??
        err(
          node,
          `${key}: unknown placeholder {${name}} (known: ${Object.keys(vars)
            .map((v) => `{${v}}`)
            .join(', ')})`,
        ),
    );
    if (!isAbsolute(p))
      return err(
        node,
        `${key}: ${node.value} is not an absolute path (start it with / or a placeholder such as {CWD})`,
      );
    return normalize(p).replace(/(.)\/$/, '$1');
  };
  const list = <T>(node: YamlNode | null, key: string, item: (n: YamlNode | null) => T): T[] => {
    if (isScalar(node) && node.value === null) return [];
    if (!isSeq(node)) return err(node, `${key}: must be a list`);
    return node.items.map((n) => item(n as YamlNode | null));
  };
  const bool = (node: YamlNode | null, key: string): boolean =>
    isScalar(node) && typeof node.value === 'boolean' ? node.value : err(node, `${key}: must be true or false`);
  const port = (node: YamlNode | null, key: string): number =>
    isScalar(node) && Number.isInteger(node.value) && (node.value as number) >= 0 && (node.value as number) <= 65535
      ? (node.value as number)
      : err(node, `${key}: each entry must be a TCP port number (0-65535)`);
  const section = (
    node: YamlNode | null,
    key: string,
    fields: Record<string, (v: YamlNode | null, k: string) => void>,
  ): void => {
    if (isScalar(node) && node.value === null) return;
    if (!isMap(node)) return err(node, `${key}: must be a mapping`);
    for (const pair of node.items) {
      const k = isScalar(pair.key) ? String(pair.key.value) : '';
      const set = fields[k];
      if (!set)
        return err(pair.key as YamlNode, `${key}.${k}: unknown setting (known: ${Object.keys(fields).join(', ')})`);
      out.at.set(`${key}.${k}`, lineOf(pair.key as YamlNode));
      set(pair.value as YamlNode | null, `${key}.${k}`);
    }
  };

  for (const pair of root.items) {
    const key = isScalar(pair.key) ? String(pair.key.value) : '';
    const value = pair.value as YamlNode | null;
    out.at.set(key, lineOf(pair.key as YamlNode));
    if (key === 'filesystem') {
      const fields: Record<string, (v: YamlNode | null, k: string) => void> = {};
      for (const a of [...ACCESS, 'deny'] as const) {
        fields[a] = (v, k) => {
          out.filesystem[a] = list(v, k, (n) => pathOf(n, k));
          out.lines[a] = isSeq(v) ? v.items.map((n) => lineOf(n as YamlNode)) : [];
        };
      }
      section(value, key, fields);
    } else if (key === 'network') {
      section(value, key, {
        enabled: (v, k) => (out.network.enabled = bool(v, k)),
        unix: (v, k) => (out.network.unix = bool(v, k)),
        bind_tcp: (v, k) => (out.network.bindTcp = list(v, k, (n) => port(n, k))),
        connect_tcp: (v, k) => (out.network.connectTcp = list(v, k, (n) => port(n, k))),
      });
    } else if (key === 'isolate') {
      section(value, key, {
        signals: (v, k) => (out.isolate.signals = bool(v, k)),
        abstract_unix: (v, k) => (out.isolate.abstractUnix = bool(v, k)),
        git_hooks: (v, k) => (out.isolate.gitHooks = bool(v, k)),
        startup_files: (v, k) => (out.isolate.startupFiles = bool(v, k)),
        terminals: (v, k) => (out.isolate.terminals = bool(v, k)),
      });
    } else if (key === 'env') {
      out.env = list(value, key, (n) =>
        isScalar(n) && typeof n.value === 'string' && /^[A-Za-z_][A-Za-z0-9_]*\*?$/.test(n.value)
          ? n.value
          : err(n, 'env: each entry must be a variable name, or a prefix ending in * (LC_*)'),
      );
    } else if (key === 'limits') {
      const fields: Record<string, (v: YamlNode | null, k: string) => void> = {};
      for (const [k, spec] of Object.entries(LIMIT_KEYS)) {
        fields[k] = (v) => {
          try {
            out.limits[spec.name] = parseLimit(k, isScalar(v) ? v.value : v?.toJSON());
          } catch (e) {
            err(v, (e as Error).message);
          }
        };
      }
      section(value, key, fields);
    } else if (key === 'checkpoint') {
      try {
        out.checkpoint = parseCheckpointRules(value?.toJSON(), `${file}:${lineOf(pair.key as YamlNode)}`, (k, i) => {
          const node = isMap(value) ? (value.get(k, true) as YamlNode | undefined) : undefined;
          const item = i !== undefined && isSeq(node) ? (node.items[i] as YamlNode | undefined) : node;
          return item ? `${file}:${lineOf(item)}` : '';
        });
      } catch (e) {
        throw new PolicyError((e as Error).message);
      }
    } else {
      err(
        pair.key as YamlNode,
        `${key}: unknown section (known: filesystem, network, isolate, env, limits, checkpoint)`,
      );
    }
  }
  return out;
}

/** A complete policy from a base file: unset settings take the safe defaults. */
export function parsePolicyFile(file: string, text: string, ctx: PolicyContext): SandboxPolicy {
  const f = parseFile(file, text, ctx);
  const policy: SandboxPolicy = {
    filesystem: {
      ro: f.filesystem.ro ?? [],
      rox: f.filesystem.rox ?? [],
      rw: f.filesystem.rw ?? [],
      rwx: f.filesystem.rwx ?? [],
      deny: [...alwaysDenied(ctx), ...(f.filesystem.deny ?? [])],
    },
    network: {
      enabled: f.network.enabled ?? false,
      bindTcp: f.network.bindTcp ?? [],
      connectTcp: f.network.connectTcp ?? [],
      unix: f.network.unix ?? false,
    },
    isolate: {
      signals: f.isolate.signals ?? true,
      abstractUnix: f.isolate.abstractUnix ?? true,
      gitHooks: f.isolate.gitHooks ?? true,
      startupFiles: f.isolate.startupFiles ?? true,
      terminals: f.isolate.terminals ?? true,
    },
    env: f.env ?? [],
    limits: { ...DEFAULT_LIMITS, ...f.limits },
    checkpoint: baseCheckpointRules(f.checkpoint),
    tmpDir: ctx.tmpDir,
    home: ctx.home,
    toolDirs: [join(ctx.configDir, 'tools')],
    execRoots: [ctx.cwd, ctx.tmpDir, ...USER_BIN_DIRS.map((d) => join(ctx.home, d))],
    sources: [file],
    notices: [],
  };
  checkDenied(f, ctx);
  if (!policy.network.enabled && (policy.network.bindTcp.length || policy.network.connectTcp.length)) {
    const line = f.at.get(policy.network.bindTcp.length ? 'network.bind_tcp' : 'network.connect_tcp') ?? 1;
    throw new PolicyError(
      `${file}:${line}: network: port lists need enabled: true (with enabled: false there is no network at all)`,
    );
  }
  return policy;
}

// ---- what no policy file may grant ---------------------------------------------------------------------

const within = (p: string, dir: string): boolean => dir === '/' || p === dir || p.startsWith(dir + '/');

/**
 * A rule naming an always-denied path, or a path inside one (after resolving symlinks: a link in the workspace
 * to ~/.ssh is ~/.ssh), is an error: no policy file can grant them. The one exception is the user's tool dir
 * inside the config dir, which may be named read-only or read+exec (it is granted so anyway).
 */
function checkDenied(f: PolicyFile, ctx: PolicyContext): void {
  const denied = alwaysDenied(ctx).map((d) => ({ d, real: canonical(d) }));
  const tools = canonical(join(ctx.configDir, 'tools'));
  for (const a of ACCESS) {
    (f.filesystem[a] ?? []).forEach((p, i) => {
      const real = canonical(p);
      if ((a === 'ro' || a === 'rox') && within(real, tools)) return;
      const hit = denied.find(({ real: d }) => within(real, d));
      if (!hit) return;
      const via = real === p ? '' : ` (it resolves to ${real})`;
      throw new PolicyError(
        `${f.file}:${f.lines[a]?.[i] ?? f.at.get(`filesystem.${a}`) ?? 1}: filesystem.${a}: ${p}${via} is ${real === hit.real ? '' : 'inside '}${hit.d}, which no policy file can grant ` +
          `(Ollie's config, data and runtime dirs, ~/.ssh and ~/.gnupg are always denied; a tool that needs them must be run with bypass and a person's approval)`,
      );
    });
  }
}

// ---- narrowing -----------------------------------------------------------------------------------------

/** Which levels of the base grant at least the rights of `a`. */
const COVERS: Record<Access, Access[]> = {
  ro: ['ro', 'rox', 'rw', 'rwx'],
  rox: ['rox', 'rwx'],
  rw: ['rw', 'rwx'],
  rwx: ['rwx'],
};

/** Whether the base's env list passes everything `entry` (a name, or a PREFIX* pattern) would. */
const envCovered = (entry: string, base: string[]): boolean =>
  entry.endsWith('*')
    ? base.some((b) => b.endsWith('*') && entry.startsWith(b.slice(0, -1)))
    : base.some((b) => (b.endsWith('*') ? entry.startsWith(b.slice(0, -1)) : b === entry));

/**
 * Applies a project's `.ollie-sandbox.yaml` to `base`. A project can only take away: each list it sets
 * replaces the base's list and every entry must already be granted (at least as strongly) by the base; `deny`
 * adds denied paths; the network can be switched off or limited to fewer ports; env can drop variables;
 * isolation can only be turned on. Anything wider is an error naming the line.
 */
export function narrow(base: SandboxPolicy, file: string, text: string, ctx: PolicyContext): SandboxPolicy {
  const f = parseFile(file, text, ctx);
  const fail = (key: string, what: string, line?: number): never => {
    throw new PolicyError(`${file}:${line ?? f.at.get(key) ?? f.at.get(key.split('.')[0] ?? '') ?? 1}: ${what}`);
  };
  checkDenied(f, ctx);
  const out: SandboxPolicy = structuredClone(base);
  out.sources = [...base.sources, file];
  // Compared resolved: "{CWD}/link" naming / or ~/.ssh through a symlink is where the link points, not the workspace.
  const workspace = canonical(ctx.cwd);
  const execRoots = base.execRoots.map(canonical);
  const granted = (p: string, a: Access): boolean =>
    COVERS[a].some((level) => base.filesystem[level].some((d) => within(p, canonical(d)))) ||
    // The base's readable paths are executable in the exec roots (policyArgs), so rox/rwx there is no wider.
    ((a === 'rox' || a === 'rwx') && execRoots.some((r) => within(p, r)) && granted(p, a === 'rox' ? 'ro' : 'rw'));
  for (const a of ACCESS) {
    const entries = f.filesystem[a];
    if (!entries) continue;
    entries.forEach((p, i) => {
      const real = canonical(p);
      if (within(real, workspace) || granted(real, a)) return;
      const via = real === p ? '' : ` (it resolves to ${real})`;
      fail(
        `filesystem.${a}`,
        `filesystem.${a}: ${p}${via} is not granted ${a} by ${base.sources[0]} and is not inside the workspace ${workspace}; a project file can only narrow the policy or add paths inside the workspace`,
        f.lines[a]?.[i],
      );
    });
    out.filesystem[a] = entries;
  }
  if (f.filesystem.deny) out.filesystem.deny = [...out.filesystem.deny, ...f.filesystem.deny];

  const n = f.network;
  if (n.enabled === true && !base.network.enabled)
    fail(
      'network.enabled',
      `network.enabled: the network is off in ${base.sources[0]}; a project file cannot turn it on`,
    );
  if (n.unix === true && !base.network.unix)
    fail(
      'network.unix',
      `network.unix: Unix sockets are off in ${base.sources[0]}; a project file cannot turn them on`,
    );
  if (n.enabled === false) out.network = { enabled: false, bindTcp: [], connectTcp: [], unix: out.network.unix };
  if (n.unix === false) out.network.unix = false;
  for (const [key, k] of [
    ['bind_tcp', 'bindTcp'],
    ['connect_tcp', 'connectTcp'],
  ] as const) {
    const ports = n[k];
    if (!ports) continue;
    if (!out.network.enabled && ports.length)
      fail(`network.${key}`, `network.${key}: the network is off; there are no ports to narrow`);
    const allowed = base.network[k];
    // A base with the network on and no port list allows every port; otherwise only its listed ones.
    const open = base.network.enabled && base.network.bindTcp.length === 0 && base.network.connectTcp.length === 0;
    for (const port of ports) {
      if (!open && !allowed.includes(port))
        fail(`network.${key}`, `network.${key}: port ${port} is not allowed by ${base.sources[0]}`);
    }
    out.network[k] = ports;
  }
  if (n.enabled !== false && (n.bindTcp || n.connectTcp)) {
    // Listing only one kind of port closes the other kind when the base left TCP open.
    out.network.bindTcp = n.bindTcp ?? (base.network.bindTcp.length ? base.network.bindTcp : []);
    out.network.connectTcp = n.connectTcp ?? (base.network.connectTcp.length ? base.network.connectTcp : []);
  }

  for (const [k, key] of [
    ['signals', 'signals'],
    ['abstractUnix', 'abstract_unix'],
    ['gitHooks', 'git_hooks'],
    ['startupFiles', 'startup_files'],
    ['terminals', 'terminals'],
  ] as const) {
    if (f.isolate[k] === false && base.isolate[k])
      fail(`isolate.${key}`, `isolate.${key}: a project file cannot turn isolation off`);
    if (f.isolate[k]) out.isolate[k] = true;
  }

  const wider = widenedLimit(base.limits, f.limits);
  if (wider) fail(`limits.${wider}`, `limits.${wider}: a project file can only lower a limit of ${base.sources[0]}`);
  out.limits = { ...out.limits, ...f.limits };

  try {
    out.checkpoint = narrowCheckpointRules(
      base.checkpoint ?? baseCheckpointRules(undefined),
      f.checkpoint,
      `${file}:${f.at.get('checkpoint') ?? 1}`,
    );
  } catch (e) {
    throw new PolicyError((e as Error).message);
  }

  if (f.env) {
    for (const name of f.env) {
      if (!envCovered(name, base.env))
        fail('env', `env: ${name} is not passed by ${base.sources[0]}; a project file can only drop variables`);
    }
    out.env = f.env;
  }
  return out;
}
