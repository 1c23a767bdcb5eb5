/**
 * The built Electron main process (out/main/index.js) booted under plain Node, with the `electron` module
 * replaced by a recording stand-in (fixtures/electron-stub.mjs): where no Electron binary exists this is how
 * the shell's own logic runs for real — olliesrv in-process from dist/, the 9P port bridge, the menu, the tray
 * and the notifications driven by real agents (mock LLM, real toolsrv). The Electron spec covers the window.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm, type MockLlm } from '../src/devtools/mock-llm/server.js';
import { rmrf, root, tempDir } from './helpers.js';

describe('Electron main process (on a stand-in electron module)', () => {
  let mock: MockLlm;
  let dir: string;

  beforeAll(async () => {
    // out/main and out/preload as `npm start` builds them (electron-vite); dist/ is built by `npm test`.
    const r = spawnSync(process.execPath, [join(root, 'node_modules/electron-vite/bin/electron-vite.js'), 'build'], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    mock = await startMockLlm();
    dir = tempDir('ollie-e2e-main-');
    mkdirSync(join(dir, 'run'), { mode: 0o700 });
    mkdirSync(join(dir, 'config', 'ollie'), { recursive: true });
    writeFileSync(
      join(dir, 'config', 'ollie', 'backends.conf'),
      `[default]\nbackend = mock\n\n[mock]\ntype = openai\nurl = ${mock.url}/v1\nkey = k\nmodel = gpt-4o\n`,
    );
  }, 60_000);
  afterAll(async () => {
    await mock?.close();
    rmrf(dir);
  });

  it('hosts olliesrv, bridges 9P to the renderer, and reports turns and approvals in notifications and the tray', async () => {
    mock.script(
      [{ text: 'Hello from the main process test.' }],
      [{ status: 401, message: 'invalid api key' }],
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo tray-approved', bypass: true } }] }],
      [{ text: 'done' }],
    );
    const child = spawn(
      process.execPath,
      [
        '--import',
        join(root, 'e2e/fixtures/electron-stub-register.mjs'),
        join(root, 'e2e/fixtures/main-boot-driver.mjs'),
        root,
      ],
      {
        env: {
          ...process.env,
          XDG_RUNTIME_DIR: join(dir, 'run'),
          XDG_CONFIG_HOME: join(dir, 'config'),
          XDG_DATA_HOME: join(dir, 'data'),
          STUB_USER_DATA: dir,
          OLLIE_ADDR: '',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    await new Promise((r) => child.once('exit', r));
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    expect(line, `no result; stderr: ${stderr}`).toBeDefined();
    const out = JSON.parse(line!.slice(7)) as Record<string, unknown> & { ids: { sid: string; aid: string } };
    expect(out.failure, stderr).toBeUndefined();

    expect(out.webPreferences).toMatchObject({ contextIsolation: true, sandbox: true, nodeIntegration: false });
    expect(out.loaded).toBe(join(root, 'out/renderer/index.html'));
    expect(JSON.stringify(out.appMenu)).toContain('New &Session…=CmdOrCtrl+N');
    expect(JSON.stringify(out.appMenu)).toContain('&Stop Turn=CmdOrCtrl+.');
    // Only our own page gets a 9P port.
    expect(out.portsForForeignPage).toBe(0);
    // Chat links go to the system browser, http(s) only; the app never opens a window for them.
    expect(out.windowOpen).toEqual(['deny', 'deny', 'deny']);
    expect(out.opened).toEqual(['https://example.com/docs']);

    expect(out.turnEnded).toMatchObject({ title: 'pilot finished', body: 'The turn in session boot ended.' });
    expect((out.turnFailed as { body: string }).body).toMatch(
      /^The turn in session boot ended in an error: .*(401|invalid api key)/,
    );
    expect(out.openCommand).toEqual(['ollie:command', `open-agent ${out.ids.sid} ${out.ids.aid}`]);
    expect(out.approvalNotification).toMatchObject({ title: 'Approval needed — pilot' });
    expect(String((out.approvalNotification as { body: string }).body)).toContain('echo tray-approved');
    expect((out.trayMenu as string[])[0]).toBe('1 pending approval');
    expect(out.trayItem).toEqual(expect.arrayContaining(['Approve', 'Deny', 'Show…', 'session boot']));
    expect(out.ranApproved).toBe(true);
    expect(out.tooltips).toEqual(expect.arrayContaining(['Ollie', 'Ollie — 1 pending approval']));
    expect(out.errors).toEqual([]);
    expect(out.socketClosed).toBe(true);
  }, 90_000);
});
