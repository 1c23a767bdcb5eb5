/**
 * Our retry policy, as pure functions (the SDK's retries are off). After a failed try the loop calls
 * `retryDecision(err, retries)`, where `retries` is how many retries it has already made for this request (0 after
 * the first failure), and either waits `delayMs` and tries again or gives up with `reason`.
 *
 * - TransientError, StreamDropError: exponential backoff (1 s, 2 s, 4 s, … capped at 30 s) with jitter (each wait
 *   drawn from [50%, 100%] of the step, so that clients failing together do not return together), at most
 *   MAX_TRANSIENT_RETRIES retries.
 * - RateLimitError: the provider's Retry-After when given (never shorter than it), else the backoff above; at most
 *   MAX_RATE_LIMIT_RETRIES retries, and a Retry-After beyond MAX_RATE_LIMIT_WAIT_MS gives up at once (a quota
 *   exhausted for hours is not worth holding a turn open for).
 * - Anything else (auth, bad request, ContextOverflow, ToolUnsupported): no retry; the loop handles overflow by
 *   compacting, tool refusal by failing the turn.
 */
import { RateLimitError, StreamDropError, TransientError } from './errors.js';

export const MAX_TRANSIENT_RETRIES = 5;
export const MAX_RATE_LIMIT_RETRIES = 8;
export const BACKOFF_BASE_MS = 1000;
export const BACKOFF_MAX_MS = 30_000;
export const MAX_RATE_LIMIT_WAIT_MS = 120_000;

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; reason: string };

/** The wait before retry number `retries + 1`, with jitter from `random` (in [0, 1)). */
export function backoffMs(retries: number, random: () => number = Math.random): number {
  const step = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, retries));
  return Math.round(step * (0.5 + 0.5 * random()));
}

export function retryDecision(err: unknown, retries: number, random: () => number = Math.random): RetryDecision {
  if (err instanceof RateLimitError) {
    if (retries >= MAX_RATE_LIMIT_RETRIES)
      return { retry: false, reason: `still rate limited after ${retries} retries; giving up` };
    if (err.retryAfterMs !== undefined) {
      if (err.retryAfterMs > MAX_RATE_LIMIT_WAIT_MS)
        return {
          retry: false,
          reason: `rate limited; the provider asks to wait ${Math.ceil(err.retryAfterMs / 1000)} s, more than the ${MAX_RATE_LIMIT_WAIT_MS / 1000} s we wait`,
        };
      return { retry: true, delayMs: err.retryAfterMs };
    }
    return { retry: true, delayMs: backoffMs(retries, random) };
  }
  if (err instanceof TransientError || err instanceof StreamDropError) {
    if (retries >= MAX_TRANSIENT_RETRIES)
      return {
        retry: false,
        reason: `${err instanceof StreamDropError ? 'the stream dropped' : 'transient error'} again after ${retries} retries; giving up`,
      };
    return { retry: true, delayMs: backoffMs(retries, random) };
  }
  return { retry: false, reason: `${err instanceof Error ? err.name : 'this error'} is not retryable` };
}

/** The wait before the next try in ms, or null to give up (see retryDecision for the reason). */
export function retryDelay(err: unknown, retries: number, random: () => number = Math.random): number | null {
  const d = retryDecision(err, retries, random);
  return d.retry ? d.delayMs : null;
}
