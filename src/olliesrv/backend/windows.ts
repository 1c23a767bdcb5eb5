/**
 * Context windows of well-known models, from their providers' published model pages, for when neither
 * backends.conf (`context=`) nor the provider (its model list, Ollama's /api/show) says. Matched by the longest
 * prefix of the model id, after any router prefix (`openai/gpt-4o` on OpenRouter) and before any Ollama tag
 * (`qwen3:8b`). A model not here gets its backend type's default.
 */
const KNOWN: Array<[prefix: string, tokens: number]> = [
  ['gpt-3.5-turbo', 16_385],
  ['gpt-4', 8_192],
  ['gpt-4-turbo', 128_000],
  ['gpt-4o', 128_000],
  ['gpt-4.1', 1_047_576],
  ['gpt-5', 400_000],
  ['o1', 200_000],
  ['o3', 200_000],
  ['o4-mini', 200_000],
  ['claude-', 200_000],
  ['gemini-1.5-pro', 2_097_152],
  ['gemini-1.5-flash', 1_048_576],
  ['gemini-2', 1_048_576],
  ['deepseek-chat', 128_000],
  ['deepseek-reasoner', 128_000],
  ['deepseek-coder', 128_000],
  ['grok-', 131_072],
  ['llama3', 8_192],
  ['llama3.1', 131_072],
  ['llama3.2', 131_072],
  ['llama3.3', 131_072],
  ['qwen2.5', 32_768],
  ['qwen3', 40_960],
  ['qwen3-coder', 262_144],
  ['mistral', 32_768],
  ['mistral-nemo', 131_072],
  ['mixtral', 32_768],
  ['codestral', 32_768],
  ['phi3', 4_096],
  ['phi4', 16_384],
  ['gemma2', 8_192],
  ['gemma3', 131_072],
  ['gpt-oss', 131_072],
];

/** The published window of `model`, when it is a model we know. */
export function knownWindow(model: string): number | undefined {
  const id = model.toLowerCase().replace(/^.*\//, '').replace(/:.*$/, '');
  let best: [string, number] | undefined;
  for (const k of KNOWN) if (id.startsWith(k[0]) && (!best || k[0].length > best[0].length)) best = k;
  return best?.[1];
}
