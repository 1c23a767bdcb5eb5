import { afterEach, describe, expect, it } from 'vitest';
import { startEnv, until, type Env } from './helpers.js';

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe('procs', () => {
  it('runs a foreground call and returns combined output and the exit code', async () => {
    env = await startEnv();
    const c = await env.client();
    await c.write('ctl', 'load sh');
    const r = await env.call(c, { tool: 'sh', args: { command: 'echo out; echo err >&2; exit 3' } });
    expect(r.status).toBe('exited');
    expect(r.exit).toBe(3);
    expect(r.output).toContain('out\n');
    expect(r.output).toContain('err\n');
    expect(r.outputBytes).toBe(8);
  });
});
