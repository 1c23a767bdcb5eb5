/**
 * SSRF through web_fetch, attacked as a model would: it controls the URL (and what the pages it fetches say),
 * and wants what answers on the machine itself or on the private network.
 *
 * The honest server and the target both run on loopback, so the test has to tell them apart: web_fetch runs
 * (the real executable, sandboxed by a real toolsrv) under a user .meta whose network rule lets the sandbox
 * connect to both ports and whose allow_private names only the honest server (127.0.0.1:PORT). Whatever reaches
 * the target's port therefore got past web_fetch's own address check, not the sandbox: the target counts every
 * request it receives, and each attack must leave that count at zero.
 *
 * Names resolving to loopback need a resolver that answers as an attacker's DNS would; those attacks call
 * webFetch() in-process with such a lookup (the real connection path, real sockets, a real target).
 */
import type { LookupAddress } from 'node:dns';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { parseAllowList } from '../../src/tools/web/address.js';
import { webFetch } from '../../src/tools/web/fetch.js';
import { SHIPPED_TOOLS } from '../../src/toolsrv/server.js';
import { startEnv, type Env } from '../toolsrv/helpers.js';
import { buildNative, readMeta } from '../toolsrv/sandbox-helpers.js';

const SECRET = 'TOP SECRET: the metadata service credentials';

/** The target: anything private a model would like to read. Listens on :: (IPv6 and IPv4, every loopback address). */
let target: http.Server;
let T: number;
const hits: Array<{ url: string; host: string; local: string }> = [];
/** The honest server on 127.0.0.1: pages, and redirects to wherever the attacker wants (?to=URL). */
let honest: http.Server;
let A: number;
let env: Env;
let c: Client;
const dirs: string[] = [];

const listen = (srv: http.Server, host: string): Promise<number> =>
  new Promise((r) => srv.listen(0, host, () => r((srv.address() as AddressInfo).port)));

const refusal = (what: string): string =>
  `refused: ${what}; add it to allow_private in web_fetch's network rule (web_fetch.meta) to allow`;

async function viaToolsrv(url: string): Promise<{ exit: number | null; output: string }> {
  const r = await env.call(c, { tool: 'web_fetch', args: { url, timeout: 10 } });
  return { exit: r.exit, output: r.output };
}

beforeAll(async () => {
  buildNative();
  target = http.createServer((req, res) => {
    hits.push({ url: req.url ?? '', host: req.headers.host ?? '', local: req.socket.localAddress ?? '' });
    res.writeHead(200, { 'content-type': 'text/plain' }).end(SECRET);
  });
  T = await listen(target, '::');
  honest = http.createServer((req, res) => {
    const to = new URL(req.url ?? '/', 'http://x').searchParams.get('to');
    if (to) res.writeHead(302, { location: to }).end();
    else res.writeHead(200, { 'content-type': 'text/plain' }).end('public docs\n');
  });
  A = await listen(honest, '127.0.0.1');
  const userTools = mkdtempSync(join(tmpdir(), 'ssrf-tools-'));
  const cwd = mkdtempSync(join(tmpdir(), 'ssrf-cwd-'));
  dirs.push(userTools, cwd);
  writeFileSync(
    join(userTools, 'web_fetch.meta'),
    JSON.stringify({
      ...readMeta('web_fetch'),
      sandbox: { network: { connect_tcp: [A, T], allow_private: [`127.0.0.1:${A}`] } },
    }),
  );
  symlinkSync(join(SHIPPED_TOOLS, 'web_fetch'), join(userTools, 'web_fetch'));
  // The control: the same executable and ports, with the target allow-listed.
  writeFileSync(
    join(userTools, 'web_fetch_open.meta'),
    JSON.stringify({
      ...readMeta('web_fetch'),
      sandbox: { network: { connect_tcp: [A, T], allow_private: [`127.0.0.1:${T}`] } },
    }),
  );
  symlinkSync(join(SHIPPED_TOOLS, 'web_fetch'), join(userTools, 'web_fetch_open'));
  env = await startEnv({}, { yolo: false, toolDirs: [userTools, SHIPPED_TOOLS], cwd });
  c = await env.client('agent1');
  await c.write('ctl', 'load web_fetch web_fetch_open');
}, 30_000);

