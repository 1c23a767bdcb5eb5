/**
 * The filesystem side of the sandbox policy, attacked the way a model scripting tool calls would: with the real
 * helper on the real kernel, real files in a fake HOME, and a real toolsrv process where the daemon's wiring matters
 * (--config/--data, spill files).
 *
 * Each attack asserts what the model must not get (a key's bytes, a write outside, a file created through a
 * planted link); the controls assert that honest work still runs.
 */
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { forModel } from '../../src/olliesrv/agent/dispatch.js';
import { openDatabase } from '../../src/olliesrv/store/db.js';
import { ToolClient } from '../../src/olliesrv/toolclient/client.js';
import { spawnToolsrv, TOOLSRV_ENTRY, type ToolsrvProcess } from '../../src/olliesrv/toolclient/spawn.js';
import { landlockStatus, loadPolicy, PACKAGE_ROOT, type SandboxPolicy } from '../../src/toolsrv/sandbox/index.js';
import { trust } from '../../src/toolsrv/sandbox/trust.js';
import { harness } from '../olliesrv/agent-harness.js';
import { until } from '../toolsrv/helpers.js';
import {
  buildNative,
  makeWorld,
  runSandboxed,
  runTool,
  TOOLS_DIR,
  writePolicy,
  type World,
} from '../toolsrv/sandbox-helpers.js';

const status = landlockStatus();
const ready = status.abi >= 6 && existsSync(TOOLSRV_ENTRY);
if (!ready) {
  // Loud, not silent: these tests prove holes closed, so not running them must be visible.
  console.error(
    `\n*** test/security/policy.test.ts SKIPPED: needs Landlock ABI >= 6 and a build (npm run build:node); have ABI ${status.abi}${status.reason ? ` (${status.reason})` : ''}, ${existsSync(TOOLSRV_ENTRY) ? 'built' : `${TOOLSRV_ENTRY} missing`} ***\n`,
  );
}

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

/** A user's sandbox.yaml that reads HOME (a common choice): the denied paths must be cut out of it. */
const HOME_READABLE = `filesystem:
  rox: [/usr, /bin, /lib, /lib64, /lib32]
  ro: [/etc, /proc, "{HOME}"]
  rw: ["{CWD}", "{TMPDIR}", /dev/null]
env: [PATH, HOME, LANG]
`;

const shell = (command: string, policy?: SandboxPolicy, cwd?: string) =>
  cwd
    ? runSandboxed(policy!, [join(TOOLS_DIR, 'shell')], { cwd, input: JSON.stringify({ command }) })
    : runTool(w, 'shell', { command }, policy ? { policy } : {});

/** What the model gets for a shell call: the refusal when the policy does not load (as toolsrv refuses), else the output. */
async function attempt(command: string): Promise<string> {
  let policy: SandboxPolicy;
  try {
    policy = loadPolicy(w);
  } catch (e) {
    return `refused: ${(e as Error).message}`;
  }
  return (await shell(command, policy)).out;
}

