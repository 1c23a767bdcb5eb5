/**
 * Our retry policy, as pure functions (the SDK's retries are off). The loop calls `retryDecision(err, attempt)` after
 * the `attempt`-th failed try (1 for the first) and either waits `delayMs` and tries again or gives up with `reason`.
 *
 * - TransientError, StreamDropError: exponential backoff (1 s, 2 s, 4 s, … capped at 30 s) with jitter (each wait
 *   drawn from [50%, 100%] of the step, so that clients failing together do not return together), at most
 *   MAX_TRANSIENT_ATTEMPTS tries in all.
 * - RateLimitError: the provider's Retry-After when given (never shorter than it), else the backoff above; at most
 *   MAX_RATE_LIMIT_ATTEMPTS tries, and a Retry-After beyond MAX_RATE_LIMIT_WAIT_MS gives up at once (a quota
 *   exhausted for hours is not worth holding a turn open for).
 * - Anything else (auth, bad request, ContextOverflow, ToolUnsupported): no retry; the loop handles overflow by
 *   compacting, tool refusal by failing the turn.
 */
import { RateLimitError, StreamDropError, TransientError } from './errors.js';

export const MAX_TRANSIENT_ATTEMPTS = 5;
export const MAX_RATE_LIMIT_ATTEMPTS = 8;
export const BACKOFF_BASE_MS = 1000;
export const BACKOFF_MAX_MS = 30_000;
export const MAX_RATE_LIMIT_WAIT_MS = 120_000;

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; reason: string };

/** Backoff step for an attempt, with jitter from `random` (in [0, 1)). */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const step = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, attempt - 1));
  return Math.round(step * (0.5 + 0.5 * random()));
}

export function retryDecision(err: unknown, attempt: number, random: () => number = Math.random): RetryDecision {
  if (err instanceof RateLimitError) {
    if (attempt >= MAX_RATE_LIMIT_ATTEMPTS) return { retry: false, reason: `rate limited ${attempt} times in a row; giving up` };
    if (err.retryAfterMs !== undefined) {
      if (err.retryAfterMs > MAX_RATE_LIMIT_WAIT_MS)
        return { retry: false, reason: `rate limited; the provider asks to wait ${Math.ceil(err.retryAfterMs / 1000)} s, more than the ${MAX_RATE_LIMIT_WAIT_MS / 1000} s we wait` };
      return { retry: true, delayMs: err.retryAfterMs };
    }
    return { retry: true, delayMs: backoffMs(attempt, random) };
  }
  if (err instanceof TransientError || err instanceof StreamDropError) {
    if (attempt >= MAX_TRANSIENT_ATTEMPTS) return { retry: false, reason: `${err instanceof StreamDropError ? 'stream dropped' : 'transient error'} ${attempt} times in a row; giving up` };
    return { retry: true, delayMs: backoffMs(attempt, random) };
  }
  return { retry: false, reason: 'not retryable' };
}

/** The wait before the next try in ms, or null to give up (see retryDecision for the reason). */
export function retryDelay(err: unknown, attempt: number, random: () => number = Math.random): number | null {
  const d = retryDecision(err, attempt, random);
  return d.retry ? d.delayMs : null;
}