afterAll(async () => {
  await env?.close();
  target?.close();
  honest?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

beforeEach(() => {
  hits.length = 0;
});

describe('the control: what the rule allows still works', () => {
  test('the allow-listed server answers, directly and through its own redirect', async () => {
    expect(await viaToolsrv(`http://127.0.0.1:${A}/docs`)).toEqual({
      exit: 0,
      output: expect.stringContaining('\n\npublic docs\n') as string,
    });
    const hop = await viaToolsrv(`http://127.0.0.1:${A}/?to=/docs`);
    expect(hop.exit).toBe(0);
    expect(hop.output).toContain(`Redirects: 302 http://127.0.0.1:${A}/?to=/docs\n`);
  });

  test('the sandbox would let web_fetch reach the target: only web_fetch itself stands between', async () => {
    // The same executable under the same ports, with the target allow-listed instead, reads it.
    const r = await env.call(c, { tool: 'web_fetch_open', args: { url: `http://127.0.0.1:${T}/secret` } });
    expect(r, r.output).toMatchObject({ status: 'exited', exit: 0 });
    expect(r.output).toContain(SECRET);
    expect(hits).toHaveLength(1);
  });
});

describe('the target on loopback, addressed directly', () => {
  test.each([
    [`http://127.0.0.1:{T}/secret`, refusal('127.0.0.1 is a loopback address')],
    [`http://127.0.0.2:{T}/secret`, refusal('127.0.0.2 is a loopback address')],
    [`http://localhost:{T}/secret`, refusal('localhost is the local machine (a loopback name)')],
    [`http://LocalHost.:{T}/secret`, refusal('localhost is the local machine (a loopback name)')],
    [`http://metadata.localhost:{T}/secret`, refusal('metadata.localhost is the local machine (a loopback name)')],
    [`http://[::1]:{T}/secret`, refusal('::1 is a loopback address')],
    [`http://[::]:{T}/secret`, refusal(':: is the unspecified address')],
    [`http://0.0.0.0:{T}/secret`, refusal('0.0.0.0 is a "this network" address (0.0.0.0/8 reaches the local machine)')],
    [`http://0:{T}/secret`, refusal('0.0.0.0 is a "this network" address (0.0.0.0/8 reaches the local machine)')],
    [`http://2130706433:{T}/secret`, refusal('127.0.0.1 is a loopback address')],
    [`http://0x7f.1:{T}/secret`, refusal('127.0.0.1 is a loopback address')],
    [`http://017700000001:{T}/secret`, refusal('127.0.0.1 is a loopback address')],
    [`http://127.1:{T}/secret`, refusal('127.0.0.1 is a loopback address')],
    [
      `http://[::ffff:127.0.0.1]:{T}/secret`,
      refusal('::ffff:7f00:1 is an IPv4-mapped address of 127.0.0.1, a loopback address'),
    ],
    [
      `http://[::ffff:7f00:1]:{T}/secret`,
      refusal('::ffff:7f00:1 is an IPv4-mapped address of 127.0.0.1, a loopback address'),
    ],
    [
      `http://[::127.0.0.1]:{T}/secret`,
      refusal('::7f00:1 is an IPv4-compatible address (deprecated; it reaches IPv4 hosts)'),
    ],
    // The allow-list names 127.0.0.1 with the honest server's port only.
    [`http://127.0.0.1:{T}/?to=x`, refusal('127.0.0.1 is a loopback address')],
  ])('%s is refused', async (spelled, why) => {
    const url = spelled.replace('{T}', String(T));
    const r = await viaToolsrv(url);
    expect(r.exit).toBe(1);
    expect(r.output).toMatch(/^web_fetch: cannot fetch /);
    expect(r.output).toContain(`: ${why}\n`);
    expect(r.output).not.toContain(SECRET);
    expect(hits).toEqual([]);
  });
});

describe('the target reached through a redirect from the allowed server', () => {
  test.each([
    `http://127.0.0.1:{T}/secret`,
    `http://localhost:{T}/secret`,
    `http://[::1]:{T}/secret`,
    `http://2130706433:{T}/secret`,
    `http://[::ffff:7f00:1]:{T}/secret`,
  ])('a redirect to %s is refused at that hop', async (spelled) => {
    const to = spelled.replace('{T}', String(T));
    const start = `http://127.0.0.1:${A}/?to=${encodeURIComponent(to)}`;
    const r = await viaToolsrv(start);
    expect(r.exit).toBe(1);
    expect(r.output).toMatch(
      new RegExp(
        `^web_fetch: cannot fetch \\S+ \\(redirected: 302 ${start.replace(/[.?*+()[\]\\]/g, '\\$&')}\\): refused: `,
      ),
    );
    expect(r.output).not.toContain(SECRET);
    expect(hits).toEqual([]);
  });

  test('a redirect chain that comes back to the target after several allowed hops is refused too', async () => {
    const to = `http://127.0.0.1:${T}/secret`;
    const inner = `http://127.0.0.1:${A}/?to=${encodeURIComponent(to)}`;
    const r = await viaToolsrv(`http://127.0.0.1:${A}/?to=${encodeURIComponent(inner)}`);
    expect(r.output).toContain(`): ${refusal('127.0.0.1 is a loopback address')}\n`);
    expect(hits).toEqual([]);
  });
});

describe('names that resolve to private addresses (an attacker’s DNS)', () => {
  /** A resolver whose answers the attacker chose, counting its questions. */
  const dnsOf = (answers: Record<string, string[]>) => {
    const asked: string[] = [];
    const lookup = ((host: string, _o: unknown, cb: (e: Error | null, a: LookupAddress[]) => void) => {
      asked.push(host);
      const a = answers[host];
      if (!a) return cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }), []);
      cb(
        null,
        a.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
      );
    }) as unknown as typeof import('node:dns').lookup;
    return { lookup, asked };
  };
  const allowHonest = () => parseAllowList([`127.0.0.1:${A}`], 'test');

  test('a name resolving to 127.0.0.1, ::1, 169.254.169.254 or a private network is refused, naming the address', async () => {
    const { lookup } = dnsOf({
      'evil.test': ['127.0.0.1'],
      'evil6.test': ['::1'],
      'meta.test': ['169.254.169.254'],
      'lan.test': ['192.168.1.20', '10.0.0.7'],
      'mapped.test': ['::ffff:127.0.0.1'],
    });
    for (const [host, why] of [
      ['evil.test', '127.0.0.1, a loopback address'],
      ['evil6.test', '::1, a loopback address'],
      ['meta.test', '169.254.169.254, a link-local address (where cloud metadata services answer)'],
      ['lan.test', '192.168.1.20, a private address'],
      ['mapped.test', '::ffff:127.0.0.1, an IPv4-mapped address of 127.0.0.1, a loopback address'],
    ] as const) {
      const r = await webFetch({ url: `http://${host}:${T}/secret` }, { lookup, allowPrivate: allowHonest() });
      expect(r).toEqual({
        exit: 1,
        output: `web_fetch: cannot fetch http://${host}:${T}/secret: refused: ${host} resolves to ${why}; add ${host} (or ${why.split(',')[0]}) to allow_private in web_fetch's network rule (web_fetch.meta) to allow\n`,
      });
    }
    expect(hits).toEqual([]);
  });

  test('resolved once per hop, and the socket gets only the vetted address', async () => {
    // The name answers a refused address first and an allowed one second: the connection must go to the
    // second, never to the first (no check-then-resolve-again gap a rebinding DNS could use).
    const { lookup, asked } = dnsOf({ 'mixed.test': ['127.0.0.1', '127.0.0.3'] });
    const r = await webFetch(
      { url: `http://mixed.test:${T}/secret` },
      { lookup, allowPrivate: parseAllowList(['127.0.0.3'], 'test') },
    );
    expect(r.exit).toBe(0);
    expect(hits).toEqual([{ url: '/secret', host: `mixed.test:${T}`, local: '::ffff:127.0.0.3' }]);
    expect(asked).toEqual(['mixed.test']);
  });

  test('a redirect from the allowed server to a name resolving to loopback is refused', async () => {
    const { lookup } = dnsOf({ 'rebind.test': ['127.0.0.1'] });
    const start = `http://127.0.0.1:${A}/?to=${encodeURIComponent(`http://rebind.test:${T}/secret`)}`;
    const r = await webFetch({ url: start }, { lookup, allowPrivate: allowHonest() });
    expect(r.output).toBe(
      `web_fetch: cannot fetch http://rebind.test:${T}/secret (redirected: 302 ${start}): refused: rebind.test resolves to 127.0.0.1, a loopback address; add rebind.test (or 127.0.0.1) to allow_private in web_fetch's network rule (web_fetch.meta) to allow\n`,
    );
    expect(hits).toEqual([]);
  });

  test('a name the allow-list names is reached, with its own Host header', async () => {
    const { lookup } = dnsOf({ 'docs.internal': ['127.0.0.1'] });
    const r = await webFetch(
      { url: `http://docs.internal:${T}/secret` },
      { lookup, allowPrivate: parseAllowList([`docs.internal:${T}`], 'test') },
    );
    expect(r.exit).toBe(0);
    expect(hits).toEqual([expect.objectContaining({ host: `docs.internal:${T}` })]);
  });
});
