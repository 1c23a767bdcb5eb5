import { afterEach, beforeAll, beforeEach, expect, test } from 'vitest';
import { buildNative, makeWorld, readMeta, runTool, type World } from '../sandbox-helpers.js';

let w: World;
beforeAll(() => buildNative());
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

test('a .meta-only tool: takes the thought on stdin, changes nothing, acknowledges', async () => {
  expect(readMeta('reasoning_think').cmd).toBeTypeOf('string');
  const r = await runTool(w, 'reasoning_think', { thought: 'First read the tests, then "fix" it.\nStep 2…' });
  expect(r).toMatchObject({ code: 0, out: 'Thought recorded.\n' });
});