describe.skipIf(!ready)("a project's .ollie-sandbox.yaml cannot widen the policy", () => {
  beforeEach(() => void writePolicy(w, HOME_READABLE));

  test('naming ~/.ssh inside a readable HOME is an error, and the key stays unreadable', async () => {
    writePolicy(w, 'filesystem:\n  ro:\n    - "~/.ssh"\n  rw: ["{CWD}"]\n', 'project');
    const out = await attempt(`cat ${w.home}/.ssh/id_ed25519`);
    expect(out).not.toContain('PRIVATE KEY');
    expect(out).toMatch(
      /\.ollie-sandbox\.yaml:3: filesystem\.ro: ~?.*\.ssh is .*\.ssh, which no policy file can grant/,
    );
  });

  test('a symlink in the workspace to ~/.ssh grants nothing: the rule is judged where it resolves', async () => {
    symlinkSync(join(w.home, '.ssh'), join(w.cwd, 'keys'));
    writePolicy(w, 'filesystem:\n  rw:\n    - "{CWD}"\n    - "{CWD}/keys"\n', 'project');
    const out = await attempt(`cat keys/id_ed25519; echo planted > keys/authorized_keys`);
    expect(out).not.toContain('PRIVATE KEY');
    expect(existsSync(join(w.home, '.ssh', 'authorized_keys'))).toBe(false);
    expect(out).toMatch(
      /:4: filesystem\.rw: .*\/keys \(it resolves to .*\/home\/\.ssh\) is .*\.ssh, which no policy file can grant/,
    );
  });

  test('a symlink in the workspace to / is not "inside the workspace"', async () => {
    symlinkSync('/', join(w.cwd, 'up'));
    writePolicy(w, 'filesystem:\n  rw: ["{CWD}", "{CWD}/up"]\n', 'project');
    const out = await attempt(`echo pwned > up${w.home}/other/notes.txt`);
    expect(readFileSync(join(w.home, 'other', 'notes.txt'), 'utf8')).toBe('notes\n');
    expect(out).toMatch(
      /:2: filesystem\.rw: .*\/up \(it resolves to \/\) is not granted rw by .* and is not inside the workspace/,
    );
  });

  test('adding a real directory inside the workspace is allowed (and honest work there runs)', async () => {
    mkdirSync(join(w.cwd, 'build'));
    writePolicy(w, 'filesystem:\n  ro: ["{CWD}"]\n  rw: ["{CWD}/build"]\n', 'project');
    const out = await attempt('echo made > build/out.txt && cat build/out.txt; echo no > top.txt');
    expect(out).toContain('made');
    expect(existsSync(join(w.cwd, 'top.txt'))).toBe(false);
  });
});

describe.skipIf(!ready)('a rule path swapped for a symlink after the policy loaded grants nothing', () => {
  test("a sub-agent's workspace replaced by a link to ~/.ssh (by its parent, inside the sandbox)", async () => {
    const sub = join(w.cwd, 'sub');
    mkdirSync(sub);
    // toolsrv loads a policy once per cwd and reuses it: the sub-agent's is loaded while sub is a directory.
    const subPolicy = loadPolicy({ ...w, cwd: sub });
    const parent = await shell(`rmdir sub && ln -s ${w.home}/.ssh sub && echo swapped`);
    expect(parent.out).toContain('swapped');
    const r = await shell(
      `cat ${w.home}/.ssh/id_ed25519; echo planted > ${w.home}/.ssh/authorized_keys`,
      subPolicy,
      sub,
    );
    expect(r.out).not.toContain('PRIVATE KEY');
    expect(existsSync(join(w.home, '.ssh', 'authorized_keys'))).toBe(false);
    expect(r.out).toMatch(/ollie-sandbox: .*\/proj\/sub now resolves to .*\/\.ssh \(a symbolic link\): not granted/);
  });
});

