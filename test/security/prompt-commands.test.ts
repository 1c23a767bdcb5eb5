/**
 * Nothing the daemon runs on an agent's behalf runs outside the sandbox. The attacker is the model:
 * it scripts tool calls (the real `shell` tool, sandboxed, writing in its workspace) and writes the session
 * environment; then a new agent starts in that workspace, and its profile's prompt commands (the shipped
 * environment.sh) run. Real olliesrv, real toolsrv, the real helper, real git, the mock LLM over HTTP.
 */
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { startMockLlm, type MockLlm, type Turn } from '../../src/devtools/mock-llm/server.js';
import { startDaemon, type Daemon } from '../../src/olliesrv/daemon.js';
import { openDatabase } from '../../src/olliesrv/store/db.js';
import { SessionStore } from '../../src/olliesrv/store/sessions.js';
import { gitEnv } from '../../src/olliesrv/agent/promptcmd.js';
import { landlockStatus } from '../../src/toolsrv/sandbox/index.js';
import { writeConfig } from '../olliesrv/agent-harness.js';
import { runOnPty } from '../helpers/pty.js';

const ENV_PROMPT = {
  description: 'environment only',
  prompt: ['"$OLLIE_DATA/prompts/environment.sh"'],
  autoLoad: ['shell'],
  maxSteps: 20,
};
const FRAGMENT_PROMPT = {
  description: 'a shipped fragment',
  prompt: ['"$OLLIE_DATA/prompts/fragment.sh" base'],
  autoLoad: ['shell'],
  maxSteps: 20,
};

interface World {
  dir: string;
  ws: string;
  configDir: string;
  dataDir: string;
  socket: string;
  mock: MockLlm;
  daemon: Daemon;
  c: Client;
  logs: string[];
  /** A session working in the workspace. */
  session(): Promise<string>;
  /** A new agent of `profile` in `session`: its 9P path. */
  agent(session: string, profile: string): Promise<string>;
  /** Has the agent run `turn` (its tool calls), waiting for the turn to end. */
  act(path: string, ...steps: Turn): Promise<void>;
  systemPrompt(path: string): Promise<string>;
  restart(): Promise<void>;
}

const worlds: World[] = [];
const servers: TcpServer[] = [];

