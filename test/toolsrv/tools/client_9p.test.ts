/**
 * client_9p and subagent_spawn against a live 9P server (the namespace library olliesrv uses), run in the
 * sandbox with their .meta's Ollie-socket rule, as toolsrv runs them.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { build, Dir, Leaf } from '../../../src/ninep/index.js';
import { PACKAGE_ROOT } from '../../../src/toolsrv/sandbox/index.js';
import { serve, type TestServer } from '../../ninep/helpers.js';
import { buildNative, makeWorld, runTool, type World } from '../sandbox-helpers.js';

let w: World;
let srv: TestServer<unknown>;
let plan: string;
let requests: string[];

beforeAll(() => {
  buildNative();
  // The Node tools import the compiled library; `npm test` builds it first (npm run build:node).
  expect(existsSync(join(PACKAGE_ROOT, 'dist', 'ninep', 'node.js')), 'dist/ is not built: run npm run build:node').toBe(
    true,
  );
});
beforeEach(async () => {
  w = makeWorld();
  plan = '- [ ] nothing yet\n';
  requests = [];
  srv = (await serve({
    fs: build(
      Dir(
        '/',
        Leaf('help', { read: () => 'the Ollie namespace\n' }),
        Dir(
          'session',
          Dir(
            'S1',
            Leaf('plan', { text: { get: () => plan, set: (_c, v) => void (plan = v) } }),
            Leaf('echo', { rdwr: (_c, req) => `you said: ${req}` }),
            Dir(
              'agent',
              Leaf('new', {
                rdwr: (_c, req) => {
                  requests.push(req);
                  return 'helper-1\n';
                },
              }),
            ),
          ),
        ),
      ),
      { uid: 'alice' },
    ),
  })) as TestServer<unknown>;
});
afterEach(async () => {
  await srv.close();
  w.cleanup();
});

const env = () => ({ HOME: w.home, OLLIE_ADDR: `unix!${srv.path}`, OLLIE_SESSION_ID: 'S1', OLLIE_UNAME: 'alice' });

describe('client_9p', () => {
  test('read, write and rdwr, with $OLLIE_SESSION_ID expanded', async () => {
    expect(await runTool(w, 'client_9p', { op: 'read', path: 'help' }, { env: env() })).toMatchObject({
      code: 0,
      out: 'the Ollie namespace\n',
    });
    const wr = await runTool(
      w,
      'client_9p',
      { op: 'write', path: 'session/$OLLIE_SESSION_ID/plan', data: '- [x] done\n' },
      { env: env() },
    );
    expect(wr).toMatchObject({ code: 0, out: 'wrote 11 bytes to session/S1/plan\n' });
    expect(plan).toBe('- [x] done\n');
    expect(
      (await runTool(w, 'client_9p', { op: 'read', path: 'session/${OLLIE_SESSION_ID}/plan' }, { env: env() })).out,
    ).toBe('- [x] done\n');
    expect(
      (await runTool(w, 'client_9p', { op: 'rdwr', path: 'session/S1/echo', data: 'ping' }, { env: env() })).out,
    ).toBe('you said: ping');
  });

  test('errors from the server and a missing address reach the model', async () => {
    const r = await runTool(w, 'client_9p', { op: 'read', path: 'session/S1/nope' }, { env: env() });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/^client_9p: read session\/S1\/nope: /);
    const noAddr = await runTool(w, 'client_9p', { op: 'read', path: 'help' }, { env: { ...env(), OLLIE_ADDR: '' } });
    expect(noAddr).toMatchObject({
      code: 1,
      out: 'client_9p: $OLLIE_ADDR is not set: this tool must be run by toolsrv for an Ollie session\n',
    });
  });

  test('without the Ollie-socket rule the sandbox keeps the tool off the socket', async () => {
    // shell has no such rule: it does not even get $OLLIE_ADDR, and given the address it still cannot connect.
    const client = `echo '{"op":"read","path":"help"}' | ${join(PACKAGE_ROOT, 'data', 'tools', 'client_9p')}`;
    const noEnv = await runTool(w, 'shell', { command: client }, { env: env() });
    expect(noEnv.out).toBe(
      'client_9p: $OLLIE_ADDR is not set: this tool must be run by toolsrv for an Ollie session\n',
    );
    const r = await runTool(w, 'shell', { command: `export OLLIE_ADDR='unix!${srv.path}'; ${client}` }, { env: env() });
    expect(r.out).toMatch(/^client_9p: cannot reach Ollie at unix!.*: .*EACCES/);
    expect(r.code).toBe(1);
  });
});

describe('subagent_spawn', () => {
  test('writes name=, agent=, parent=$OLLIE_UNAME and prompt=… (quoted, last) to session/$OLLIE_SESSION_ID/agent/new and prints the reply', async () => {
    const prompt = 'Review "src/a.ts"\nand report back \\ briefly.';
    const r = await runTool(w, 'subagent_spawn', { prompt, name: 'reviewer', profile: 'reviewer' }, { env: env() });
    expect(r).toMatchObject({ code: 0, out: 'helper-1\n' });
    expect(requests).toEqual([
      'name="reviewer" agent="reviewer" parent="alice" prompt="Review \\"src/a.ts\\"\nand report back \\\\ briefly."\n',
    ]);
  });

  test('an empty prompt is refused before anything is sent', async () => {
    expect(await runTool(w, 'subagent_spawn', { prompt: ' ' }, { env: env() })).toMatchObject({
      code: 1,
      out: 'subagent_spawn: argument prompt is required\n',
    });
    expect(requests).toEqual([]);
  });
});