describe.skipIf(!ready)("the always-denied paths cannot be granted by the user's sandbox.yaml either", () => {
  test.each([
    ['the config dir', 'ro', '"{XDG_CONFIG_HOME}/ollie"', /config/],
    ['a file in the config dir', 'ro', '"{XDG_CONFIG_HOME}/ollie/backends.json"', /config/],
    ['the data dir', 'rw', '"{XDG_DATA_HOME}/ollie"', /share\/ollie/],
    ['the runtime dir', 'ro', '"{RUNTIME}"', /run\/ollie/],
    ['the user tool dir, writable', 'rw', '"{XDG_CONFIG_HOME}/ollie/tools"', /config/],
  ])('%s → FILE:LINE, and the secret stays unreadable', async (_what, level, path, dir) => {
    const file = writePolicy(
      w,
      `filesystem:\n  rox: [/usr, /bin, /lib, /lib64]\n  ${level}:\n    - "{CWD}"\n    - ${path}\n`,
    );
    const out = await attempt(`cat ${w.configDir}/backends.json`);
    expect(out).not.toContain('sk-secret');
    expect(out).toContain(`refused: ${file}:5: filesystem.${level}: `);
    expect(out).toMatch(dir);
    expect(out).toMatch(/which no policy file can grant/);
  });

  test('a --data dir outside the XDG ones, named in sandbox.yaml (or through a link to it), is an error too', async () => {
    const data = join(w.root, 'custom-data');
    mkdirSync(data);
    writeFileSync(join(data, 'secret.txt'), 'data-secret\n');
    symlinkSync(data, join(w.cwd, 'd'));
    const file = writePolicy(
      w,
      `filesystem:\n  rox: [/usr, /bin, /lib, /lib64]\n  rw: ["{CWD}"]\n  ro:\n    - "{CWD}/d"\n`,
    );
    let out: string;
    try {
      const p = loadPolicy({ ...w, dataDir: data });
      out = (await shell(`cat ${data}/secret.txt`, p)).out;
    } catch (e) {
      out = (e as Error).message;
    }
    expect(out).not.toContain('data-secret');
    expect(out).toBe(
      `${file}:5: filesystem.ro: ${w.cwd}/d (it resolves to ${data}) is ${data}, which no policy file can grant (Ollie's config, data and runtime dirs, ~/.ssh and ~/.gnupg are always denied; a tool that needs them must be run with bypass and a person's approval)`,
    );
  });

  test('the user tool dir may be named read+exec (documented), and it runs', async () => {
    const tools = join(w.configDir, 'tools');
    mkdirSync(tools);
    writeFileSync(join(tools, 'mine'), '#!/bin/sh\necho my-tool-ran\n', { mode: 0o755 });
    writePolicy(
      w,
      'filesystem:\n  rox: [/usr, /bin, /lib, /lib64, "{XDG_CONFIG_HOME}/ollie/tools"]\n  rw: ["{CWD}"]\n',
    );
    const out = await attempt(`${tools}/mine; cat ${w.configDir}/backends.json`);
    expect(out).toContain('my-tool-ran');
    expect(out).not.toContain('sk-secret');
  });
});

describe.skipIf(!ready)('trust: a project file applies only as the owner trusted it', () => {
  test('untrusted → ignored with a notice; trusted → applied; changed → refused; the list is out of reach', async () => {
    // The project file narrows: no writes in the workspace. Untrusted, it must change nothing.
    const file = writePolicy(w, 'filesystem:\n  ro: ["{CWD}"]\n  rw: []\n', 'project', { trusted: false });
    let p = loadPolicy(w);
    expect(p.sources).toHaveLength(1);
    expect(p.notices.join('\n')).toContain(`${file} is not trusted, so it was ignored`);
    expect(p.notices.join('\n')).toContain(`ollie trust ${file}`);
    expect((await shell('echo a > a.txt && echo wrote-a', p)).out).toContain('wrote-a');

    // The model tries to trust it itself: the list lives in the config dir, which the sandbox denies.
    const sha = execFileSync('sha256sum', [file], { encoding: 'utf8' }).split(' ')[0];
    const self = await shell(
      `printf '%s\\t%s\\n' ${sha} ${file} >> ${w.configDir}/trusted-projects; cat ${w.configDir}/trusted-projects`,
      p,
    );
    expect(existsSync(join(w.configDir, 'trusted-projects'))).toBe(false);
    expect(self.out).toMatch(/Permission denied/);
    expect(loadPolicy(w).sources).toHaveLength(1);

    trust(w.configDir, w.cwd);
    p = loadPolicy(w);
    expect(p.sources).toEqual([expect.stringContaining('sandbox.yaml'), file]);
    expect((await shell('echo b > b.txt && echo wrote-b', p)).out).not.toContain('wrote-b');

    // Changed since it was trusted: never the base policy again (the agent may be the one who changed it).
    writeFileSync(file, 'filesystem:\n  ro: ["{CWD}"]\n  rw: []\n# edited\n');
    expect(() => loadPolicy(w)).toThrow(`${file} was trusted, but it has changed since`);
  });

  test('a symlinked project file is never applied', () => {
    writeFileSync(join(w.home, 'other', 'policy.yaml'), 'filesystem:\n  ro: ["{CWD}"]\n');
    symlinkSync(join(w.home, 'other', 'policy.yaml'), join(w.cwd, '.ollie-sandbox.yaml'));
    expect(() => trust(w.configDir, w.cwd)).toThrow(/symbolic link: only a regular file can be trusted/);
    const p = loadPolicy(w);
    expect(p.sources).toHaveLength(1);
    expect(p.notices.join('\n')).toMatch(/is a symbolic link, so it was ignored/);
  });
});

