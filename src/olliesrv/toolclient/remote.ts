/**
 * A toolsrv on another machine, over the system OpenSSH client (`ssh`): the user's agent, keys, known_hosts,
 * ~/.ssh/config aliases and ProxyJump all apply as they do for the user's own `ssh`.
 *
 * On first use the toolsrv bundle (dist/toolsrv, the chunks it loads), the shipped tools and policy (data/), the
 * native helpers (native/build, prebuilt for this machine's architecture; built there with the remote's `cc`
 * otherwise) and the one npm package toolsrv loads (yaml) go as one tar stream into a versioned cache directory
 * on the remote, ~/.cache/ollie/remote/VERSION-HASH (0700). Then
 *
 *   ssh -T -L LOCAL.sock:REMOTE.sock HOST /bin/sh -c 'exec node …/dist/toolsrv/main.js --socket REMOTE.sock …'
 *
 * starts toolsrv there with the secret as the first line of the channel's stdin (never a command line), and every
 * 9P connection olliesrv opens to LOCAL.sock (in the private runtime directory) is an SSH channel to toolsrv's
 * Unix socket on the remote: no TCP port is opened on either side. EOF on the channel's stdin, which follows
 * from the ssh process ending or the connection dropping, ends toolsrv and every process it runs, as locally.
 *
 * Nothing of the local daemon is forwarded: tools there get no OLLIE_ADDR and no token (session-tools.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { machine } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { confine } from '../auth/confined.js';
import { handshakeToolsrv } from './handshake.js';
import { TOOLSRV_ENTRY, type ToolsrvProcess } from './spawn.js';

/** `[user@]host[:port]` or a Host alias of the ssh config, as given and as ssh takes it. */
export interface RemoteTarget {
  /** What the user wrote (normalised), shown in session/idx and messages. */
  readonly label: string;
  /** The ssh destination: `user@host` or `host`. */
  readonly dest: string;
  readonly port?: number;
}

