/**
 * Nothing the daemon runs on an agent's behalf runs outside the sandbox, workflows included: a workflow runs in the
 * session's working directory and may run what the agents left there (a check script, a test suite). The model writes
 * such a script with its sandboxed shell; the owner's workflow runs it when a goal is set. The script must get no
 * more than a tool: no writes outside the workspace, no Ollie config (API keys), no network, none of the daemon's
 * environment. Real olliesrv, toolsrv, helper, `ollie-9p`, mock LLM.
 */
import { createServer, type Server } from 'node:net';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { startMockLlm, type MockLlm } from '../../src/devtools/mock-llm/server.js';
import { startDaemon, type Daemon } from '../../src/olliesrv/daemon.js';
import { writeConfig } from '../olliesrv/agent-harness.js';
import { until } from '../wait.js';
import { alive } from '../toolsrv/helpers.js';

const SECRET = 'OLLIE_SEC_TEST_DAEMON_SECRET';

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.reverse()) await f();
  cleanup = [];
});

async function world(
  o: { yolo?: boolean } = {},
): Promise<{ dir: string; ws: string; configDir: string; c: Client; daemon: Daemon; mock: MockLlm }> {
  const dir = mkdtempSync(join(tmpdir(), 'ollie-sec-wf-'));
  const ws = join(dir, 'ws');
  mkdirSync(ws);
  const mock = await startMockLlm();
  const configDir = join(dir, 'config');
  writeConfig(configDir, mock.url, {
    sh: { description: 'shell', prompt: 'You run shell commands.', autoLoad: ['shell'], maxSteps: 5 },
  });
  // The owner's workflow: runs the workspace's check script, then reports through the namespace.
  mkdirSync(join(configDir, 'workflows'));
  writeFileSync(
    join(configDir, 'workflows', 'checker'),
    '#!/bin/sh\nout=$(sh ./check.sh 2>&1)\nprintf "complete\\n%s\\n" "$out" | ollie-9p write "session/$OLLIE_SESSION/goalstatus"\n',
  );
  chmodSync(join(configDir, 'workflows', 'checker'), 0o755);
  const socket = join(dir, 'run', 'ollie.sock');
  const daemon = await startDaemon({
    socket,
    dataDir: join(dir, 'data'),
    configDir,
    toolsrv: { yolo: o.yolo },
    toolCacheFile: false,
    skills: false,
    log: () => undefined,
  });
  const c = await dial(`unix!${socket}`, { uname: userInfo().username });
  cleanup.push(async () => {
    c.close();
    await daemon.close();
    await mock.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { dir, ws, configDir, c, daemon, mock };
}

async function goalStatus(c: Client, s: string): Promise<string> {
  await c.write(`session/${s}/goal`, 'check the work');
  return until(
    async () => {
      const st = await c.readText(`session/${s}/goalstatus`);
      return st.startsWith('running') ? undefined : st;
    },
    'the workflow to settle the goal',
    15_000,
  );
}

describe('workflows run sandboxed', () => {
  it("a check script the agent planted cannot write outside, read the config, connect, or see the daemon's environment", async () => {
    const tcp: Server = createServer();
    let hits = 0;
    tcp.on('connection', (sock) => {
      hits++;
      sock.destroy();
    });
    await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => tcp.close(() => r())));
    process.env[SECRET] = 'sk-daemon-only';
    cleanup.push(() => void delete process.env[SECRET]);

    const w = await world();
    const outside = join(w.dir, 'outside');
    mkdirSync(outside);
    const s = (await w.c.rdwrText('session/new', `cwd=${w.ws}`)).trim();
    await w.c.rdwrText(`session/${s}/ctl`, 'workflow checker');
    const agent = (await w.c.rdwrText(`session/${s}/agent/new`, 'agent=sh')).trim();
    const port = (tcp.address() as { port: number }).port;
    const script = [
      `cat ${join(w.configDir, 'backends.conf')} >/dev/null 2>&1 && echo READ-KEYS`,
      `touch ${join(outside, 'owned')} 2>/dev/null && echo WROTE-OUTSIDE`,
      'env | grep -q OLLIE_SEC_TEST && echo SAW-SECRET',
      `${process.execPath} -e 'require("net").connect(${port},"127.0.0.1").on("connect",()=>{console.log("CONNECTED");process.exit(0)}).on("error",()=>process.exit(0))'`,
      'echo ok > ws-file && echo WROTE-WS',
    ].join('\n');
    // The model plants it with its own (sandboxed) shell.
    w.mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: `cat > check.sh <<'EOF'\n${script}\nEOF` } }] }],
      [{ text: 'planted' }],
    );
    const a = w.daemon.agents.all().find((x) => x.name === agent)!;
    const done = a.nextTurn();
    await w.c.write(`session/${s}/agent/${agent}/prompt`, 'plant it');
    await done;
    expect(existsSync(join(w.ws, 'check.sh'))).toBe(true);

    const st = await goalStatus(w.c, s);
    // The workflow itself still works: it ran the script and reported through the Ollie socket.
    expect(st.startsWith('complete\n')).toBe(true);
    expect(st).toContain('WROTE-WS');
    expect(st).not.toContain('READ-KEYS');
    expect(st).not.toContain('WROTE-OUTSIDE');
    expect(st).not.toContain('SAW-SECRET');
    expect(st).not.toContain('CONNECTED');
    expect(existsSync(join(outside, 'owned'))).toBe(false);
    expect(hits).toBe(0);
  });

  it('what a workflow starts ends with it, even a process that left its group (it is started by the spawner)', async () => {
    const w = await world();
    // What an agent could leave in the workspace for the owner's workflow to run: a daemon that detaches.
    writeFileSync(
      join(w.ws, 'check.sh'),
      'setsid sleep 1013.9 >/dev/null 2>&1 </dev/null &\necho $! > escaped.pid\necho STARTED\n',
    );
    const s = (await w.c.rdwrText('session/new', `cwd=${w.ws}`)).trim();
    await w.c.rdwrText(`session/${s}/ctl`, 'workflow checker');
    const st = await goalStatus(w.c, s);
    expect(st).toContain('STARTED');
    const pid = Number(readFileSync(join(w.ws, 'escaped.pid'), 'utf8').trim());
    expect(pid).toBeGreaterThan(0);
    await until(() => !alive(pid), 'the detached process to end', 10_000);
  });

  it('a broken sandbox policy: the workflow is not started, and the goal says why', async () => {
    const w = await world();
    writeFileSync(join(w.configDir, 'sandbox.yaml'), 'netwerk: {}\n');
    writeFileSync(join(w.ws, 'check.sh'), `touch ${join(w.ws, 'ran')}\n`);
    const s = (await w.c.rdwrText('session/new', `cwd=${w.ws}`)).trim();
    await w.c.rdwrText(`session/${s}/ctl`, 'workflow checker');
    const st = await goalStatus(w.c, s);
    expect(st).toMatch(
      /^error\nworkflow checker was not started: the sandbox is unavailable: .*sandbox\.yaml:1: netwerk: unknown section/,
    );
    expect(existsSync(join(w.ws, 'ran'))).toBe(false);
  });
});