describe.skipIf(!ready)('honest execution (controls)', () => {
  test('./configure, node_modules/.bin/x and a program in ~/.local/bin run under the default policy', async () => {
    writeFileSync(join(w.cwd, 'configure'), '#!/bin/sh\necho configured\n', { mode: 0o755 });
    mkdirSync(join(w.cwd, 'node_modules', 'x', 'bin'), { recursive: true });
    mkdirSync(join(w.cwd, 'node_modules', '.bin'));
    writeFileSync(join(w.cwd, 'node_modules', 'x', 'bin', 'x.sh'), '#!/bin/sh\necho x-ran\n', { mode: 0o755 });
    symlinkSync('../x/bin/x.sh', join(w.cwd, 'node_modules', '.bin', 'x'));
    mkdirSync(join(w.home, '.local', 'bin'), { recursive: true });
    copyFileSync('/bin/echo', join(w.home, '.local', 'bin', 'hello'));
    // A program built in the private tmp (go test, cargo build scripts) runs too.
    const r = await shell(
      `./configure && node_modules/.bin/x && ${w.home}/.local/bin/hello local-bin-ran && cp /bin/true "$TMPDIR/t" && "$TMPDIR/t" && echo tmp-ran`,
    );
    expect(r.out).toContain('configured');
    expect(r.out).toContain('x-ran');
    expect(r.out).toContain('local-bin-ran');
    expect(r.out).toContain('tmp-ran');
  });

  test('the always-denied paths stay denied when the workspace is HOME itself', async () => {
    writeFileSync(join(w.home, '.ssh', 'run-me'), '#!/bin/sh\necho ran-from-ssh\n', { mode: 0o755 });
    const p = loadPolicy({ ...w, cwd: w.home });
    const r = await shell(`${w.home}/.ssh/run-me; cat ${w.home}/.ssh/id_ed25519; echo ok`, p, w.home);
    expect(r.out).not.toContain('ran-from-ssh');
    expect(r.out).not.toContain('PRIVATE KEY');
    expect(r.out).toContain('ok');
  });

  test.each([
    ['not executable in the sandbox (EACCES)', true],
    ['missing (ENOENT)', false],
  ])('file_grep falls back to its built-in search when rg is %s', async (_what, planted) => {
    writeFileSync(join(w.cwd, 'src.txt'), 'alpha\nneedle here\nomega\n');
    const bin = join(w.home, 'other', 'bin');
    mkdirSync(bin, { recursive: true });
    if (planted) copyFileSync('/bin/true', join(bin, 'rg'));
    // rg on PATH in a directory the default policy does not grant: exactly what ~/somewhere/bin/rg meets.
    const r = await runTool(
      w,
      'file_grep',
      { pattern: 'needle' },
      { argv: [join(TOOLS_DIR, 'file_grep'), '--rg'], env: { PATH: `${bin}:/usr/bin:/bin` } },
    );
    expect(r.out).toContain('src.txt:2:needle here');
    expect(r.out).toContain('using the built-in search instead of rg');
    expect(r.code).toBe(0);
  });
});

