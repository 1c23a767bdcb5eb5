/**
 * The MCP servers in the GUI's Settings (McpServers.tsx), in Chromium against the real daemon and web UI: the
 * selected session's server shows as ready with its tools; Stop and Restart act on it through the namespace.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixtureServer, writeMcpConfig } from '../test/toolsrv/mcp-helpers.js';
import { useGui } from './gui-harness.js';
import { until } from './helpers.js';

describe('MCP servers in Settings', () => {
  const g = useGui({
    prefix: 'ollie-e2e-mcp-',
    viewport: { width: 1280, height: 900 },
    outside: true,
    prepare: (d) => writeMcpConfig(join(d, 'config'), { fx: fixtureServer({ env: { FX_TOKEN: 'secret-xyz-123' } }) }),
  });

  it("shows the selected session's servers; Stop and Restart act on them", async () => {
    await g.outside.rdwrText('session/new', `name=proj cwd=${join(g.dir, 'work')}`);
    await g.outside.rdwrText('session/proj/agent/new', 'agent=e2e name=coder');
    // Its first turn starts the session's tool server, and with it the MCP servers.
    g.mock.script([{ text: 'hello' }]);
    await g.outside.write('session/proj/agent/coder/prompt', 'hi');
    await until(
      async () => /state=ready/.test(await g.outside.readText('session/proj/mcp/fx/status').catch(() => '')),
      'fx to start',
      15000,
    );

    await g.page.goto(g.ui.url);
    await g.page.getByTestId('conn').filter({ hasText: 'connected' }).waitFor();
    await g.page.locator('[data-agent="coder"]').first().click();
    await g.page.getByRole('tab', { name: 'Settings' }).click();
    const row = g.page.locator('[data-server="fx"]');
    await g.page.locator('[data-server="fx"][data-state="ready"]').waitFor();
    expect(await row.locator('td').nth(2).textContent()).toBe('9');
    await row.getByRole('button', { name: 'Stop' }).click();
    await g.page.locator('[data-server="fx"][data-state="stopped"]').waitFor();
    expect(await g.outside.readText('session/proj/mcp/fx/status')).toMatch(/state=stopped/);
    await row.getByRole('button', { name: 'Restart' }).click();
    await until(
      async () => /state=ready/.test(await g.outside.readText('session/proj/mcp/fx/status')),
      'fx to restart',
      15000,
    );
    await g.page.getByRole('button', { name: 'Refresh' }).click();
    await g.page.locator('[data-server="fx"][data-state="ready"]').waitFor();
    // The config file is edited in the same view, its env and header values hidden; a save keeps them.
    const area = g.page.getByRole('textbox', { name: 'mcp.json', exact: true });
    await until(async () => (await area.inputValue()).includes('FX_TOKEN'), 'mcp.json to load');
    expect(await area.inputValue()).not.toContain('secret-xyz-123');
    expect(await area.inputValue()).toContain('"FX_TOKEN": "••••••••"');
    await area.fill(
      (await area.inputValue()).replace('"fx"', '"fx2"').replace('"FX_TOKEN": "••••••••"', '"FX_TOKEN": "secret-new"'),
    );
    await g.page.locator('[data-file="mcp.json"]').getByRole('button', { name: 'Save' }).click();
    await until(async () => (await g.outside.readText('config/mcp.json')).includes('"fx2"'), 'the save');
    expect(JSON.parse(await g.outside.readText('config/mcp.json')).mcpServers.fx2.env).toEqual({
      FX_TOKEN: 'secret-new',
    });
    await area.fill((await area.inputValue()).replace('"args"', '"args" '));
    await g.page.locator('[data-file="mcp.json"]').getByRole('button', { name: 'Save' }).click();
    await until(async () => (await g.outside.readText('config/mcp.json')).includes('"args" '), 'the second save');
    expect(JSON.parse(await g.outside.readText('config/mcp.json')).mcpServers.fx2.env).toEqual({
      FX_TOKEN: 'secret-new',
    });
  });
});
