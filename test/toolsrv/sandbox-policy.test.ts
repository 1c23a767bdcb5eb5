/**
 * Loading the sandbox policy: the shipped default, the user's sandbox.yaml, a project's narrowing file,
 * placeholders, and errors that name file and line.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { DEFAULT_POLICY_FILE, loadPolicy, PolicyError, policyArgs } from '../../src/toolsrv/sandbox/index.js';
import { makeWorld, writePolicy, type World } from './sandbox-helpers.js';

let w: World;
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

const USER = `filesystem:
  rox: [/usr]
  ro: ["{HOME}", /etc]
  rw: ["{CWD}", "{TMPDIR}"]
network:
  enabled: true
  connect_tcp: [443, 80]
env: [PATH, LANG, LC_*]
`;

/** The message of the PolicyError that `fn` throws. */
function policyError(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyError);
    return (e as Error).message;
  }
  throw new Error('no error thrown');
}

describe('the shipped default', () => {
  test('reads and executes the system, writes the project and a private tmp, no network, the secrets denied', () => {
    const p = loadPolicy(w);
    expect(p.sources).toEqual([DEFAULT_POLICY_FILE]);
    expect(p.filesystem.rox).toEqual(expect.arrayContaining(['/usr', '/bin', '/lib']));
    expect(p.filesystem.ro).toContain('/etc');
    expect(p.filesystem.rw).toEqual(expect.arrayContaining([w.cwd, w.tmpDir, '/dev/null']));
    expect(
      [...p.filesystem.ro, ...p.filesystem.rox, ...p.filesystem.rw, ...p.filesystem.rwx].some((x) => x === w.home),
    ).toBe(false);
    expect(p.filesystem.deny).toEqual(
      expect.arrayContaining([join(w.home, '.ssh'), join(w.home, '.gnupg'), w.runtimeDir, w.configDir]),
    );
    expect(p.network).toEqual({ enabled: false, bindTcp: [], connectTcp: [], unix: false });
    expect(p.isolate).toEqual({
      signals: true,
      abstractUnix: true,
      gitHooks: true,
      startupFiles: true,
      terminals: true,
    });
    expect(p.toolDirs).toEqual([join(w.configDir, 'tools')]);
    expect(statSync(w.tmpDir).mode & 0o777).toBe(0o700);

    const args = policyArgs(p).join(' ');
    // The workspace and the private tmp are executable where writable (docs/sandbox.md, "Executable where readable").
    expect(args).toContain(`--rwx ${w.cwd}`);
    expect(args).toContain(`--rwx ${w.tmpDir}`);
    expect(args).toContain(`--rox ${join(w.home, '.local', 'bin')}`);
    expect(args).toContain(`--deny ${join(w.home, '.ssh')}`);
    expect(args).toContain('--no-net');
    expect(args).toContain('--deny-unix');
    expect(args).toContain('--scope-signals --scope-abstract-unix');
    expect(args).toContain(`--rox ${join(w.configDir, 'tools')}`);
  });
});