describe.skipIf(!ready)('files at rest', () => {
  let umask: number;
  beforeEach(() => {
    umask = process.umask(0o022);
  });
  afterEach(() => void process.umask(umask));

  test('ollie.db, -wal and -shm are 0600 in a 0700 data dir, with umask 022', () => {
    const dir = join(w.root, 'data');
    const db = openDatabase(join(dir, 'ollie.db'));
    db.exec('CREATE TABLE t (x); INSERT INTO t VALUES (1)');
    try {
      const mode = (f: string) => (statSync(join(dir, f)).mode & 0o777).toString(8);
      expect(mode('.')).toBe('700');
      expect(['ollie.db', 'ollie.db-wal', 'ollie.db-shm'].map(mode)).toEqual(['600', '600', '600']);
    } finally {
      db.close();
    }
  });

  test('an existing loose database and data dir are tightened', () => {
    const dir = join(w.root, 'data');
    mkdirSync(dir, { mode: 0o755 });
    chmodSync(dir, 0o755);
    openDatabase(join(dir, 'ollie.db')).close();
    chmodSync(join(dir, 'ollie.db'), 0o644);
    openDatabase(join(dir, 'ollie.db')).close();
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'ollie.db')).mode & 0o777).toBe(0o600);
  });

  test.each([
    ['ollie.db', 'the database'],
    ['ollie.db-wal', 'the database file'],
  ])('a symlink planted at %s is refused; its target is untouched', (name, what) => {
    const dir = join(w.root, 'data');
    mkdirSync(dir, { mode: 0o700 });
    const target = join(w.home, 'other', 'notes.txt');
    symlinkSync(target, join(dir, name));
    expect(() => openDatabase(join(dir, 'ollie.db'))).toThrow(
      new RegExp(`${what} .*${name} is a symbolic link: refusing to follow it`),
    );
    expect(readFileSync(target, 'utf8')).toBe('notes\n');
  });

  test("a data dir that is a planted symlink, or another user's directory, is refused", () => {
    const elsewhere = join(w.root, 'elsewhere');
    mkdirSync(elsewhere);
    symlinkSync(elsewhere, join(w.root, 'data'));
    expect(() => openDatabase(join(w.root, 'data', 'ollie.db'))).toThrow(
      /the data directory .*data is a symbolic link/,
    );
    expect(existsSync(join(elsewhere, 'ollie.db'))).toBe(false);
    if (process.getuid?.() === 0) {
      const theirs = join(w.root, 'theirs');
      mkdirSync(theirs, { mode: 0o777 });
      chownSync(theirs, 65534, 65534);
      expect(() => openDatabase(join(theirs, 'ollie.db'))).toThrow(/belongs to uid 65534, not to you/);
    } else {
      console.error('policy.test.ts: the other-owner case needs root (chown); only the symlink case ran');
    }
  });

  test('a long output is spilled 0600 in 0700 dirs; a planted symlink at the spill dir is refused, not written through', () => {
    const big = {
      pid: 1,
      tool: 'shell',
      status: 'exited' as const,
      exit: 0,
      output: 'x'.repeat(40_000),
      outputBytes: 40_000,
    };
    const root = join(w.root, 'data', 'output');
    const ok = forModel(big, { root, dir: join(root, 'S1', 'A1'), name: 'call_1' });
    const spilled = join(root, 'S1', 'A1', 'call_1.txt');
    expect(ok.content).toContain(`The whole output is in ${spilled}`);
    expect(statSync(spilled).mode & 0o777).toBe(0o600);
    expect([root, join(root, 'S1'), join(root, 'S1', 'A1')].map((d) => statSync(d).mode & 0o777)).toEqual([
      0o700, 0o700, 0o700,
    ]);

    // Another user (or anything that could write there) plants the spill dir as a link to a place of its choosing.
    const root2 = join(w.root, 'data2', 'output');
    mkdirSync(join(w.root, 'data2'));
    const trap = join(w.root, 'trap');
    mkdirSync(trap, { mode: 0o777 });
    symlinkSync(trap, root2);
    const r = forModel(big, { root: root2, dir: join(root2, 'S1', 'A1'), name: 'call_1' });
    expect(r.content).toMatch(/The whole output could not be saved: the spill directory .*output is a symbolic link/);
    expect(existsSync(join(trap, 'S1'))).toBe(false);
    // A planted link at the file's own name is replaced, never written through.
    symlinkSync(join(w.home, 'other', 'notes.txt'), join(root, 'S1', 'A1', 'call_2.txt'));
    forModel(big, { root, dir: join(root, 'S1', 'A1'), name: 'call_2' });
    expect(readFileSync(join(w.home, 'other', 'notes.txt'), 'utf8')).toBe('notes\n');
    expect(lstatSync(join(root, 'S1', 'A1', 'call_2.txt')).isFile()).toBe(true);
  });
});

