/**
 * setup.ts: the key=value requests of config/check and config/backend (and `ollie setup`'s flags), and the merge of a
 * new section into a backends.conf a person wrote, which must keep what they wrote.
 */
import { describe, expect, it } from 'vitest';
import { parseBackendsConfig } from '../../../src/olliesrv/backend/config.js';
import { mergeSetup, parseSetupRequest, sectionText, setupFrom } from '../../../src/olliesrv/backend/setup.js';

const W = 'config/backend';

describe('setup requests', () => {
  it('completes a provider with its URL and section name', () => {
    expect(parseSetupRequest('provider=anthropic\nkey_env=ANTHROPIC_API_KEY\n', W)).toEqual({
      provider: 'anthropic',
      name: 'anthropic',
      url: 'https://api.anthropic.com/v1',
      keyEnv: 'ANTHROPIC_API_KEY',
      makeDefault: true,
    });
    expect(parseSetupRequest('provider=openrouter\nkey=sk-or\nmodel=x/y\ndefault=no\nname=router\n', W)).toMatchObject({
      url: 'https://openrouter.ai/api/v1',
      name: 'router',
      model: 'x/y',
      makeDefault: false,
    });
  });

  it.each([
    [
      'no provider',
      'url=http://x\n',
      'config/backend: "provider" is required (one of openai, anthropic, openrouter, ollama, gemini, copilot, compatible)',
    ],
    [
      'an unknown field',
      'provider=openai\nmodle=x\n',
      'config/backend:2: expected one of provider, name, url, key, key_env, model, default as "key=value", got "modle"',
    ],
    ['a field twice', 'provider=openai\nprovider=ollama\n', 'config/backend:2: "provider" given twice'],
    [
      'a compatible server without URL',
      'provider=compatible\n',
      'config/backend: "url" is required for OpenAI-compatible server (LM Studio, vLLM, llama.cpp, a gateway…) (e.g. http://localhost:1234/v1)',
    ],
    ['a bad URL', 'provider=ollama\nurl=ftp://x\n', 'config/backend: bad url "ftp://x" (expected http:// or https://)'],
    [
      'both key and key_env',
      'provider=openai\nkey=a\nkey_env=B\n',
      'config/backend: give "key" or "key_env", not both',
    ],
    [
      'the name "default"',
      'provider=openai\nname=default\n',
      'config/backend: bad backend name "default" (letters, digits, _ . -; not "default")',
    ],
  ])('refuses %s, saying where', (_what, text, msg) => {
    expect(() => parseSetupRequest(text, W)).toThrow(msg);
  });

  it('refuses a line break inside a value (it would add a line to the file)', () => {
    expect(() =>
      setupFrom({ provider: 'openai', key: 'sk\n[evil]\ntype = openai', makeDefault: true }, 'ollie setup'),
    ).toThrow('ollie setup: "key" holds a line break');
  });

  it('writes a section backends.conf parses back to the same backend', () => {
    const s = parseSetupRequest('provider=compatible\nname=lm\nurl=http://localhost:1234/v1/\nkey=k\nmodel=qwen\n', W);
    const text = sectionText(s);
    expect(text).toMatch(
      /^# OpenAI-compatible server .*, set up \d{4}-\d\d-\d\d\.\n# The key is kept here: this file is readable by you alone \(0600\)\.\n\[lm\]\n/,
    );
    expect(parseBackendsConfig(text, 'x', {}).backends[0]).toMatchObject({
      name: 'lm',
      type: 'openai',
      url: 'http://localhost:1234/v1',
      key: 'k',
      model: 'qwen',
    });
  });
});

describe('mergeSetup', () => {
  const ollama = parseSetupRequest('provider=ollama\nmodel=qwen3\n', W);

  it('starts a new file with a header, a [default] and the section', () => {
    const text = mergeSetup('', ollama);
    expect(text).toMatch(
      /^# LLM backends of Ollie[^]*\n\n\[default\]\nbackend = ollama\n\n# Ollama \(provider ollama\)[^\n]*\n\[ollama\]\ntype = ollama\nurl = http:\/\/127\.0\.0\.1:11434\nmodel = qwen3\n$/,
    );
    expect(parseBackendsConfig(text, 'x', {}).defaultName).toBe('ollama');
  });

  it('keeps what the person wrote, replaces only its own section (and the comment above it), and moves [default] when asked', () => {
    const mine =
      '# my backends\n\n[default]\nbackend = claude\n\n# the good one\n[claude]\ntype = anthropic\nkey = env:K\n\n# comment of ollama\n[ollama]\ntype = ollama\nmodel = old\n\n# the last one\n[x]\ntype = openai\n';
    const text = mergeSetup(mine, { ...ollama, makeDefault: false });
    expect(text).toBe(
      mine.replace(/# comment of ollama\n\[ollama\]\ntype = ollama\nmodel = old\n/, sectionText(ollama)),
    );
    const made = mergeSetup(mine, ollama);
    expect(made).toContain('[default]\nbackend = ollama\n\n# the good one\n[claude]');
    expect(made.match(/\[default\]/g)).toHaveLength(1);
    expect(parseBackendsConfig(made, 'x', { K: 'k' }).backends.map((b) => b.name)).toEqual(['claude', 'ollama', 'x']);
  });

  it('makes a first backend the default even when asked not to', () => {
    expect(mergeSetup('# nothing yet\n', { ...ollama, makeDefault: false })).toContain('[default]\nbackend = ollama\n');
  });
});