describe("the user's sandbox.yaml", () => {
  test('replaces the shipped one; placeholders and ~ expand', () => {
    const file = writePolicy(
      w,
      `filesystem:
  ro: ["~/docs", "{XDG_CONFIG_HOME}/git", "{XDG_DATA_HOME}/fonts"]
  rw: ["{CWD}/out/", "{TMPDIR}", "{RUNTIME}/../scratch"]
  deny: ["{HOME}/.aws"]
isolate:
  signals: false
`,
    );
    const p = loadPolicy(w);
    expect(p.sources).toEqual([file]);
    expect(p.filesystem.ro).toEqual([
      join(w.home, 'docs'),
      join(w.home, '.config', 'git'),
      join(w.home, '.local', 'share', 'fonts'),
    ]);
    expect(p.filesystem.rw).toEqual([join(w.cwd, 'out'), w.tmpDir, join(w.root, 'run', 'scratch')]);
    expect(p.filesystem.rox).toEqual([]);
    expect(p.filesystem.deny.slice(0, 5)).toEqual([
      join(w.home, '.ssh'),
      join(w.home, '.gnupg'),
      w.runtimeDir,
      w.configDir,
      w.dataDir,
    ]);
    expect(p.filesystem.deny).toContain('/dev/shm');
    expect(p.filesystem.deny.at(-1)).toBe(join(w.home, '.aws'));
    expect(p.isolate).toEqual({
      signals: false,
      abstractUnix: true,
      gitHooks: true,
      startupFiles: true,
      terminals: true,
    });
    expect(p.network.enabled).toBe(false);
  });

  test('an empty file is the safest policy: nothing granted, nothing open', () => {
    writePolicy(w, '# nothing\n');
    const p = loadPolicy(w);
    expect(p.filesystem.ro).toEqual([]);
    expect(p.network.enabled).toBe(false);
    expect(p.env).toEqual([]);
  });

  test.each([
    ['filesystem:\n  ro: [/etc\n', /:3: /],
    [
      'filesystem:\n  rw: ["{CWD}"]\n  ro:\n    - relative/path\n',
      /:4: filesystem\.ro: relative\/path is not an absolute path/,
    ],
    [
      'filesystem:\n  ro:\n    - /etc\n    - "{NOPE}/x"\n',
      /:4: filesystem\.ro: unknown placeholder \{NOPE\} \(known: \{CWD\}, \{HOME\}, \{TMPDIR\}, \{XDG_CONFIG_HOME\}, \{XDG_DATA_HOME\}, \{RUNTIME\}\)/,
    ],
    ['filesystem:\n  rw: /tmp\n', /:2: filesystem\.rw: must be a list/],
    ['filesystem:\n  write: [/tmp]\n', /:2: filesystem\.write: unknown setting \(known: ro, rox, rw, rwx, deny\)/],
    ['env: [PATH]\nnetwerk:\n  enabled: true\n', /:2: netwerk: unknown section/],
    ['network:\n  enabled: yes please\n', /:2: network\.enabled: must be true or false/],
    [
      'network:\n  enabled: true\n  bind_tcp: [8080, 70000]\n',
      /:3: network\.bind_tcp: each entry must be a TCP port number/,
    ],
    ['network:\n  enabled: false\n  connect_tcp: [443]\n', /:3: network: port lists need enabled: true/],
    ['env:\n  - PATH\n  - "BAD NAME"\n', /:3: env: each entry must be a variable name/],
    ['- just\n- a list\n', /:1: the policy must be a mapping/],
    ['env: [PATH]\nenv: [HOME]\n', /:2: /],
  ])('malformed: %j → file:line and what', (text, message) => {
    const file = writePolicy(w, text);
    const m = policyError(() => loadPolicy(w));
    expect(m.startsWith(`${file}:`)).toBe(true);
    expect(m).toMatch(message);
  });
});