/** A real toolsrv process, as the daemon starts it with `--config DIR --data DIR`. */
describe.skipIf(!ready)('through a real toolsrv started with --config and --data', () => {
  let ts: ToolsrvProcess | undefined;
  const hosts: ToolClient[] = [];
  afterEach(async () => {
    for (const h of hosts.splice(0)) await h.close();
    await ts?.stop(500);
    ts = undefined;
  });

  /** Config and data dirs inside the workspace (`ollie serve --config ./.ollie/config --data ./.ollie/data`). */
  async function start(): Promise<{ config: string; data: string }> {
    const config = join(w.cwd, '.ollie', 'config');
    const data = join(w.cwd, '.ollie', 'data');
    mkdirSync(config, { recursive: true });
    mkdirSync(data, { recursive: true });
    writeFileSync(join(config, 'backends.conf'), '[x]\nkey = sk-config-secret\n');
    openDatabase(join(data, 'ollie.db')).close();
    writeFileSync(join(data, 'secret.txt'), 'data-secret\n');
    mkdirSync(join(w.cwd, 'src'));
    chmodSync(w.runtimeDir, 0o700);
    ts = await spawnToolsrv({
      runtimeDir: w.runtimeDir,
      name: 'sec',
      sessionId: 'S1',
      cwd: w.cwd,
      toolDirs: [TOOLS_DIR],
      configDir: config,
      dataDir: data,
      log: () => undefined,
    });
    return { config, data };
  }

  async function agent(id: string): Promise<ToolClient> {
    const h = await ToolClient.connect(ts!, id);
    hosts.push(h);
    await h.ctlLines(['load shell', 'load file_read']);
    return h;
  }

  test('the shell cannot read or write the config and data dirs named on the command line', async () => {
    const { config, data } = await start();
    const h = await agent('A1');
    const r = await h.call({
      tool: 'shell',
      args: {
        command: `cat ${config}/backends.conf ${data}/secret.txt; head -c 16 ${data}/ollie.db; echo x > ${data}/planted; ls ${config}; echo honest > src/ok.txt && cat src/ok.txt`,
      },
    });
    expect(r.output).not.toContain('sk-config-secret');
    expect(r.output).not.toContain('data-secret');
    expect(r.output).not.toContain('SQLite format');
    expect(existsSync(join(data, 'planted'))).toBe(false);
    expect(r.output).toContain('honest');
  });

  test("an agent reads its own spill files, not another agent's nor another session's", async () => {
    const { data } = await start();
    const spill = (s: string, a: string, text: string): string => {
      const r = forModel(
        {
          pid: 1,
          tool: 'shell',
          status: 'exited',
          exit: 0,
          output: `${text}\n${'.'.repeat(40_000)}`,
          outputBytes: 40_100,
        },
        { root: join(data, 'output'), dir: join(data, 'output', s, a), name: 'c1' },
      );
      const m = /The whole output is in (\S+)/.exec(r.content);
      expect(m).not.toBeNull();
      return m![1]!;
    };
    const own = spill('S1', 'A1', 'own-output');
    const peer = spill('S1', 'A2', 'peer-output');
    const other = spill('S2', 'A1', 'other-session-output');
    const h = await agent('A1');
    const read = async (path: string) => (await h.call({ tool: 'file_read', args: { path, limit: 1 } })).output;
    expect(await read(own)).toContain('own-output');
    expect(await read(peer)).not.toContain('peer-output');
    expect(await read(other)).not.toContain('other-session-output');
    const sh = await h.call({
      tool: 'shell',
      args: {
        command: `cat ${join(data, 'output', 'S2', 'A1', 'c1.txt')} | head -1; ls ${join(data, 'output')} && echo LISTED`,
      },
    });
    expect(sh.output).not.toContain('other-session-output');
    expect(sh.output).not.toContain('LISTED');
  });
});

