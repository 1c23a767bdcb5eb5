/**
 * web_fetch: GET a URL, follow redirects up to a bound, read at most max_bytes of the body, and give the model
 * text: HTML as Markdown (turndown; scripts, styles and other non-content dropped), JSON pretty-printed, other
 * text as is, binary content described rather than shown. It runs in the sandbox with its .meta's network rule
 * (TCP 80 and 443 only): every other tool keeps the policy's network (off by default).
 *
 * The sandbox governs ports, not addresses, so web_fetch itself refuses loopback, private, link-local,
 * multicast and other non-public addresses (address.ts) unless its rule's `allow_private` names them. The
 * check sits where the connection is made: a literal address is checked before connecting, a name is
 * resolved once by a lookup that hands the socket only addresses it has vetted (no second resolution a DNS
 * rebinding could answer differently), and every redirect hop is a new request through the same gate.
 *
 * Exit 0 for a 2xx answer, 1 for anything else (an HTTP error status, too many redirects, a refused address,
 * a network error), always with what happened in words.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { pipeline } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import TurndownService from 'turndown';
import {
  ALLOW_PRIVATE_ENV,
  coversAddress,
  isLocalhostName,
  namesHost,
  normalHost,
  parseAllowList,
  parseIp,
  whyNotPublicAddress,
  type AllowEntry,
} from './address.js';

export interface FetchArgs {
  url: string;
  max_redirects?: number;
  max_bytes?: number;
  max_chars?: number;
  timeout?: number;
  raw?: boolean;
}

const DEFAULTS = { redirects: 5, bytes: 2 << 20, chars: 64 * 1024, timeoutS: 30 };

class FetchError extends Error {}

/** An address web_fetch will not connect to; the message says which and why. */
class RefusedError extends Error {}

export interface FetchOptions {
  /** Hosts, addresses and networks that may be reached although they are not public. */
  allowPrivate?: AllowEntry[];
  /** Name resolution (dns.lookup); tests give a resolver that answers what an attacker's DNS would. */
  lookup?: typeof dnsLookup;
}

const hint = (what: string): string =>
  `add ${what} to allow_private in web_fetch's network rule (web_fetch.meta) to allow`;

/** Refuses a URL's host before any connection when it is a non-public literal address or a localhost name. */
function checkHost(url: URL, port: number, allow: AllowEntry[]): void {
  const host = normalHost(url.hostname);
  if (namesHost(allow, host, port)) return;
  const ip = parseIp(host);
  if (ip !== undefined) {
    const why = whyNotPublicAddress(host);
    if (why && !coversAddress(allow, ip, port)) throw new RefusedError(`refused: ${host} is ${why}; ${hint('it')}`);
    return;
  }
  if (isLocalhostName(host))
    throw new RefusedError(`refused: ${host} is the local machine (a loopback name); ${hint('it')}`);
}

/**
 * The lookup the socket uses for a name: one resolution, every answer checked, only vetted addresses handed
 * on. When none is left the connection fails with the first refusal.
 */
function guardedLookup(host: string, port: number, allow: AllowEntry[], resolve: typeof dnsLookup): LookupFunction {
  return ((
    hostname: string,
    options: { family?: number; hints?: number; all?: boolean },
    cb: (err: Error | null, address: string | LookupAddress[], family?: number) => void,
  ) => {
    const o: LookupAllOptions = {
      all: true,
      ...(options.family && { family: options.family }),
      ...(options.hints !== undefined && { hints: options.hints }),
    };
    resolve(hostname, o, (err, addrs) => {
      if (err) return cb(err, '');
      const ok: LookupAddress[] = [];
      let refusal: string | undefined;
      for (const a of addrs) {
        const ip = parseIp(a.address);
        const why = whyNotPublicAddress(a.address);
        if (!why || (ip !== undefined && coversAddress(allow, ip, port))) ok.push(a);
        else refusal ??= `refused: ${host} resolves to ${a.address}, ${why}; ${hint(`${host} (or ${a.address})`)}`;
      }
      if (!ok.length) return cb(new RefusedError(refusal ?? `refused: ${host} resolves to no address`), '');
      if (options.all) cb(null, ok);
      else cb(null, ok[0]!.address, ok[0]!.family);
    });
  }) as LookupFunction;
}

const DECODERS: Record<string, () => NodeJS.ReadWriteStream> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

interface Answer {
  status: number;
  statusText: string;
  headers: IncomingMessage['headers'];
  res: IncomingMessage;
}