// Letters, digits, '.', '_', '-' (and ':' inside brackets for an IPv6 address); never a leading '-', which ssh
// would take as an option (`-oProxyCommand=…`).
const REMOTE_RE =
  /^(?:([A-Za-z0-9._][A-Za-z0-9._-]{0,63})@)?([A-Za-z0-9_][A-Za-z0-9._-]{0,252}|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/;

/** Parses `[user@]host[:port]`; throws naming the value when it is not one. */
export function parseRemote(text: string): RemoteTarget {
  const s = text.trim();
  const m = REMOTE_RE.exec(s);
  if (!m)
    throw new Error(
      `remote ${JSON.stringify(text)}: expected [user@]host[:port] or a Host alias of ~/.ssh/config (letters, digits, '.', '_', '-'; not starting with '-')`,
    );
  const [, user, host, port] = m;
  const p = port === undefined ? undefined : Number(port);
  if (p !== undefined && (p < 1 || p > 65535))
    throw new Error(`remote ${JSON.stringify(text)}: port ${port} is not between 1 and 65535`);
  const bare = host!.startsWith('[') ? host!.slice(1, -1) : host!;
  return { label: s, dest: user ? `${user}@${bare}` : bare, ...(p !== undefined && { port: p }) };
}

/** How ssh is run: the binary and an ssh config file (`-F`) instead of ~/.ssh/config. */
export interface SshSettings {
  /** The ssh binary (default `ssh` from PATH). */
  ssh?: string;
  /** An ssh_config file given to every ssh run with -F ($OLLIE_SSH_CONFIG); default: ssh's own (~/.ssh/config). */
  configFile?: string;
}

/** The settings from the environment: $OLLIE_SSH (the binary) and $OLLIE_SSH_CONFIG (the -F file). */
export function sshSettingsFromEnv(env: NodeJS.ProcessEnv): SshSettings {
  return {
    ...(env.OLLIE_SSH && { ssh: env.OLLIE_SSH }),
    ...(env.OLLIE_SSH_CONFIG && { configFile: env.OLLIE_SSH_CONFIG }),
  };
}

/** The Host aliases of an ssh config (patterns with wildcards or negations left out): for the GUI's host list. */
export function sshConfigHosts(text: string): string[] {
  const out = new Set<string>();
  for (const raw of text.split('\n')) {
    const m = /^\s*Host\s+(.+?)\s*$/i.exec(raw.replace(/#.*/, ''));
    if (!m) continue;
    for (const h of m[1]!.split(/\s+/)) if (h && !/[*?!]/.test(h) && REMOTE_RE.test(h)) out.add(h);
  }
  return [...out];
}

/** A word quoted for a POSIX shell (the remote's /bin/sh). */
export function shq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** `ssh [-F CONFIG] [-p PORT] OPTIONS -- DEST COMMAND`. BatchMode: never ask a question on a terminal we do not have. */
function sshArgs(t: RemoteTarget, s: SshSettings, extra: string[], command: string): string[] {
  return [
    ...(s.configFile ? ['-F', s.configFile] : []),
    ...(t.port !== undefined ? ['-p', String(t.port)] : []),
    '-T',
    '-o',
    'BatchMode=yes',
    '-o',
    'ConnectTimeout=15',
    '-o',
    'ServerAliveInterval=5',
    '-o',
    'ServerAliveCountMax=3',
    ...extra,
    '--',
    t.dest,
    command,
  ];
}

/** Runs one ssh command to completion with `input` on its stdin; its stdout, or an error naming the host. */
function sshRun(
  t: RemoteTarget,
  s: SshSettings,
  command: string,
  input: Buffer | string,
  what: string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(s.ssh ?? 'ssh', sshArgs(t, s, [], command), { stdio: ['pipe', 'pipe', 'pipe'] });
    confine(child);
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-2000)));
    child.stdin.on('error', () => undefined);
    child.once('error', (e) => reject(new Error(`${what} on ${t.label}: cannot run ${s.ssh ?? 'ssh'}: ${e.message}`)));
    child.once('close', (code) => {
      if (code === 0) resolve(out);
      else
        reject(
          new Error(
            `${what} on ${t.label} failed (ssh exit ${code}): ${(err.trim() || out.trim()).split('\n').slice(-3).join(' / ')}`,
          ),
        );
    });
    child.stdin.end(input);
  });
}

/** The package root of this installation (dist/ and data/ beside each other). */
const root = (): string => join(dirname(TOOLSRV_ENTRY), '..', '..');

