/**
 * Waiting in tests: on a condition, never for a fixed time. `until` polls `fn` until it returns a truthy value
 * (errors it throws count as "not yet"), and fails naming `what` (and the last error) when `ms` pass first.
 * A test that needs time itself to pass (a timeout, a grace period) says so where it waits.
 */
export async function until<T>(fn: () => T | Promise<T>, what = 'the condition', ms = 5000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end)
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
