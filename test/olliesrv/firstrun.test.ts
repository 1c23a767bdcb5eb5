/**
 * The first run: no backends.conf means no backend (a prompt fails at once, saying where to set one up), a backend is
 * checked live and stored through config/check and config/backend, and agents made before it follow it.
 */
import { readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { testHarness, type Harness } from './agent-harness.js';

const conf = (x: Harness): string => join(x.configDir, 'backends.conf');

describe('no backend configured', () => {
  it('makes the agent, and fails its prompt at once with a pointer to Settings / ollie setup, without asking any provider', async () => {
    const h = await testHarness({ tools: false });
    rmSync(conf(h));
    expect(await h.c.rdwrText('ctl', 'reload')).toMatch(/no backend configured/);
    expect(await h.c.readText('backends')).toBe('');
    const a = await h.agent();
    const before = h.mock.requests.length;
    const t0 = Date.now();
    const blocks = await h.turn(a.path, 'hello', 5000);
    // At once: no retry with backoff (the old implicit Ollama retried five times over ~28 s).
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(blocks.map((b) => b.role)).toEqual(['user', 'error']);
    expect(blocks[1]!.content).toMatch(/no LLM backend is configured: add one in the GUI's Settings .*`ollie setup`/);
    expect(h.mock.requests.length).toBe(before);
    await expect(h.c.rdwrText('generate', '\nhi')).rejects.toThrow(/no LLM backend is configured/);
  });
});

describe('config/check and config/backend', () => {
  it("lists a candidate's models live, or says why not; the key is never in a reply", async () => {
    const h = await testHarness({ tools: false, mock: { models: ['mock-a', 'mock-b'] } });
    const models = await h.c.rdwrText(
      'config/check',
      `provider=compatible\nurl=${h.mock.url}/v1\nkey=sk-secret-123456\n`,
    );
    expect(
      models
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split('\t')[0]),
    ).toEqual(['mock-a', 'mock-b']);
    expect(h.mock.requests.at(-1)).toMatchObject({ method: 'GET', path: '/v1/models' });
    // Nothing is stored by a check.
    expect(readFileSync(conf(h), 'utf8')).not.toContain('sk-secret-123456');

    // A port nothing listens on (a server's, just closed): the reason, not undici's bare "fetch failed".
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const err = h.c.rdwrText(
      'config/check',
      `provider=compatible\nurl=http://127.0.0.1:${port}/v1\nkey=sk-secret-123456\n`,
    );
    await expect(err).rejects.toThrow(
      `http://127.0.0.1:${port}/v1: local: fetch failed (ECONNREFUSED): connect ECONNREFUSED 127.0.0.1:${port}`,
    );
    await expect(err).rejects.not.toThrow(/sk-secret/);
    await expect(h.c.rdwrText('config/check', 'provider=compatible\n')).rejects.toThrow(
      'config/check: "url" is required for OpenAI-compatible server',
    );
    await expect(h.c.rdwrText('config/check', 'provider=kiro\n')).rejects.toThrow(
      /config\/check: unknown provider "kiro" \(one of openai, anthropic, openrouter/,
    );
    await expect(h.c.rdwrText('config/check', 'provider=openai\nmodle=x\n')).rejects.toThrow(
      /config\/check:2: expected one of provider, name/,
    );
    await expect(h.c.rdwrText('config/check', 'provider=openai\nkey_env=NOT_SET_ANYWHERE\n')).rejects.toThrow(
      /NOT_SET_ANYWHERE .* is not set/,
    );
  });

  it('stores a commented, 0600 backends.conf from nothing, reloads it, and an agent made before follows it', async () => {
    const h = await testHarness({ tools: false, turns: [[{ text: 'Set up and answering.' }]] });
    rmSync(conf(h));
    await h.c.rdwrText('ctl', 'reload');
    const a = await h.agent();

    const reply = await h.c.rdwrText(
      'config/backend',
      `provider=compatible\nname=mock\nurl=${h.mock.url}/v1\nkey=sk-secret-123456\nmodel=gpt-4o\n`,
    );
    expect(reply).toBe(`saved [mock] in ${conf(h)} (the default backend)\n`);
    expect(reply).not.toContain('sk-secret');
    const text = readFileSync(conf(h), 'utf8');
    expect(text).toMatch(/^# LLM backends of Ollie/);
    expect(text).toContain('[default]\nbackend = mock\n');
    expect(text).toMatch(
      /# OpenAI-compatible server.*\n# The key is kept here.*\n\[mock\]\ntype = openai\nurl = http:\/\/127\.0\.0\.1:\d+\/v1\nkey = sk-secret-123456\nmodel = gpt-4o\n/,
    );
    expect(statSync(conf(h)).mode & 0o777).toBe(0o600);
    expect(await h.c.readText('backends')).toMatch(/^mock\*\topenai\t/);

    const blocks = await h.turn(a.path, 'hello');
    expect(blocks.at(-1)).toMatchObject({ role: 'assistant', content: 'Set up and answering.' });
    expect(
      blocks.some(
        (b) =>
          b.role === 'info' &&
          /no backend was configured when this agent was made: using the default backend "mock"/.test(b.content),
      ),
    ).toBe(true);
    expect(await h.c.readText(`${a.path}/cfg`)).toMatch(/backend=mock/);
  });

  it('replaces a section of the same name and keeps the rest of the file as written', async () => {
    const h = await testHarness({ tools: false });
    const before = readFileSync(conf(h), 'utf8');
    await h.c.rdwrText(
      'config/backend',
      `provider=compatible\nname=tiny\nurl=${h.mock.url}/v1\nkey_env=HOME\nmodel=gpt-4o\ndefault=no\n`,
    );
    const text = readFileSync(conf(h), 'utf8');
    expect(text).toContain('[default]\nbackend = mock\n');
    expect(text).toMatch(/\[tiny\]\ntype = openai\nurl = [^\n]+\nkey = env:HOME\nmodel = gpt-4o\n/);
    expect(text.match(/\[tiny\]/g)).toHaveLength(1);
    // The sections around it are untouched.
    for (const s of ['claude', 'small'])
      expect(text).toContain(before.slice(before.indexOf(`[${s}]`)).split('\n\n')[0]);
  });
});

describe('an agent whose backend is gone', () => {
  it('follows the default backend (and its model) instead of failing with unknown backend', async () => {
    const h = await testHarness({ tools: false, turns: [[{ text: 'From the default.' }]] });
    const a = await h.agent({ backend: 'claude' });
    await h.c.write(`${a.path}/cfg`, 'model=claude-opus-4');
    const text = readFileSync(conf(h), 'utf8');
    await h.c.write('config/backends.conf', text.replace(/\[claude\][^[]*/, ''));
    const blocks = await h.turn(a.path, 'hello');
    expect(blocks.at(-1)).toMatchObject({ role: 'assistant', content: 'From the default.' });
    expect(blocks.find((b) => b.role === 'info')?.content).toBe(
      'backend "claude" is no longer configured: using the default backend "mock" and its model.',
    );
    const req = h.mock.requests.find((r) => r.path === '/v1/chat/completions');
    expect((req?.body as { model: string }).model).toBe('gpt-4o');
    expect(await h.c.readText(`${a.path}/cfg`)).toMatch(/backend=mock/);

    // Asking for its model moves it too: the answer is the model its next request will use, not the gone one's.
    const b = await h.agent({ backend: 'small', session: a.session });
    await h.c.write(`${b.path}/cfg`, 'model=small-only-model');
    await h.c.write('config/backends.conf', readFileSync(conf(h), 'utf8').replace(/\[small\][^[]*/, ''));
    expect(await h.c.rdwrText(`${b.path}/ctl`, 'model')).toBe('gpt-4o\n');
  });
});
