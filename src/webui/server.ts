/**
 * Headless web mode: the built renderer (out/renderer) and a WebSocket that carries 9P frames to olliesrv, mounted
 * at `/` on the daemon's loopback front door (src/platform/front-door.ts), which checks Host, Origin and the token
 * before anything here runs: the page and its assets need the token (in the query of the printed URL, then in the
 * cookie the door sets), the WebSocket at /9p needs it too, and is refused before any 9P flows. The gateway moves
 * bytes and nothing else: every semantic lives in the namespace. `/9p?to=ssh!HOST[!SOCK]` ("Connect to…") moves
 * them to the daemon on that host instead (src/platform/daemon-choice.ts).
 */
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import { webSocketChannel, type Server, type WebSocketLike } from '../ninep/index.js';
import { bridgeToDaemon, closeReason, parseDaemonChoice } from '../platform/daemon-choice.js';
import type { SshAddress } from '../platform/dial.js';
import { startFrontDoor, type FrontDoor } from '../platform/front-door.js';

export interface WebUiMountOptions {
  /** The 9P server to bridge (the daemon's). */
  server: Server<unknown>;
  /** The built renderer; defaults to out/renderer of this checkout or package. */
  rendererDir?: string;
}

export interface WebUiOptions extends WebUiMountOptions {
  /** TCP port on 127.0.0.1; 0 picks a free one. */
  port?: number;
  /** A fixed token (tests); by default 32 random bytes, hex. */
  token?: string;
}

export interface WebUi {
  readonly url: string;
  readonly port: number;
  readonly token: string;
  close(): Promise<void>;
}

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
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

export function defaultRendererDir(): string {
  // dist/webui/server.js and src/webui/server.ts are both two levels below the root.
  return resolve(import.meta.dirname, '../../out/renderer');
}

/** The web UI's URL on `door`: the page, with the token the page then carries to its WebSocket. */
export function webUiUrl(door: FrontDoor): string {
  return `${door.origin}/?token=${door.token}`;
}

/** Mounts the web UI at `/` of `door`. */
export function mountWebUi(door: FrontDoor, opts: WebUiMountOptions): void {
  const rootDir = resolve(opts.rendererDir ?? defaultRendererDir());
  const deny = (res: ServerResponse, code: number, msg: string): void => {
    res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(`${msg}\n`);
  };
  const wss = new WebSocketServer({ noServer: true, maxPayload: 16 * 1024 * 1024 });
  door.mount({
    prefix: '/',
    errors: 'text',
    pageCookie: true,
    request(req, res, url) {
      if (req.method !== 'GET' && req.method !== 'HEAD') return deny(res, 405, 'method not allowed');
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
        if (rel === '/index.html')
          return deny(res, 503, `the renderer is not built (${rootDir} is missing); run \`npm run build:app\``);
        return deny(res, 404, 'not found');
      }
      // A symbolic link in the build (planted, or left by a tool) must not serve a file from elsewhere.
      if (!realpathSync(file).startsWith(realpathSync(rootDir) + sep)) return deny(res, 404, 'not found');
      res.writeHead(200, {
        'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
        'content-security-policy': CSP,
      });
      res.end(req.method === 'HEAD' ? undefined : readFileSync(file));
    },
    upgrade(req: IncomingMessage, socket: Socket, head: Buffer, url: URL) {
      if (url.pathname !== '/9p')
        return void socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
        // The page presented the token (the door checked it): its channel is the owner's ('local' origin), or,
        // with `to=ssh!HOST[!SOCK]` ("Connect to…"), the raw 9P stream of the daemon on that host.
        const channel = webSocketChannel(ws as unknown as WebSocketLike);
        let to: SshAddress | undefined;
        try {
          to = parseDaemonChoice(url.searchParams.get('to'));
        } catch (e) {
          // Refused after the upgrade so that the page can show why (the close reason).
          return void ws.close(4400, closeReason((e as Error).message));
        }
        if (!to) return void opts.server.serve(channel, { kind: 'local' });
        bridgeToDaemon(channel, to, (why) => ws.close(4502, closeReason(why)));
      });
    },
    close() {
      for (const c of wss.clients) c.terminate();
      wss.close();
    },
  });
}

function asWebUi(door: FrontDoor): WebUi {
  return { url: webUiUrl(door), port: door.port, token: door.token, close: () => door.close() };
}

/** A front door of its own with only the web UI on it (tests; `ollie serve` mounts it on its shared door). */
export async function startWebUi(opts: WebUiOptions): Promise<WebUi> {
  const door = await startFrontDoor({ port: opts.port, token: opts.token });
  mountWebUi(door, opts);
  return asWebUi(door);
}
