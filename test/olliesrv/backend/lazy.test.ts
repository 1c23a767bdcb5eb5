/**
 * Startup: loading the backends and building them from a config imports no provider package; the first request of
 * a type imports that type's package only.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startMockLlm, type MockLlm } from '../../../src/devtools/mock-llm/server.js';
import { backendFor, collect, request } from './helpers.js';

const loaded = vi.hoisted(() => new Set<string>());

vi.mock('@ai-sdk/anthropic', async (orig) => {
  loaded.add('anthropic');
  return orig();
});
vi.mock('@ai-sdk/openai-compatible', async (orig) => {
  loaded.add('openai-compatible');
  return orig();
});
vi.mock('@ai-sdk/google', async (orig) => {
  loaded.add('google');
  return orig();
});
vi.mock('ollama-ai-provider-v2', async (orig) => {
  loaded.add('ollama');
  return orig();
});
vi.mock('ai', async (orig) => {
  loaded.add('ai');
  return orig();
});

describe('lazy provider imports', () => {
  let mock: MockLlm;
  beforeAll(async () => {
    mock = await startMockLlm();
  });
  afterAll(async () => {
    await mock.close();
  });

  it('imports nothing until a request, then only the package of that type', async () => {
    const { Backends } = await import('../../../src/olliesrv/backend/index.js');
    expect(typeof Backends).toBe('function');
    const backends = ['openai', 'anthropic', 'ollama', 'gemini', 'copilot'] as const;
    const built = backends.map((t) => backendFor(t, mock));
    expect([...loaded]).toEqual([]);

    expect((await collect(built[1]!.stream(request()))).error).toBeUndefined();
    expect([...loaded]).toEqual(['anthropic']);
    expect((await collect(built[2]!.stream(request()))).error).toBeUndefined();
    expect([...loaded]).toEqual(['anthropic', 'ollama']);
    // Model lists and context lengths need no provider package either.
    await built[3]!.models();
    expect(loaded.has('google')).toBe(false);
    expect(loaded.has('ai')).toBe(false);

    // prepare() loads ahead of the first request (and exchanges Copilot's token); it never rejects.
    await built[3]!.prepare!();
    expect(loaded.has('google')).toBe(true);
    expect(mock.copilotTokens).toHaveLength(0);
    await built[4]!.prepare!();
    expect(loaded.has('openai-compatible')).toBe(true);
    expect(mock.copilotTokens).toHaveLength(1);
    await expect(backendFor('copilot', mock, { key: undefined }).prepare!()).resolves.toBeUndefined();
    expect(loaded.has('ai')).toBe(false);
  });
});
