/**
 * `ollie models`: the embedding model that matches prompts to skills and tools and ranks memories.
 *
 *   ollie models install [--from DIR|URL] [--sha256 FILE=HEX,…] [--name NAME] [--dir DIR]
 *                                                    fetch (or copy) model.onnx and tokenizer.json, checked
 *   ollie models list [--dir DIR]                    installed models, broken ones said so, which one is the default
 *
 * The default source is sentence-transformers/all-MiniLM-L6-v2 on Hugging Face (its ONNX export and its
 * tokenizer.json), into $XDG_DATA_HOME/ollie/models/all-MiniLM-L6-v2. `--from` names a mirror (a base URL laid out
 * the same way) or a local directory (holding onnx/model.onnx or model.onnx, and tokenizer.json). Downloads go
 * through $HTTPS_PROXY / $HTTP_PROXY (minus $NO_PROXY), as curl's do. Each file's SHA-256 is checked against what
 * the source publishes (a SHA256SUMS file next to the files, Hugging Face's X-Linked-Etag of an LFS file) and
 * `--sha256`, and recorded in the model's SHA256SUMS, which `list` checks. Files are staged and the directory
 * renamed into place once the model has loaded once. Without a network the error says so, and what to do instead.
 *
 * Registered in src/cli/ollie.ts with registerModels(program).
 */
import type { Command } from 'commander';
import { createHash } from 'node:crypto';
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_MODEL, findModel, modelsDir, OnnxEmbedder } from '../olliesrv/skills/embed.js';

export const DEFAULT_SOURCE = 'https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main';
/** Where each file is under the source. */
export const MODEL_FILES: Record<string, string> = {
  'model.onnx': 'onnx/model.onnx',
  'tokenizer.json': 'tokenizer.json',
};
/** The checksums of an installed model's files, as `sha256sum` writes them. */
export const SUMS_FILE = 'SHA256SUMS';

export class ModelInstallError extends Error {
  override name = 'ModelInstallError';
}

const OFFLINE_HINT =
  'Is this machine online (behind a proxy, set HTTPS_PROXY)? Offline, copy the model directory from a machine that has it and install it with --from DIR; until then matching uses BM25.';

