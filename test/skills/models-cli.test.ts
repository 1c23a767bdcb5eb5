import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installModel, listModels, ModelInstallError } from '../../src/cli/models.js';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { topicModel } from './fixtures.js';

let root: string;
let server: Server;
let base: string;
/** A port nothing listens on (as offline: the connection is refused). */
let closed: string;
const hits: string[] = [];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'ollie-models-'));
  const src = topicModel(join(root, 'source')).dir;
  // Laid out as on Hugging Face: onnx/model.onnx and tokenizer.json under the repository's resolve/main.
  const files: Record<string, Buffer> = {
    '/repo/onnx/model.onnx': readFileSync(join(src, 'model.onnx')),
    '/repo/tokenizer.json': readFileSync(join(src, 'tokenizer.json')),
    '/broken/onnx/model.onnx': Buffer.from('not a model'),
    '/broken/tokenizer.json': readFileSync(join(src, 'tokenizer.json')),
  };
  server = createServer((req, res) => {
    hits.push(req.url!);
    const body = files[req.url!];
    if (!body) return void res.writeHead(404).end('not found');
    res.writeHead(200, { 'content-length': body.length }).end(body);
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
    expect(listModels(dir)).toEqual(['all-MiniLM-L6-v2']);
    expect(existsSync(join(dir, 'all-MiniLM-L6-v2.installing'))).toBe(false);
    const out = execFileSync(process.execPath, [join(PACKAGE_ROOT, 'dist', 'cli', 'ollie.js'), 'models', 'list', '--dir', dir], { encoding: 'utf8' });
    expect(out).toBe(`all-MiniLM-L6-v2\t${join(dir, 'all-MiniLM-L6-v2')}\t(default)\n`);
  });

  it('keeps nothing of a model that does not load', async () => {
    const dir = join(root, 'models-broken');
    await expect(installModel({ from: `${base}/broken`, dir })).rejects.toThrow(/the downloaded model does not work/);
    expect(listModels(dir)).toEqual([]);
    expect(existsSync(join(dir, 'all-MiniLM-L6-v2'))).toBe(false);
  });

  it('says HTTP errors and an unreachable source in words (offline)', async () => {
    await expect(installModel({ from: `${base}/missing`, dir: join(root, 'm2') })).rejects.toThrow(`cannot download ${base}/missing/onnx/model.onnx: HTTP 404`);
    const err = await installModel({ from: `${closed}/repo`, dir: join(root, 'm3') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelInstallError);
    expect((err as Error).message).toMatch(/^cannot download http:\/\/127\.0\.0\.1:\d+\/repo\/onnx\/model\.onnx: ECONNREFUSED\. Is this machine online\? .*matching uses BM25\.$/);
  });

  it('exits 1 with the reason from the CLI', () => {
    let out = '';
    try {
      execFileSync(process.execPath, [join(PACKAGE_ROOT, 'dist', 'cli', 'ollie.js'), 'models', 'install', '--from', closed, '--dir', join(root, 'm4')], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      const x = e as { status: number; stderr: string };
      out = `${x.status} ${x.stderr}`;
    }
    expect(out).toMatch(/^1 ollie models install: cannot download http:\/\/127\.0\.0\.1:\d+\/onnx\/model\.onnx: ECONNREFUSED/);
  });
});