/** dist/toolsrv/main.js and every chunk it imports, statically or lazily, as paths relative to ROOT. */
function bundleFiles(): string[] {
  const seen = new Set<string>();
  const visit = (f: string): void => {
    if (seen.has(f)) return;
    seen.add(f);
    const text = readFileSync(f, 'utf8');
    for (const m of text.matchAll(/(?:from\s*|import\s*\(\s*|import\s+)["']([^"']+)["']/g)) {
      // Only real chunks: bundled sources keep JSDoc types such as `import('./types/index')` in their text.
      const target = join(dirname(f), m[1]!);
      if (m[1]!.startsWith('.') && m[1]!.endsWith('.js') && existsSync(target)) visit(target);
    }
  };
  visit(TOOLSRV_ENTRY);
  return [...seen].map((f) => relative(root(), f));
}

/** Every file (and symlink) under `dir`, relative to ROOT. */
function tree(dir: string, skip: (name: string) => boolean = () => false): string[] {
  const out: string[] = [];
  const abs = join(root(), dir);
  if (!existsSync(abs)) return out;
  for (const e of readdirSync(abs, { withFileTypes: true })) {
    if (skip(e.name)) continue;
    const rel = join(dir, e.name);
    if (e.isDirectory()) out.push(...tree(rel, skip));
    else out.push(rel);
  }
  return out;
}

/** The files a remote toolsrv needs, relative to ROOT. */
function packageFiles(): string[] {
  return [
    'package.json',
    ...bundleFiles(),
    ...tree('data'),
    // The helpers prebuilt here (statically linked where the C library allows), and the sources to build them there.
    ...tree(join('native', 'build'), (n) => n.startsWith('obj-') || n.endsWith('.tmp') || n === 'peercred.node'),
    ...tree('native', (n) => n === 'build' || n === 'addon' || n === 'README.md'),
    ...tree(join('node_modules', 'yaml'), (n) => n === 'browser'),
  ].filter((f) => existsSync(join(root(), f)) || isLink(join(root(), f)));
}

function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

interface RemotePackage {
  /** VERSION-HASH: the cache directory's name on the remote. */
  readonly id: string;
  readonly files: string[];
}

let pkgCache: { key: string; pkg: RemotePackage } | undefined;

/** The package to ship, named by version and a hash of its contents (what changes when dist/ is rebuilt). */
export function remotePackage(): RemotePackage {
  const entryStat = lstatSync(TOOLSRV_ENTRY);
  const key = `${entryStat.mtimeMs}`;
  if (pkgCache?.key === key) return pkgCache.pkg;
  const files = packageFiles().sort();
  const h = createHash('sha256');
  for (const f of files) {
    h.update(`${f}\0`);
    h.update(isLink(join(root(), f)) ? `->${readlinkSync(join(root(), f))}` : readFileSync(join(root(), f)));
    h.update('\0');
  }
  const version =
    (JSON.parse(readFileSync(join(root(), 'package.json'), 'utf8')) as { version?: string }).version ?? '0';
  const pkg = { id: `${version}-${h.digest('hex').slice(0, 16)}`, files };
  pkgCache = { key, pkg };
  return pkg;
}

/** The package as a gzipped tar stream (GNU or BSD tar; symlinks kept as symlinks). */
function tarball(files: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('tar', ['-czf', '-', '-C', root(), '--no-recursion', '-T', '-'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const chunks: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (d: Buffer) => chunks.push(d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.once('error', (e) => reject(new Error(`cannot run tar to pack the remote toolsrv: ${e.message}`)));
    child.once('close', (code) =>
      code === 0
        ? resolve(Buffer.concat(chunks))
        : reject(new Error(`tar failed packing the remote toolsrv: ${err.trim()}`)),
    );
    child.stdin.end(`${files.join('\n')}\n`);
  });
}

/** uname -m names for Node's os.machine() of the same architecture. */
const sameArch = (a: string, b: string): boolean => {
  const n = (x: string): string => ({ arm64: 'aarch64', amd64: 'x86_64' })[x] ?? x;
  return n(a) === n(b);
};

/**
 * Builds the helpers from the shipped sources with the remote's cc: the same objects and links as
 * scripts/build-native.mjs, without Node (the peer-credentials module is olliesrv's, not toolsrv's).
 */
export function buildScript(files: string[]): string {
  const tools = files
    .filter((f) => /^native\/tools\/[^/]+\.c$/.test(f))
    .map((f) => f.slice('native/tools/'.length, -2));
  const libs = files.filter((f) => /^native\/tools\/lib\/[^/]+\.c$/.test(f));
  const table = [
    ...tools.map((t) => `int ollie_tool_${t}(int, char **);`),
    'struct builtin_tool { const char *name; int (*main)(int, char **); };',
    'const struct builtin_tool builtin_tools[] = {',
    ...tools.map((t) => `  {"${t}", ollie_tool_${t}},`),
    '  {0, 0},',
    '};',
  ].join('\n');
  const f = '-O2 -std=gnu11 -Wall';
  return [
    'command -v cc >/dev/null || { echo "no C compiler (cc) to build the sandbox helpers" >&2; exit 4; }',
    'rm -rf native/build && mkdir -p native/build/obj',
    ...tools.map((t) => `cc ${f} -Dmain=ollie_tool_${t} -c -o native/build/obj/${t}.o native/tools/${t}.c`),
    `printf '%s\\n' ${shq(table)} > native/build/obj/tools.c`,
    `objs="${tools.map((t) => `native/build/obj/${t}.o`).join(' ')} native/build/obj/tools.c ${libs.join(' ')}"`,
    `cc -static ${f} -o native/build/ollie-sandbox native/ollie-sandbox.c $objs 2>/dev/null || cc ${f} -o native/build/ollie-sandbox native/ollie-sandbox.c $objs`,
    `cc -static ${f} -o native/build/ollie-spawner native/ollie-spawner.c 2>/dev/null || cc ${f} -o native/build/ollie-spawner native/ollie-spawner.c`,
    ...tools.map((t) => `ln -s ollie-sandbox native/build/${t}`),
    'rm -rf native/build/obj',
  ].join('\n');
}

interface Probe {
  cache: string;
  runtime: string;
  arch: string;
  node: string;
  have: boolean;
}

/** One ssh round: the remote's cache and runtime directories (made 0700), its architecture and node. */
async function probe(t: RemoteTarget, s: SshSettings, id: string): Promise<Probe> {
  const script = [
    'umask 077',
    'cache="${XDG_CACHE_HOME:-$HOME/.cache}/ollie/remote"',
    'mkdir -p "$cache" && chmod 700 "$cache" "${cache%/remote}" || exit 3',
    'rt="${XDG_RUNTIME_DIR:-/tmp}/ollie-remote-$(id -u)"',
    'mkdir -p "$rt" 2>/dev/null',
    // A directory someone else made in /tmp beforehand, or a link, would let them reach the socket.
    '[ -d "$rt" ] && [ ! -L "$rt" ] && [ -O "$rt" ] || { echo "$rt is not a directory of ours" >&2; exit 3; }',
    'chmod 700 "$rt"',
    'echo "cache=$cache"; echo "runtime=$rt"; echo "arch=$(uname -m)"; echo "node=$(command -v node)"',
    `[ -f "$cache/${id}/.complete" ] && echo have=1`,
    'exit 0',
  ].join('\n');
  const out = await sshRun(t, s, `/bin/sh -c ${shq(script)}`, '', 'preparing the remote toolsrv');
  const kv = Object.fromEntries(
    out
      .split('\n')
      .filter((l) => l.includes('='))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  if (!kv.cache || !kv.runtime)
    throw new Error(
      `preparing the remote toolsrv on ${t.label}: unexpected answer ${JSON.stringify(out.slice(0, 200))}`,
    );
  if (!kv.node)
    throw new Error(
      `no node on ${t.label}: the remote toolsrv needs Node 20+ in the PATH of a non-interactive ssh session`,
    );
  return { cache: kv.cache, runtime: kv.runtime, arch: kv.arch ?? '', node: kv.node, have: kv.have === '1' };
}

/** Copies the package into CACHE/ID on the remote (atomically: a half-copied one is never used). */
async function install(t: RemoteTarget, s: SshSettings, p: Probe, pkg: RemotePackage): Promise<void> {
  const dir = `${p.cache}/${pkg.id}`;
  const build = sameArch(p.arch, machine()) ? '' : buildScript(pkg.files);
  const script = [
    'set -e',
    'umask 077',
    `d=${shq(dir)}`,
    't="$d.tmp.$$"',
    'rm -rf "$t"; mkdir -p "$t"',
    'tar -xzf - -C "$t"',
    ...(build ? ['cd "$t"', build, 'cd /'] : []),
    'touch "$t/.complete"',
    // Two daemons installing at once: the first rename wins, the other copy goes.
    '[ -e "$d" ] || mv "$t" "$d" 2>/dev/null || true',
    'rm -rf "$t"',
    '[ -f "$d/.complete" ]',
  ].join('\n');
  await sshRun(t, s, `/bin/sh -c ${shq(script)}`, await tarball(pkg.files), 'installing the remote toolsrv');
}

export interface RemoteSpawnOptions {
  remote: RemoteTarget;
  ssh?: SshSettings;
  /** The local private runtime directory: the forwarded socket goes there. */
  runtimeDir: string;
  yolo?: boolean;
  sessionId?: string;
  idleMs?: number;
  graceMs?: number;
  procTtlMs?: number;
  startTimeoutMs?: number;
  log?: (m: string) => void;
}

export interface RemoteToolsrvProcess extends ToolsrvProcess {
  /** The remote, as the user named it. */
  readonly host: string;
  /** Milliseconds spent copying the package (first use on this host), 0 when it was there. */
  readonly setupMs: number;
}

/** Prepares the remote (first use: copies the package) and starts toolsrv there, reachable at a local socket. */
export async function spawnRemoteToolsrv(o: RemoteSpawnOptions): Promise<RemoteToolsrvProcess> {
  const t = o.remote;
  const s = o.ssh ?? {};
  const log = o.log ?? ((m: string) => process.stderr.write(`olliesrv: ${m}\n`));
  const pkg = remotePackage();
  const p = await probe(t, s, pkg.id);
  let setupMs = 0;
  if (!p.have) {
    const t0 = performance.now();
    log(`copying the toolsrv package ${pkg.id} to ${t.label}:${p.cache}`);
    await install(t, s, p, pkg);
    setupMs = performance.now() - t0;
  }
  mkdirSync(o.runtimeDir, { recursive: true, mode: 0o700 });
  const tag = randomBytes(6).toString('hex');
  const socket = join(o.runtimeDir, `toolsrv-r-${tag}.sock`);
  if (Buffer.byteLength(socket) > 107) throw new Error(`toolsrv socket path too long for a Unix socket: ${socket}`);
  const remoteSocket = `${p.runtime}/toolsrv-${tag}.sock`;
  const dir = `${p.cache}/${pkg.id}`;
  // The cache is in the remote HOME, which a session's cwd may cover: no tool may write the helpers it runs.
  const args = [
    `${dir}/dist/toolsrv/main.js`,
    '--socket',
    remoteSocket,
    '--tools-dir',
    `${dir}/data/tools`,
    '--seal',
    p.cache,
  ];
  if (o.yolo) args.push('--yolo');
  if (o.sessionId) args.push('--session', o.sessionId);
  if (o.idleMs !== undefined) args.push('--idle-ms', String(o.idleMs));
  if (o.graceMs !== undefined) args.push('--grace-ms', String(o.graceMs));
  if (o.procTtlMs !== undefined) args.push('--proc-ttl-ms', String(o.procTtlMs));
  const command = `/bin/sh -c ${shq(`rm -f ${shq(remoteSocket)}; exec ${shq(p.node)} ${args.map(shq).join(' ')}`)}`;
  const secret = randomBytes(32).toString('hex');
  rmSync(socket, { force: true });
  const child: ChildProcess = spawn(
    s.ssh ?? 'ssh',
    sshArgs(
      t,
      s,
      ['-o', 'ExitOnForwardFailure=yes', '-o', 'StreamLocalBindUnlink=yes', '-L', `${socket}:${remoteSocket}`],
      command,
    ),
    {
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  const timeout = o.startTimeoutMs ?? 30000;
  const started = await handshakeToolsrv(child, {
    secret,
    timeoutMs: timeout,
    log: (l) => log(`${t.label}: ${l}`),
    onExit: () => rmSync(socket, { force: true }),
    timeoutMessage: `the toolsrv on ${t.label} did not start within ${timeout} ms`,
    spawnError: (e) => new Error(`cannot run ${s.ssh ?? 'ssh'} for ${t.label}: ${e.message}`),
    exitMessage: (code, errTail) =>
      `the toolsrv on ${t.label} ended during start (ssh exit ${code}): ${errTail.trim().split('\n').slice(-3).join(' / ')}`,
  });
  return {
    socket,
    secret,
    child,
    setupMs,
    exited: started.exited,
    host: t.label,
    pidFile: '',
    pid: child.pid!,
    get alive() {
      return started.alive;
    },
    stop: (graceMs?: number) => started.stop(graceMs),
  };
}
