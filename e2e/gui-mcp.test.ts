/**
 * The MCP servers in the GUI's Settings (McpServers.tsx), in Chromium against the real daemon and web UI: the
 * selected session's server shows as ready with its tools; Stop and Restart act on it through the namespace.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startMockLlm, type MockLlm } from '../src/devtools/mock-llm/server.js';
import type { Client } from '../src/ninep/index.js';
import { dial } from '../src/ninep/node.js';
import { startDaemon, type Daemon } from '../src/olliesrv/daemon.js';
import { startWebUi, type WebUi } from '../src/webui/server.js';
import { fixtureServer, writeMcpConfig } from '../test/toolsrv/mcp-helpers.js';
import { buildRenderer, launch, mockBackends, rmrf, socketPath, tempDir, until } from './helpers.js';

describe('MCP servers in Settings', () => {
  let rendererDir: string;
  let browser: Browser;
  let dir: string;
  let mock: MockLlm;
  let daemon: Daemon;
  let ui: WebUi;
  let outside: Client;
  let page: Page;

  beforeAll(async () => {
    [rendererDir, browser, mock] = await Promise.all([buildRenderer(), launch(), startMockLlm()]);
    dir = tempDir('ollie-e2e-mcp-');
    mkdirSync(join(dir, 'config', 'agents'), { recursive: true });
    mkdirSync(join(dir, 'work'));
    writeFileSync(join(dir, 'config', 'backends.conf'), mockBackends(mock.url));
    writeFileSync(join(dir, 'config', 'agents', 'e2e.json'), JSON.stringify({ description: 'e2e agent', prompt: 'You are a test agent.', autoLoad: ['shell'], maxSteps: 20 }));
    writeMcpConfig(join(dir, 'config'), { fx: fixtureServer({ env: { FX_TOKEN: 'secret-xyz-123' } }) });
    const sock = socketPath(dir);
    daemon = await startDaemon({ socket: sock, dataDir: join(dir, 'data'), configDir: join(dir, 'config'), log: () => undefined });
    ui = await startWebUi({ server: daemon.server, rendererDir, port: 0 });
    outside = await dial(`unix!${sock}`, { uname: userInfo().username });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  }, 60_000);
  afterAll(async () => {
    await page?.close();
    await browser?.close();
    outside?.close();
    await ui?.close();
    await daemon?.close();
    await mock?.close();
    rmrf(rendererDir, dir);
  });

  it('shows the selected session\'s servers; Stop and Restart act on them', async () => {
    await outside.rdwrText('session/new', `name=proj cwd=${join(dir, 'work')}`);
    await outside.rdwrText('session/proj/agent/new', 'agent=e2e name=coder');
    // Its first turn starts the session's tool server, and with it the MCP servers.
    mock.script([{ text: 'hello' }]);
    await outside.write('session/proj/agent/coder/prompt', 'hi');
    await until(async () => /state=ready/.test(await outside.readText('session/proj/mcp/fx/status').catch(() => '')), 'fx to start', 15000);

    await page.goto(ui.url);
    await page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    await page.locator('[data-agent="coder"]').first().click();
    await page.getByRole('tab', { name: 'Settings' }).click();
    const row = page.locator('[data-server="fx"]');
    await page.locator('[data-server="fx"][data-state="ready"]').waitFor();
    expect(await row.locator('td').nth(2).textContent()).toBe('9');
    await row.getByRole('button', { name: 'Stop' }).click();
    await page.locator('[data-server="fx"][data-state="stopped"]').waitFor();
    expect(await outside.readText('session/proj/mcp/fx/status')).toMatch(/state=stopped/);
    await row.getByRole('button', { name: 'Restart' }).click();
    await until(async () => /state=ready/.test(await outside.readText('session/proj/mcp/fx/status')), 'fx to restart', 15000);
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.locator('[data-server="fx"][data-state="ready"]').waitFor();
    // The config file is edited in the same view, its env and header values hidden; a save keeps them.
    const area = page.getByRole('textbox', { name: 'mcp.json', exact: true });
    await until(async () => (await area.inputValue()).includes('FX_TOKEN'), 'mcp.json to load');
    expect(await area.inputValue()).not.toContain('secret-xyz-123');
    expect(await area.inputValue()).toContain('"FX_TOKEN": "••••••••"');
    await area.fill((await area.inputValue()).replace('"fx"', '"fx2"').replace('"FX_TOKEN": "••••••••"', '"FX_TOKEN": "secret-new"'));
    await page.locator('[data-file="mcp.json"]').getByRole('button', { name: 'Save' }).click();
    await until(async () => (await outside.readText('config/mcp.json')).includes('"fx2"'), 'the save');
    expect(JSON.parse(await outside.readText('config/mcp.json')).mcpServers.fx2.env).toEqual({ FX_TOKEN: 'secret-new' });
    await area.fill((await area.inputValue()).replace('"args"', '"args" '));
    await page.locator('[data-file="mcp.json"]').getByRole('button', { name: 'Save' }).click();
    await until(async () => (await outside.readText('config/mcp.json')).includes('"args" '), 'the second save');
    expect(JSON.parse(await outside.readText('config/mcp.json')).mcpServers.fx2.env).toEqual({ FX_TOKEN: 'secret-new' });
  });
});
