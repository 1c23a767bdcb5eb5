/**
 * The lsp host's server table in-process, for what the host-level tests (robust.test.ts) cannot make happen
 * on cue: a server that never answers initialize, and one that stops reading its input while it runs (a write
 * to it then fails with EPIPE, which vscode-jsonrpc would turn into an unhandled rejection ending the host).
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Servers } from '../../src/tools/lsp/client.js';
import { until } from '../toolsrv/helpers.js';

let dir: string;
const gopls = (kind: string, text: string): Record<string, string> => {
  mkdirSync(join(dir, kind));
  writeFileSync(join(dir, kind, 'gopls'), text);
  chmodSync(join(dir, kind, 'gopls'), 0o755);
  mkdirSync(join(dir, `${kind}-ws`));
  writeFileSync(join(dir, `${kind}-ws`, 'go.mod'), `module ${kind}\n`);
  writeFileSync(join(dir, `${kind}-ws`, 'main.go'), 'package main\n');
  return { PATH: join(dir, kind) };
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'lsp-client-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test('a server that never answers initialize is killed after the start timeout, and paused before the next try', async () => {
  const env = gopls('silent', '#!/bin/sh\nexec /bin/sleep 600\n');
  const file = join(dir, 'silent-ws', 'main.go');
  const servers = new Servers(60_000, { startTimeoutMs: 300, backoffMs: 5000 });
  const starting = servers.get(file, dir, env);
  const pid = servers.list()[0]!.pid;
  expect(alive(pid)).toBe(true);
  await expect(starting).rejects.toThrow(
    'the go language server (gopls) did not answer initialize within 0.3 s; it is started again on a call after 5 s',
  );
  await until(() => !alive(pid));
  expect(servers.list()).toEqual([]);
  await expect(servers.get(file, dir, env)).rejects.toThrow(
    /^the go language server \(gopls\) did not answer initialize within 0\.3 s; it is started again on a call after [45](\.\d)? s \(1 failure in a row\)$/,
  );
  expect(servers.started).toEqual({ go: 1 });
  expect(servers.failed).toEqual({ go: 1 });
  await servers.stopAll();
});

test('a server that stops reading its input: the next request fails with that, and the host lives', async () => {
  // Answers initialize, then closes its stdin and lives on.
  const env = gopls(
    'deaf',
    `#!${process.execPath}
let buf = '';
process.stdin.setEncoding('latin1').on('data', (d) => {
  buf += d;
  const m = /Content-Length: (\\d+)\\r\\n\\r\\n/.exec(buf);
  if (!m || buf.length < m.index + m[0].length + Number(m[1])) return;
  const msg = JSON.parse(buf.slice(m.index + m[0].length, m.index + m[0].length + Number(m[1])));
  const body = JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { capabilities: { hoverProvider: true } } });
  process.stdout.write('Content-Length: ' + Buffer.byteLength(body) + '\\r\\n\\r\\n' + body);
  process.stdin.destroy();
  require('fs').closeSync(0);
  setInterval(() => undefined, 1000);
});
`,
  );
  const file = join(dir, 'deaf-ws', 'main.go');
  const servers = new Servers(60_000);
  const s = await servers.get(file, dir, env);
  const pid = servers.list()[0]!.pid;
  await until(() => !existsSync(`/proc/${pid}/fd/0`));
  const hover = s.request(
    'textDocument/hover',
    { textDocument: { uri: `file://${file}` }, position: { line: 0, character: 0 } },
    new AbortController().signal,
  );
  await expect(hover).rejects.toThrow(
    'the go language server (gopls) stopped reading its input (EPIPE); it is started again on a call after 1 s',
  );
  await until(() => !alive(pid));
  expect(servers.failed).toEqual({ go: 1 });
  await servers.stopAll();
});
