/**
 * The one loopback HTTP server of the daemon: the web UI and the HTTP gateway are mounted on it, behind one
 * token, one Host and Origin check and one set of security headers, all applied here before a mount sees the
 * request. Who may reach it: the owner only, by holding the token (printed at start, kept 0600 in the private
 * runtime directory); tools inside the sandbox can neither read the token nor pass the checks without it.
 *
 * - Listens on 127.0.0.1 only.
 * - Host must name this listener (127.0.0.1:PORT or localhost:PORT): a DNS-rebound name is refused (403)
 *   before anything else is looked at, tokens included.
 * - Origin, when sent, must be this listener's own: a page on another site is refused (403), with or without
 *   the token, for requests and WebSocket upgrades alike. So is a request a browser marks as coming from
 *   another origin (`Sec-Fetch-Site` other than same-origin or none): a page on another local port is
 *   "same-site" for cookies and sends no Origin on a plain GET (an <img>, a <script>), but does say that.
 * - The token, compared in constant time, may come as `Authorization: Bearer TOKEN` (scripts) or `?token=TOKEN`
 *   (the printed URL, a WebSocket). Without it: 401, before any mount is asked.
 * - The `ollie_token` cookie (HttpOnly, SameSite=Strict), set on a GET that brought the token in its query, lets
 *   the page's own asset requests through: GET and HEAD on a mount that asks for it (the web UI's files), and
 *   nothing else, no WebSocket, no gateway. It does not hold the token but a value derived from it, because
 *   browsers send a cookie of 127.0.0.1 to every port of 127.0.0.1: to any local server the owner browses to,
 *   an agent's dev server included.
 * - Every answer has the headers below: no caching, no sniffing, no referrer (a URL holding the token never
 *   travels on), no framing. Mounts add their own content policy. The door logs no request URL, and its
 *   refusals never echo the request, so a token in a URL ends up in no log.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { privateFile, writePrivateFile } from './private.js';

export const LOOPBACK = '127.0.0.1';
const COOKIE = 'ollie_token';

/** On every answer, refusals included. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-resource-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
};

/** What is mounted at a path prefix: plain requests, and optionally WebSocket upgrades. */
export interface Mount {
  /** `/` or a prefix like `/api`: the longest prefix matching a request's path gets it. */
  prefix: string;
  /** Called only once Host, Origin and the token passed. `url` is the request's full URL. */
  request(req: IncomingMessage, res: ServerResponse, url: URL): void;
  upgrade?(req: IncomingMessage, socket: Socket, head: Buffer, url: URL): void;
  /** Whether the page cookie lets GET and HEAD requests in (a page's own assets); otherwise only the token does. */
  pageCookie?: boolean;
  /** How refusals are worded for it: JSON `{"error": …}` (an API) or plain text (pages). */
  errors?: 'json' | 'text';
  /** Called when the door closes (connections it holds of its own, such as WebSockets). */
  close?(): void | Promise<void>;
}

export interface FrontDoorOptions {
  /** TCP port on 127.0.0.1; 0 (the default) picks a free one. */
  port?: number;
  /** A fixed token (tests, a remembered one); by default 32 random bytes, hex. */
  token?: string;
}

export interface FrontDoor {
  /** `http://127.0.0.1:PORT`, without the token. */
  readonly origin: string;
  readonly port: number;
  readonly token: string;
  mount(m: Mount): void;
  close(): Promise<void>;
}

