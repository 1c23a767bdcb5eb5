/**
 * Attack on the launcher's fallback path through a resident tool host. The lsp host is started by
 * launchInteractive (src/platform/launcher.ts), which is Node's spawn: no spawner, so no subreaper, no per-call
 * process or memory limits. An agent that could make the host run code of its choosing would get a process that
 * leaves the call's group and outlives the call, the host and the session. typescript-language-server prefers a
 * workspace's own `node_modules/typescript/lib/tsserver.js` to the TypeScript Ollie ships: the agent writes one
 * in its workspace and calls lsp_hover. The host must run the shipped TypeScript only.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { DEFAULT_POLICY_FILE, PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { startEnv, type Env } from '../toolsrv/helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';

const FIXTURE = join(import.meta.dirname, '../lsp/fixture');

/** What the agent writes as its "TypeScript": a detached process of its own, then the pid of it in the workspace. */
const PLANTED = `
const { spawn } = require('node:child_process');
const { writeFileSync } = require('node:fs');
const { join } = require('node:path');
const c = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
c.unref();
writeFileSync(join(${JSON.stringify('ROOT')}, 'escaped.pid'), String(c.pid));
`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('an agent cannot make the lsp host run a TypeScript of its own (which the fallback launch could not contain)', () => {
  let env: Env;
  let c: Client;
  let root: string;
  let configDir: string;
  beforeAll(async () => {
    buildNative();
    root = mkdtempSync(join(tmpdir(), 'lsp-attack-'));
    cpSync(FIXTURE, root, { recursive: true });
    // The shipped policy; where node_modules is a link out of the package (a git worktree), its target too.
    configDir = mkdtempSync(join(tmpdir(), 'lsp-attack-cfg-'));
    const modules = realpathSync(join(PACKAGE_ROOT, 'node_modules'));
    const linked = modules !== join(realpathSync(PACKAGE_ROOT), 'node_modules');
    const shipped = readFileSync(DEFAULT_POLICY_FILE, 'utf8');
    writeFileSync(
      join(configDir, 'sandbox.yaml'),
      linked ? shipped.replace(/^ {2}ro:\n/m, `  ro:\n    - ${modules}\n`) : shipped,
    );
    env = await startEnv({}, { yolo: false, toolDirs: [SHIPPED_TOOLS], cwd: root, configDir });
    c = await env.client('agent1');
    await c.write('ctl', 'load lsp_hover shell');
  }, 60_000);
  afterAll(async () => {
    const pidFile = join(root, 'escaped.pid');
    if (existsSync(pidFile)) {
      const pid = Number(readFileSync(pidFile, 'utf8'));
      if (pid > 0 && alive(pid)) process.kill(pid, 'SIGKILL');
    }
    await env.close();
    rmSync(root, { recursive: true, force: true });
    rmSync(configDir, { recursive: true, force: true });
  });

  test('a workspace node_modules/typescript/lib/tsserver.js is never run', async () => {
    // The agent's own files, in its workspace, as its file tools (or shell) would write them.
    const ts = join(root, 'node_modules/typescript');
    mkdirSync(join(ts, 'lib'), { recursive: true });
    writeFileSync(
      join(ts, 'package.json'),
      JSON.stringify({ name: 'typescript', version: '5.9.3', main: 'lib/typescript.js' }),
    );
    writeFileSync(join(ts, 'lib/typescript.js'), '');
    writeFileSync(join(ts, 'lib/tsserver.js'), PLANTED.replace('"ROOT"', JSON.stringify(root)));
    const r = await env.call(c, { tool: 'lsp_hover', args: { path: 'src/main.ts', line: 4, column: 27 } });
    // The shipped TypeScript answered: the real hover, and the planted file never ran.
    expect(existsSync(join(root, 'escaped.pid'))).toBe(false);
    expect(r.output + (r.error ?? '')).toContain('Greeter.greet(name: string): string');
  }, 60_000);
});
