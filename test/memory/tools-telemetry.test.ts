/**
 * onnxruntime-node's telemetry wrote `.ses` and `mat-debug-PID.log` into $TMPDIR (and `:memory:.ses` into the
 * cwd when it could not) on every memory tool call with a model installed. The tool, run as toolsrv runs it (its
 * own Node process, the agent's cwd, a private TMPDIR), must leave both untouched.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { topicModel } from '../skills/fixtures.js';

let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'ollie-memtele-'));
  topicModel(join(root, 'share', 'ollie', 'models'));
  for (const d of ['proj', 'tmp']) mkdirSync(join(root, d));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

function runMemoryTool(tool: string, args: Record<string, unknown>): Promise<{ code: number | null; out: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_DATA_HOME: join(root, 'share'), TMPDIR: join(root, 'tmp') };
  delete env.ORT_DISABLE_TELEMETRY; // as a user's environment has it
  const p = spawn(process.execPath, [join(PACKAGE_ROOT, 'data', 'tools', tool)], {
    cwd: join(root, 'proj'),
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  p.stdout.on('data', (b: Buffer) => (out += b.toString()));
  p.stderr.on('data', (b: Buffer) => (out += b.toString()));
  p.stdin.end(JSON.stringify(args));
  return new Promise((resolve) => p.on('close', (code) => resolve({ code, out })));
}

it('a memory tool that loads the embedding model writes nothing into the cwd or $TMPDIR', async () => {
  const r = await runMemoryTool('memory_remember', { text: 'Resolve merge conflicts with rebase' });
  expect(r).toEqual({ code: 0, out: `remembered #1 (project ${join(root, 'proj')}, with an embedding)\n` });
  const recall = await runMemoryTool('memory_recall', { query: 'git branch commit' });
  expect(recall.out).toMatch(/^1 memory, best first \(full text and embeddings\):/);
  // The processes have exited (telemetry writes at start-up and at shutdown).
  expect(readdirSync(join(root, 'proj'))).toEqual([]);
  expect(readdirSync(join(root, 'tmp'))).toEqual([]);
});
