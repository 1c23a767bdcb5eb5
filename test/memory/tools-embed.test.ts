/**
 * The memory tools with an embedding model installed, sandboxed through a real toolsrv: onnxruntime-node loads
 * inside Landlock (the models directory is the tools' read-only rule) and recall finds memories by meaning.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import type { ProcResult } from '../../src/toolsrv/protocol.js';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { topicModel } from '../skills/fixtures.js';
import { startEnv, type Env } from '../toolsrv/helpers.js';
import { buildNative } from '../toolsrv/sandbox-helpers.js';

let root: string;
let env: Env;
let c: Client;
let saved: string | undefined;

beforeAll(async () => {
  buildNative();
  root = mkdtempSync(join(tmpdir(), 'ollie-memembed-'));
  saved = process.env.XDG_DATA_HOME;
  process.env.XDG_DATA_HOME = join(root, 'share');
  topicModel(join(root, 'share', 'ollie', 'models'));
  mkdirSync(join(root, 'proj'));
  env = await startEnv({}, { toolDirs: [join(PACKAGE_ROOT, 'data', 'tools')], yolo: false, cwd: join(root, 'proj') });
  c = await env.client('agent');
  await c.rdwrText('ctl', 'load memory_remember\nload memory_recall\n');
});

afterAll(async () => {
  await env?.close();
  if (saved === undefined) delete process.env.XDG_DATA_HOME;
  else process.env.XDG_DATA_HOME = saved;
  rmSync(root, { recursive: true, force: true });
});

const call = (tool: string, args: Record<string, unknown>): Promise<ProcResult> => env.call(c, { tool, args });

it('stores embeddings and recalls by meaning inside the sandbox', async () => {
  const first = await call('memory_remember', { text: 'Resolve merge conflicts with rebase' });
  expect(first.output).toBe(`remembered #1 (project ${join(root, 'proj')}, with an embedding)\n`);
  // Nothing else in the output: onnxruntime's own warnings would reach the model.
  await call('memory_remember', { text: 'The flaky unit test needs a fixed seed' });
  const r = await call('memory_recall', { query: 'git branch commit' });
  expect(r.output).toMatch(/^1 memory, best first \(full text and embeddings\):\n\n#1 /);
});
