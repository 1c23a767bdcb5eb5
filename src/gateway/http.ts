/**
 * The HTTP gateway: REST over the 9P namespace for curl and scripts, mounted at /api on the daemon's loopback
 * front door (src/platform/front-door.ts), which checks Host, Origin and the token before anything here runs.
 *
 *   GET     reads: a directory lists as JSON; a file is JSON where its format is well defined (formats.ts) and text
 *           otherwise (`?raw=1` always gives the text); a streaming file streams, chunked (NDJSON for line formats)
 *           or as server-sent events with `Accept: text/event-stream`. `?request=` is written first on files that
 *           take a request before streaming (event filters).
 *   POST    writes the body; a control file's reply (read on the same fid) is the response.
 *   DELETE  removes; PATCH renames ({"name": "new"} or the name as text).
 *   GET /openapi.json describes all of it, generated from the namespace declaration.
 *
 * It only moves bytes: it is a 9P client of the daemon's Server over an in-process channel pair and shares no
 * object with the daemon. The declaration (Namespace.declared()) says what each path is, so that the gateway
 * knows which reads stream, and which files the spec withholds (`internal`): those answer 404 as if absent.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { userInfo } from 'node:os';
import { Client, DMDIR, modeString, OREAD, ORDWR, type DeclaredNode, type Server } from '../ninep/index.js';
import { formatsOf, lineFormat, render, renderLine, type Format } from './formats.js';
import { openApi } from './openapi.js';
import { channelPair } from './pair.js';
import { startFrontDoor, type FrontDoor } from '../platform/front-door.js';

/** Where the gateway is mounted on the front door. */
export const GATEWAY_PREFIX = '/api';

export interface HttpGatewayMountOptions {
  /** The 9P server to re-export (the daemon's). Its file server must be a declared Namespace. */
  server: Server<unknown>;
  /** The 9P user the gateway attaches as; the daemon's owner by default. */
  uname?: string;
  /** JSON formats by declared pattern; by default the ones declared on the namespace's files. */
  formats?: Readonly<Record<string, Format>>;
}

export interface HttpGatewayOptions extends HttpGatewayMountOptions {
  /** Port on 127.0.0.1; 0 (the default) picks a free one. */
  port?: number;
  /** A fixed token (tests); by default 32 random bytes, hex, new on every start. */
  token?: string;
}

export interface HttpGateway {
  /** The gateway's root: the front door's origin and /api. */
  readonly url: string;
  readonly port: number;
  readonly token: string;
  /** Closes the front door the gateway is mounted on (with whatever else is mounted there). */
  close(): Promise<void>;
}

/** Largest request body: prompts and plans, not uploads. */
const MAX_BODY = 16 * 1024 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** 9P error strings to HTTP statuses: absent → 404, refused by permissions → 403, anything else the server refused → 400. */
function statusOf(msg: string): number {
  if (/file not found|file does not exist|no such/i.test(msg)) return 404;
  if (/permission denied/i.test(msg)) return 403;
  return 400;
}

/** The declared node a concrete path lands on: static names first, then the template directory (as the namespace walks). */
function match(root: DeclaredNode, names: string[]): DeclaredNode | undefined {
  let n: DeclaredNode | undefined = root;
  for (const name of names) {
    const kids: DeclaredNode[] = n.children;
    n = kids.find((c) => c.param === undefined && c.name === name) ?? kids.find((c) => c.param !== undefined);
    if (!n) return undefined;
  }
  return n;
}

