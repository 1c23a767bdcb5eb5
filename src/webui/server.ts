/**
 * Headless web mode: the built renderer (out/renderer) and a WebSocket that carries 9P frames to olliesrv,
 * served on loopback only. The gateway moves bytes and nothing else: every semantic lives in the namespace.
 *
 * Protection: a random token per start, printed in the URL. The page and every asset need it (in the query,
 * or in the HttpOnly cookie the page sets so that the page's own asset requests carry it); the WebSocket
 * needs it in its query. Anything else gets 403, and an upgrade without it is refused before any 9P flows.
 * Host and Origin are checked too, so that a page on another site (or a DNS-rebound name) cannot reach it
 * even if it guessed the port.
 */
import { privateFile, writePrivateFile } from '../platform/private.js';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import { webSocketChannel, type Server, type WebSocketLike } from '../ninep/index.js';

export interface WebUiOptions {
  /** The 9P server to bridge (the daemon's). */
  server: Server<unknown>;
  /** TCP port on 127.0.0.1; 0 picks a free one. */
  port?: number;
  /** The built renderer; defaults to out/renderer of this checkout or package. */
  rendererDir?: string;
  /** A fixed token (tests); by default 32 random bytes, hex. */
  token?: string;
}

export interface WebUi {
  readonly url: string;
  readonly port: number;
  readonly token: string;
  close(): Promise<void>;
}

const HOST = '127.0.0.1';
const COOKIE = 'ollie_token';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.woff2': 'font/woff2',
};

/** The same policy as the Electron window's (src/renderer/index.html), plus the WebSocket. */
const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

export function defaultRendererDir(): string {
  // dist/webui/server.js and src/webui/server.ts are both two levels below the root.
  return resolve(import.meta.dirname, '../../out/renderer');
}

function sameToken(given: string | undefined | null, token: string): boolean {
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function cookieToken(req: IncomingMessage): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === COOKIE) return v.join('=');
  }
  return undefined;
}

/**
 * Starts the web UI on the token and port of its last start (kept in `stateFile`, 0600 in the private runtime
 * directory), so that a page left open across a daemon restart reconnects instead of being refused for ever; a
 * port taken since is given up for a free one. Tokens last as long as the runtime directory (a logout clears it).
 */
export async function startRememberedWebUi(opts: Omit<WebUiOptions, 'token'> & { stateFile: string }): Promise<WebUi> {
  let last: { token?: unknown; port?: unknown } = {};
  try {
    privateFile(opts.stateFile, 'web UI state');
    last = JSON.parse(readFileSync(opts.stateFile, 'utf8')) as typeof last;
  } catch {
    // None yet, or unreadable: a fresh token and port.
  }
  const token = typeof last.token === 'string' && /^[0-9a-f]{64}$/.test(last.token) ? last.token : undefined;
  const lastPort = typeof last.port === 'number' && Number.isInteger(last.port) ? last.port : undefined;
  let ui: WebUi;
  try {
    ui = await startWebUi({ ...opts, token, port: opts.port ?? lastPort ?? 0 });
  } catch (e) {
    if (opts.port !== undefined || lastPort === undefined || (e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
    ui = await startWebUi({ ...opts, token, port: 0 });
  }
  writePrivateFile(opts.stateFile, JSON.stringify({ token: ui.token, port: ui.port }));
  return ui;
}

export async function startWebUi(opts: WebUiOptions): Promise<WebUi> {
  const token = opts.token ?? randomBytes(32).toString('hex');
  const rootDir = resolve(opts.rendererDir ?? defaultRendererDir());
  let port = 0;
  const allowedHosts = (): string[] => [`${HOST}:${port}`, `localhost:${port}`];

  const deny = (res: ServerResponse, code: number, msg: string): void => {
    res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
    res.end(`${msg}\n`);
  };

  const http = createServer((req, res) => {
    if (!allowedHosts().includes(req.headers.host ?? '')) return deny(res, 403, 'forbidden host');
    if (req.method !== 'GET' && req.method !== 'HEAD') return deny(res, 405, 'method not allowed');
    const url = new URL(req.url ?? '/', `http://${HOST}:${port}`);
    const viaQuery = sameToken(url.searchParams.get('token'), token);
    if (!viaQuery && !sameToken(cookieToken(req), token)) return deny(res, 403, 'forbidden: this URL needs the token printed by `ollie serve --ui`');
    let rel: string;
    try {
      rel = decodeURIComponent(url.pathname);
    } catch {
      return deny(res, 400, 'bad path');
    }
    if (rel === '/' || rel === '') rel = '/index.html';
    const file = normalize(join(rootDir, rel));
    if (!file.startsWith(rootDir + sep)) return deny(res, 403, 'forbidden path');
    if (!existsSync(file) || !statSync(file).isFile()) {
      if (rel === '/index.html') return deny(res, 503, `the renderer is not built (${rootDir} is missing); run \`npm run build:app\``);
      return deny(res, 404, 'not found');
    }
    const headers: Record<string, string> = {
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'content-security-policy': CSP,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-store',
    };
    // The page's own requests (scripts, styles) cannot carry the query token: a strict, HttpOnly cookie does.
    if (viaQuery) headers['set-cookie'] = `${COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`;
    res.writeHead(200, headers);
    res.end(req.method === 'HEAD' ? undefined : readFileSync(file));
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: 16 * 1024 * 1024 });
  http.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const refuse = (code: number, msg: string): void => {
      socket.end(`HTTP/1.1 ${code} ${msg}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    const url = new URL(req.url ?? '/', `http://${HOST}:${port}`);
    if (!allowedHosts().includes(req.headers.host ?? '')) return refuse(403, 'Forbidden');
    const origin = req.headers.origin;
    if (origin !== undefined && !allowedHosts().some((h) => origin === `http://${h}`)) return refuse(403, 'Forbidden');
    if (url.pathname !== '/9p' || !sameToken(url.searchParams.get('token'), token)) return refuse(403, 'Forbidden');
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      // The page presented this start's token (checked above): its channel is the owner's ('local' origin).
      opts.server.serve(webSocketChannel(ws as unknown as WebSocketLike), { kind: 'local' });
    });
  });

  await new Promise<void>((res, rej) => {
    http.once('error', rej);
    http.listen(opts.port ?? 0, HOST, () => {
      http.off('error', rej);
      res();
    });
  });
  port = (http.address() as AddressInfo).port;
  return {
    url: `http://${HOST}:${port}/?token=${token}`,
    port,
    token,
    async close() {
      for (const c of wss.clients) c.terminate();
      wss.close();
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
    },
  };
}
