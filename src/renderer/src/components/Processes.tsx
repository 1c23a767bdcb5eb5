/**
 * The selected agent's background processes (`proc/idx`), the output of one of them streamed from its
 * `proc/{pid}/out` with ANSI colours rendered as styled spans, and stop / kill / dismiss (its `ctl`). The list
 * is re-read when the agent's state changes or an exit notice arrives in its log (store.ts), never polled.
 */
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'react';
import { AnsiText } from '../lib/ansi.js';
import { parseKv, procCommand, type ProcInfo } from '../lib/parse.js';
import { act, nextFrame, ollie, useStore } from '../lib/store.js';
import { AnsiSpans } from './Ansi.js';
import { CopyButton } from './CopyButton.js';

const running = (p: ProcInfo): boolean => p.status === 'running';

/** How a process ended, from its stat when read (else proc/idx): `killed, signal SIGKILL · ran 1.2 s · 14 bytes`. */
function ending(p: ProcInfo, stat?: Record<string, string>): string {
  const status = stat?.status && stat.status !== 'running' ? stat.status : p.status === 'running' ? 'output ended' : p.status;
  const exit = stat?.exit || p.exit;
  const parts = [status + (exit ? `, exit code ${exit}` : '') + (stat?.signal ? `, signal ${stat.signal}` : '')];
  const ms = Number(stat?.runtime_ms);
  if (stat?.runtime_ms && Number.isFinite(ms)) parts.push(`ran ${ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`}`);
  if (stat?.output_bytes) parts.push(`${Number(stat.output_bytes).toLocaleString()} bytes of output`);
  return parts.join(' · ');
}

function ProcOutput({ session, agent, proc }: { session: string; agent: string; proc: ProcInfo }) {
  // After a reconnect the old stream is dead: read the output again, from the start, on the new connection.
  const open = useStore((s) => s.conn === 'open');
  const [out, setOut] = useState(() => new AnsiText());
  const [version, setVersion] = useState(0);
  const [state, setState] = useState<'streaming' | 'ended' | 'error'>('streaming');
  const [error, setError] = useState<string>();
  /** The process's `stat` (status, exit, signal, runtime_ms, output_bytes…), read once its output has ended. */
  const [stat, setStat] = useState<Record<string, string>>();
  const pre = useRef<HTMLPreElement>(null);
  const stuck = useRef(true);
  const isRunning = running(proc);

  useEffect(() => {
    const api = ollie.api;
    if (!api || !open) return;
    const abort = new AbortController();
    const text = new AnsiText();
    setOut(text);
    setState('streaming');
    setError(undefined);
    setStat(undefined);
    const path = ollie.procPath(session, agent, proc.pid);
    let queued = false;
    // Output can arrive in many small chunks: render at most once a frame.
    const bump = (): void => {
      if (queued) return;
      queued = true;
      nextFrame(() => {
        queued = false;
        setVersion((v) => v + 1);
      });
    };
    void (async () => {
      try {
        for await (const chunk of api.stream(`${path}/out`, { signal: abort.signal })) {
          text.push(chunk);
          bump();
        }
        if (abort.signal.aborted) return;
        setState('ended');
        // The stream ends when the process does: its status in proc/idx is what changed, and stat says how it
        // ended before olliesrv has heard of it (the exit notice comes a moment later).
        void ollie.reloadProcs(session, agent);
        const st = parseKv(await api.readOr(`${path}/stat`, ''));
        if (!abort.signal.aborted && Object.keys(st).length) setStat(st);
      } catch (e) {
        if (abort.signal.aborted) return;
        setState('error');
        setError((e as Error).message);
      }
    })();
    return () => abort.abort();
  }, [session, agent, proc.pid, open]);

  useLayoutEffect(() => {
    const el = pre.current;
    if (el && stuck.current) el.scrollTop = el.scrollHeight;
  }, [version]);
  const onScroll = useCallback(() => {
    const el = pre.current;
    if (el) stuck.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
  }, []);

  const ctl = (cmd: string, what: string): void => void act(what, () => ollie.procCtl(session, agent, proc.pid, cmd));
  return (
    <div className="proc-view" data-pid={proc.pid}>
      <div className="proc-head">
        <code className="proc-cmd" title={proc.args}>
          {procCommand(proc.args)}
        </code>
        <div className="proc-buttons">
          <button type="button" title="Ask it to stop (SIGTERM, then SIGKILL after a grace period)" onClick={() => ctl('term', 'stop')} disabled={!isRunning}>
            Stop
          </button>
          <button type="button" className="danger" title="SIGKILL" onClick={() => ctl('kill', 'kill')} disabled={!isRunning}>
            Kill
          </button>
          <button type="button" title="Remove it from the list" onClick={() => ctl('dismiss', 'dismiss')} disabled={isRunning}>
            Dismiss
          </button>
          <CopyButton text={out.toString()} label="Copy output" />
        </div>
      </div>
      <pre className="proc-out" ref={pre} onScroll={onScroll} data-testid="proc-out" aria-label={`Output of process ${proc.pid}`} aria-live="off">
        {out.dropped > 0 && <span className="dim">[{out.dropped.toLocaleString()} earlier characters not shown]{'\n'}</span>}
        <AnsiSpans segments={out.segments} version={version} />
        {state === 'streaming' && out.segments.length === 0 && <span className="dim">(no output yet)</span>}
      </pre>
      <div className="proc-foot">
        {state === 'error' ? (
          <span className="errmsg">output unavailable: {error}</span>
        ) : state === 'ended' || !isRunning ? (
          <span>{ending(proc, stat)}</span>
        ) : (
          <span className="live">● live</span>
        )}
      </div>
    </div>
  );
}

export function Processes() {
  const open = useStore((s) => s.procsOpen);
  const procs = useStore((s) => s.procs);
  const pid = useStore((s) => s.procPid);
  const { session, agent } = useStore((s) => s.selected);
  const agentName = useStore((s) => (s.selected.session && s.selected.agent ? s.agents[s.selected.session]?.find((a) => a.id === s.selected.agent)?.name : undefined));
  if (!open) return null;
  const current = procs.find((p) => p.pid === pid);
  return (
    <aside className="procs" aria-label="Processes">
      <header>
        <b>Processes</b>
        {agentName && <span className="dim">of {agentName}</span>}
        <button type="button" aria-label="Close processes" title="Close (Ctrl+Shift+P)" onClick={() => useStore.setState({ procsOpen: false })}>
          ✕
        </button>
      </header>
      {!session || !agent ? (
        <p className="empty">Select an agent to see its background processes.</p>
      ) : procs.length === 0 ? (
        <p className="empty">
          No background processes. An agent starts one with a tool call that has <code>&quot;background&quot;: true</code>; it shows here with its live
          output.
        </p>
      ) : (
        <>
          <ul className="proc-list" role="listbox" aria-label="Background processes">
            {procs.map((p) => (
              <li
                key={p.pid}
                role="option"
                tabIndex={0}
                aria-selected={p.pid === pid}
                data-pid={p.pid}
                data-status={p.status}
                className={p.pid === pid ? 'picked' : ''}
                onClick={() => useStore.setState({ procPid: p.pid })}
                onKeyDown={(e) => {
                  if (e.key === 'Enter' || e.key === ' ') useStore.setState({ procPid: p.pid });
                  else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
                    const i = procs.indexOf(p) + (e.key === 'ArrowDown' ? 1 : -1);
                    const next = procs[Math.max(0, Math.min(procs.length - 1, i))]!;
                    useStore.setState({ procPid: next.pid });
                    (e.currentTarget.parentElement?.querySelector(`[data-pid="${next.pid}"]`) as HTMLElement | null)?.focus();
                    e.preventDefault();
                  }
                }}
              >
                <span className={`pstatus st-${running(p) ? 'running' : p.exit === '0' ? 'ok' : 'failed'}`}>
                  {p.status}
                  {p.exit !== undefined ? ` ${p.exit}` : ''}
                </span>
                <code className="proc-cmd">{procCommand(p.args)}</code>
                <span className="dim">
                  {p.tool} #{p.pid}
                </span>
              </li>
            ))}
          </ul>
          {current ? <ProcOutput key={`${session}/${agent}/${current.pid}`} session={session} agent={agent} proc={current} /> : <p className="empty">Pick a process to see its output.</p>}
        </>
      )}
    </aside>
  );
}
