/**
 * The tool schemas an agent's first request needs, remembered from the last time toolsrv reported them, so that
 * request does not wait the ~150 ms a toolsrv takes to start. The key covers everything the list depends on: the
 * tools asked for, every .meta file of the tool directories (name, size, mtime) and PATH (variants choose by the
 * binaries present). toolsrv stays the authority: the runtime takes its real list as soon as it is up, and a call
 * whose arguments a changed schema refuses is refused by toolsrv in words.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, renameSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { privateDir, writePrivateFile } from '../../platform/private.js';
import type { ToolInfo } from '../../toolsrv/protocol.js';

/** How many tool sets (profiles × configurations) are remembered. */
const KEEP = 32;
/** How long a look at the tool directories is reused for keys (see toolFiles). */
const FILES_TTL = 1000;

export class ToolCache {
  private entries?: Map<string, ToolInfo[]>;

  /** @param file where the cache is kept ($XDG_CACHE_HOME/ollie/tools.json) @param dirs the tool directories */
  constructor(
    private readonly file: string,
    private readonly dirs: string[],
  ) {}

  key(wanted: readonly string[]): string {
    const h = createHash('sha256');
    h.update([...wanted].sort().join(','));
    h.update(`\0${process.env.PATH ?? ''}`);
    h.update(this.toolFiles());
    return h.digest('hex');
  }

  /**
   * Every .meta file of the tool directories (name, size, mtime), as text for the key. Taken at most once every
   * FILES_TTL ms: each sub-agent's runtime asks for a key, and listing and statting the tool directories cost more
   * than the rest of its creation. What an edit made in the last FILES_TTL ms can cost is one request with the
   * schemas of before, which toolsrv's real list replaces as soon as it is read (the cache is only a head start).
   */
  private toolFiles(): string {
    const now = Date.now();
    if (this.files && now - this.files.at < FILES_TTL) return this.files.text;
    let text = '';
    for (const d of this.dirs) {
      let names: string[];
      try {
        names = readdirSync(d)
          .filter((f) => f.endsWith('.meta'))
          .sort();
      } catch {
        continue;
      }
      text += `\0${d}`;
      for (const f of names) {
        try {
          const st = statSync(join(d, f));
          text += `\0${f}:${st.size}:${st.mtimeMs}`;
        } catch {
          // gone since the readdir: the key simply differs
        }
      }
    }
    this.files = { at: now, text };
    return text;
  }

  private files?: { at: number; text: string };

  private load(): Map<string, ToolInfo[]> {
    if (!this.entries) {
      try {
        this.entries = new Map(
          Object.entries(JSON.parse(readFileSync(this.file, 'utf8')) as Record<string, ToolInfo[]>),
        );
      } catch {
        // No cache yet, or a damaged one: start afresh.
        this.entries = new Map();
      }
    }
    return this.entries;
  }

  get(key: string): ToolInfo[] | undefined {
    return this.load().get(key);
  }

  set(key: string, tools: ToolInfo[]): void {
    const m = this.load();
    // The usual case (every sub-agent's runtime): nothing changed, so nothing is written.
    const had = m.get(key);
    if (had && JSON.stringify(had) === JSON.stringify(tools)) return;
    m.delete(key);
    m.set(key, tools);
    while (m.size > KEEP) m.delete(m.keys().next().value!);
    try {
      privateDir(dirname(this.file), 'the cache directory');
      const tmp = `${this.file}.${process.pid}.tmp`;
      writePrivateFile(tmp, JSON.stringify(Object.fromEntries(m)));
      renameSync(tmp, this.file);
    } catch {
      // A cache that cannot be written only costs the next start its head start.
    }
  }
}
