/**
 * A language server that cannot start, or dies, is an error for its language only: the lsp host and the other
 * servers (the warm TypeScript one) keep serving. Through a real sandboxed toolsrv with one shared lsp host;
 * each agent gets its own PATH, on which `gopls` is one kind of broken:
 *
 *   eacces  a script whose #! interpreter is not executable: execve fails with EACCES (as a server in a
 *           directory the sandbox does not let tools execute from does)
 *   noent   a script whose #! interpreter does not exist: ENOENT after `which` found the script
 *   exits   starts, says why on stderr, exits 3 before answering initialize
 *   crash   a working little server that dies of SIGSEGV when asked for a hover, and serves symbols
 *
 * Before this was handled, the first of these ended the whole host (ERR_STREAM_DESTROYED from a write to the
 * server that never started) and with it the warm TypeScript server.
 */
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import type { ProcResult } from '../../src/toolsrv/protocol.js';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { startEnv, until, type Env } from '../toolsrv/helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';

const FIXTURE = join(import.meta.dirname, 'fixture');

/** A language server in a few lines: initialize, documentSymbol, shutdown; a hover kills it. */
const CRASHING_SERVER = `#!${process.execPath}
let buf = Buffer.alloc(0);
const send = (m) => {
  const b = Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...m }));
  process.stdout.write(\`Content-Length: \${b.length}\\r\\n\\r\\n\`);
  process.stdout.write(b);
};
const at = { start: { line: 0, character: 5 }, end: { line: 0, character: 9 } };
process.stdin.on('data', (d) => {
  buf = Buffer.concat([buf, d]);
  for (;;) {
    const i = buf.indexOf('\\r\\n\\r\\n');
    if (i < 0) return;
    const n = Number(/Content-Length: (\\d+)/i.exec(buf.subarray(0, i).toString())[1]);
    if (buf.length < i + 4 + n) return;
    const m = JSON.parse(buf.subarray(i + 4, i + 4 + n).toString());
    buf = buf.subarray(i + 4 + n);
    if (m.method === 'initialize') send({ id: m.id, result: { capabilities: { hoverProvider: true, documentSymbolProvider: true } } });
    else if (m.method === 'textDocument/hover') {
      process.stderr.write('panic: runtime error: invalid memory address or nil pointer dereference\\n');
      process.kill(process.pid, 'SIGSEGV');
    } else if (m.method === 'textDocument/documentSymbol') send({ id: m.id, result: [{ name: 'main', kind: 12, range: at, selectionRange: at }] });
    else if (m.method === 'exit') process.exit(0);
    else if (m.id !== undefined && m.method) send({ id: m.id, result: null });
  }
});
`;

interface Case {
  c: Client;
  /** The .go file, in a module of its own (its own server key, so one case's pause does not hold another). */
  file: string;
}

let env: Env;
let root: string;
let bins: string;
let ts: Client;
const cases: Record<string, Case> = {};

const call = (c: Client, tool: string, args: Record<string, unknown>): Promise<ProcResult> =>
  env.call(c, { tool, args });
const hoverTs = (): Promise<ProcResult> => call(ts, 'lsp_hover', { path: 'src/main.ts', line: 4, column: 27 });
const stats = async (): Promise<{
  started: Record<string, number>;
  failed: Record<string, number>;
  servers: Array<{ id: string; pid: number }>;
}> => {
  const h = env.ts.core.hosts.list().find((x) => x.name === 'lsp')!;
  return (await env.ts.core.hosts.stats(h.pid)) as Awaited<ReturnType<typeof stats>>;
};
const hostPid = (): number => env.ts.core.hosts.list().find((x) => x.name === 'lsp')!.pid;

beforeAll(async () => {
  buildNative();
  root = mkdtempSync(join(tmpdir(), 'lsp-robust-'));
  cpSync(FIXTURE, root, { recursive: true });
  // The broken servers live in a tool directory: the sandbox lets tools execute from there, so what fails is
  // the server itself, not the sandbox.
  bins = mkdtempSync(join(tmpdir(), 'lsp-robust-bins-'));
  const gopls = (kind: string, text: string): void => {
    mkdirSync(join(bins, kind));
    writeFileSync(join(bins, kind, 'gopls'), text);
    chmodSync(join(bins, kind, 'gopls'), 0o755);
  };
  writeFileSync(join(bins, 'not-a-program'), 'this is not a program\n');
  chmodSync(join(bins, 'not-a-program'), 0o644);
  gopls('eacces', `#!${join(bins, 'not-a-program')}\n`);
  gopls('noent', '#!/nonexistent/interpreter\n');
  gopls('exits', '#!/bin/sh\necho "gopls: go.mod: cannot load the workspace" >&2\nexit 3\n');
  gopls('crash', CRASHING_SERVER);
  env = await startEnv({}, { yolo: false, toolDirs: [bins, SHIPPED_TOOLS], cwd: root });
  ts = await env.client('ts');
  await ts.write('ctl', 'load lsp_hover lsp_symbols');
  for (const kind of ['eacces', 'noent', 'exits', 'crash', 'missing']) {
    mkdirSync(join(root, kind));
    writeFileSync(join(root, kind, 'go.mod'), `module ${kind}\n`);
    writeFileSync(join(root, kind, 'main.go'), 'func main() {}\n');
    const c = await env.client(kind);
    await c.write(
      'ctl',
      `env PATH=${kind === 'missing' ? join(bins, 'nothing-here') : join(bins, kind)}:/usr/bin:/bin\nload lsp_hover lsp_symbols`,
    );
    cases[kind] = { c, file: `${kind}/main.go` };
  }
}, 60_000);

