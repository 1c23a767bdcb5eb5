/**
 * web_fetch: GET a URL, follow redirects up to a bound, read at most max_bytes of the body, and give the model
 * text: HTML as Markdown (turndown; scripts, styles and other non-content dropped), JSON pretty-printed, other
 * text as is, binary content described rather than shown. It runs in the sandbox with its .meta's network rule
 * (TCP 80 and 443 only): every other tool keeps the policy's network (off by default).
 *
 * Exit 0 for a 2xx answer, 1 for anything else (an HTTP error status, too many redirects, a network error),
 * always with what happened in words.
 */
import TurndownService from 'turndown';

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

function toMarkdown(html: string): { title?: string; markdown: string } {
  const td = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' });
  td.remove(['script', 'style', 'noscript', 'iframe', 'svg', 'canvas', 'template', 'head', 'title', 'meta', 'link', 'form'] as TurndownService.Filter);
  const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1]?.replace(/\s+/g, ' ').trim();
  const markdown = td.turndown(html).replace(/\n{3,}/g, '\n\n').trim();
  return { ...(title && { title: decodeEntities(title) }), markdown };
}

function decodeEntities(s: string): string {
  const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };
  return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e: string) =>
    e[0] === '#' ? String.fromCodePoint(e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)) : (named[e.toLowerCase()] ?? m),
  );
}

function kindOf(mime: string): 'html' | 'json' | 'text' | 'binary' {
  if (mime === 'text/html' || mime === 'application/xhtml+xml') return 'html';
  if (mime === 'application/json' || mime.endsWith('+json')) return 'json';
  if (mime.startsWith('text/') || mime.endsWith('+xml') || ['application/xml', 'application/javascript', 'application/x-javascript', 'application/ecmascript', 'application/x-sh', 'application/toml', 'application/yaml', 'application/x-yaml', ''].includes(mime)) return 'text';
  return 'binary';
}

async function readCapped(res: Response, max: number): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  if (!res.body) return { bytes: new Uint8Array(0), truncated: false };
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  let truncated = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (n + value.length > max) {
      parts.push(value.subarray(0, max - n));
      n = max;
      truncated = true;
      await reader.cancel();
      break;
    }
    parts.push(value);
    n += value.length;
  }
  const bytes = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    bytes.set(p, o);
    o += p.length;
  }
  return { bytes, truncated };
}

function describeError(e: unknown): string {
  const err = e as Error & { cause?: Error & { code?: string } };
  if (err.name === 'TimeoutError') return 'timed out';
  const c = err.cause;
  if (c) {
    const why = c.code === 'EACCES' || /EACCES/.test(c.message) ? ' (the sandbox did not let web_fetch connect there: it reaches only the ports of its network rule, 80 and 443 as shipped)' : '';
    return `${c.message.replace(/ - Local \([^)]*\)$/, '')}${why}`;
  }
  return err.message;
}

export async function webFetch(a: FetchArgs): Promise<{ output: string; exit: number }> {
  let url: URL;
  try {
    url = new URL(a.url);
  } catch {
    return { output: `web_fetch: not a URL: ${a.url}\n`, exit: 1 };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { output: `web_fetch: only http and https URLs can be fetched, not ${url.protocol}\n`, exit: 1 };
  const maxRedirects = Math.max(0, Math.min(20, a.max_redirects ?? DEFAULTS.redirects));
  const maxBytes = Math.max(1024, Math.min(16 << 20, a.max_bytes ?? DEFAULTS.bytes));
  const maxChars = Math.max(1024, Math.min(1 << 20, a.max_chars ?? DEFAULTS.chars));
  const signal = AbortSignal.timeout(Math.max(1, Math.min(300, a.timeout ?? DEFAULTS.timeoutS)) * 1000);
  const chain: string[] = [];
  let res: Response;
  try {
    for (;;) {
      res = await fetch(url, {
        redirect: 'manual',
        signal,
        headers: { 'user-agent': 'Ollie-web_fetch/1', accept: 'text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5' },
      });
      const loc = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && loc) {
        await res.body?.cancel();
        chain.push(`${res.status} ${url.href}`);
        if (chain.length > maxRedirects) throw new FetchError(`too many redirects (more than ${maxRedirects}): ${chain.join(' -> ')} -> ${new URL(loc, url).href}`);
        url = new URL(loc, url);
        if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new FetchError(`redirected to a ${url.protocol} URL, which cannot be fetched: ${url.href}`);
        continue;
      }
      break;
    }
  } catch (e) {
    if (e instanceof FetchError) return { output: `web_fetch: ${e.message}\n`, exit: 1 };
    return { output: `web_fetch: cannot fetch ${url.href}: ${describeError(e)}\n`, exit: 1 };
  }
  const ctype = res.headers.get('content-type') ?? '';
  const mime = ctype.split(';')[0]!.trim().toLowerCase();
  const charset = /charset=["']?([^"';\s]+)/i.exec(ctype)?.[1] ?? 'utf-8';
  let body: { bytes: Uint8Array; truncated: boolean };
  try {
    body = await readCapped(res, maxBytes);
  } catch (e) {
    return { output: `web_fetch: reading ${url.href} failed: ${describeError(e)}\n`, exit: 1 };
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
  if (text.length > maxChars) text = `${text.slice(0, maxChars)}\n\n[… ${text.length - maxChars} more characters not shown: raise max_chars]`;
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
  const r = await webFetch(args);
  process.stdout.write(r.output);
  process.exitCode = r.exit;
}
