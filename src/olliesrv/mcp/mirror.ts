/**
 * olliesrv's view of each session's MCP servers, which live in the session's toolsrv (src/toolsrv/mcp). The names
 * of the servers and of their resources are kept here, refreshed at every change toolsrv announces
 * (`mcp/changes`), because the namespace lists directories synchronously; everything else (status, logs,
 * resource contents, prompts) is read from toolsrv when asked.
 */
import { lines, type Client } from '../../ninep/index.js';
import type { SessionTools } from '../toolclient/host.js';

export interface ResourceEntry {
  uri: string;
  name: string;
  mime: string;
}

interface Known {
  sid: string;
  st: SessionTools;
  /** Its toolsrv runs another session's MCP servers (a shared toolsrv). */
  foreign?: boolean;
  servers: string[];
  resources: Map<string, ResourceEntry[]>;
  life: AbortController;
}

/** A resource's file name: its URI with every character a file name cannot hold escaped. */
export const resourceFile = (uri: string): string => encodeURIComponent(uri);

export class McpMirror {
  private readonly sessions = new Map<string, Known>();

  constructor(private readonly log: (m: string) => void) {}

  /** Follows the MCP servers of the session's toolsrv (called when it is opened). */
  follow(sid: string, st: SessionTools): void {
    if (!st.toolsrv) return;
    this.forget(sid);
    const k: Known = { sid, st, servers: [], resources: new Map(), life: new AbortController() };
    this.sessions.set(sid, k);
    void this.run(sid, k);
  }

  private async run(sid: string, k: Known): Promise<void> {
    let delay = 200;
    while (!k.life.signal.aborted) {
      try {
        for await (const _ of lines(k.st.toolsrv!().stream('mcp/changes', { signal: k.life.signal }))) {
          delay = 200;
          await this.refresh(k);
        }
      } catch (e) {
        if (k.life.signal.aborted) return;
        // An older toolsrv without mcp/: nothing to mirror.
        if (/not found|does not exist/.test((e as Error).message)) return;
        this.log(`session ${sid}: following its MCP servers: ${(e as Error).message}; again in ${delay} ms`);
      }
      await new Promise((r) => setTimeout(r, delay).unref());
      delay = Math.min(delay * 2, 10_000);
    }
  }

  private async refresh(k: Known): Promise<void> {
    const c = k.st.toolsrv!();
    const st = JSON.parse(await c.readText('mcp/status')) as {
      session: string | null;
      servers: Array<{ name: string; state: string; resources: number }>;
    };
    // A toolsrv shared by sessions runs the servers of the first session that asked: never shown to another.
    k.foreign = st.session !== null && st.session !== k.sid;
    const running = st.session === k.sid ? st.servers.filter((s) => s.state !== 'invalid') : [];
    const resources = new Map<string, ResourceEntry[]>();
    await Promise.all(
      running.map(async (s) => {
        if (!s.resources) return;
        const text = await c.readText(`mcp/${s.name}/resources`).catch(() => '');
        resources.set(
          s.name,
          text
            .split('\n')
            .filter(Boolean)
            .map((l) => {
              const [uri = '', name = '', mime = ''] = l.split('\t');
              return { uri, name, mime };
            }),
        );
      }),
    );
    k.servers = running.map((s) => s.name);
    k.resources = resources;
  }

  forget(sid: string): void {
    this.sessions.get(sid)?.life.abort();
    this.sessions.delete(sid);
  }

  servers(sid: string): string[] {
    return this.sessions.get(sid)?.servers ?? [];
  }

  resources(sid: string, server: string): ResourceEntry[] {
    return this.sessions.get(sid)?.resources.get(server) ?? [];
  }

  /** The session's toolsrv connection; an error naming why there is none. */
  client(sid: string): Client {
    const k = this.sessions.get(sid);
    if (!k)
      throw new Error(
        'no tool server runs for this session yet (it starts with its first agent): its MCP servers are not running',
      );
    if (k.foreign)
      throw new Error(
        'this session shares its tool server, whose MCP servers belong to another session: it has none of its own',
      );
    return k.st.toolsrv!();
  }

  /** The owner changed config/mcp.json: every running session reads it again. */
  reloadAll(): void {
    for (const [sid, k] of this.sessions) {
      void k.st.toolsrv!()
        .write('mcp/ctl', 'reload')
        .catch((e: Error) => this.log(`session ${sid}: reloading its MCP servers: ${e.message}`));
    }
  }

  close(): void {
    for (const sid of [...this.sessions.keys()]) this.forget(sid);
  }
}
