/**
 * `ollie setup` from the built CLI, driven by flags as a script would: checked live against the mock LLM, written
 * as a commented 0600 backends.conf, and reloaded by the running daemon; a failed check or a missing flag writes
 * nothing.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { harness, type Harness } from '../olliesrv/agent-harness.js';
import { runSetup } from '../../src/cli/setup.js';

const OLLIE = new URL('../../dist/cli/ollie.js', import.meta.url).pathname;

let h: Harness | undefined;
afterEach(async () => {
  delete process.env.MOCK_KEY;
  await h?.close();
  h = undefined;
});

function setup(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; out: string; err: string }> {
  const p = spawn(process.execPath, [OLLIE, 'setup', '--config', h!.configDir, '--socket', h!.socket, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let out = '';
  let err = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => p.once('close', (code) => resolve({ code, out, err })));
}

describe('ollie setup', () => {
  it('checks the provider, writes the section and has the running daemon reload it', async () => {
    // The daemon (in this process) reads the key from its environment, as it would from the user's login.
    process.env.MOCK_KEY = 'sk-from-env-123';
    h = await harness({ tools: false, mock: { models: ['served-model', 'other-model'] } });
    const file = join(h.configDir, 'backends.conf');
    rmSync(file);
    await h.c.rdwrText('ctl', 'reload');

    const r = await setup(
      ['--provider', 'compatible', '--name', 'mock', '--url', `${h.mock.url}/v1`, '--key-env', 'MOCK_KEY'],
      { MOCK_KEY: 'sk-from-env-123' },
    );
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toContain('2 models: served-model, other-model');
    expect(r.out).toContain(`saved [mock] in ${file} (the default backend)`);
    expect(r.out).toMatch(/daemon: reloaded .*backends\.conf: mock/);
    const text = readFileSync(file, 'utf8');
    // No model given: a local server's own (the first it lists), not OpenAI's usual one.
    expect(text).toMatch(
      /^# LLM backends of Ollie[^]*\[default\]\nbackend = mock\n[^]*# The key is read from \$MOCK_KEY[^]*\n\[mock\]\ntype = openai\nurl = http:\/\/127\.0\.0\.1:\d+\/v1\nkey = env:MOCK_KEY\nmodel = served-model\n$/,
    );
    expect(text).not.toContain('sk-from-env');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await h.c.readText('backends')).toMatch(/^mock\*\topenai\t.*\tserved-model\n$/);
  });

  it('writes nothing when the check fails or a flag is missing, and says why', async () => {
    h = await harness({ tools: false });
    const file = join(h.configDir, 'backends.conf');
    const before = readFileSync(file, 'utf8');
    const bad = await setup(['--provider', 'compatible', '--url', 'http://127.0.0.1:9/v1']);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(
      /^ollie setup: the check failed: http:\/\/127\.0\.0\.1:9\/v1: .*\(--no-check stores it anyway\)\n$/,
    );
    const none = await setup(['--url', 'http://127.0.0.1:9/v1']);
    expect(none.code).toBe(1);
    expect(none.err).toBe(
      'ollie setup: --provider is required when not on a terminal (one of openai, anthropic, openrouter, ollama, gemini, copilot, compatible)\n',
    );
    const noUrl = await setup(['--provider', 'compatible', '--no-check']);
    expect(noUrl.err).toMatch(/"url" is required for OpenAI-compatible server/);
    expect(readFileSync(file, 'utf8')).toBe(before);
    expect(existsSync(join(h.configDir, `.backends.conf.${process.pid}.tmp`))).toBe(false);
  });

  it('asks on a terminal: provider by number, URL, a key read as a secret, the model offered from the live list', async () => {
    h = await harness({ tools: false, mock: { models: ['served-model', 'other-model'] } });
    const file = join(h.configDir, 'backends.conf');
    rmSync(file);
    const asked: Array<[string, boolean]> = [];
    const answers = ['7', `${h.mock.url}/v1`, 'sk-typed-key-1234', 'other-model'];
    let out = '';
    await runSetup(
      { config: h.configDir, socket: h.socket, default: true, check: true },
      { out: (s) => (out += s), env: {}, ask: async (q, secret) => (asked.push([q, !!secret]), answers.shift()!) },
    );
    expect(asked).toEqual([
      ['Provider [1]: ', false],
      ['URL [e.g. http://localhost:1234/v1]: ', false],
      ['API key (not shown; or env:VARNAME; Enter for none): ', true],
      ['Model [served-model]: ', false],
    ]);
    expect(out).toContain('  7. OpenAI-compatible server (LM Studio, vLLM, llama.cpp, a gateway…) (compatible)\n');
    expect(out).not.toContain('sk-typed-key');
    expect(readFileSync(file, 'utf8')).toContain('[local]\ntype = openai\n');
    expect(readFileSync(file, 'utf8')).toMatch(/key = sk-typed-key-1234\nmodel = other-model\n$/);
    expect(await h.c.readText('backends')).toMatch(/^local\*\topenai\t.*\tother-model\n$/);
  });
});