export function sameToken(given: string | undefined | null, token: string): boolean {
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

/** The page cookie's value: derived from the token, so that a cookie that reaches another port is not it. */
function pageCookieValue(token: string): string {
  return createHmac('sha256', token).update('ollie front door page cookie').digest('hex');
}

/** How a request presented the token (or the page cookie), if it did. */
function presented(req: IncomingMessage, url: URL, token: string): 'header' | 'query' | 'cookie' | undefined {
  const bearer = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
  if (sameToken(bearer, token)) return 'header';
  if (sameToken(url.searchParams.get('token'), token)) return 'query';
  if (sameToken(cookieToken(req), pageCookieValue(token))) return 'cookie';
  return undefined;
}

const TOKEN_HELP = 'this needs the token printed by `ollie serve` (Authorization: Bearer TOKEN, or ?token=TOKEN)';

export async function startFrontDoor(opts: FrontDoorOptions = {}): Promise<FrontDoor> {
  const token = opts.token ?? randomBytes(32).toString('hex');
  const mounts: Mount[] = [];
  let port = 0;
  const hosts = (): string[] => [`${LOOPBACK}:${port}`, `localhost:${port}`];

  /** Why a request may not pass, as a status and a message that names nothing of the request; or undefined. */
  const cookie = pageCookieValue(token);
  /** `cookieOk`: a GET or HEAD for a mount that takes the page cookie. */
  const check = (
    req: IncomingMessage,
    url: URL,
    cookieOk: boolean,
  ): { status: number; message: string } | undefined => {
    if (!hosts().includes(req.headers.host ?? '')) return { status: 403, message: 'forbidden host' };
    const origin = req.headers.origin;
    if (origin !== undefined && !hosts().some((h) => origin === `http://${h}`))
      return { status: 403, message: 'forbidden origin' };
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none')
      return { status: 403, message: 'forbidden: a request from another site' };
    const how = presented(req, url, token);
    if (!how || (how === 'cookie' && !cookieOk)) return { status: 401, message: TOKEN_HELP };
    return undefined;
  };
  const mountFor = (path: string): Mount | undefined =>
    mounts
      .filter((m) => m.prefix === '/' || path === m.prefix || path.startsWith(`${m.prefix}/`))
      .sort((a, b) => b.prefix.length - a.prefix.length)[0];
  const urlOf = (req: IncomingMessage): URL | undefined => {
    try {
      return new URL(req.url ?? '/', `http://${LOOPBACK}:${port}`);
    } catch {
      return undefined;
    }
  };

  const http = createServer((req, res) => {
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
    const url = urlOf(req);
    const m = url && mountFor(url.pathname);
    const deny = (status: number, message: string): void => {
      const api = m?.errors === 'json';
      res.writeHead(status, {
        'content-type': api ? 'application/json' : 'text/plain; charset=utf-8',
        ...(status === 401 && { 'www-authenticate': 'Bearer' }),
      });
      res.end(api ? `${JSON.stringify({ error: message })}\n` : `${message}\n`);
    };
    if (!url) return deny(400, 'bad request target');
    const refused = check(req, url, (req.method === 'GET' || req.method === 'HEAD') && m?.pageCookie === true);
    if (refused) return deny(refused.status, refused.message);
    // The page's own requests (scripts, styles) cannot carry the query token: a strict, HttpOnly cookie does.
    if ((req.method === 'GET' || req.method === 'HEAD') && presented(req, url, token) === 'query') {
      res.setHeader('set-cookie', `${COOKIE}=${cookie}; HttpOnly; SameSite=Strict; Path=/`);
    }
    if (!m) return deny(404, 'not found');
    m.request(req, res, url);
  });

  http.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const refuse = (status: number): void => {
      const words =
        status === 401 ? 'Unauthorized' : status === 404 ? 'Not Found' : status === 400 ? 'Bad Request' : 'Forbidden';
      socket.end(`HTTP/1.1 ${status} ${words}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    const url = urlOf(req);
    if (!url) return refuse(400);
    const refused = check(req, url, false);
    if (refused) return refuse(refused.status);
    const m = mountFor(url.pathname);
    if (!m?.upgrade) return refuse(404);
    m.upgrade(req, socket, head, url);
  });

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port ?? 0, LOOPBACK, () => {
      http.off('error', reject);
      resolve();
    });
  });
  port = (http.address() as AddressInfo).port;
  return {
    origin: `http://${LOOPBACK}:${port}`,
    port,
    token,
    mount(m) {
      if (m.prefix !== '/' && !/^(\/[\w.-]+)+$/.test(m.prefix))
        throw new Error(`bad mount prefix ${JSON.stringify(m.prefix)}: "/" or "/name"`);
      if (mounts.some((x) => x.prefix === m.prefix)) throw new Error(`${m.prefix} is mounted already`);
      mounts.push(m);
    },
    async close() {
      for (const m of mounts) await m.close?.();
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
    },
  };
}

/**
 * Starts the door on the token and port of its last start (kept in `stateFile`, 0600 in the private runtime
 * directory), so that a page left open across a daemon restart reconnects instead of being refused for ever,
 * and a script keeps its token; a port taken since is given up for a free one. Tokens last as long as the
 * runtime directory (a logout clears it).
 */
export async function startRememberedFrontDoor(opts: { port?: number; stateFile: string }): Promise<FrontDoor> {
  let last: { token?: unknown; port?: unknown } = {};
  try {
    privateFile(opts.stateFile, 'web UI state');
    last = JSON.parse(readFileSync(opts.stateFile, 'utf8')) as typeof last;
  } catch {
    // None yet, or unreadable: a fresh token and port.
  }
  const token = typeof last.token === 'string' && /^[0-9a-f]{64}$/.test(last.token) ? last.token : undefined;
  const lastPort = typeof last.port === 'number' && Number.isInteger(last.port) ? last.port : undefined;
  let door: FrontDoor;
  try {
    door = await startFrontDoor({ token, port: opts.port ?? lastPort ?? 0 });
  } catch (e) {
    if (opts.port !== undefined || lastPort === undefined || (e as NodeJS.ErrnoException).code !== 'EADDRINUSE')
      throw e;
    door = await startFrontDoor({ token, port: 0 });
  }
  writePrivateFile(opts.stateFile, JSON.stringify({ token: door.token, port: door.port }));
  return door;
}