describe("a project's .ollie-sandbox.yaml narrows", () => {
  beforeEach(() => {
    writePolicy(w, USER);
  });

  test("lists it sets replace the base's when every entry is already granted; deny adds", () => {
    const file = writePolicy(
      w,
      `filesystem:
  rw: ["{CWD}/src"]
  ro: ["{CWD}", /etc/ssl]
  deny: ["{CWD}/.env"]
network:
  connect_tcp: [443]
env: [PATH, LC_ALL, LC_M*]
isolate:
  signals: true
`,
      'project',
    );
    const p = loadPolicy(w);
    expect(p.sources).toEqual([join(w.configDir, 'sandbox.yaml'), file]);
    expect(p.filesystem.rw).toEqual([join(w.cwd, 'src')]);
    expect(p.filesystem.ro).toEqual([w.cwd, '/etc/ssl']);
    expect(p.filesystem.rox).toEqual(['/usr']);
    expect(p.filesystem.deny).toContain(join(w.cwd, '.env'));
    expect(p.network).toEqual({ enabled: true, bindTcp: [], connectTcp: [443], unix: false });
    expect(p.env).toEqual(['PATH', 'LC_ALL', 'LC_M*']);
  });

  test('can switch the network off', () => {
    writePolicy(w, 'network:\n  enabled: false\n', 'project');
    expect(loadPolicy(w).network).toEqual({ enabled: false, bindTcp: [], connectTcp: [], unix: false });
  });

  test.each([
    [
      'filesystem:\n  ro: ["{CWD}"]\n  rw:\n    - "{HOME}"\n',
      /:4: filesystem\.rw: .*\/home is not granted rw by .*sandbox\.yaml and is not inside the workspace .*; a project file can only narrow the policy or add paths inside the workspace/,
    ],
    ['filesystem:\n  rox: [/etc]\n', /:2: filesystem\.rox: \/etc is not granted rox/],
    ['filesystem:\n  ro: [/var]\n', /:2: filesystem\.ro: \/var is not granted ro/],
    ['network:\n  connect_tcp: [22]\n', /:2: network\.connect_tcp: port 22 is not allowed by/],
    ['network:\n  unix: true\n', /:2: network\.unix: Unix sockets are off in .*; a project file cannot turn them on/],
    ['env: [PATH, AWS_SECRET_ACCESS_KEY]\n', /:1: env: AWS_SECRET_ACCESS_KEY is not passed by/],
    ['env: [PATH, L*]\n', /:1: env: L\* is not passed by/],
    ['filesystem:\n  ro: [/etc\n', /\.ollie-sandbox\.yaml:3: /],
  ])('but never widens: %j', (text, message) => {
    const file = writePolicy(w, text, 'project');
    const m = policyError(() => loadPolicy(w));
    expect(m.startsWith(`${file}:`)).toBe(true);
    expect(m).toMatch(message);
  });

  test('cannot turn the network on when the base has it off, nor turn isolation off', () => {
    writePolicy(w, 'filesystem:\n  rw: ["{CWD}"]\n');
    let file = writePolicy(w, '# comment\nnetwork:\n  enabled: true\n', 'project');
    expect(policyError(() => loadPolicy(w))).toBe(
      `${file}:3: network.enabled: the network is off in ${join(w.configDir, 'sandbox.yaml')}; a project file cannot turn it on`,
    );
    file = writePolicy(w, 'isolate:\n  abstract_unix: false\n', 'project');
    expect(policyError(() => loadPolicy(w))).toBe(
      `${file}:2: isolate.abstract_unix: a project file cannot turn isolation off`,
    );
  });
});

describe('executable where readable', () => {
  test('the workspace, the private tmp and the user-local bin dirs gain execute; a denied one gains nothing', () => {
    writePolicy(w, 'filesystem:\n  ro: ["{HOME}"]\n  rw: ["{CWD}", "{TMPDIR}"]\n  deny: ["~/go"]\n');
    const args = policyArgs(loadPolicy(w)).join(' ');
    expect(args).toContain(`--rwx ${w.cwd}`);
    expect(args).toContain(`--rwx ${w.tmpDir}`);
    // HOME is readable, so the bin dirs below it are executable (rules of their own: HOME itself stays ro).
    expect(args).toContain(`--ro ${w.home}`);
    expect(args).toContain(`--rox ${join(w.home, '.local', 'bin')}`);
    expect(args).toContain(`--rox ${join(w.home, 'bin')}`);
    expect(args).not.toContain(`--rox ${join(w.home, 'go', 'bin')}`);
  });

  test('a project that makes the workspace read-only leaves it executable, not writable', () => {
    writePolicy(w, 'filesystem:\n  ro: ["{CWD}"]\n  rw: []\n', 'project');
    const args = policyArgs(loadPolicy(w)).join(' ');
    expect(args).toContain(`--rox ${w.cwd}`);
    expect(args).not.toMatch(new RegExp(`--rwx? ${w.cwd}( |$)`));
  });
});