/** The daemon, the mock LLM and a toolsrv per session: the model's own tool calls, scripted. */
describe.skipIf(!ready)('end to end: a model pages through its own spilled output', () => {
  test("file_read of the spill path the model was told works for its agent, and is denied to another session's", async () => {
    const h = await harness();
    try {
      const a = await h.agent();
      const other = await h.agent();
      const spilled = join(h.dataDir, 'output', a.sid, a.aid, 'big1.txt');
      h.mock.script(
        [{ toolCalls: [{ id: 'big1', name: 'shell', args: { command: 'seq 1 30000' } }] }],
        [{ toolCalls: [{ id: 'read1', name: 'file_read', args: { path: spilled, offset: 29990, limit: 2 } }] }],
        [{ text: 'read it' }],
      );
      await h.turn(a.path, 'count to 30000, then look at the end');
      const toolMessages = () => {
        const body = h.mock.requests.filter((r) => r.protocol === 'openai').at(-1)!.body as {
          messages: Array<{ role: string; content?: unknown }>;
        };
        return body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
      };
      const [told, read] = toolMessages().slice(-2);
      expect(told).toContain(`The whole output is in ${spilled}`);
      expect(read).toContain('29990');
      expect(read).not.toMatch(/Permission denied/);

      h.mock.script(
        [{ toolCalls: [{ id: 'peek', name: 'file_read', args: { path: spilled } }] }],
        [{ text: 'denied' }],
      );
      await h.turn(other.path, `read ${spilled}`);
      const peek = toolMessages().at(-1)!;
      expect(peek).toMatch(/Permission denied/);
      expect(peek).not.toContain('29990');

      // The daemon's --config and --data dirs (the harness's are its own, not the XDG ones) reached toolsrv.
      h.mock.script(
        [
          {
            toolCalls: [
              {
                id: 'cfg',
                name: 'shell',
                args: {
                  command: `cat ${h.configDir}/backends.conf; head -c 15 ${h.dataDir}/ollie.db; echo x > ${h.dataDir}/planted`,
                },
              },
            ],
          },
        ],
        [{ text: 'no' }],
      );
      await h.turn(a.path, 'read the keys');
      const keys = toolMessages().at(-1)!;
      expect(keys).not.toContain('test-key');
      expect(keys).not.toContain('SQLite format');
      expect(existsSync(join(h.dataDir, 'planted'))).toBe(false);

      // Killing the session removes its spill files with it.
      await h.c.rdwrText(`session/${a.session}/ctl`, 'kill');
      await until(() => !existsSync(join(h.dataDir, 'output', a.sid)));
    } finally {
      await h.close();
    }
  }, 60_000);
});

