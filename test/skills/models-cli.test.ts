import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installModel, listModels, ModelInstallError, parseSha256Option } from '../../src/cli/models.js';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { topicModel } from './fixtures.js';

let root: string;
let src: string;
let server: Server;
let base: string;
/** A port nothing listens on (as offline: the connection is refused). */
let closed: string;
const hits: string[] = [];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'ollie-models-'));
  src = topicModel(join(root, 'source')).dir;
  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  const model = readFileSync(join(src, 'model.onnx'));
  const tokenizer = readFileSync(join(src, 'tokenizer.json'));
  // Laid out as on Hugging Face: onnx/model.onnx and tokenizer.json under the repository's resolve/main.
  const files: Record<string, Buffer> = {
    '/repo/onnx/model.onnx': readFileSync(join(src, 'model.onnx')),
    '/repo/tokenizer.json': readFileSync(join(src, 'tokenizer.json')),
    '/broken/onnx/model.onnx': Buffer.from('not a model'),
    '/broken/tokenizer.json': readFileSync(join(src, 'tokenizer.json')),
    // A mirror publishing SHA256SUMS: right for /summed, wrong for /badsum's model.onnx.
    '/summed/onnx/model.onnx': model,
    '/summed/tokenizer.json': tokenizer,
    '/summed/SHA256SUMS': Buffer.from(`${sha(model)}  onnx/model.onnx\n${sha(tokenizer)}  tokenizer.json\n`),
    '/badsum/onnx/model.onnx': model,
    '/badsum/tokenizer.json': tokenizer,
    '/badsum/SHA256SUMS': Buffer.from(`${'0'.repeat(64)}  onnx/model.onnx\n`),
    // As Hugging Face serves an LFS file: its SHA-256 in X-Linked-Etag (here a wrong one).
    '/etag/onnx/model.onnx': model,
    '/etag/tokenizer.json': tokenizer,
  };
  server = createServer((req, res) => {
    hits.push(req.url!);
    const body = files[req.url!];
    if (!body) return void res.writeHead(404).end('not found');
    const etag = req.url === '/etag/onnx/model.onnx' ? { 'x-linked-etag': `"${'a'.repeat(64)}"` } : {};
    res.writeHead(200, { 'content-length': body.length, ...etag }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const tmp = createServer();
  await new Promise<void>((r) => tmp.listen(0, '127.0.0.1', r));
  closed = `http://127.0.0.1:${(tmp.address() as { port: number }).port}`;
  await new Promise((r) => tmp.close(r));
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
  rmSync(root, { recursive: true, force: true });
});

describe('ollie models install', () => {
  it('downloads model.onnx and tokenizer.json, checks the model loads, and lists it', async () => {
    const dir = join(root, 'models');
    const r = await installModel({ from: `${base}/repo`, dir });
    expect(r).toEqual({ dir: join(dir, 'all-MiniLM-L6-v2'), dim: 16 });
    expect(hits).toEqual(expect.arrayContaining(['/repo/onnx/model.onnx', '/repo/tokenizer.json']));
    expect(await listModels(dir)).toEqual([{ name: 'all-MiniLM-L6-v2', path: join(dir, 'all-MiniLM-L6-v2') }]);
    // The checksums are recorded with the model.
    expect(readFileSync(join(dir, 'all-MiniLM-L6-v2', 'SHA256SUMS'), 'utf8')).toMatch(
      /^[0-9a-f]{64} {2}model\.onnx\n[0-9a-f]{64} {2}tokenizer\.json\n$/,
    );
    expect(existsSync(join(dir, 'all-MiniLM-L6-v2.installing'))).toBe(false);
    const out = execFileSync(
      process.execPath,
      [join(PACKAGE_ROOT, 'dist', 'cli', 'ollie.js'), 'models', 'list', '--dir', dir],
      { encoding: 'utf8' },
    );
    expect(out).toBe(`all-MiniLM-L6-v2\t${join(dir, 'all-MiniLM-L6-v2')}\t(default)\n`);
  });

  it('keeps nothing of a model that does not load', async () => {
    const dir = join(root, 'models-broken');
    await expect(installModel({ from: `${base}/broken`, dir })).rejects.toThrow(/the downloaded model does not work/);
    expect(await listModels(dir)).toEqual([]);
    expect(existsSync(join(dir, 'all-MiniLM-L6-v2'))).toBe(false);
  });

  it('says HTTP errors and an unreachable source in words (offline)', async () => {
    await expect(installModel({ from: `${base}/missing`, dir: join(root, 'm2') })).rejects.toThrow(
      `cannot download ${base}/missing/onnx/model.onnx: HTTP 404`,
    );
    const err = await installModel({ from: `${closed}/repo`, dir: join(root, 'm3') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelInstallError);
    expect((err as Error).message).toMatch(
      /^cannot download http:\/\/127\.0\.0\.1:\d+\/repo\/onnx\/model\.onnx: ECONNREFUSED\. Is this machine online \(behind a proxy, set HTTPS_PROXY\)\? .*--from DIR; until then matching uses BM25\.$/,
    );
  });

  it('exits 1 with the reason from the CLI', () => {
    let out = '';
    try {
      execFileSync(
        process.execPath,
        [
          join(PACKAGE_ROOT, 'dist', 'cli', 'ollie.js'),
          'models',
          'install',
          '--from',
          closed,
          '--dir',
          join(root, 'm4'),
        ],
        { encoding: 'utf8', stdio: 'pipe' },
      );
    } catch (e) {
      const x = e as { status: number; stderr: string };
      out = `${x.status} ${x.stderr}`;
    }
    expect(out).toMatch(
      /^1 ollie models install: cannot download http:\/\/127\.0\.0\.1:\d+\/onnx\/model\.onnx: ECONNREFUSED/,
    );
  });

  it("checks SHA-256 against the source's SHA256SUMS, an X-Linked-Etag, and --sha256; a mismatch installs nothing", async () => {
    const logs: string[] = [];
    await installModel({ from: `${base}/summed`, dir: join(root, 'ms'), log: (m) => logs.push(m) });
    expect(logs).toHaveLength(2);
    expect(logs[0]).toMatch(
      /onnx\/model\.onnx → .* sha256 [0-9a-f]{64}, checked against http:\/\/127\.0\.0\.1:\d+\/summed\/SHA256SUMS\)$/,
    );
    const bad = join(root, 'mb');
    await expect(installModel({ from: `${base}/badsum`, dir: bad })).rejects.toThrow(
      new RegExp(
        `^${base}/badsum/onnx/model\\.onnx: SHA-256 [0-9a-f]{64} does not match 0{64} \\(from ${base}/badsum/SHA256SUMS\\): a damaged or different file; nothing was installed$`,
      ),
    );
    await expect(installModel({ from: `${base}/etag`, dir: bad })).rejects.toThrow(
      /SHA-256 [0-9a-f]{64} does not match a{64} \(from the X-Linked-Etag of http:.*\/etag\/onnx\/model\.onnx\)/,
    );
    await expect(
      installModel({ from: `${base}/repo`, dir: bad, sha256: parseSha256Option(`tokenizer.json=${'b'.repeat(64)}`) }),
    ).rejects.toThrow(/tokenizer\.json: SHA-256 .* does not match b{64} \(from --sha256\)/);
    expect(existsSync(bad) ? (await listModels(bad)).length : 0).toBe(0);
    expect(() => parseSha256Option('model.onnx=xyz')).toThrow(
      /--sha256 "model.onnx=xyz": expected FILE=HEX with FILE one of model.onnx, tokenizer.json and HEX 64 hex digits/,
    );
  });

  it("--from DIR installs from a local directory (installed layout or Hugging Face's), with no network", async () => {
    const flat = await installModel({ from: src, dir: join(root, 'from-dir') });
    expect(flat.dim).toBe(16);
    const hf = join(root, 'hf-layout');
    mkdirSync(join(hf, 'onnx'), { recursive: true });
    cpSync(join(src, 'model.onnx'), join(hf, 'onnx', 'model.onnx'));
    cpSync(join(src, 'tokenizer.json'), join(hf, 'tokenizer.json'));
    expect((await installModel({ from: hf, dir: join(root, 'from-hf'), name: 'copy' })).dir).toBe(
      join(root, 'from-hf', 'copy'),
    );
    // An installed model's SHA256SUMS is checked when copying it elsewhere.
    writeFileSync(join(root, 'from-dir', 'all-MiniLM-L6-v2', 'tokenizer.json'), '{}');
    await expect(
      installModel({ from: join(root, 'from-dir', 'all-MiniLM-L6-v2'), dir: join(root, 'from-copy') }),
    ).rejects.toThrow(/tokenizer\.json: SHA-256 .* does not match .*from .*SHA256SUMS/);
    await expect(installModel({ from: join(root, 'nowhere'), dir: join(root, 'x') })).rejects.toThrow(
      `--from ${join(root, 'nowhere')}: no such directory`,
    );
    await expect(installModel({ from: join(root, 'source'), dir: join(root, 'x') })).rejects.toThrow(
      /has no onnx\/model\.onnx \(nor model\.onnx\): --from DIR needs/,
    );
  });

  it('goes through HTTP_PROXY (not for hosts in NO_PROXY)', async () => {
    const seen: string[] = [];
    const proxy = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      const up = request(req.url!, { method: req.method, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode!, r.headers);
        r.pipe(res);
      });
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const purl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
    try {
      await installModel({ from: `${base}/repo`, dir: join(root, 'proxied'), env: { HTTP_PROXY: purl } });
      expect(seen).toEqual([
        `GET ${base}/repo/SHA256SUMS`,
        `GET ${base}/repo/onnx/model.onnx`,
        `GET ${base}/repo/tokenizer.json`,
      ]);
      await installModel({
        from: `${base}/repo`,
        dir: join(root, 'direct'),
        env: { HTTP_PROXY: purl, NO_PROXY: 'example.com,127.0.0.1' },
      });
      expect(seen).toHaveLength(3);
    } finally {
      await new Promise((r) => proxy.close(r));
    }
  });

  it('goes through HTTPS_PROXY to an https mirror (a CONNECT tunnel), from the CLI', async () => {
    // A self-signed certificate for 127.0.0.1, trusted by the CLI through NODE_EXTRA_CA_CERTS.
    const certDir = join(root, 'tls');
    mkdirSync(certDir);
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(certDir, 'key.pem'),
        '-out',
        join(certDir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    const files: Record<string, Buffer> = {
      '/m/onnx/model.onnx': readFileSync(join(src, 'model.onnx')),
      '/m/tokenizer.json': readFileSync(join(src, 'tokenizer.json')),
    };
    const tls: HttpsServer = createHttpsServer(
      { key: readFileSync(join(certDir, 'key.pem')), cert: readFileSync(join(certDir, 'cert.pem')) },
      (req, res) => {
        const body = files[req.url!];
        if (!body) return void res.writeHead(404).end();
        res.writeHead(200, { 'content-length': body.length }).end(body);
      },
    );
    await new Promise<void>((r) => tls.listen(0, '127.0.0.1', r));
    const tport = (tls.address() as { port: number }).port;
    const tunnels: string[] = [];
    const proxy = createServer((_req, res) => res.writeHead(405).end());
    proxy.on('connect', (req, sock) => {
      tunnels.push(req.url!);
      const [host, port] = req.url!.split(':');
      const up = connect(Number(port), host!, () => {
        sock.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        up.pipe(sock);
        sock.pipe(up);
      });
      up.on('error', () => sock.destroy());
      sock.on('error', () => up.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const pport = (proxy.address() as { port: number }).port;
    try {
      const dir = join(root, 'via-https-proxy');
      const env = {
        ...process.env,
        HTTPS_PROXY: `http://127.0.0.1:${pport}`,
        NO_PROXY: '',
        no_proxy: '',
        NODE_EXTRA_CA_CERTS: join(certDir, 'cert.pem'),
      };
      const out = await new Promise<string>((ok, fail) =>
        execFile(
          process.execPath,
          [
            join(PACKAGE_ROOT, 'dist', 'cli', 'ollie.js'),
            'models',
            'install',
            '--from',
            `https://127.0.0.1:${tport}/m`,
            '--dir',
            dir,
          ],
          { env, encoding: 'utf8' },
          (e, stdout, stderr) => (e ? fail(new Error(`${e.message}\n${stderr}`)) : ok(stdout)),
        ),
      );
      expect(out).toBe(`installed ${join(dir, 'all-MiniLM-L6-v2')} (16-d); a running daemon uses it after a restart\n`);
      expect(tunnels).toEqual([`127.0.0.1:${tport}`, `127.0.0.1:${tport}`, `127.0.0.1:${tport}`]);
    } finally {
      await new Promise((r) => proxy.close(r));
      await new Promise((r) => tls.close(r));
    }
  });
});

describe('ollie models list', () => {
  it('shows a broken model as broken, and why', async () => {
    const dir = join(root, 'listed');
    await installModel({ from: src, dir, name: 'good' });
    await installModel({ from: src, dir, name: 'changed' });
    writeFileSync(join(dir, 'changed', 'model.onnx'), 'truncated');
    await installModel({ from: src, dir, name: 'half' });
    rmSync(join(dir, 'half', 'tokenizer.json'));
    // Copied by hand (no SHA256SUMS): loading it is the check.
    mkdirSync(join(dir, 'garbage'));
    writeFileSync(join(dir, 'garbage', 'model.onnx'), 'not a model');
    cpSync(join(src, 'tokenizer.json'), join(dir, 'garbage', 'tokenizer.json'));
    const out = execFileSync(
      process.execPath,
      [join(PACKAGE_ROOT, 'dist', 'cli', 'ollie.js'), 'models', 'list', '--dir', dir],
      { encoding: 'utf8' },
    );
    const lines = out
      .trim()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(lines.map((l) => l[0])).toEqual(['changed', 'garbage', 'good', 'half']);
    expect(lines[0]![2]).toMatch(
      /^broken: model\.onnx changed since it was installed \(SHA-256 [0-9a-f]{64}, recorded [0-9a-f]{64}\)$/,
    );
    expect(lines[1]![2]).toMatch(/^broken: does not load: .*model\.onnx/);
    expect(lines[2]).toEqual(['good', join(dir, 'good')]);
    expect(lines[3]![2]).toBe('broken: no tokenizer.json');
  });
});