/** One GET, through the address gate. */
function get(url: URL, allow: AllowEntry[], resolve: typeof dnsLookup, signal: AbortSignal): Promise<Answer> {
  const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
  checkHost(url, port, allow);
  const host = normalHost(url.hostname);
  // A host the allow-list names may resolve to anything: the owner vouched for the name.
  const lookup = namesHost(allow, host, port) ? (resolve as LookupFunction) : guardedLookup(host, port, allow, resolve);
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((ok, fail) => {
    const req = mod.request(url, {
      method: 'GET',
      agent: false,
      signal,
      lookup,
      headers: {
        'user-agent': 'Ollie-web_fetch/1',
        accept: 'text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5',
        'accept-encoding': 'gzip, deflate, br',
      },
    });
    req.once('response', (res) =>
      ok({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', headers: res.headers, res }),
    );
    req.once('error', fail);
    req.end();
  });
}

function toMarkdown(html: string): { title?: string; markdown: string } {
  const td = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' });
  td.remove([
    'script',
    'style',
    'noscript',
    'iframe',
    'svg',
    'canvas',
    'template',
    'head',
    'title',
    'meta',
    'link',
    'form',
  ] as TurndownService.Filter);
  const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1]?.replace(/\s+/g, ' ').trim();
  const markdown = td
    .turndown(html)
    .replace(/\n{3,}/g, '\n\n')
    .trim();
  return { ...(title && { title: decodeEntities(title) }), markdown };
}

function decodeEntities(s: string): string {
  const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };
  return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e: string) =>
    e[0] === '#'
      ? String.fromCodePoint(e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10))
      : (named[e.toLowerCase()] ?? m),
  );
}

function kindOf(mime: string): 'html' | 'json' | 'text' | 'binary' {
  if (mime === 'text/html' || mime === 'application/xhtml+xml') return 'html';
  if (mime === 'application/json' || mime.endsWith('+json')) return 'json';
  if (
    mime.startsWith('text/') ||
    mime.endsWith('+xml') ||
    [
      'application/xml',
      'application/javascript',
      'application/x-javascript',
      'application/ecmascript',
      'application/x-sh',
      'application/toml',
      'application/yaml',
      'application/x-yaml',
      '',
    ].includes(mime)
  )
    return 'text';
  return 'binary';
}

/** Reads the (decoded) body up to `max` bytes; the rest is not read. */
async function readCapped(a: Answer, max: number): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  const enc = String(a.headers['content-encoding'] ?? '')
    .trim()
    .toLowerCase();
  const decoder = DECODERS[enc]?.();
  const body = (decoder ? pipeline(a.res, decoder, () => undefined) : a.res) as AsyncIterable<Buffer>;
  const parts: Buffer[] = [];
  let n = 0;
  let truncated = false;
  try {
    for await (const value of body) {
      if (n + value.length > max) {
        parts.push(value.subarray(0, max - n));
        n = max;
        truncated = true;
        break;
      }
      parts.push(value);
      n += value.length;
    }
  } finally {
    a.res.destroy();
  }
  return { bytes: Buffer.concat(parts, n), truncated };
}

function describeError(e: unknown): string {
  const err = e as Error & { code?: string };
  if (err instanceof RefusedError) return err.message;
  const why =
    err.code === 'EACCES'
      ? ' (the sandbox did not let web_fetch connect there: it reaches only the ports of its network rule, 80 and 443 as shipped)'
      : '';
  return `${err.message.replace(/ - Local \([^)]*\)$/, '')}${why}`;
}