afterEach(async () => {
  for (const w of worlds.splice(0)) {
    w.c.close();
    await w.daemon.close();
    await w.mock.close();
    rmSync(w.dir, { recursive: true, force: true });
  }
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function world(o: { yolo?: boolean; profiles?: Record<string, unknown>; home?: string } = {}): Promise<World> {
  const dir = mkdtempSync(join(tmpdir(), 'ollie-sec-prompt-'));
  const ws = join(dir, 'ws');
  mkdirSync(ws);
  const mock = await startMockLlm();
  const configDir = join(dir, 'config');
  const dataDir = join(dir, 'data');
  writeConfig(configDir, mock.url, { env: ENV_PROMPT, frag: FRAGMENT_PROMPT, ...o.profiles });
  const socket = join(dir, 'run', 'ollie.sock');
  const logs: string[] = [];
  const start = (): Promise<Daemon> =>
    startDaemon({
      socket,
      dataDir,
      configDir,
      toolsrv: { yolo: o.yolo },
      toolCacheFile: false,
      skills: false,
      log: (m) => logs.push(m),
      ...(o.home && { env: { ...process.env, HOME: o.home } }),
    });
  const w: World = {
    dir,
    ws,
    configDir,
    dataDir,
    socket,
    mock,
    logs,
    daemon: await start(),
    c: undefined as unknown as Client,
    async session() {
      return (await w.c.rdwrText('session/new', `cwd=${ws}`)).trim();
    },
    async agent(session, profile) {
      const name = (await w.c.rdwrText(`session/${session}/agent/new`, `agent=${profile}`)).trim();
      return `session/${session}/agent/${name}`;
    },
    async act(path, ...steps) {
      mock.script(steps, [{ text: 'done' }]);
      const aid = (await w.c.readText(`${path}/id`)).trim();
      const agent = w.daemon.agents.all().find((a) => a.id === aid)!;
      const done = agent.nextTurn();
      await w.c.write(`${path}/prompt`, 'go');
      await done;
    },
    async systemPrompt(path) {
      return w.c.rdwrText(`${path}/ctl`, 'systemprompt');
    },
    async restart() {
      w.c.close();
      await w.daemon.close();
      w.daemon = await start();
      w.c = await dial(`unix!${socket}`, { uname: userInfo().username });
    },
  };
  w.c = await dial(`unix!${socket}`, { uname: userInfo().username });
  worlds.push(w);
  return w;
}

/** A shell tool call, as the model makes it. */
const sh = (command: string): Turn => [{ toolCalls: [{ name: 'shell', args: { command } }] }];

/**
 * The workspace a hostile model leaves behind: a repository whose own configuration names its script for every
 * hook git offers (fsmonitor, hooks, pager, external diff, a clean filter chosen by .gitattributes, textconv,
 * ssh, editor, an alias, gpg for signatures), and a tracked file changed in place (same size: git status must
 * compare contents, which is when it runs a clean filter). The script leaves MARK in the workspace.
 */
function poisonRepo(ws: string): string {
  const evil = join(ws, 'evil');
  const mark = join(ws, 'MARK');
  return [
    'set -e',
    // The tools' policy does not let git read the owner's ~/.gitconfig: a model would do the same.
    'export GIT_CONFIG_GLOBAL=/dev/null',
    `cd ${ws}`,
    'git init -q .',
    'printf "a\\n" > f',
    'git add f',
    'git -c user.name=m -c user.email=m@example.com commit -qm init',
    `printf '#!/bin/sh\\necho "$0 $*" >> ${mark}\\n' > ${evil}`,
    `chmod +x ${evil}`,
    'mkdir -p hooks && cp evil hooks/post-checkout && cp evil hooks/pre-commit',
    `printf '* filter=ev diff=ev\\n' > .gitattributes`,
    `git config core.fsmonitor ${evil}`,
    `git config core.hooksPath ${join(ws, 'hooks')}`,
    `git config core.pager ${evil}`,
    `git config pager.log ${evil}`,
    `git config diff.external ${evil}`,
    `git config filter.ev.clean ${evil}`,
    `git config filter.ev.process ${evil}`,
    `git config diff.ev.textconv ${evil}`,
    `git config core.sshCommand ${evil}`,
    `git config core.editor ${evil}`,
    `git config alias.st '!${evil}'`,
    `git config log.showSignature true`,
    `git config gpg.program ${evil}`,
    'printf "b\\n" > f',
    'echo poisoned',
  ].join('\n');
}

describe("prompt commands: a workspace .git/config cannot make the daemon run the agent's code", () => {
  it("the new agent's environment.sh runs none of the repository's programs, and still reports git status", async () => {
    const w = await world();
    const s = await w.session();
    const attacker = await w.agent(s, 'env');
    await w.act(attacker, ...sh(poisonRepo(w.ws)));
    expect(readFileSync(join(w.ws, '.git', 'config'), 'utf8')).toContain('fsmonitor');
    // Whatever the attacker's own prompt run did, only what happens from here on counts.
    rmSync(join(w.ws, 'MARK'), { force: true });

    const victim = await w.agent(s, 'env');
    const text = await w.systemPrompt(victim);
    expect(existsSync(join(w.ws, 'MARK'))).toBe(false);
    // Honest use: the environment section and the repository's state are still there.
    expect(text).toContain(`Working directory: ${w.ws}`);
    expect(text).toContain('## Repository');
    expect(text).toMatch(/Uncommitted changes:\n(.*\n)* M f\n/);
    expect(text).toMatch(/Recent commits:\n[0-9a-f]+ init/);
  });

  it('with --yolo (no sandbox at all), hardened git alone still runs none of them', async () => {
    const w = await world({ yolo: true });
    const s = await w.session();
    const attacker = await w.agent(s, 'env');
    await w.act(attacker, ...sh(poisonRepo(w.ws)));
    rmSync(join(w.ws, 'MARK'), { force: true });
    const text = await w.systemPrompt(await w.agent(s, 'env'));
    // Unsandboxed, the script could have written MARK: that it did not means git never started it.
    expect(existsSync(join(w.ws, 'MARK'))).toBe(false);
    expect(text).toMatch(/Uncommitted changes:\n(.*\n)* M f\n/);
  });
});

describe('git hardening (the environment prompt commands get)', () => {
  let repo = '';
  afterEach(() => rmSync(repo, { recursive: true, force: true }));

  /** Runs each git command in a poisoned repository with `env` added; returns what the repository's script recorded for each. */
  function gitRuns(env: Record<string, string>): Record<string, string> {
    const mark = join(repo, 'MARK');
    const commands = [
      ['status', '--short'],
      ['log', '--oneline', '-1'],
      ['diff'],
      ['log', '-p', '-1'],
      ['st'],
      ['-c', 'user.name=m', '-c', 'user.email=m@example.com', 'commit', '-qam', 'x'],
      ['fetch', 'ssh://example.invalid/x'],
    ];
    const marks: Record<string, string> = {};
    for (const args of commands) {
      rmSync(mark, { force: true });
      try {
        execFileSync('git', args, {
          cwd: repo,
          env: { PATH: process.env.PATH!, HOME: repo, ...env },
          stdio: 'ignore',
          timeout: 10_000,
        });
      } catch {
        // A refused program makes some commands fail: only whether the script ran matters.
      }
      marks[args.join(' ')] = existsSync(mark) ? readFileSync(mark, 'utf8') : '';
    }
    return marks;
  }

  it("plain git runs the repository's programs (the attack is real); hardened git runs none", () => {
    repo = mkdtempSync(join(tmpdir(), 'ollie-sec-git-'));
    execFileSync('/bin/sh', ['-c', poisonRepo(repo)], {
      stdio: 'ignore',
      env: { PATH: process.env.PATH!, HOME: repo },
    });
    const plain = gitRuns({});
    for (const [cmd, ran] of Object.entries(plain))
      if (cmd !== 'log --oneline -1') expect(ran, `plain git ${cmd}`).not.toBe('');
    // The repository's driver names are found and disarmed as promptcmd.ts does it.
    const hardened = gitRuns(
      gitEnv(['filter.ev.clean', 'filter.ev.process', 'diff.ev.textconv', 'diff.external', 'alias.st', 'pager.log']),
    );
    for (const [cmd, ran] of Object.entries(hardened)) expect(ran, `hardened git ${cmd}`).toBe('');
  });

  it("on a terminal (where git starts a pager) plain git runs the repository's pager; hardened git does not", async () => {
    repo = mkdtempSync(join(tmpdir(), 'ollie-sec-git-'));
    execFileSync('/bin/sh', ['-c', poisonRepo(repo)], {
      stdio: 'ignore',
      env: { PATH: process.env.PATH!, HOME: repo },
    });
    const onTty = async (env: Record<string, string>): Promise<string> => {
      const mark = join(repo, 'MARK');
      rmSync(mark, { force: true });
      await runOnPty('git', ['log', '-1'], {
        cwd: repo,
        env: { PATH: process.env.PATH!, HOME: repo, TERM: 'xterm', ...env },
      });
      return existsSync(mark) ? readFileSync(mark, 'utf8') : '';
    };
    expect(await onTty({})).not.toBe('');
    expect(await onTty(gitEnv(['pager.log']))).toBe('');
  });
});

describe('prompt commands run read-only and offline', () => {
  it('a prompt command cannot write the workspace, HOME or tmp outside its own, nor reach TCP or Unix sockets', async () => {
    const tcp = createTcpServer();
    let tcpHits = 0;
    tcp.on('connection', (sock) => {
      tcpHits++;
      sock.destroy();
    });
    servers.push(tcp);
    await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
    const port = (tcp.address() as { port: number }).port;

    const dir = mkdtempSync(join(tmpdir(), 'ollie-sec-home-'));
    const unixPath = join(dir, 'sock');
    const unix = createTcpServer();
    let unixHits = 0;
    unix.on('connection', (sock) => {
      unixHits++;
      sock.destroy();
    });
    servers.push(unix);
    await new Promise<void>((r) => unix.listen(unixPath, r));

    const node = process.execPath;
    const connect = (target: string): string =>
      `${node} -e 'const s=require("net").connect(${target});s.on("connect",()=>{console.log("CONNECTED");process.exit(0)});s.on("error",e=>{console.log("refused: "+e.code);process.exit(0)})'`;
    // The daemon's HOME (what prompt commands get as $HOME) is a scratch dir, so that old code writes there.
    const w = await world({
      home: dir,
      profiles: {
        probe: {
          description: 'a prompt that tries to get out',
          prompt: [
            'echo owned > owned.txt && echo WROTE-WS; true',
            'echo owned > "$HOME/home-file" && echo WROTE-HOME; true',
            'echo ok > "$TMPDIR/own-tmp" && echo WROTE-OWN-TMP; true',
            connect(String(port)),
            connect(JSON.stringify(unixPath)),
          ],
          autoLoad: [],
          maxSteps: 5,
        },
      },
    });
    try {
      const s = await w.session();
      const text = await w.systemPrompt(await w.agent(s, 'probe'));
      expect(existsSync(join(w.ws, 'owned.txt'))).toBe(false);
      expect(existsSync(join(dir, 'home-file'))).toBe(false);
      expect(tcpHits).toBe(0);
      expect(unixHits).toBe(0);
      expect(text).not.toContain('WROTE-WS');
      expect(text).not.toContain('WROTE-HOME');
      expect(text).not.toContain('CONNECTED');
      // Its own private tmp is writable (shells need one); it is removed when the commands are done.
      expect(text).toContain('WROTE-OWN-TMP');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("honest use: the user's own fragment in $XDG_CONFIG_HOME/ollie/prompts is read (inside the denied config dir)", async () => {
    const w = await world();
    mkdirSync(join(w.configDir, 'prompts'));
    writeFileSync(join(w.configDir, 'prompts', 'base.md'), 'My own base prompt.\n');
    const s = await w.session();
    expect((await w.systemPrompt(await w.agent(s, 'frag'))).startsWith('My own base prompt.\n')).toBe(true);
  });

  it('a broken sandbox policy: the commands are not run, and the prompt says why', async () => {
    const w = await world({
      profiles: { marker: { description: 'runs', prompt: ['touch ran; echo RAN'], autoLoad: [], maxSteps: 5 } },
    });
    writeFileSync(join(w.configDir, 'sandbox.yaml'), 'netwerk: {}\n');
    const s = await w.session();
    const text = await w.systemPrompt(await w.agent(s, 'marker'));
    expect(existsSync(join(w.ws, 'ran'))).toBe(false);
    expect(text).not.toContain('RAN');
    expect(text).toContain('prompt command was not run: the sandbox is unavailable');
    expect(text).toContain('sandbox.yaml:1: netwerk: unknown section');
  });

  it('with --yolo the same commands run (unsandboxed, as the owner asked)', async () => {
    const w = await world({
      yolo: true,
      profiles: { marker: { description: 'runs', prompt: ['touch ran; echo RAN'], autoLoad: [], maxSteps: 5 } },
    });
    writeFileSync(join(w.configDir, 'sandbox.yaml'), 'netwerk: {}\n');
    const s = await w.session();
    expect(await w.systemPrompt(await w.agent(s, 'marker'))).toContain('RAN');
    expect(existsSync(join(w.ws, 'ran'))).toBe(true);
  });
});

describe('the session environment cannot redirect what the daemon runs', () => {
  it('OLLIE_DATA, LD_PRELOAD, NODE_OPTIONS, GIT_SSH_COMMAND and friends are refused, naming the variable and the rule', async () => {
    const w = await world();
    const s = await w.session();
    const refused: Array<[string, RegExp]> = [
      [
        'OLLIE_DATA=/evil',
        /OLLIE_DATA may not be set in a session environment: OLLIE_\* variables are set by the daemon/,
      ],
      ['LD_PRELOAD=/tmp/evil.so', /LD_PRELOAD may not be set .*dynamic loader/],
      ['NODE_OPTIONS=--require /tmp/evil.js', /NODE_OPTIONS may not be set .*Node/],
      ['GIT_SSH_COMMAND=/tmp/evil', /GIT_SSH_COMMAND may not be set .*git run programs/],
      ['GIT_CONFIG_COUNT=1', /GIT_CONFIG_COUNT may not be set/],
      ['BASH_ENV=/tmp/evil', /BASH_ENV may not be set .*shell/],
      ['PYTHONSTARTUP=/tmp/evil.py', /PYTHONSTARTUP may not be set .*interpreter/],
      ['BASH_FUNC_git=() { /tmp/evil; }', /BASH_FUNC_git may not be set .*shell/],
      ['MAKEFLAGS=SHELL=/tmp/evil', /MAKEFLAGS may not be set .*build tool/],
      ['npm_config_script_shell=/tmp/evil', /npm_config_script_shell may not be set .*package manager/],
    ];
    for (const [line, why] of refused) {
      await expect(w.c.write(`session/${s}/env`, `FOO=1\n${line}\n`)).rejects.toThrow(why);
      // Nothing of a refused write is stored.
      expect(await w.c.readText(`session/${s}/env`)).toBe('');
    }
    // Honest use: ordinary variables, PATH and HOME for the tools.
    await w.c.write(`session/${s}/env`, 'FOO=1\nPATH=/opt/x/bin:/usr/bin:/bin\nGIT_AUTHOR_NAME=Me\n');
    expect(await w.c.readText(`session/${s}/env`)).toBe('FOO=1\nPATH=/opt/x/bin:/usr/bin:/bin\nGIT_AUTHOR_NAME=Me\n');
  });

  it('a session PATH does not choose the git that prompt commands run', async () => {
    const w = await world();
    const s = await w.session();
    const attacker = await w.agent(s, 'env');
    const bin = join(w.ws, 'bin');
    await w.act(
      attacker,
      ...sh(
        `mkdir -p ${bin} && printf '#!/bin/sh\\ntouch ${join(w.ws, 'MARK')}\\n' > ${bin}/git && chmod +x ${bin}/git && GIT_CONFIG_GLOBAL=/dev/null git init -q ${w.ws}`,
      ),
    );
    await w.c.write(`session/${s}/env`, `PATH=${bin}:/usr/bin:/bin\n`);
    rmSync(join(w.ws, 'MARK'), { force: true });
    const text = await w.systemPrompt(await w.agent(s, 'env'));
    expect(existsSync(join(w.ws, 'MARK'))).toBe(false);
    expect(text).toContain('## Repository');
  });

  it('an OLLIE_DATA already stored in the database is dropped at load (logged), and the shipped fragments run', async () => {
    const w = await world();
    const s = await w.session();
    const sid = (await w.c.readText(`session/${s}/id`)).trim();
    // The agent's own "fragment.sh", where a stored OLLIE_DATA would send the prompt.
    const fake = join(w.ws, 'fake');
    mkdirSync(join(fake, 'prompts'), { recursive: true });
    writeFileSync(join(fake, 'prompts', 'fragment.sh'), `#!/bin/sh\ntouch ${join(w.ws, 'MARK')}\necho EVIL-FRAGMENT\n`);
    chmodSync(join(fake, 'prompts', 'fragment.sh'), 0o755);
    await w.c.write(`session/${s}/env`, 'FOO=1\n');
    // A database written before the rule existed (or by hand).
    w.c.close();
    await w.daemon.close();
    const db = openDatabase(join(w.dataDir, 'ollie.db'));
    new SessionStore(db).setEnv(sid, `FOO=1\nOLLIE_DATA=${fake}\nLD_PRELOAD=/tmp/x.so\n`);
    db.close();
    await w.restart();

    expect(await w.c.readText(`session/${s}/env`)).toBe('FOO=1\n');
    expect(w.logs.some((l) => l.includes(`session ${s}: dropped OLLIE_DATA from its stored environment`))).toBe(true);
    expect(w.logs.some((l) => l.includes('dropped LD_PRELOAD'))).toBe(true);
    const text = await w.systemPrompt(await w.agent(s, 'frag'));
    expect(existsSync(join(w.ws, 'MARK'))).toBe(false);
    expect(text).not.toContain('EVIL-FRAGMENT');
    expect(text.startsWith(readFileSync(join(process.cwd(), 'data', 'prompts', 'base.md'), 'utf8'))).toBe(true);
  });
});

// The sandboxed cases need the helper and Landlock; this machine has both (ABI 7). Elsewhere they would fail
// closed, which the policy test above covers.
if (landlockStatus().abi < 6)
  throw new Error(
    `these tests need Landlock ABI 6 or later: ${landlockStatus().reason ?? `ABI ${landlockStatus().abi}`}`,
  );