afterAll(async () => {
  await env?.close();
  rmSync(root, { recursive: true, force: true });
  rmSync(bins, { recursive: true, force: true });
});

describe('a broken server fails its own calls, in words; TypeScript goes on in the same host', () => {
  let host: number;
  let tsServer: number;

  beforeAll(async () => {
    expect((await hoverTs()).output).toContain('Greeter.greet');
    host = hostPid();
    tsServer = (await stats()).servers.find((s) => s.id === 'typescript')!.pid;
  }, 60_000);

  /** The TypeScript server answers, and it is the same host and the same warm server as before. */
  async function typescriptStillServes(): Promise<void> {
    const r = await hoverTs();
    expect(r, r.output).toMatchObject({ status: 'exited', exit: 0 });
    expect(r.output).toContain('(method) Greeter.greet(name: string): string');
    expect(hostPid()).toBe(host);
    const st = await stats();
    expect(st.started.typescript).toBe(1);
    expect(st.servers.find((s) => s.id === 'typescript')!.pid).toBe(tsServer);
  }

  test('not executable (EACCES)', async () => {
    const r = await call(cases.eacces!.c, 'lsp_hover', { path: cases.eacces!.file, line: 1, column: 6 });
    expect(r).toMatchObject({ status: 'exited', exit: 1 });
    const bin = join(bins, 'eacces', 'gopls');
    expect(r.output).toBe(
      `lsp_hover: the go language server (gopls) could not start: ${bin} cannot be executed (EACCES: it, or the interpreter its #! line names, is not executable, or the sandbox does not let tools run programs from ${join(bins, 'eacces')}); it is started again on a call after 1 s\n`,
    );
    await typescriptStillServes();
  });

  test('its interpreter is missing (ENOENT)', async () => {
    const r = await call(cases.noent!.c, 'lsp_hover', { path: cases.noent!.file, line: 1, column: 6 });
    expect(r.output).toBe(
      `lsp_hover: the go language server (gopls) could not start: ${join(bins, 'noent', 'gopls')} or the interpreter its #! line names does not exist (ENOENT); it is started again on a call after 1 s\n`,
    );
    await typescriptStillServes();
  });

  test('not installed at all', async () => {
    const r = await call(cases.missing!.c, 'lsp_hover', { path: cases.missing!.file, line: 1, column: 6 });
    expect(r.output).toBe(
      'lsp_hover: no go language server here: gopls is not on PATH (install gopls (go install golang.org/x/tools/gopls@latest) and put it on PATH)\n',
    );
    await typescriptStillServes();
  });

  test('exits at once, and is started again only after a pause that grows', async () => {
    const go = (): Promise<ProcResult> =>
      call(cases.exits!.c, 'lsp_hover', { path: cases.exits!.file, line: 1, column: 6 });
    const first = await go();
    expect(first.output).toBe(
      'lsp_hover: the go language server (gopls) exited during start-up (code 3): gopls: go.mod: cannot load the workspace; it is started again on a call after 1 s\n',
    );
    await typescriptStillServes();
    // Asked again at once: no new start, the same reason and how long until the next try.
    const started = (await stats()).started.go ?? 0;
    const paused = await go();
    expect(paused.output).toMatch(
      /^lsp_hover: the go language server \(gopls\) exited during start-up \(code 3\): gopls: go\.mod: cannot load the workspace; it is started again on a call after (0\.\d|1) s \(1 failure in a row\)\n$/,
    );
    expect((await stats()).started.go ?? 0).toBe(started);
    // After the pause it is tried again, fails again, and the next pause is twice as long.
    const second = (await until(
      async () => {
        const r = await go();
        return r.output.endsWith('it is started again on a call after 2 s\n') ? r : undefined;
      },
      'the second failed start',
      10_000,
    ))!;
    expect(second.output).toContain('exited during start-up (code 3)');
    expect((await stats()).started.go).toBe(started + 1);
    await typescriptStillServes();
  });

  test('crashes mid-session: the call in flight fails with the crash, the next use after the pause starts it again', async () => {
    const c = cases.crash!.c;
    const file = cases.crash!.file;
    expect((await call(c, 'lsp_symbols', { path: file })).output).toBe(`${file}:\n1:6  function main\n`);
    const crashed = await call(c, 'lsp_hover', { path: file, line: 1, column: 6 });
    expect(crashed).toMatchObject({ status: 'exited', exit: 1 });
    expect(crashed.output).toBe(
      'lsp_hover: the go language server (gopls) exited (signal SIGSEGV): panic: runtime error: invalid memory address or nil pointer dereference; it is started again on a call after 1 s\n',
    );
    await typescriptStillServes();
    const st = await stats();
    expect(st.failed.go).toBeGreaterThanOrEqual(1);
    expect(st.servers.map((s) => s.id)).not.toContain('go');
    // Restarted on a later call, once the pause is over: it serves again.
    const again = (await until(
      async () => {
        const r = await call(c, 'lsp_symbols', { path: file });
        return r.exit === 0 ? r : undefined;
      },
      'the server to serve again',
      10_000,
    ))!;
    expect(again.output).toBe(`${file}:\n1:6  function main\n`);
    await typescriptStillServes();
  });
});