export async function webFetch(a: FetchArgs, o: FetchOptions = {}): Promise<{ output: string; exit: number }> {
  const allow = o.allowPrivate ?? [];
  const resolve = o.lookup ?? dnsLookup;
  let url: URL;
  try {
    url = new URL(a.url);
  } catch {
    return { output: `web_fetch: not a URL: ${a.url}\n`, exit: 1 };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { output: `web_fetch: only http and https URLs can be fetched, not ${url.protocol}\n`, exit: 1 };
  const maxRedirects = Math.max(0, Math.min(20, a.max_redirects ?? DEFAULTS.redirects));
  const maxBytes = Math.max(1024, Math.min(16 << 20, a.max_bytes ?? DEFAULTS.bytes));
  const maxChars = Math.max(1024, Math.min(1 << 20, a.max_chars ?? DEFAULTS.chars));
  const signal = AbortSignal.timeout(Math.max(1, Math.min(300, a.timeout ?? DEFAULTS.timeoutS)) * 1000);
  const chain: string[] = [];
  let res: Answer;
  try {
    for (;;) {
      res = await get(url, allow, resolve, signal);
      const loc = res.headers.location;
      if (res.status >= 300 && res.status < 400 && loc) {
        res.res.destroy();
        chain.push(`${res.status} ${url.href}`);
        if (chain.length > maxRedirects)
          throw new FetchError(
            `too many redirects (more than ${maxRedirects}): ${chain.join(' -> ')} -> ${new URL(loc, url).href}`,
          );
        url = new URL(loc, url);
        if (url.protocol !== 'http:' && url.protocol !== 'https:')
          throw new FetchError(`redirected to a ${url.protocol} URL, which cannot be fetched: ${url.href}`);
        continue;
      }
      break;
    }
  } catch (e) {
    if (e instanceof FetchError) return { output: `web_fetch: ${e.message}\n`, exit: 1 };
    const via = chain.length ? ` (redirected: ${chain.join(' -> ')})` : '';
    return {
      output: `web_fetch: cannot fetch ${url.href}${via}: ${signal.aborted ? 'timed out' : describeError(e)}\n`,
      exit: 1,
    };
  }
  const ctype = String(res.headers['content-type'] ?? '');
  const mime = ctype.split(';')[0]!.trim().toLowerCase();
  const charset = /charset=["']?([^"';\s]+)/i.exec(ctype)?.[1] ?? 'utf-8';
  let body: { bytes: Uint8Array; truncated: boolean };
  try {
    body = await readCapped(res, maxBytes);
  } catch (e) {
    return {
      output: `web_fetch: reading ${url.href} failed: ${signal.aborted ? 'timed out' : describeError(e)}\n`,
      exit: 1,
    };
  }
  const head = [
    `URL: ${url.href}`,
    ...(chain.length ? [`Redirects: ${chain.join(' -> ')}`] : []),
    `Status: ${res.status} ${res.statusText}`.trimEnd(),
    `Content-Type: ${ctype || '(none)'}`,
    `Size: ${body.bytes.length} bytes${body.truncated ? ` (cut at max_bytes=${maxBytes}; the rest was not read)` : ''}`,
  ];
  const kind = kindOf(mime);
  let text: string;
  if (kind === 'binary') {
    text = `[binary content (${mime}), not shown]`;
  } else {
    let label = 'utf-8';
    try {
      label = new TextDecoder(charset).encoding;
    } catch {
      // an unknown charset label: read as UTF-8
    }
    text = new TextDecoder(label).decode(body.bytes);
    if (a.raw) {
      // as received
    } else if (kind === 'html') {
      const md = toMarkdown(text);
      if (md.title) head.push(`Title: ${md.title}`);
      text = md.markdown;
    } else if (kind === 'json' && !body.truncated) {
      try {
        text = JSON.stringify(JSON.parse(text), null, 2);
      } catch {
        // not valid JSON after all: shown as text
      }
    }
  }
  if (text.length > maxChars)
    text = `${text.slice(0, maxChars)}\n\n[… ${text.length - maxChars} more characters not shown: raise max_chars]`;
  const ok = res.status >= 200 && res.status < 300;
  return { output: `${head.join('\n')}\n\n${text}${text.endsWith('\n') ? '' : '\n'}`, exit: ok ? 0 : 1 };
}

/** The executable's body: JSON arguments on stdin, the result on stdout. */
export async function main(): Promise<void> {
  let input = '';
  for await (const c of process.stdin) input += c;
  let args: FetchArgs;
  try {
    args = JSON.parse(input) as FetchArgs;
  } catch (e) {
    process.stdout.write(`web_fetch: arguments are not valid JSON: ${(e as Error).message}\n`);
    process.exitCode = 1;
    return;
  }
  if (typeof args.url !== 'string') {
    process.stdout.write('web_fetch: url is required\n');
    process.exitCode = 1;
    return;
  }
  let allowPrivate: AllowEntry[];
  const where = `$${ALLOW_PRIVATE_ENV} (allow_private of web_fetch's network rule)`;
  try {
    let list: unknown;
    try {
      list = JSON.parse(process.env[ALLOW_PRIVATE_ENV] || '[]');
    } catch {
      throw new Error(`${where}: not a JSON list: ${process.env[ALLOW_PRIVATE_ENV]}`);
    }
    allowPrivate = parseAllowList(list, where);
  } catch (e) {
    process.stdout.write(`web_fetch: ${(e as Error).message}\n`);
    process.exitCode = 1;
    return;
  }
  const r = await webFetch(args, { allowPrivate });
  process.stdout.write(r.output);
  process.exitCode = r.exit;
}
