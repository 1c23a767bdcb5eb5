/**
 * The MCP servers of the selected session (`session/S/mcp/`, docs/mcp.md): each server's state, tool count,
 * restarts and error, with restart / stop / start, and the config files' problems. The servers live in the
 * session's tool server, which starts with its first agent: before that there is nothing to show.
 */
import { useCallback, useEffect, useState } from 'react';
import type { McpServerStatus as ServerStatus } from '../../../formats/mcp-status.js';
import { act, ollie, useStore } from '../lib/store.js';
import { ListTable } from './ListTable.js';

export function McpServers() {
  const conn = useStore((s) => s.conn);
  const sid = useStore((s) => s.selected.session);
  const [status, setStatus] = useState<{ servers: ServerStatus[]; notes: string[] }>();
  const [error, setError] = useState<string>();

  const load = useCallback(async () => {
    if (conn !== 'open' || !sid) return;
    try {
      setStatus(JSON.parse(await ollie.readMcp(sid)) as { servers: ServerStatus[]; notes: string[] });
      setError(undefined);
    } catch (e) {
      setStatus(undefined);
      setError((e as Error).message);
    }
  }, [conn, sid]);
  useEffect(() => void load(), [load]);

  const ctl = (command: string) => async () => {
    if (!sid) return;
    await act(`MCP ${command}`, () => ollie.mcpCtl(sid, command));
    await load();
  };

  return (
    <section className="cfg-file" aria-labelledby="mcp-servers-h" data-file="mcp">
      <h3 id="mcp-servers-h">
        MCP servers of this session <code className="dim">session/…/mcp</code>
      </h3>
      {!sid && <p className="hint">Select a session to see its MCP servers.</p>}
      {error && (
        <p className="hint" role="status">
          {error}
        </p>
      )}
      {status && (
        <>
          {status.notes.map((n) => (
            <p key={n} className="errmsg" role="alert">
              {n}
            </p>
          ))}
          <ListTable
            className="mcp-servers"
            columns={['Server', 'State', 'Tools', 'Restarts', '']}
            items={status.servers}
            empty="No MCP servers in this session."
            row={(s) => (
              <tr key={s.name} data-server={s.name} data-state={s.state}>
                <td>
                  {s.name} <span className="dim">{s.type}</span>
                  {s.error && <div className="errmsg">{s.error}</div>}
                </td>
                <td>{s.state}</td>
                <td>{s.tools}</td>
                <td>{s.restarts}</td>
                <td>
                  {s.state !== 'invalid' && (
                    <>
                      <button type="button" onClick={ctl(`restart ${s.name}`)}>
                        Restart
                      </button>{' '}
                      {s.state === 'stopped' || s.state === 'failed' ? (
                        <button type="button" onClick={ctl(`start ${s.name}`)}>
                          Start
                        </button>
                      ) : (
                        <button type="button" onClick={ctl(`stop ${s.name}`)}>
                          Stop
                        </button>
                      )}
                    </>
                  )}
                </td>
              </tr>
            )}
          />
          <p>
            <button type="button" onClick={() => void load()}>
              Refresh
            </button>{' '}
            <button type="button" onClick={ctl('reload')}>
              Reload configuration
            </button>
          </p>
        </>
      )}
    </section>
  );
}