/** The proxy for `url` from the environment, as curl reads it; undefined for none (or NO_PROXY names the host). */
export function proxyFor(url: URL, env: NodeJS.ProcessEnv = process.env): URL | undefined {
  const raw = url.protocol === 'https:' ? (env.HTTPS_PROXY ?? env.https_proxy) : (env.HTTP_PROXY ?? env.http_proxy);
  if (!raw) return undefined;
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  for (let n of (env.NO_PROXY ?? env.no_proxy ?? '').split(',')) {
    n = n.trim().toLowerCase().replace(/:\d+$/, '');
    if (!n) continue;
    if (n === '*') return undefined;
    const bare = n.replace(/^\*?\./, '');
    if (host === bare || host.endsWith(`.${bare}`)) return undefined;
  }
  try {
    return new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`);
  } catch {
    throw new ModelInstallError(
      `the proxy ${JSON.stringify(raw)} (from ${url.protocol === 'https:' ? 'HTTPS_PROXY' : 'HTTP_PROXY'}) is not a URL`,
    );
  }
}

function proxyAuth(proxy: URL): Record<string, string> {
  if (!proxy.username) return {};
  const cred = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
  return { 'proxy-authorization': `Basic ${Buffer.from(cred).toString('base64')}` };
}

/** A TLS connection to url's host through an HTTP proxy's CONNECT tunnel. */
function tunnel(proxy: URL, url: URL): Promise<TLSSocket> {
  const port = url.port || '443';
  return new Promise((ok, fail) => {
    const req = http.request({
      host: proxy.hostname,
      port: proxy.port || 80,
      method: 'CONNECT',
      path: `${url.hostname}:${port}`,
      headers: { host: `${url.hostname}:${port}`, ...proxyAuth(proxy) },
    });
    req.on('connect', (res: IncomingMessage, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        return fail(
          new ModelInstallError(
            `the proxy ${proxy.host} refused to connect to ${url.host}: HTTP ${res.statusCode} ${res.statusMessage ?? ''}`.trim(),
          ),
        );
      }
      // The certificate is checked against the host; SNI takes host names only (RFC 6066), none for an address.
      const host = url.hostname.replace(/^\[|\]$/g, '');
      const tls = tlsConnect({ socket, host, ...(isIP(host) ? {} : { servername: host }) });
      tls.once('secureConnect', () => ok(tls));
      tls.once('error', fail);
    });
    req.on('error', (e: NodeJS.ErrnoException) =>
      fail(Object.assign(new Error(e.message), { cause: { code: e.code ?? e.message }, viaProxy: proxy.host })),
    );
    req.end();
  });
}

/** GET url (through the environment's proxy), following redirects; the response, status 200. */
async function get(url: URL, env: NodeJS.ProcessEnv, redirects = 5): Promise<IncomingMessage> {
  const proxy = proxyFor(url, env);
  const lib = url.protocol === 'https:' ? https : http;
  let socket: TLSSocket | undefined;
  if (proxy && url.protocol === 'https:') socket = await tunnel(proxy, url);
  const res = await new Promise<IncomingMessage>((ok, fail) => {
    const req =
      proxy && !socket
        ? // Plain HTTP through a proxy: the absolute URL as the request target.
          http.request(
            {
              host: proxy.hostname,
              port: proxy.port || 80,
              path: url.href,
              headers: { host: url.host, ...proxyAuth(proxy) },
            },
            ok,
          )
        : lib.request(url, { agent: false, ...(socket && { createConnection: () => socket }) }, ok);
    req.on('error', (e: NodeJS.ErrnoException) => fail(proxy ? Object.assign(e, { viaProxy: proxy.host }) : e));
    req.end();
  });
  // A tunnel serves one request (the agent that would reuse a connection is bypassed): closed with its response,
  // or it would keep the process alive.
  if (socket) res.once('close', () => socket.destroy());
  const status = res.statusCode ?? 0;
  if (status >= 300 && status < 400 && res.headers.location) {
    res.resume();
    if (!redirects) throw new ModelInstallError(`cannot download ${url.href}: too many redirects`);
    return get(new URL(res.headers.location, url), env, redirects - 1);
  }
  if (status !== 200) {
    res.resume();
    throw new ModelInstallError(`cannot download ${url.href}: HTTP ${status} ${res.statusMessage ?? ''}`.trim());
  }
  return res;
}

/** Writes a stream to `to` (by way of to.part) and returns its size and SHA-256. */
async function save(from: NodeJS.ReadableStream, to: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  const tmp = `${to}.part`;
  const out = createWriteStream(tmp);
  await new Promise<void>((ok, fail) => {
    from.on('data', (b: Buffer) => {
      hash.update(b);
      bytes += b.length;
    });
    from.on('error', fail);
    out.on('error', fail);
    out.on('finish', ok);
    from.pipe(out);
  });
  renameSync(tmp, to);
  return { bytes, sha256: hash.digest('hex') };
}

const HEX64 = /^[0-9a-f]{64}$/;

/** `sha256sum` lines (HEX, two spaces or " *", path) as path → hex. */
export function parseSums(text: string, where: string): Map<string, string> {
  const sums = new Map<string, string>();
  text.split('\n').forEach((line, i) => {
    if (!line.trim() || line.startsWith('#')) return;
    const m = /^([0-9a-fA-F]{64}) [ *](.+)$/.exec(line.trim());
    if (!m)
      throw new ModelInstallError(`${where}, line ${i + 1}: not "SHA256  FILE": ${JSON.stringify(line.slice(0, 80))}`);
    sums.set(m[2]!.replace(/^\.\//, ''), m[1]!.toLowerCase());
  });
  return sums;
}

/** `--sha256 model.onnx=HEX,tokenizer.json=HEX`. */
export function parseSha256Option(v: string | undefined): Map<string, string> {
  const sums = new Map<string, string>();
  for (const part of (v ?? '').split(',').filter(Boolean)) {
    const [file, hex] = part.split('=');
    if (!file || !(file in MODEL_FILES) || !hex || !HEX64.test(hex.toLowerCase())) {
      throw new ModelInstallError(
        `--sha256 ${JSON.stringify(part)}: expected FILE=HEX with FILE one of ${Object.keys(MODEL_FILES).join(', ')} and HEX 64 hex digits`,
      );
    }
    sums.set(file, hex.toLowerCase());
  }
  return sums;
}

interface Fetched {
  bytes: number;
  sha256: string;
  /** Checksums the source itself gave for this file, and where each came from. */
  published: Array<{ sha256: string; from: string }>;
}

/** A source: a base URL (http, https, file) or a local directory. */
interface Source {
  describe(path: string): string;
  fetch(path: string, to: string): Promise<Fetched>;
  /** The source's SHA256SUMS, if it has one. */
  sums(): Promise<Map<string, string> | undefined>;
}

function urlSource(base: string, env: NodeJS.ProcessEnv): Source {
  const at = (path: string) => new URL(`${base}/${path}`);
  return {
    describe: (path) => at(path).href,
    async fetch(path, to) {
      let res: IncomingMessage;
      try {
        res = await get(at(path), env);
      } catch (e) {
        if (e instanceof ModelInstallError) throw e;
        const x = e as { cause?: { code?: string }; code?: string; viaProxy?: string };
        const why = x.cause?.code ?? x.code ?? (e as Error).message;
        throw new ModelInstallError(
          `cannot download ${at(path).href}${x.viaProxy ? ` (through the proxy ${x.viaProxy})` : ''}: ${why}. ${OFFLINE_HINT}`,
        );
      }
      // Hugging Face serves LFS files (model.onnx) with their SHA-256 as X-Linked-Etag (or as the ETag itself).
      const published: Fetched['published'] = [];
      for (const h of ['x-linked-etag', 'etag']) {
        const v = String(res.headers[h] ?? '')
          .replace(/^W\//, '')
          .replace(/"/g, '')
          .toLowerCase();
        if (HEX64.test(v)) {
          published.push({ sha256: v, from: `the ${h === 'etag' ? 'ETag' : 'X-Linked-Etag'} of ${at(path).href}` });
          break;
        }
      }
      return { ...(await save(res, to)), published };
    },
    async sums() {
      try {
        const res = await get(at(SUMS_FILE), env);
        let text = '';
        for await (const chunk of res) text += String(chunk);
        return parseSums(text, at(SUMS_FILE).href);
      } catch (e) {
        // No SHA256SUMS published (Hugging Face has none): only a 404 means that; anything else is reported.
        if (e instanceof ModelInstallError && / HTTP 404\b/.test(e.message)) return undefined;
        if (e instanceof ModelInstallError) throw e;
        return undefined; // unreachable: the file downloads themselves say so
      }
    },
  };
}

function dirSource(dir: string): Source {
  // A model directory as installed (model.onnx at the top) or as laid out on Hugging Face (onnx/model.onnx).
  const at = (path: string) => (existsSync(join(dir, path)) ? join(dir, path) : join(dir, path.replace(/^onnx\//, '')));
  return {
    describe: (path) => at(path),
    async fetch(path, to) {
      const f = at(path);
      if (!existsSync(f))
        throw new ModelInstallError(
          `${dir} has no ${path}${path.startsWith('onnx/') ? ` (nor ${path.slice(5)})` : ''}: --from DIR needs a directory holding model.onnx (or onnx/model.onnx) and tokenizer.json`,
        );
      return { ...(await save(createReadStream(f), to)), published: [] };
    },
    async sums() {
      const f = join(dir, SUMS_FILE);
      if (!existsSync(f)) return undefined;
      const sums = parseSums(readFileSync(f, 'utf8'), f);
      // An installed model's SHA256SUMS names model.onnx; a mirror's names onnx/model.onnx: accept both.
      for (const [file, path] of Object.entries(MODEL_FILES))
        if (!sums.has(path) && sums.has(file)) sums.set(path, sums.get(file)!);
      return sums;
    },
  };
}

function sourceOf(from: string, env: NodeJS.ProcessEnv): Source {
  if (/^https?:\/\//i.test(from)) return urlSource(from.replace(/\/+$/, ''), env);
  const dir = from.startsWith('file:') ? fileURLToPath(from) : isAbsolute(from) ? from : resolve(from);
  let st;
  try {
    st = statSync(dir);
  } catch {
    throw new ModelInstallError(
      `--from ${from}: no such directory (give a directory holding the model files, or an http(s) URL)`,
    );
  }
  if (!st.isDirectory())
    throw new ModelInstallError(
      `--from ${from}: not a directory (give a directory holding the model files, or an http(s) URL)`,
    );
  return dirSource(dir);
}

export interface InstallOptions {
  /** A base URL or a local directory (default: Hugging Face). */
  from?: string;
  name?: string;
  dir?: string;
  /** Expected SHA-256 by file name (model.onnx, tokenizer.json), beyond what the source publishes. */
  sha256?: Map<string, string>;
  /** Where proxy settings are read (default process.env). */
  env?: NodeJS.ProcessEnv;
  log?: (m: string) => void;
}

/** Downloads (or copies) and checks a model; returns its directory and dimension. */
export async function installModel(o: InstallOptions = {}): Promise<{ dir: string; dim: number }> {
  const log = o.log ?? (() => undefined);
  const dir = join(o.dir ?? modelsDir(), o.name ?? DEFAULT_MODEL);
  const source = sourceOf(o.from ?? DEFAULT_SOURCE, o.env ?? process.env);
  const staging = `${dir}.installing`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  try {
    const sums = await source.sums();
    const recorded: string[] = [];
    for (const [file, path] of Object.entries(MODEL_FILES)) {
      const got = await source.fetch(path, join(staging, file));
      const expected = [
        ...got.published,
        ...(sums?.has(path) ? [{ sha256: sums.get(path)!, from: `${source.describe(SUMS_FILE)}` }] : []),
        ...(o.sha256?.has(file) ? [{ sha256: o.sha256.get(file)!, from: '--sha256' }] : []),
      ];
      for (const e of expected) {
        if (e.sha256 !== got.sha256) {
          throw new ModelInstallError(
            `${source.describe(path)}: SHA-256 ${got.sha256} does not match ${e.sha256} (from ${e.from}): a damaged or different file; nothing was installed`,
          );
        }
      }
      log(
        `${source.describe(path)} → ${join(dir, file)} (${(got.bytes / 1e6).toFixed(1)} MB, sha256 ${got.sha256}, ` +
          `${expected.length ? `checked against ${expected.map((e) => e.from).join(' and ')}` : 'no checksum published to check it against; recorded'})`,
      );
      recorded.push(`${got.sha256}  ${file}`);
    }
    writeFileSync(join(staging, SUMS_FILE), `${recorded.join('\n')}\n`);
    const emb = await OnnxEmbedder.load(staging).catch((e: Error) => {
      throw new ModelInstallError(`the downloaded model does not work: ${e.message}`);
    });
    const dim = emb.dim;
    await emb.close();
    rmSync(dir, { recursive: true, force: true });
    renameSync(staging, dir);
    return { dir, dim };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

function sha256Of(file: string): Promise<string> {
  return new Promise((ok, fail) => {
    const h = createHash('sha256');
    createReadStream(file)
      .on('data', (b) => h.update(b))
      .on('error', fail)
      .on('end', () => ok(h.digest('hex')));
  });
}

export interface ModelEntry {
  name: string;
  path: string;
  /** Why the model cannot be used; undefined when it loads (and its files match its SHA256SUMS). */
  broken?: string;
}

/**
 * The models directory's models, each checked: both files there, their SHA-256 as recorded at install (when
 * recorded), and loaded once. A directory staged by an install in progress (NAME.installing) is not a model.
 */
export async function listModels(dir = modelsDir()): Promise<ModelEntry[]> {
  let names: string[];
  try {
    names = readdirSync(dir).filter(
      (n) => !n.endsWith('.installing') && !n.startsWith('.') && statSync(join(dir, n)).isDirectory(),
    );
  } catch {
    return [];
  }
  const out: ModelEntry[] = [];
  for (const name of names.sort()) {
    const path = join(dir, name);
    out.push({ name, path, ...(await whyBroken(name, dir)) });
  }
  return out;
}

async function whyBroken(name: string, dir: string): Promise<{ broken?: string }> {
  const path = join(dir, name);
  const missing = Object.keys(MODEL_FILES).filter((f) => !existsSync(join(path, f)));
  if (missing.length || !findModel(name, dir))
    return { broken: `no ${(missing.length ? missing : Object.keys(MODEL_FILES)).join(' and no ')}` };
  if (existsSync(join(path, SUMS_FILE))) {
    let sums: Map<string, string>;
    try {
      sums = parseSums(readFileSync(join(path, SUMS_FILE), 'utf8'), join(path, SUMS_FILE));
    } catch (e) {
      return { broken: (e as Error).message };
    }
    for (const [file, hex] of sums) {
      if (!existsSync(join(path, file))) return { broken: `no ${file} (listed in ${SUMS_FILE})` };
      const got = await sha256Of(join(path, file));
      if (got !== hex) return { broken: `${file} changed since it was installed (SHA-256 ${got}, recorded ${hex})` };
    }
  }
  try {
    const emb = await OnnxEmbedder.load(path);
    await emb.close();
  } catch (e) {
    return { broken: `does not load: ${(e as Error).message}` };
  }
  return {};
}

export function registerModels(program: Command): void {
  const models = program.command('models').description('the embedding model for skill, tool and memory matching');
  models
    .command('install')
    .description(
      `download the embedding model (default ${DEFAULT_MODEL} from Hugging Face) into $XDG_DATA_HOME/ollie/models, through $HTTPS_PROXY if set`,
    )
    .option(
      '--from <dir|url>',
      'a mirror (base URL holding onnx/model.onnx and tokenizer.json) or a local directory holding the model files',
      DEFAULT_SOURCE,
    )
    .option(
      '--sha256 <file=hex,...>',
      'expected SHA-256 of model.onnx and/or tokenizer.json (besides what the source publishes)',
    )
    .option('--name <name>', 'directory name under the models dir', DEFAULT_MODEL)
    .option('--dir <dir>', 'models directory', modelsDir())
    .action(async (o: { from: string; name: string; dir: string; sha256?: string }) => {
      try {
        const r = await installModel({
          ...o,
          sha256: parseSha256Option(o.sha256),
          log: (m) => process.stderr.write(`ollie models: ${m}\n`),
        });
        process.stdout.write(`installed ${r.dir} (${r.dim}-d); a running daemon uses it after a restart\n`);
      } catch (e) {
        process.stderr.write(`ollie models install: ${(e as Error).message}\n`);
        process.exit(1);
      }
    });
  models
    .command('list')
    .description('installed embedding models, each checked (files, checksums, loads); a broken one says why')
    .option('--dir <dir>', 'models directory', modelsDir())
    .action(async (o: { dir: string }) => {
      const list = await listModels(o.dir);
      if (!list.some((m) => !m.broken))
        process.stdout.write(`no working model in ${o.dir}: matching uses BM25 (ollie models install)\n`);
      for (const m of list) {
        const notes = [m.name === DEFAULT_MODEL ? '(default)' : '', m.broken ? `broken: ${m.broken}` : ''].filter(
          Boolean,
        );
        process.stdout.write(`${m.name}\t${m.path}${notes.map((n) => `\t${n}`).join('')}\n`);
      }
    });
}
