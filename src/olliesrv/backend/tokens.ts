/**
 * Token counts of request text, the way the o200k family (GPT-4o, o-series, GPT-5) splits it: text is cut into
 * the pieces of o200k's pre-tokenizer (its own regular expression: words with their leading space, cased
 * sub-words, digit groups of three, punctuation runs, whitespace runs), and each piece costs what BPE makes of
 * such a piece: one token for a word-sized piece, more for a long one. The pre-tokenizer is what makes code,
 * JSON and prose count differently (a fixed characters-per-token ratio is off by 30 % either way); the per-piece
 * cost is the approximation. Against o200k itself (BPE over its published ranks) on this repository's files it
 * is within 1 % on TypeScript and JSON, 3 % low on C and 8 % low on English prose. Other providers' tokenizers
 * differ more: the loop corrects its estimates with the usage each provider reports (agent/context.ts,
 * Correction).
 *
 * The mock LLM counts with this too, so the bench's windows are enforced in the same family.
 */

import type { Message, ToolCall, ToolSpec } from './types.js';

// o200k_base's pre-tokenizer pattern (tiktoken), as published.
const PIECE =
  /[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'s|'t|'re|'ve|'m|'ll|'d|'S|'T|'RE|'VE|'M|'LL|'D)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'s|'t|'re|'ve|'m|'ll|'d|'S|'T|'RE|'VE|'M|'LL|'D)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

const LETTER = /\p{L}/u;
const NON_ASCII = /\P{ASCII}/u;

function pieceTokens(p: string): number {
  const n = p.length;
  if (n <= 1) return 1;
  const c = p.charCodeAt(p.length - 1);
  // Whitespace runs (indentation) are single tokens up to a few dozen characters.
  if (c === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d) return Math.ceil(n / 24);
  if (LETTER.test(p)) {
    // Non-Latin scripts are roughly a token per one or two characters even in o200k.
    if (NON_ASCII.test(p)) return Math.ceil(n / 1.6);
    // Common words (with their space) are one token; long identifiers and rare words split every ~6 characters.
    return n <= 10 ? 1 : Math.ceil(n / 6);
  }
  if (p.charCodeAt(0) >= 0x30 && p.charCodeAt(0) <= 0x39) return 1;
  // Punctuation runs merge in pairs or threes ("\");", "}}", "=>").
  return n <= 3 ? 1 : Math.ceil(n / 3);
}

/** The estimate of o200k tokens of `text` (the pre-tokenizer and a per-piece cost). */
function estimateTokens(text: string): number {
  let total = 0;
  for (const m of text.matchAll(PIECE)) total += pieceTokens(m[0]);
  return total;
}

/**
 * The exact o200k count, from a maintained tokenizer (gpt-tokenizer, the BPE over o200k's published ranks), once
 * loaded. It is loaded only when a request comes near its window (preciseCounting), where a few per cent decide
 * whether it fits: loading costs ~100 ms and ~60 MB, which most sessions never need to pay.
 */
let exact: ((text: string) => number) | undefined;
let loading: Promise<void> | undefined;
/** Bumped when the counting changes, so that counts cached before are made again. */
let generation = 0;

/** Starts loading the exact tokenizer (once); counts are exact from when it is loaded. */
export function preciseCounting(): Promise<void> {
  loading ??= import('gpt-tokenizer/encoding/o200k_base').then(
    (m) => {
      exact = (text) => m.countTokens(text);
      generation++;
    },
    () => undefined, // the estimate stays: the loop corrects it with the provider's reported usage anyway
  );
  return loading;
}

/** o200k tokens of `text`: exact once the tokenizer is loaded (preciseCounting), estimated until then. */
export function countTokens(text: string): number {
  if (!text) return 0;
  return exact ? exact(text) : estimateTokens(text);
}

/** What each message costs beyond its text (role and separators), as the chat formats frame it. */
export const MESSAGE_OVERHEAD = 4;

// Messages, calls and tool lists are immutable once made: their counts are computed once (per way of counting).
const cache = new WeakMap<object, { generation: number; n: number }>();

function cached(key: object, f: () => number): number {
  const c = cache.get(key);
  if (c?.generation === generation) return c.n;
  const n = f();
  cache.set(key, { generation, n });
  return n;
}

export const argsTokens = (c: ToolCall): number => cached(c, () => countTokens(c.args));

export function messageTokens(m: Message): number {
  return cached(m, () => {
    let n = MESSAGE_OVERHEAD + countTokens(m.content);
    if (m.role === 'assistant') {
      if (m.reasoning) n += countTokens(m.reasoning);
      for (const c of m.toolCalls ?? []) n += MESSAGE_OVERHEAD + countTokens(c.name) + argsTokens(c);
    }
    return n;
  });
}

export function toolsTokens(specs: readonly ToolSpec[]): number {
  return cached(specs, () => (specs.length ? countTokens(JSON.stringify(specs)) : 0));
}

/** The estimated prompt of a whole request. */
export function requestTokens(messages: readonly Message[], tools: readonly ToolSpec[]): number {
  let n = toolsTokens(tools);
  for (const m of messages) n += messageTokens(m);
  return n;
}
