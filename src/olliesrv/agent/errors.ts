/** The agent's errors, and the provider's own figures read from its context-length errors. */

export class AgentError extends Error {
  override name = 'AgentError';
}

/** A request that cannot be made to fit the model's window: the message says what takes the room. */
export class ContextBudgetError extends AgentError {
  override name = 'ContextBudgetError';
}

/** The provider's own count and limit, from the wording of its context-length error, when it gives them. */
export function overflowFigures(message: string): { actual?: number; limit?: number } {
  const pats: Array<[RegExp, 'al' | 'la' | 'l' | 'a']> = [
    [/maximum context length is (\d+) tokens\. However, your messages resulted in (\d+) tokens/i, 'la'],
    [/prompt is too long: (\d+) tokens > (\d+)/i, 'al'],
    [/input token count \((\d+)\) exceeds the maximum number of tokens allowed \((\d+)\)/i, 'al'],
    [/prompt token count of (\d+) exceeds the limit of (\d+)/i, 'al'],
    [/exceeds the context length \((\d+) > (\d+)\)/i, 'al'],
    [/maximum context length is (\d+)/i, 'l'],
  ];
  for (const [re, order] of pats) {
    const m = re.exec(message);
    if (!m) continue;
    const a = Number(m[1]);
    const b = Number(m[2]);
    if (order === 'al') return { actual: a, limit: b };
    if (order === 'la') return { limit: a, actual: b };
    return { limit: a };
  }
  return {};
}

export const errText = (e: unknown): string => (e instanceof Error ? e.message : String(e));
