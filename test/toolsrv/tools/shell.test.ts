import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, expect, test } from 'vitest';
import { buildNative, makeWorld, runTool, type World } from '../sandbox-helpers.js';

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

const shell = (command: string, opts: { unsandboxed?: boolean } = {}) =>
  runTool(w, 'shell', { command }, { ...opts, env: { HOME: w.home } });

test("runs bash -c in the agent cwd: stdout and stderr merged in order, the exit code is the command's", async () => {
  const r = await shell('pwd; echo out; echo err >&2; echo "$0"; exit 7');
  expect(r.out).toBe(`${w.cwd}\nout\nerr\nbash\n`);
  expect(r.code).toBe(7);
});

test('bash features work and stdin is empty, not the JSON arguments', async () => {
  const r = await shell('arr=(a b c); echo "${#arr[@]} $(( 6 * 7 ))"; cat; echo "[eof]"');
  expect(r.out).toBe('3 42\n[eof]\n');
  expect(r.code).toBe(0);
});

test('writes land in the project; outside it the sandbox refuses', async () => {
  const r = await shell(`echo hi > made.txt && echo x > ${w.home}/other/nope.txt`);
  expect(readFileSync(join(w.cwd, 'made.txt'), 'utf8')).toBe('hi\n');
  expect(r.out).toContain('Permission denied');
  expect(r.code).toBe(1);
  expect(existsSync(join(w.home, 'other', 'nope.txt'))).toBe(false);
});

test('the same command succeeds unsandboxed (after an approved bypass)', async () => {
  const r = await shell(`echo x > ${w.home}/other/yes.txt && echo done`, { unsandboxed: true });
  expect(r.out).toBe('done\n');
  expect(readFileSync(join(w.home, 'other', 'yes.txt'), 'utf8')).toBe('x\n');
});

test("the command sees only the policy's environment", async () => {
  const r = await runTool(
    w,
    'shell',
    { command: 'echo "[$API_TOKEN] [$LANG] [$TMPDIR]"' },
    { env: { HOME: w.home, API_TOKEN: 'secret', LANG: 'C.UTF-8' } },
  );
  expect(r.out).toBe(`[] [C.UTF-8] [${w.tmpDir}]\n`);
});

test('bad arguments are reported to the model', async () => {
  expect(await runTool(w, 'shell', {})).toMatchObject({ code: 1, out: 'shell: argument command is required\n' });
  expect(await runTool(w, 'shell', { command: 42 })).toMatchObject({
    code: 1,
    out: 'shell: argument command must be a string\n',
  });
});