describe.skipIf(!ready)('trusting a project file: config/trust and `ollie trust`', () => {
  test('a tool call in a project with an untrusted policy file says so in its result (and the file changes nothing)', async () => {
    const h = await harness();
    try {
      const file = join(h.dir, '.ollie-sandbox.yaml');
      writeFileSync(file, 'filesystem:\n  ro: ["{CWD}"]\n  rw: []\n');
      // The harness keeps its config and data dirs in the session's cwd: denied, they leave its top level
      // read-only (docs/sandbox.md), so the honest write goes one level down.
      mkdirSync(join(h.dir, 'src'));
      const a = await h.agent();
      h.mock.script(
        [{ toolCalls: [{ id: 'w1', name: 'shell', args: { command: 'echo x > src/written.txt && echo wrote' } }] }],
        [{ text: 'ok' }],
      );
      const blocks = await h.turn(a.path, 'write a file');
      const tool = blocks.filter((b) => b.role === 'tool').at(-1)!.content;
      expect(tool).toContain('wrote');
      expect(tool).toContain(`[sandbox: ${file} is not trusted, so it was ignored`);
      expect(tool).toContain(`write "trust ${file}" to config/trust`);

      // The owner trusts it: the next call runs under it, without restarting anything.
      await h.c.write('config/trust', `trust ${h.dir}\n`);
      h.mock.script(
        [
          {
            toolCalls: [{ id: 'w2', name: 'shell', args: { command: 'echo y > src/second.txt && echo wrote-again' } }],
          },
        ],
        [{ text: 'ok' }],
      );
      const after = (await h.turn(a.path, 'write another')).filter((b) => b.role === 'tool').at(-1)!.content;
      expect(after).not.toContain('wrote-again');
      expect(after).not.toContain('[sandbox:');
      expect(existsSync(join(h.dir, 'src', 'second.txt'))).toBe(false);
    } finally {
      await h.close();
    }
  });

  test('config/trust lists sha256<TAB>path, takes trust/untrust lines, refuses anything else', async () => {
    const h = await harness({ tools: false });
    try {
      const proj = join(h.dir, 'proj');
      mkdirSync(proj);
      const file = join(proj, '.ollie-sandbox.yaml');
      writeFileSync(file, 'network:\n  enabled: false\n');
      await h.c.write('config/trust', `trust ${proj}\n`);
      const sha = execFileSync('sha256sum', [file], { encoding: 'utf8' }).split(' ')[0];
      expect(await h.c.readText('config/trust')).toBe(`${sha}\t${file}\n`);
      expect(statSync(join(h.configDir, 'trusted-projects')).mode & 0o777).toBe(0o600);
      await expect(h.c.write('config/trust', 'trust relative/path\n')).rejects.toThrow(
        /expected "trust \/abs\/path \[sha256\]" or "untrust \/abs\/path"/,
      );
      await expect(h.c.write('config/trust', `trust ${join(h.dir, 'nope')}\n`)).rejects.toThrow(/nope: no such file/);
      await h.c.write('config/trust', `untrust ${file}\n`);
      expect(await h.c.readText('config/trust')).toBe('');
    } finally {
      await h.close();
    }
  });

  test('`ollie trust [PATH]` trusts the file as it is, `--list` shows it, `--untrust` forgets it', () => {
    writePolicy(w, 'network:\n  enabled: false\n', 'project', { trusted: false });
    const ollie = (...args: string[]) =>
      execFileSync(
        process.execPath,
        [join(PACKAGE_ROOT, 'dist', 'cli', 'ollie.js'), 'trust', '--config', w.configDir, ...args],
        { encoding: 'utf8', cwd: w.cwd },
      );
    expect(ollie()).toMatch(new RegExp(`^trusted [0-9a-f]{64}\\t${w.cwd}/\\.ollie-sandbox\\.yaml\\n$`));
    expect(loadPolicy(w).sources).toHaveLength(2);
    expect(ollie('--list')).toContain(`${w.cwd}/.ollie-sandbox.yaml`);
    expect(ollie('--untrust')).toContain('untrusted');
    expect(loadPolicy(w).sources).toHaveLength(1);
  });
});

describe.skipIf(!ready)("a workspace that contains Ollie's own package", () => {
  test("cannot replace the sandbox helper, the daemons' code or the shipped tools; the sources stay writable", async () => {
    // The package's parent as the workspace: the {CWD} rule covers the whole checkout (Ollie working on itself,
    // or a home directory it is installed under).
    writePolicy(w, HOME_READABLE);
    const policy = loadPolicy({ ...w, cwd: dirname(PACKAGE_ROOT) });
    const probe = `probe-${process.pid}-${Date.now()}`;
    const targets = ['native/build', 'dist', 'node_modules', 'data/tools'].map((d) => join(PACKAGE_ROOT, d, probe));
    const src = join(PACKAGE_ROOT, 'src', probe);
    try {
      const out = (
        await shell(
          `for f in ${targets.join(' ')}; do echo x > $f && echo WROTE $f; done; echo ok > ${src} && echo SRC`,
          policy,
          dirname(PACKAGE_ROOT),
        )
      ).out;
      for (const t of targets) expect(existsSync(t), t).toBe(false);
      expect(out).not.toContain('WROTE');
      // What sits beside them is still the agent's to edit.
      expect(out).toContain('SRC');
    } finally {
      for (const f of [...targets, src]) rmSync(f, { force: true });
    }
  });
});
