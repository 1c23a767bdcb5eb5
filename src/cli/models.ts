/**
 * `ollie models`: the embedding model that matches prompts to skills and tools and ranks memories.
 *
 *   ollie models install [--from URL] [--name NAME] [--dir DIR]   fetch model.onnx and tokenizer.json
 *   ollie models list [--dir DIR]                                 installed models; which one matching uses
 *
 * The default source is sentence-transformers/all-MiniLM-L6-v2 on Hugging Face (its ONNX export and its
 * tokenizer.json), into $XDG_DATA_HOME/ollie/models/all-MiniLM-L6-v2. Files are downloaded to a temporary name
 * and renamed once whole, then the model is loaded once to check it. Without a network the error says so,
 * and what to do instead.
 *
 * Registered in src/cli/ollie.ts with registerModels(program).
 */
import type { Command } from 'commander';
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_MODEL, findModel, modelsDir, OnnxEmbedder } from '../olliesrv/skills/embed.js';

export const DEFAULT_SOURCE = 'https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main';
/** Where each file is under the source. */
export const MODEL_FILES: Record<string, string> = { 'model.onnx': 'onnx/model.onnx', 'tokenizer.json': 'tokenizer.json' };

export class ModelInstallError extends Error {
  override name = 'ModelInstallError';
}

async function download(url: string, to: string, log: (m: string) => void): Promise<number> {
  let res: Response;
  try {
    res = await fetch(url, { redirect: 'follow' });
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    throw new ModelInstallError(
      `cannot download ${url}: ${cause?.code ?? cause?.message ?? (e as Error).message}. ` +
        'Is this machine online? Offline, copy model.onnx and tokenizer.json of an all-MiniLM-L6-v2-class model into the model directory by hand; until then matching uses BM25.',
    );
  }
  if (!res.ok || !res.body) throw new ModelInstallError(`cannot download ${url}: HTTP ${res.status} ${res.statusText}`);
  const buf = new Uint8Array(await res.arrayBuffer());
  const tmp = `${to}.part`;
  writeFileSync(tmp, buf);
  renameSync(tmp, to);
  log(`${url} → ${to} (${(buf.length / 1e6).toFixed(1)} MB)`);
  return buf.length;
}

/** Downloads and checks a model; returns its directory and dimension. */
export async function installModel(o: { from?: string; name?: string; dir?: string; log?: (m: string) => void } = {}): Promise<{ dir: string; dim: number }> {
  const log = o.log ?? (() => undefined);
  const dir = join(o.dir ?? modelsDir(), o.name ?? DEFAULT_MODEL);
  const base = (o.from ?? DEFAULT_SOURCE).replace(/\/+$/, '');
  const staging = `${dir}.installing`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  try {
    for (const [file, path] of Object.entries(MODEL_FILES)) await download(`${base}/${path}`, join(staging, file), log);
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

/** Installed models (directories with both files). */
export function listModels(dir = modelsDir()): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.filter((n) => findModel(n, dir)).sort();
}

export function registerModels(program: Command): void {
  const models = program.command('models').description('the embedding model for skill, tool and memory matching');
  models
    .command('install')
    .description(`download the embedding model (default ${DEFAULT_MODEL} from Hugging Face) into $XDG_DATA_HOME/ollie/models`)
    .option('--from <url>', 'base URL holding onnx/model.onnx and tokenizer.json', DEFAULT_SOURCE)
    .option('--name <name>', 'directory name under the models dir', DEFAULT_MODEL)
    .option('--dir <dir>', 'models directory', modelsDir())
    .action(async (o: { from: string; name: string; dir: string }) => {
      try {
        const r = await installModel({ ...o, log: (m) => process.stderr.write(`ollie models: ${m}\n`) });
        process.stdout.write(`installed ${r.dir} (${r.dim}-d); a running daemon uses it after a restart\n`);
      } catch (e) {
        process.stderr.write(`ollie models install: ${(e as Error).message}\n`);
        process.exit(1);
      }
    });
  models
    .command('list')
    .description('installed embedding models')
    .option('--dir <dir>', 'models directory', modelsDir())
    .action((o: { dir: string }) => {
      const list = listModels(o.dir);
      if (!list.length) process.stdout.write(`no models in ${o.dir}: matching uses BM25 (ollie models install)\n`);
      for (const n of list) process.stdout.write(`${n}\t${join(o.dir, n)}${n === DEFAULT_MODEL ? '\t(default)' : ''}\n`);
    });
}
