// Timing shared by the bench scripts.

/** Median, 95th percentile, least and count of a list of times. */
export function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { median: q(0.5), p95: q(0.95), min: s[0], n: s.length };
}

/** `median / p95` of a stats(), each with `digits` decimals padded to `width`: a column of a printed table. */
export const medianP95 = (s, digits, width) =>
  `${s.median.toFixed(digits).padStart(width)} / ${s.p95.toFixed(digits).padStart(width)}`;

/**
 * Times the runners round-robin (one call of each in turn), so that load from elsewhere on the machine falls
 * on all of them alike and the columns stay comparable: `warmup` untimed rounds, then `n` timed ones (ms).
 */
export async function timeTogether(runners, { warmup, n }) {
  const names = Object.keys(runners);
  for (let i = 0; i < warmup; i++) for (const name of names) await runners[name]();
  const xs = Object.fromEntries(names.map((name) => [name, []]));
  for (let i = 0; i < n; i++) {
    for (const name of names) {
      const t = process.hrtime.bigint();
      await runners[name]();
      xs[name].push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  }
  return Object.fromEntries(names.map((name) => [name, stats(xs[name])]));
}
