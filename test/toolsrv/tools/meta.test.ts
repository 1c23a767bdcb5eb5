/** Every shipped tool definition is well formed, and the toolsrv registry's parser accepts it. */
import { accessSync, constants, existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, expect, test } from 'vitest';
import { parseMeta } from '../../../src/toolsrv/registry/meta.js';
import { buildNative, TOOLS_DIR } from '../sandbox-helpers.js';

const CORE = [
  'shell',
  'file_read',
  'file_write',
  'file_edit',
  'file_grep',
  'file_glob',
  'reasoning_think',
  'client_9p',
  'subagent_spawn',
];

beforeAll(() => buildNative());

test('the core tools are all there', () => {
  const names = readdirSync(TOOLS_DIR)
    .filter((f) => f.endsWith('.meta'))
    .map((f) => f.slice(0, -5))
    .sort();
  // Other tools (code intelligence, memory, web_fetch…) are tested with their features.
  expect(names).toEqual(expect.arrayContaining(CORE));
});

test.each(CORE)('%s.meta: description, object schema, scope, and an executable or a cmd', (name) => {
  const file = join(TOOLS_DIR, `${name}.meta`);
  const text = readFileSync(file, 'utf8');
  const exe = join(TOOLS_DIR, name);
  const hasExe = existsSync(exe);
  const meta = JSON.parse(text) as Record<string, unknown>;
  expect(typeof meta.description).toBe('string');
  expect((meta.args as { type: string }).type).toBe('object');
  expect(['read', 'write', 'global']).toContain(meta.scope);
  if (meta.scope === 'write') expect(meta.pathArg).toBe('path');
  expect(hasExe || typeof meta.cmd === 'string').toBe(true);
  if (hasExe) accessSync(exe, constants.X_OK);
  const def = parseMeta(name, file, TOOLS_DIR, text, hasExe ? exe : undefined);
  expect(def.base.description).toBe(meta.description);
});

test('only the tools that talk to Ollie get the Ollie socket', () => {
  const withSocket = CORE.filter(
    (n) =>
      (JSON.parse(readFileSync(join(TOOLS_DIR, `${n}.meta`), 'utf8')) as { sandbox?: { ollieSocket?: boolean } })
        .sandbox?.ollieSocket,
  );
  expect(withSocket).toEqual(['client_9p', 'subagent_spawn']);
});
