/**
 * The review panel: what the selected agent's tool rounds changed in its files, turn by turn, from its
 * `checkpoint/` directory (docs/checkpoints.md): each round's files and hunks (`checkpoint/ID/diff`), a
 * "reviewed" mark per file kept by the daemon (`checkpoint/ID/reviewed`, so marks survive later turns and
 * reloads), Rewind (`ctl rewind ID`: the files back to before that round) and Undo (rewinding to the last
 * rewind's own checkpoint). A rewind that meets files changed outside the agent's rounds lists them and offers
 * to keep them or overwrite them. Re-read when the agent's state changes, never polled.
 */
import { useCallback, useEffect, useState } from 'react';
import { create } from 'zustand';
import { agentPath, notify, ollie, selectedAgent, useStore } from '../lib/store.js';
import { parseCheckpointIdx, parseCheckpointInfo } from '../lib/parse.js';
import { parseDiff, type FileDiff } from '../lib/review-diff.js';
import { SidePanel } from './SidePanel.js';

/** Whether the panel is open (its toolbar button toggles it). */
export const useReview = create<{ open: boolean }>(() => ({ open: false }));

interface Row {
  id: string;
  turn: string;
  time: string;
  changed: number;
  bytes: number;
}

const parseIdx = (text: string): Row[] => parseCheckpointIdx(text);

function Round({
  base,
  row,
  onRewind,
  version,
}: {
  base: string;
  row: Row;
  onRewind: (id: string, extra?: string) => void;
  version: number;
}) {
  const [files, setFiles] = useState<FileDiff[]>();
  const [reviewed, setReviewed] = useState<Set<string>>(new Set());
  const [info, setInfo] = useState<Record<string, string>>({});
  const [open, setOpen] = useState(true);

  useEffect(() => {
    const api = ollie.api;
    if (!api) return;
    let live = true;
    void (async () => {
      const [d, r, i] = await Promise.all([
        api.readOr(`${base}/checkpoint/${row.id}/diff`, ''),
        api.readOr(`${base}/checkpoint/${row.id}/reviewed`, ''),
        api.readOr(`${base}/checkpoint/${row.id}/info`, ''),
      ]);
      if (!live) return;
      setFiles(parseDiff(d));
      setReviewed(new Set(r.split('\n').filter(Boolean)));
      setInfo(parseCheckpointInfo(i));
    })();
    return () => {
      live = false;
    };
  }, [base, row.id, version]);

  const mark = async (path: string, on: boolean): Promise<void> => {
    const api = ollie.api;
    if (!api) return;
    const set = (yes: boolean): void =>
      setReviewed((s) => {
        const n = new Set(s);
        if (yes) n.add(path);
        else n.delete(path);
        return n;
      });
    // Shown at once; taken back if the daemon refuses it.
    set(on);
    try {
      await api.write(`${base}/checkpoint/${row.id}/reviewed`, `${on ? '+' : '-'}${path}\n`);
    } catch (e) {
      set(!on);
      notify(`mark reviewed: ${(e as Error).message}`, true);
    }
  };

  const rewind = info.kind === 'rewind';
  return (
    <li className="review-round" data-checkpoint={row.id} data-kind={info.kind ?? 'round'}>
      <div className="review-round-head">
        <button type="button" className="link" aria-expanded={open} onClick={() => setOpen(!open)}>
          {rewind ? `Rewind to checkpoint ${info.target ?? '?'}` : `Round ${row.id}`}
        </button>
        <span className="dim">
          {row.changed} file{row.changed === 1 ? '' : 's'} · {new Date(row.time).toLocaleTimeString()}
        </span>
        <button
          type="button"
          title={`Put the files back as they were before ${rewind ? 'this rewind' : 'this round'} (ctl rewind ${row.id})`}
          onClick={() => onRewind(row.id)}
        >
          {rewind ? 'Undo' : 'Rewind'}
        </button>
      </div>
      {open && files && (
        <ul className="review-files">
          {files.length === 0 && <li className="dim">no file changed</li>}
          {files.map((f) => (
            <li key={f.path} className={`review-file${reviewed.has(f.path) ? ' reviewed' : ''}`} data-path={f.path}>
              <label>
                <input
                  type="checkbox"
                  checked={reviewed.has(f.path)}
                  onChange={(e) => void mark(f.path, e.target.checked)}
                  aria-label={`Reviewed ${f.path}`}
                />{' '}
                <code>{f.path}</code>
              </label>
              {!reviewed.has(f.path) && (
                <pre className="review-hunks">
                  {f.lines.map((l, i) => (
                    <div
                      key={i}
                      className={
                        l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : l.startsWith('@@') ? 'hunk' : ''
                      }
                    >
                      {l}
                    </div>
                  ))}
                </pre>
              )}
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

export function Review() {
  const open = useReview((s) => s.open);
  const { session, agent } = useStore((s) => s.selected);
  const state = useStore((s) => selectedAgent(s)?.state);
  const [rows, setRows] = useState<Row[]>([]);
  const [version, setVersion] = useState(0);
  const [conflict, setConflict] = useState<{ id: string; text: string }>();
  const [result, setResult] = useState<string>();
  const base = session && agent ? agentPath(session, agent) : undefined;

  const reload = useCallback(async () => {
    const api = ollie.api;
    if (!api || !base) return setRows([]);
    setRows(parseIdx(await api.readOr(`${base}/checkpoint/idx`, '')));
    setVersion((v) => v + 1);
  }, [base]);

  useEffect(() => {
    if (open) void reload();
  }, [open, reload, state]);

  useEffect(() => {
    setConflict(undefined);
    setResult(undefined);
  }, [base]);

  const rewind = async (id: string, extra = ''): Promise<void> => {
    const api = ollie.api;
    if (!api || !base) return;
    setConflict(undefined);
    try {
      setResult(await api.rdwr(`${base}/ctl`, `rewind ${id}${extra}\n`));
    } catch (e) {
      const msg = (e as Error).message;
      if (msg.includes('conflict\t')) setConflict({ id, text: msg });
      else notify(`rewind: ${msg}`, true);
    }
    await reload();
  };

  if (!open) return null;
  const turns = new Map<string, Row[]>();
  for (const r of rows) turns.set(r.turn, [...(turns.get(r.turn) ?? []), r]);
  return (
    <SidePanel className="review" title="Review" closeTitle="Close" onClose={() => useReview.setState({ open: false })}>
      {!base ? (
        <p className="empty">Select an agent to review what its tools changed.</p>
      ) : rows.length === 0 ? (
        <p className="empty">No checkpoints yet: they are taken before each tool round that can write.</p>
      ) : (
        <div className="review-body">
          {conflict && (
            <div className="banner warn" role="alert">
              <pre>{conflict.text}</pre>
              <button type="button" onClick={() => void rewind(conflict.id, ' keep')}>
                Keep mine, rewind the rest
              </button>{' '}
              <button type="button" className="danger" onClick={() => void rewind(conflict.id, ' force')}>
                Overwrite
              </button>
            </div>
          )}
          {result && (
            <pre className="review-result" role="status">
              {result}
            </pre>
          )}
          {[...turns].map(([turn, list]) => (
            <section key={turn} aria-label={`Turn ${turn}`}>
              <h4>Turn {turn}</h4>
              <ul>
                {list.map((r) => (
                  <Round
                    key={r.id}
                    base={base}
                    row={r}
                    onRewind={(id, extra) => void rewind(id, extra)}
                    version={version}
                  />
                ))}
              </ul>
            </section>
          ))}
        </div>
      )}
    </SidePanel>
  );
}
