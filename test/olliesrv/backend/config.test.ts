/** backends.conf parsing, and the Backends pool built from a config dir. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { emptyConfig, loadBackendsConfig, parseBackendsConfig } from '../../../src/olliesrv/backend/config.js';
import { Backends, NoBackendError } from '../../../src/olliesrv/backend/pool.js';

const P = '/cfg/backends.conf';
const env = { OPENAI_API_KEY: 'sk-from-env', MY_KEY: 'sk-mine-very-secret', GITHUB_TOKEN: 'gho_abc' };

describe('backends.conf parser', () => {
  it('parses every type, keys, env references, context, headers and the default', () => {
    const cfg = parseBackendsConfig(
      `# comment
; another comment
[default]
backend = router

[local]
type = ollama
url = http://gpu-box:11434/
model = qwen3:8b
context = 64k

[router]
type = openai
url = https://openrouter.ai/api/v1
key = env:MY_KEY
model = anthropic/claude-sonnet-4.5
compaction_model = openai/gpt-4.1-mini
headers = HTTP-Referer: https://ollie.dev; X-Title: Ollie
headers = X-Extra: 1

[lmstudio]
type = openai
url = http://localhost:1234/v1
model = qwen2.5-coder
context = 32_768

[claude]
TYPE = Anthropic
key = sk-ant-literal

[gem]
type = gemini

[cp]
type = copilot
`,
      P,
      env,
    );
    expect(cfg.defaultName).toBe('router');
    expect(cfg.path).toBe(P);
    const by = Object.fromEntries(cfg.backends.map((b) => [b.name, b]));
    expect(Object.keys(by)).toEqual(['local', 'router', 'lmstudio', 'claude', 'gem', 'cp']);
    expect(by.local).toMatchObject({
      type: 'ollama',
      url: 'http://gpu-box:11434',
      model: 'qwen3:8b',
      compactionModel: 'qwen3:8b',
      context: 65536,
      source: `${P}:6`,
    });
    expect(by.local!.key).toBeUndefined();
    expect(by.router).toMatchObject({
      type: 'openai',
      key: 'sk-mine-very-secret',
      compactionModel: 'openai/gpt-4.1-mini',
      headers: { 'HTTP-Referer': 'https://ollie.dev', 'X-Title': 'Ollie', 'X-Extra': '1' },
    });
    expect(by.lmstudio).toMatchObject({
      type: 'openai',
      url: 'http://localhost:1234/v1',
      context: 32768,
      key: 'sk-from-env',
    });
    expect(by.claude).toMatchObject({
      type: 'anthropic',
      url: 'https://api.anthropic.com/v1',
      key: 'sk-ant-literal',
      model: 'claude-sonnet-4-5',
    });
    expect(by.gem).toMatchObject({
      type: 'gemini',
      url: 'https://generativelanguage.googleapis.com/v1beta',
      model: 'gemini-2.5-flash',
    });
    expect(by.gem!.key).toBeUndefined();
    expect(by.cp).toMatchObject({ type: 'copilot', url: 'https://api.github.com', key: 'gho_abc' });
  });

  it('defaults to the first backend without [default]', () => {
    expect(parseBackendsConfig('[b]\ntype = ollama\n[a]\ntype = ollama\n', P, {}).defaultName).toBe('b');
  });

  const bad: Array<[string, string, number, RegExp]> = [
    ['a bad line', '[a]\ntype = ollama\nthis is not a pair\n', 3, /expected "key = value"/],
    ['an unknown key', '[a]\ntype = ollama\ntemprature = 1\n', 3, /unknown key "temprature" in \[a\]/],
    ['an unknown type', '[a]\n\ntype = chatgpt\n', 3, /unknown type "chatgpt"/],
    [
      'a duplicate section',
      '[a]\ntype = ollama\n[b]\ntype = ollama\n[a]\ntype = openai\n',
      5,
      /duplicate section \[a\] \(first at line 1\)/,
    ],
    ['a duplicate key', '[a]\ntype = ollama\nmodel = x\nmodel = y\n', 4, /duplicate key "model"/],
    ['a bad number', '[a]\ntype = ollama\ncontext = lots\n', 3, /bad context "lots"/],
    ['a negative number', '[a]\ntype = ollama\ncontext = -5\n', 3, /bad context/],
    [
      'a missing env var',
      '[a]\ntype = openai\nkey = env:NOPE_NOT_SET\n',
      3,
      /environment variable NOPE_NOT_SET .* is not set/,
    ],
    [
      'a default naming nothing',
      '[default]\nbackend = ghost\n\n[a]\ntype = ollama\n',
      2,
      /default backend "ghost" is not defined \(defined: a\)/,
    ],
    ['a key outside a section', 'type = ollama\n', 1, /outside any section/],
    ['a section without type', '[a]\nmodel = x\n', 1, /has no "type"/],
    ['a bad url', '[a]\ntype = openai\nurl = ftp://x\n', 3, /bad url/],
    ['a bad header', '[a]\ntype = openai\nheaders = no colon here\n', 3, /bad header/],
    [
      'an unknown key in [default]',
      '[default]\nmodel = x\n[a]\ntype = ollama\n',
      2,
      /unknown key "model" in \[default\]/,
    ],
    ['a bad section header', '[a\ntype = ollama\n', 1, /bad section header/],
    ['an empty value', '[a]\ntype = ollama\nmodel =\n', 3, /empty value/],
  ];
  it.each(bad)('rejects %s with PATH:LINE', (_what, text, line, msg) => {
    let err: Error | undefined;
    try {
      parseBackendsConfig(text, P, env);
    } catch (e) {
      err = e as Error;
    }
    expect(err).toBeInstanceOf(Error);
    expect(err!.message.startsWith(`${P}:${line}: `)).toBe(true);
    expect(err!.message).toMatch(msg);
  });

  it('never puts a key in an error message', () => {
    const texts = [
      '[a]\ntype = openai\nkey = sk-literal-secret\nkey = sk-literal-secret\n',
      '[a]\ntype = openai\nkey = sk-literal-secret\ncontext = x\n',
    ];
    for (const t of texts)
      expect(() => parseBackendsConfig(t, P, env)).toThrow(/^\/cfg\/backends\.conf:\d+: (?!.*sk-literal-secret)/);
  });

  it('no file: no backend at all (no implicit local Ollama)', () => {
    expect(emptyConfig()).toEqual({ backends: [], defaultName: '' });
  });
});

describe('Backends pool', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ollie-backends-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const write = (text: string): void => writeFileSync(join(dir, 'backends.conf'), text);

  it('has no backend without a file, and says where to configure one', () => {
    // OLLAMA_HOST used to conjure an implicit local Ollama; it must not any more.
    const b = new Backends({ configDir: dir, env: { OLLAMA_HOST: '127.0.0.1:11434' } });
    expect(b.names()).toEqual([]);
    expect(b.defaultBackendName).toBe('');
    expect(b.path).toBeUndefined();
    expect(loadBackendsConfig(dir, {}).backends).toHaveLength(0);
    for (const get of [() => b.default, () => b.get(''), () => b.get('ollama')]) {
      expect(get).toThrow(NoBackendError);
      expect(get).toThrow(/no LLM backend is configured: .*Settings.*`ollie setup`.*backends\.conf/);
    }
    write('[one]\ntype = ollama\n');
    expect(b.reload()).toBeUndefined();
    expect(b.default.name).toBe('one');
  });

  it('gets backends by name; an unknown name lists the known ones', () => {
    write(
      '[default]\nbackend = two\n[one]\ntype = ollama\n[two]\ntype = openai\nurl = http://127.0.0.1:9/v1\nmodel = m\n',
    );
    const b = new Backends({ configDir: dir, env: {} });
    expect(b.names()).toEqual(['one', 'two']);
    expect(b.default.name).toBe('two');
    expect(b.defaultBackendName).toBe('two');
    expect(b.get('one').type).toBe('ollama');
    expect(b.get('').name).toBe('two');
    expect(() => b.get('three')).toThrow('unknown backend "three" (known: one, two)');
  });

  it('throws PATH:LINE from the constructor when the file is malformed', () => {
    write('[a]\ntype = nope\n');
    expect(() => new Backends({ configDir: dir, env: {} })).toThrow(
      `${join(dir, 'backends.conf')}:2: unknown type "nope"`,
    );
  });

  it('reload keeps the old config on error, applies a good one, and keeps unchanged backends (and their caches)', () => {
    write('[one]\ntype = ollama\n[two]\ntype = ollama\nmodel = a\n');
    const b = new Backends({ configDir: dir, env: {} });
    const one = b.get('one');
    const two = b.get('two');
    write('[one]\ntype = ollama\n[two]\ntype = bogus\n');
    const err = b.reload();
    expect(err?.message).toBe(
      `${join(dir, 'backends.conf')}:4: unknown type "bogus" (one of openai, anthropic, ollama, gemini, copilot)`,
    );
    expect(b.names()).toEqual(['one', 'two']);
    expect(b.get('two')).toBe(two);
    write('# moved down a line\n[one]\ntype = ollama\n[two]\ntype = ollama\nmodel = b\n[three]\ntype = gemini\n');
    expect(b.reload()).toBeUndefined();
    expect(b.names()).toEqual(['one', 'two', 'three']);
    expect(b.get('one')).toBe(one);
    expect(b.get('two')).not.toBe(two);
    expect(b.get('two').defaultModel).toBe('b');
  });
});
