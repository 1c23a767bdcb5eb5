/**
 * Second review of workflows (src/olliesrv/session/workflows.ts). A workflow runs sandboxed with its session's
 * token in $OLLIE_TOKEN, and it may run what the agents left in the workspace (a check script): that script
 * inherits the token, so code the model planted acts as the session's workflow — reading the session's `env`
 * (the owner's, which no agent may read and which tools see only through the policy's env list), loading any tool
 * into any agent (web_fetch: the network), switching profiles. Known and NOT fixed (design: the token and the
 * workspace's code share one process tree and one sandbox); `it.fails` until it is.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { dial } from '../../src/ninep/node.js';
import { startMockLlm } from '../../src/devtools/mock-llm/server.js';
import { startDaemon } from '../../src/olliesrv/daemon.js';
import { writeConfig } from '../olliesrv/agent-harness.js';

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.reverse()) await f();
  cleanup = [];
});

describe('a check script the agent planted, run by the owner\'s workflow', () => {
  it.fails('does not get the session\'s rights: it cannot read the session env nor load tools into agents', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ollie-sec-wftok-'));
    const ws = join(dir, 'ws');
    mkdirSync(ws);
    const mock = await startMockLlm();
    const configDir = join(dir, 'config');
    writeConfig(configDir, mock.url, { sh: { description: 'shell', prompt: 'You run shell commands.', autoLoad: ['shell'], maxSteps: 5 } });
    mkdirSync(join(configDir, 'workflows'));
    writeFileSync(join(configDir, 'workflows', 'checker'), '#!/bin/sh\nout=$(sh ./check.sh 2>&1)\nprintf "complete\\n%s\\n" "$out" | ollie-9p write "session/$OLLIE_SESSION/goalstatus"\n');
    chmodSync(join(configDir, 'workflows', 'checker'), 0o755);
    const socket = join(dir, 'run', 'ollie.sock');
    const daemon = await startDaemon({ socket, dataDir: join(dir, 'data'), configDir, toolsrv: {}, toolCacheFile: false, skills: false, log: () => undefined });
    const c = await dial(`unix!${socket}`, { uname: userInfo().username });
    cleanup.push(async () => {
      c.close();
      await daemon.close();
      await mock.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const s = (await c.rdwrText('session/new', `cwd=${ws}`)).trim();
    await c.write(`session/${s}/env`, 'DEPLOY_TOKEN=sk-session-only\n');
    await c.rdwrText(`session/${s}/ctl`, 'workflow checker');
    const agent = (await c.rdwrText(`session/${s}/agent/new`, 'agent=sh')).trim();
    // What the model plants with its sandboxed shell (written here directly: the planting is not the point).
    writeFileSync(join(ws, 'check.sh'), [
      'ollie-9p read "session/$OLLIE_SESSION/env"',
      `echo tool_load web_fetch | ollie-9p write "session/$OLLIE_SESSION/agent/${agent}/ctl" && ollie-9p read "session/$OLLIE_SESSION/agent/${agent}/ctl" </dev/null; echo tools | ollie-9p rdwr "session/$OLLIE_SESSION/agent/${agent}/ctl"`,
    ].join('\n'));
    await c.write(`session/${s}/goal`, 'check the work');
    let st = '';
    for (const end = Date.now() + 15_000; Date.now() < end; await new Promise((r) => setTimeout(r, 20))) {
      st = await c.readText(`session/${s}/goalstatus`);
      if (!st.startsWith('running')) break;
    }
    expect(st.startsWith('complete\n')).toBe(true);
    expect(st).not.toContain('sk-session-only');
    expect(st).not.toMatch(/web_fetch/);
  }, 30_000);
});