function allowed(n: DeclaredNode): string {
  const m: string[] = [];
  if (n.read) m.push('GET');
  if (n.write) m.push('POST');
  if (n.removable) m.push('DELETE');
  if (n.renamable) m.push('PATCH');
  return m.join(', ');
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on('data', (d: Buffer) => {
      size += d.length;
      if (size > MAX_BODY) {
        reject(new HttpError(413, `request body larger than ${MAX_BODY} bytes`));
        req.destroy();
      } else parts.push(d);
    });
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function write(res: ServerResponse, data: string | Uint8Array): Promise<void> {
  return new Promise((resolve) => (res.write(data) ? resolve() : res.once('drain', resolve)));
}

/** Mounts the gateway at /api of `door`; resolves once its 9P session with the daemon is up. */
export async function mountHttpGateway(door: FrontDoor, opts: HttpGatewayMountOptions): Promise<HttpGateway> {
  const fs = opts.server.options.fs as { declared?: () => DeclaredNode };
  if (typeof fs.declared !== 'function')
    throw new Error('the HTTP gateway needs a server whose file server is a declared Namespace');
  const tree = fs.declared();
  const formats = opts.formats ?? formatsOf(tree);
  const [mine, theirs] = channelPair();
  // The gateway checked the caller's token itself: its channel is the owner's (olliesrv's 'local' origin).
  opts.server.serve(theirs, { kind: 'local' });
  const c = await Client.connect(mine, { uname: opts.uname ?? userInfo().username });
  const base = `${door.origin}${GATEWAY_PREFIX}`;

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    const text = typeof body === 'string' ? body : `${JSON.stringify(body)}\n`;
    res.writeHead(status, {
      'content-type': typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json',
      ...headers,
    });
    res.end(text);
  };

  /** Content as JSON when its format is known and it parses, else as text. */
  const reply = (res: ServerResponse, status: number, f: Format | undefined, text: string, raw: boolean): void => {
    const json = f && !raw ? render(f, text) : undefined;
    send(res, status, json === undefined ? text : json);
  };

  /** Streams a file (or a request's replies) to the response until it ends or the HTTP client goes away. */
  const stream = async (
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    f: Format | undefined,
    raw: boolean,
    request: string | undefined,
  ): Promise<void> => {
    const sse = (req.headers.accept ?? '').includes('text/event-stream');
    const lines = !raw && lineFormat(f);
    const life = new AbortController();
    res.on('close', () => life.abort(new Error('client went away')));
    // Opening (and writing the request) decides the status: errors before the first byte are real HTTP errors.
    const fid = await c.open(path, request === undefined ? OREAD : ORDWR, life.signal);
    try {
      if (request !== undefined) await fid.writeAll(new TextEncoder().encode(request), life.signal);
    } catch (e) {
      await fid.clunk().catch(() => undefined);
      throw e;
    }
    res.writeHead(200, {
      'content-type': sse
        ? 'text/event-stream; charset=utf-8'
        : lines
          ? 'application/x-ndjson'
          : 'text/plain; charset=utf-8',
      'x-accel-buffering': 'no',
    });
    const dec = new TextDecoder();
    let buf = '';
    const emit = async (line: string): Promise<void> => {
      const out = lines ? JSON.stringify(renderLine(f!, line)) : line;
      await write(res, sse ? `data: ${out}\n\n` : `${out}\n`);
    };
    res.flushHeaders();
    try {
      for (let offset = 0; ;) {
        const chunk = await fid.read(offset, fid.iounit, life.signal);
        if (chunk.length === 0) break;
        offset += chunk.length;
        if (!sse && !lines) await write(res, chunk);
        else {
          buf += dec.decode(chunk, { stream: true });
          let nl: number;
          while ((nl = buf.indexOf('\n')) !== -1) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (line !== '' || !lines) await emit(line);
          }
        }
      }
      if (buf) await emit(buf);
    } catch (e) {
      if (!life.signal.aborted) res.destroy(e as Error);
      return;
    } finally {
      // The aborted read was flushed; clunking closes the file, ending a subscription on the server.
      await fid.clunk().catch(() => undefined);
    }
    res.end();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const method = req.method ?? 'GET';
    const rel = url.pathname.slice(GATEWAY_PREFIX.length) || '/';
    if (rel === '/openapi.json') {
      if (method !== 'GET') throw new HttpError(405, 'method not allowed', { allow: 'GET' });
      return send(res, 200, openApi(tree, formats, base));
    }
    let names: string[];
    try {
      names = rel
        .split('/')
        .filter((p) => p !== '')
        .map(decodeURIComponent);
    } catch {
      throw new HttpError(400, 'bad path');
    }
    if (names.some((n) => n === '.' || n === '..' || n.includes('/'))) throw new HttpError(400, 'bad path');
    const node = match(tree, names);
    const path = names.join('/');
    // Withheld files answer exactly as absent ones, so the gateway does not reveal what it hides.
    if (!node || node.internal) throw new HttpError(404, `file not found: /${path}`);
    const raw = url.searchParams.has('raw') || (req.headers.accept ?? '').startsWith('text/plain');
    const f = formats[node.pattern];
    const refuse = (): never => {
      throw new HttpError(405, `${method} is not allowed on ${node.pattern} (allowed: ${allowed(node) || 'none'})`, {
        allow: allowed(node),
      });
    };
    switch (method) {
      case 'GET': {
        if (node.read === 'list') {
          const entries = await c.ls(path);
          const visible = entries.filter((st) => {
            const n = match(tree, [...names, st.name]);
            return n !== undefined && !n.internal;
          });
          return send(
            res,
            200,
            visible.map((st) => ({
              name: st.name,
              dir: (st.mode & DMDIR) !== 0,
              mode: modeString(st.mode),
              length: st.length,
            })),
          );
        }
        if (node.read === 'stream' || node.read === 'rdwrStream') {
          return stream(
            req,
            res,
            path,
            f,
            raw,
            node.read === 'rdwrStream' ? (url.searchParams.get('request') ?? '') : undefined,
          );
        }
        if (!node.read) return refuse();
        const life = new AbortController();
        // A read that blocks (goalwait, models) is flushed when the HTTP client goes away.
        res.on('close', () => life.abort(new Error('client went away')));
        const text = await c.readText(path, life.signal);
        return reply(res, 200, f, text, raw);
      }
      case 'POST': {
        if (!node.write) return refuse();
        const body = await readBody(req);
        if (node.write === 'rdwr') return reply(res, 200, f, await c.rdwrText(path, body), raw);
        if (node.write === 'rdwrStream') return stream(req, res, path, f, raw, body.toString('utf8'));
        await c.write(path, body, { truncate: node.write === 'text' });
        res.writeHead(204, { 'cache-control': 'no-store' });
        return void res.end();
      }
      case 'DELETE':
        if (!node.removable) return refuse();
        await c.remove(path);
        res.writeHead(204, { 'cache-control': 'no-store' });
        return void res.end();
      case 'PATCH': {
        if (!node.renamable) return refuse();
        const body = (await readBody(req)).toString('utf8').trim();
        let name = url.searchParams.get('name') ?? body;
        if ((req.headers['content-type'] ?? '').includes('json') || body.startsWith('{')) {
          try {
            name = String((JSON.parse(body) as { name?: unknown }).name ?? '');
          } catch {
            throw new HttpError(400, 'expected {"name": "NEW"}');
          }
        }
        if (!name) throw new HttpError(400, 'a new name is needed: {"name": "NEW"}, the name as text, or ?name=');
        await c.rename(path, name);
        return send(res, 200, { name, path: `/${[...names.slice(0, -1), name].join('/')}` });
      }
      default:
        return refuse();
    }
  };

  door.mount({
    prefix: GATEWAY_PREFIX,
    errors: 'json',
    request(req, res, url) {
      handle(req, res, url).catch((e: unknown) => {
        const err = e as Error;
        if (res.headersSent) return void res.destroy(err);
        if (res.destroyed) return;
        const status = e instanceof HttpError ? e.status : statusOf(err.message);
        send(res, status, { error: err.message }, e instanceof HttpError ? e.headers : {});
      });
    },
    close: () => c.close(),
  });
  return { url: base, port: door.port, token: door.token, close: () => door.close() };
}

/** A front door of its own with only the gateway on it (tests). */
export async function startHttpGateway(opts: HttpGatewayOptions): Promise<HttpGateway> {
  const door = await startFrontDoor({ port: opts.port, token: opts.token });
  try {
    return await mountHttpGateway(door, opts);
  } catch (e) {
    await door.close();
    throw e;
  }
}
