/**
 * What the MCP tests share: the fixture server (e2e/fixtures/mcp-server.mjs, written with the official SDK), a
 * config dir holding mcp.json, and — where this checkout's node_modules lies outside the package root (a git
 * worktree whose node_modules links to another checkout) — a sandbox.yaml that lets sandboxed programs read it,
 * as they read it inside the package root in a normal checkout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const FIXTURE = join(ROOT, 'e2e', 'fixtures', 'mcp-server.mjs');

/** Writes `configDir`/mcp.json with these servers (and the sandbox.yaml described above when needed). */
export function writeMcpConfig(configDir: string, servers: Record<string, unknown>): void {
  mkdirSync(configDir, { recursive: true });
  writeFileSync(join(configDir, 'mcp.json'), JSON.stringify({ mcpServers: servers }, null, 2));
  const modules = realpathSync(join(ROOT, 'node_modules'));
  if (!modules.startsWith(`${realpathSync(ROOT)}/`)) {
    const base = readFileSync(join(ROOT, 'data', 'sandbox.yaml'), 'utf8');
    writeFileSync(join(configDir, 'sandbox.yaml'), base.replace(/^ {2}ro:\n/m, `  ro:\n    - ${modules}\n`));
  }
}

/** The fixture as a stdio server entry. */
export const fixtureServer = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  command: process.execPath,
  args: [FIXTURE],
  ...extra,
});

/** The fixture over Streamable HTTP (or SSE) on loopback: its URL, and the process to kill. */
export async function startHttpFixture(
  transport: 'http' | 'sse' = 'http',
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [FIXTURE, `--${transport}`], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`the HTTP fixture exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}/${transport === 'sse' ? 'sse' : 'mcp'}`, child };
}
