/**
 * Objects parsed from the checkpoint store: the newest few kept in memory (each round reads the one before it), and
 * how deep in its chain of deltas each of many more lies (what decides when the next one is stored whole again).
 */
export class ParsedObjects<T> {
  private readonly parsed = new Map<string, T>();
  private readonly depths = new Map<string, number>();

  /** Keeps the `size` newest parsed objects, and the depths of the 4096 newest. */
  constructor(private readonly size: number) {}

  get(hash: string): T | undefined {
    return this.parsed.get(hash);
  }

  depth(hash: string): number | undefined {
    return this.depths.get(hash);
  }

  remember(hash: string, value: T, depth: number): void {
    this.parsed.delete(hash);
    this.parsed.set(hash, value);
    this.depths.set(hash, depth);
    while (this.parsed.size > this.size) this.parsed.delete(this.parsed.keys().next().value!);
    while (this.depths.size > 4096) this.depths.delete(this.depths.keys().next().value!);
  }
}
