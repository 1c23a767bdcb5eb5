/**
 * web_fetch against a local HTTP server, run by a real sandboxed toolsrv. The shipped .meta allows TCP 80 and
 * 443 only, so the tests run the same executable under a user .meta whose rule names the test server's port
 * (as a user could) and lets it reach 127.0.0.1 (allow_private: the test server is on loopback, which web_fetch
 * refuses otherwise; test/security/webfetch-ssrf.test.ts attacks that), and check that the rule is all it
 * gets: another port is refused by the sandbox, the shipped rule reaches no local address, and a tool without
 * a rule cannot connect at all.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import type { ProcResult } from '../../src/toolsrv/protocol.js';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { startEnv, writeTools, type Env } from '../toolsrv/helpers.js';
import { buildNative, readMeta } from '../toolsrv/sandbox-helpers.js';

const PAGE = `<!doctype html><html><head><title>Fixture &amp; Page</title><style>body { color: red }</style>
<script>console.log("tracking")</script></head>
<body><h1>Hello</h1><p>Read the <a href="/docs">docs</a> and <strong>enjoy</strong>.</p>
<ul><li>one</li><li>two</li></ul>
<pre><code>const x = 1;</code></pre><noscript>enable JS</noscript></body></html>`;

function serve(): Promise<http.Server> {
  const srv = http.createServer((req, res) => {
    const url = req.url ?? '/';
    const r = /^\/r\/(\d+)$/.exec(url);
    if (r) {
      const n = Number(r[1]);
      res.writeHead(302, { location: n === 0 ? '/page' : `/r/${n - 1}` }).end();
    } else if (url === '/page') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
    else if (url === '/big') res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(3 << 20));
    else if (url === '/json') res.writeHead(200, { 'content-type': 'application/json' }).end('{"a":1,"b":[true,null]}');
    else if (url === '/bin')
      res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2]));
    else if (url === '/latin1')
      res
        .writeHead(200, { 'content-type': 'text/plain; charset=iso-8859-1' })
        .end(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    else if (url === '/gz')
      res
        .writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' })
        .end(gzipSync('compressed text\n'));
    else if (url === '/hang') res.writeHead(200, { 'content-type': 'text/plain' }).write('the start');
    else if (url === '/loop') res.writeHead(301, { location: '/loop' }).end();
    else res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not here</h1>');
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv)));
}

let srv: http.Server;
let other: http.Server;
let base: string;
let otherPort: number;
let env: Env;
let shipped: Env;
let c: Client;
let cShipped: Client;
const dirs: string[] = [];

const fetchUrl = (args: Record<string, unknown>, cl = c): Promise<ProcResult> =>
  (cl === c ? env : shipped).call(cl, { tool: 'web_fetch', args });

beforeAll(async () => {
  buildNative();
  srv = await serve();
  other = await serve();
  const port = (srv.address() as AddressInfo).port;
  otherPort = (other.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
  // A user tool dir: web_fetch with the shipped executable and a rule for the test server's port and address.
  const userTools = mkdtempSync(join(tmpdir(), 'webfetch-tools-'));
  const cwd = mkdtempSync(join(tmpdir(), 'webfetch-cwd-'));
  dirs.push(userTools, cwd);
  mkdirSync(userTools, { recursive: true });
  writeFileSync(
    join(userTools, 'web_fetch.meta'),
    JSON.stringify({
      ...readMeta('web_fetch'),
      sandbox: { network: { connect_tcp: [port], allow_private: ['127.0.0.1'] } },
    }),
  );
  symlinkSync(join(SHIPPED_TOOLS, 'web_fetch'), join(userTools, 'web_fetch'));
  env = await startEnv({}, { yolo: false, toolDirs: [userTools, SHIPPED_TOOLS], cwd });
  c = await env.client('agent1');
  await c.write('ctl', 'load web_fetch');
  // The shipped web_fetch, and a tool with no network rule (a node one-liner), as any agent has them.
  const plainTools = mkdtempSync(join(tmpdir(), 'webfetch-plain-'));
  dirs.push(plainTools);
  writeTools(plainTools, {
    node_eval: {
      meta: { description: 'node one-liner', args: { type: 'object', properties: { js: { type: 'string' } } } },
      script: `#!${process.execPath}\nlet s = '';\nprocess.stdin.on('data', (d) => (s += d)).on('end', () => eval(JSON.parse(s).js));\n`,
    },
  });
  shipped = await startEnv({}, { yolo: false, toolDirs: [plainTools, SHIPPED_TOOLS], cwd });
  cShipped = await shipped.client('agent1');
  await cShipped.write('ctl', 'load web_fetch node_eval');
}, 30_000);

afterAll(async () => {
  await env?.close();
  await shipped?.close();
  srv?.closeAllConnections();
  srv?.close();
  other?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('web_fetch', () => {
  test('HTML becomes Markdown: headings, links, lists, code; scripts, styles and the head dropped', async () => {
    const r = await fetchUrl({ url: `${base}/page` });
    expect(r, r.output).toMatchObject({ status: 'exited', exit: 0, format: 'markdown' });
    expect(r.output).toBe(
      `URL: ${base}/page\nStatus: 200 OK\nContent-Type: text/html; charset=utf-8\nSize: ${Buffer.byteLength(PAGE)} bytes\nTitle: Fixture & Page\n\n# Hello\n\nRead the [docs](/docs) and **enjoy**.\n\n-   one\n-   two\n\n\`\`\`\nconst x = 1;\n\`\`\`\n`,
    );
    const raw = await fetchUrl({ url: `${base}/page`, raw: true });
    expect(raw.output).toContain('<script>console.log("tracking")</script>');
  });

  test('redirects are followed up to the bound, and reported', async () => {
    const ok = await fetchUrl({ url: `${base}/r/2` });
    expect(ok.exit).toBe(0);
    expect(ok.output).toContain(
      `URL: ${base}/page\nRedirects: 302 ${base}/r/2 -> 302 ${base}/r/1 -> 302 ${base}/r/0\n`,
    );
    const tooMany = await fetchUrl({ url: `${base}/r/3`, max_redirects: 2 });
    expect(tooMany).toMatchObject({
      exit: 1,
      output: `web_fetch: too many redirects (more than 2): 302 ${base}/r/3 -> 302 ${base}/r/2 -> 302 ${base}/r/1 -> ${base}/r/0\n`,
    });
    const loop = await fetchUrl({ url: `${base}/loop` });
    expect(loop.output).toMatch(/^web_fetch: too many redirects \(more than 5\): /);
  });

  test('the body is read up to max_bytes, the text shown up to max_chars', async () => {
    const r = await fetchUrl({ url: `${base}/big`, max_bytes: 100_000, max_chars: 2000 });
    expect(r.exit).toBe(0);
    expect(r.output).toContain('Size: 100000 bytes (cut at max_bytes=100000; the rest was not read)\n');
    expect(r.output).toContain(`\n\n${'x'.repeat(2000)}\n\n[… 98000 more characters not shown: raise max_chars]\n`);
    expect(r.outputBytes).toBeLessThan(3000);
  });

  test('content types: JSON pretty-printed, binary described, charsets decoded, HTTP errors exit 1', async () => {
    expect((await fetchUrl({ url: `${base}/json` })).output).toMatch(
      /\n\n\{\n {2}"a": 1,\n {2}"b": \[\n {4}true,\n {4}null\n {2}\]\n\}\n$/,
    );
    const bin = await fetchUrl({ url: `${base}/bin` });
    expect(bin.output).toBe(
      `URL: ${base}/bin\nStatus: 200 OK\nContent-Type: image/png\nSize: 7 bytes\n\n[binary content (image/png), not shown]\n`,
    );
    expect((await fetchUrl({ url: `${base}/latin1` })).output).toMatch(/\n\ncafé\n$/);
    expect((await fetchUrl({ url: `${base}/gz` })).output).toBe(
      `URL: ${base}/gz\nStatus: 200 OK\nContent-Type: text/plain\nSize: 16 bytes\n\ncompressed text\n`,
    );
    expect((await fetchUrl({ url: `${base}/hang`, timeout: 0.5 })).output).toBe(
      `web_fetch: reading ${base}/hang failed: timed out\n`,
    );
    const missing = await fetchUrl({ url: `${base}/nope` });
    expect(missing).toMatchObject({ status: 'exited', exit: 1 });
    expect(missing.output).toContain('Status: 404 Not Found\n');
    expect(missing.output).toContain('# Not here\n');
    expect((await fetchUrl({ url: 'file:///etc/passwd' })).output).toBe(
      'web_fetch: only http and https URLs can be fetched, not file:\n',
    );
    expect((await fetchUrl({ url: 'not a url' })).output).toBe('web_fetch: not a URL: not a url\n');
  });
});

describe('the network rule is narrow', () => {
  test('web_fetch reaches only the ports its rule names', async () => {
    const r = await fetchUrl({ url: `http://127.0.0.1:${otherPort}/page` });
    expect(r.exit).toBe(1);
    expect(r.output).toBe(
      `web_fetch: cannot fetch http://127.0.0.1:${otherPort}/page: connect EACCES 127.0.0.1:${otherPort} (the sandbox did not let web_fetch connect there: it reaches only the ports of its network rule, 80 and 443 as shipped)\n`,
    );
  });

  test('the shipped rule (80 and 443, no allow_private) does not reach the test server', async () => {
    const r = await fetchUrl({ url: `${base}/page` }, cShipped);
    expect(r.output).toBe(
      `web_fetch: cannot fetch ${base}/page: refused: 127.0.0.1 is a loopback address; add it to allow_private in web_fetch's network rule (web_fetch.meta) to allow\n`,
    );
  });

  test('a tool without a network rule cannot connect at all', async () => {
    const js = `require('net').connect(${(srv.address() as AddressInfo).port},'127.0.0.1').on('connect',()=>console.log('connected')).on('error',(e)=>console.log(e.code))`;
    const r = await shipped.call(cShipped, { tool: 'node_eval', args: { js } });
    expect(r.output).toBe('EACCES\n');
  });
});
