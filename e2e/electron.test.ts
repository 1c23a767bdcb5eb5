/**
 * The desktop app itself, through Playwright's `_electron`: the same flow as the web-mode tests, but over the
 * preload's MessagePort, plus what only the shell does (remembered bounds, the single-instance lock, the tray's
 * watcher). It needs the Electron binary, which cannot be downloaded everywhere (not on the machine this was
 * written on), and better-sqlite3 built for Electron's ABI; where either is missing it says so loudly and skips.
 */
import { spawnSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { _electron, type ElectronApplication, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockLlm, type MockLlm } from '../src/devtools/mock-llm/server.js';
import type { Client } from '../src/ninep/index.js';
import { dial } from '../src/ninep/node.js';
import { rmrf, root, screenshot, tempDir, until } from './helpers.js';

function electronPath(): string | undefined {
  try {
    const p = createRequire(join(root, 'package.json'))('electron') as unknown;
    return typeof p === 'string' && existsSync(p) ? p : undefined;
  } catch {
    return undefined;
  }
}

/** Why the spec cannot run here, or undefined when it can. */
function missing(): string | undefined {
  const bin = electronPath();
  if (!bin)
    return 'the Electron binary is missing (node_modules/electron/dist was never downloaded; `node node_modules/electron/install.js` fetches it)';
  const r = spawnSync(bin, ['-e', "require('better-sqlite3')(':memory:').close()"], {
    cwd: root,
    env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
    encoding: 'utf8',
  });
  if (r.status !== 0) {
    return 'better-sqlite3 is built for Node, not for Electron (run `npx electron-builder install-app-deps` to run this spec; `npm rebuild better-sqlite3` goes back)';
  }
  return undefined;
}

const why = missing();
if (why) {
  const line = '!'.repeat(100);
  process.stderr.write(
    `\n${line}\n!! ELECTRON SPEC SKIPPED: ${why}.\n!! The desktop window is NOT tested on this machine; web mode (the same renderer) is.\n${line}\n\n`,
  );
}

describe.skipIf(why !== undefined)(`Electron app${why ? ` — SKIPPED: ${why}` : ''}`, () => {
  let dir: string;
  let env: Record<string, string>;
  let mock: MockLlm;
  let app: ElectronApplication;
  let page: Page;
  let outside: Client;

  const launch = async (): Promise<ElectronApplication> =>
    _electron.launch({
      executablePath: electronPath()!,
      args: [root, '--no-sandbox'],
      env,
      cwd: root,
      timeout: 30_000,
    });

  beforeAll(async () => {
    // The app loads out/ and dist/: build both (as `npm start` would).
    for (const args of [
      [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.node.json'],
      [join(root, 'node_modules/electron-vite/bin/electron-vite.js'), 'build'],
    ]) {
      const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
      expect(r.status).toBe(0);
    }
    mock = await startMockLlm();
    dir = tempDir('ollie-e2e-electron-');
    const run = join(dir, 'run');
    mkdirSync(run, { mode: 0o700 });
    mkdirSync(join(dir, 'config', 'ollie', 'agents'), { recursive: true });
    writeFileSync(
      join(dir, 'config', 'ollie', 'backends.conf'),
      `[default]\nbackend = mock\n\n[mock]\ntype = openai\nurl = ${mock.url}/v1\nkey = k\nmodel = gpt-4o\n`,
    );
    const inherited = Object.fromEntries(
      Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined),
    );
    env = {
      ...inherited,
      XDG_RUNTIME_DIR: run,
      XDG_CONFIG_HOME: join(dir, 'config'),
      XDG_DATA_HOME: join(dir, 'data'),
      OLLIE_ADDR: '',
    };
    app = await launch();
    page = await app.firstWindow();
    await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor({ timeout: 20_000 });
    outside = await dial(`unix!${join(run, 'ollie', 'ollie.sock')}`, { uname: userInfo().username });
  }, 180_000);
  afterAll(async () => {
    outside?.close();
    await app?.close().catch(() => undefined);
    await mock?.close();
    rmrf(dir);
  });

  it('runs the renderer sandboxed, with the 9P port from the preload as its only way out', async () => {
    // No Node in the page (nodeIntegration off, context isolated): only the bridge's three members.
    expect(
      await page.evaluate(() => [
        typeof (globalThis as { require?: unknown }).require,
        typeof (globalThis as { process?: unknown }).process,
      ]),
    ).toEqual(['undefined', 'undefined']);
    expect(await page.evaluate(() => Object.keys((globalThis as unknown as { ollie: object }).ollie).sort())).toEqual([
      'connect',
      'onCommand',
      'version',
    ]);
    // Remote content is refused.
    const fetched = await page.evaluate(() =>
      fetch('https://example.com/').then(
        () => 'loaded',
        () => 'refused',
      ),
    );
    expect(fetched).toBe('refused');
  });

  it('shows sessions and agents made by another client, streams a reply, and takes an approval', async () => {
    await outside.rdwrText('session/new', `name=desk\ncwd=${dir}\n`);
    await page.locator('[data-session="desk"]').waitFor();
    await outside.rdwrText('session/desk/agent/new', 'name=pilot backend=mock');
    await page.locator('[data-agent="pilot"] .node').click();
    mock.script([{ delayMs: 30 }, { text: 'Hello ' }, { text: 'from ' }, { text: 'Electron' }]);
    const box = page.getByRole('textbox', { name: 'Prompt', exact: true });
    await box.fill('hi');
    await box.press('Enter');
    await page
      .locator('.block[data-role="assistant"]', { hasText: 'Hello from Electron' })
      .waitFor({ timeout: 15_000 });

    mock.script(
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo desk-approved', bypass: true } }] }],
      [{ text: 'ok' }],
    );
    await box.fill('approve me');
    await box.press('Enter');
    const approval = page.getByRole('dialog', { name: /Approval needed/ }).filter({ hasText: 'echo desk-approved' });
    await approval.waitFor({ timeout: 15_000 });
    // The tray's watcher sees it too (its menu lists it).
    const trayPending = (): Promise<number> =>
      app.evaluate(() => (globalThis as { ollieTray?: { pending: string[] } }).ollieTray?.pending.length ?? -1);
    await until(() => trayPending().then((n) => n === 1), 'the tray to list the request', 10_000);
    await screenshot(page, 'electron-approval');
    await approval.getByRole('button', { name: 'Approve once' }).click();
    await page.locator('.block[data-role="tool"]', { hasText: 'desk-approved' }).waitFor({ timeout: 15_000 });
    await until(() => trayPending().then((n) => n === 0), 'the tray to clear', 10_000);
  });

  it('refuses a second instance and remembers the window bounds', async () => {
    const second = spawn(electronPath()!, [root, '--no-sandbox'], { env, cwd: root, stdio: 'ignore' });
    const code = await new Promise<number | null>((r) => second.once('exit', r));
    expect(code).toBe(0);
    await app.evaluate(({ BrowserWindow }) =>
      BrowserWindow.getAllWindows()[0]!.setBounds({ x: 40, y: 50, width: 900, height: 640 }),
    );
    // Saved once the resize settles (debounced), before the window closes.
    const stateFile = join(await app.evaluate(({ app: a }) => a.getPath('userData')), 'window-state.json');
    await until(
      () => (JSON.parse(readFileSync(stateFile, 'utf8')) as { bounds: { width: number } }).bounds.width === 900,
      'the new bounds to be saved',
    );
    await app.close();
    app = await launch();
    page = await app.firstWindow();
    const b = await app.evaluate(({ BrowserWindow }) => BrowserWindow.getAllWindows()[0]!.getBounds());
    expect([b.width, b.height]).toEqual([900, 640]);
    // The session made before the restart is still there (olliesrv's store).
    await page.locator('[data-session="desk"]').waitFor({ timeout: 20_000 });
  });
});
