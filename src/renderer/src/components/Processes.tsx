/**
 * The selected agent's background processes (`proc/idx`), one of them in a terminal (xterm.js, sized to the panel)
 * fed from its `proc/{pid}/out`, so that colours, cursor movement and `\r` progress lines look as they would in a
 * terminal, and stop / kill / dismiss (its `ctl`). A tty tool's process runs in a pty: what is typed in the
 * terminal goes to its `in`, and the pty follows the view's size (`ctl resize COLS ROWS`); any other process has no
 * input once started, and its terminal is read-only. The list is re-read when the agent's state changes or an
 * exit notice arrives in its log (store.ts), never polled.
 */
import { useEffect, useRef, useState } from 'react';
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { parseKv, procCommand, type ProcInfo } from '../lib/parse.js';
import { PROC_STAT } from '../../../formats/olliesrv.js';
import { act, notify, ollie, selectedAgent, useStore } from '../lib/store.js';
import { CopyButton } from './CopyButton.js';
import { SidePanel } from './SidePanel.js';

const running = (p: ProcInfo): boolean => p.status === 'running';

/** How a process ended, from its stat when read (else proc/idx): `killed, signal SIGKILL · ran 1.2 s · 14 bytes`. */
function ending(p: ProcInfo, stat?: Record<string, string>): string {
  const status =
    stat?.status && stat.status !== 'running' ? stat.status : p.status === 'running' ? 'output ended' : p.status;
  const exit = stat?.exit || p.exit;
  const parts = [status + (exit ? `, exit code ${exit}` : '') + (stat?.signal ? `, signal ${stat.signal}` : '')];
  const ms = Number(stat?.runtime_ms);
  if (stat?.runtime_ms && Number.isFinite(ms))
    parts.push(`ran ${ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`}`);
  if (stat?.output_bytes) parts.push(`${Number(stat.output_bytes).toLocaleString()} bytes of output`);
  return parts.join(' · ');
}

/** The terminal's text, its scrollback included, one line per row (wrapped rows joined), for Copy. */
function bufferText(term: Terminal): string {
  const b = term.buffer.active;
  const lines: string[] = [];
  for (let i = 0; i < b.length; i++) {
    const l = b.getLine(i);
    if (!l) continue;
    const t = l.translateToString(true);
    if (l.isWrapped && lines.length) lines[lines.length - 1] += t;
    else lines.push(t);
  }
  while (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines.join('\n');
}

function ProcOutput({ session, agent, proc }: { session: string; agent: string; proc: ProcInfo }) {
  // After a reconnect the old stream is dead: read the output again, from the start, on the new connection.
  const open = useStore((s) => s.conn === 'open');
  const [state, setState] = useState<'streaming' | 'ended' | 'error'>('streaming');
  const [error, setError] = useState<string>();
  /** Whether it runs in a pty (stat's tty=1): then it takes keystrokes and follows the view's size. */
  const [tty, setTty] = useState<boolean>();
  /** The process's `stat` (status, exit, signal, runtime_ms, output_bytes…), read once its output has ended. */
  const [stat, setStat] = useState<Record<string, string>>();
  const box = useRef<HTMLDivElement>(null);
  const termRef = useRef<Terminal>(undefined);
  const isRunning = running(proc);

  useEffect(() => {
    const api = ollie.api;
    const el = box.current;
    if (!api || !open || !el) return;
    const abort = new AbortController();
    setState('streaming');
    setError(undefined);
    setStat(undefined);
    setTty(undefined);
    const path = ollie.procPath(session, agent, proc.pid);
    const term = new Terminal({
      // A pty turns \n into \r\n (onlcr); a piped process's output never went through one: do as a tty would.
      convertEol: true,
      scrollback: 10_000,
      disableStdin: true,
      cursorBlink: false,
      fontSize: 12,
      fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace',
      theme: { background: '#0d1117', foreground: '#d3d7cf', cursor: '#d3d7cf' },
    });
    // The app's shortcuts (Ctrl+Shift+…, Ctrl+`) stay the app's when the terminal has the focus.
    term.attachCustomKeyEventHandler((e) => !((e.ctrlKey || e.metaKey) && (e.shiftKey || e.key === '`')));
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(el);
    termRef.current = term;
    const refit = (): void => {
      try {
        if (el.clientWidth > 0 && el.clientHeight > 0) fit.fit();
      } catch {
        // not laid out yet
      }
    };
    refit();
    const observer = new ResizeObserver(() => refit());
    observer.observe(el);

    // Input and resizes, for a pty only, written in order, one at a time: what is typed while a write is on its way
    // goes together in the next.
    let isTty = false;
    let ended = false;
    let typed = '';
    let chain = Promise.resolve();
    const enqueue = (what: string, op: () => Promise<void>): void => {
      chain = chain.then(op).catch((e: Error) => {
        if (!abort.signal.aborted && !ended) notify(`${what}: ${e.message}`, true);
      });
    };
    const send = (data: string): void => {
      if (!isTty || ended) return;
      const first = !typed;
      typed += data;
      if (first)
        enqueue('input', async () => {
          const d = typed;
          typed = '';
          if (!ended && !abort.signal.aborted) await ollie.procInput(session, agent, proc.pid, d);
        });
    };
    const resize = (): void =>
      enqueue('resize', async () => {
        if (isTty && !ended && !abort.signal.aborted)
          await ollie.procResize(session, agent, proc.pid, term.cols, term.rows);
      });
    let resizeTimer: ReturnType<typeof setTimeout> | undefined;
    const sendSize = (): void => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(resize, 150);
    };
    const subs = [term.onData(send), term.onResize(sendSize)];

    void (async () => {
      const st = parseKv(PROC_STAT, await api.readOr(`${path}/stat`, ''));
      if (abort.signal.aborted) return;
      isTty = st.tty === '1' && st.state === 'running';
      setTty(st.tty === '1');
      term.options.disableStdin = !isTty;
      if (isTty) resize();
    })();
    void (async () => {
      try {
        for await (const chunk of api.stream(`${path}/out`, { signal: abort.signal })) term.write(chunk);
        if (abort.signal.aborted) return;
        ended = true;
        term.options.disableStdin = true;
        // Nothing will move the cursor any more: hide it, as a finished program's terminal would not show it.
        term.write('\x1b[?25l');
        setState('ended');
        // The stream ends when the process does: its status in proc/idx is what changed, and stat says how it
        // ended before olliesrv has heard of it (the exit notice comes a moment later).
        void ollie.reloadProcs(session, agent);
        const st = parseKv(PROC_STAT, await api.readOr(`${path}/stat`, ''));
        if (!abort.signal.aborted && Object.keys(st).length) setStat(st);
      } catch (e) {
        if (abort.signal.aborted) return;
        setState('error');
        setError((e as Error).message);
      }
    })();
    return () => {
      abort.abort();
      clearTimeout(resizeTimer);
      observer.disconnect();
      for (const d of subs) d.dispose();
      termRef.current = undefined;
      term.dispose();
    };
  }, [session, agent, proc.pid, open]);

  const ctl = (cmd: string, what: string): void => void act(what, () => ollie.procCtl(session, agent, proc.pid, cmd));
  const input = tty && isRunning && state === 'streaming';
  return (
    <div className="proc-view" data-pid={proc.pid} data-tty={tty === undefined ? undefined : tty ? '1' : '0'}>
      <div className="proc-head">
        <code className="proc-cmd" title={proc.args}>
          {procCommand(proc.args)}
        </code>
        <div className="proc-buttons">
          <button
            type="button"
            title="Ask it to stop (SIGTERM, then SIGKILL after a grace period)"
            onClick={() => ctl('term', 'stop')}
            disabled={!isRunning}
          >
            Stop
          </button>
          <button
            type="button"
            className="danger"
            title="SIGKILL"
            onClick={() => ctl('kill', 'kill')}
            disabled={!isRunning}
          >
            Kill
          </button>
          <button
            type="button"
            title="Remove it from the list"
            onClick={() => ctl('dismiss', 'dismiss')}
            disabled={isRunning}
          >
            Dismiss
          </button>
          <CopyButton text={() => (termRef.current ? bufferText(termRef.current) : '')} label="Copy output" />
        </div>
      </div>
      <div
        className="proc-term"
        ref={box}
        data-testid="proc-out"
        role="region"
        aria-label={`Terminal of process ${proc.pid}${input ? '' : ' (read-only)'}`}
      />
      <div className="proc-foot">
        {state === 'error' ? (
          <span className="errmsg">output unavailable: {error}</span>
        ) : state === 'ended' || !isRunning ? (
          <span>{ending(proc, stat)}</span>
        ) : (
          <span className="live">● live</span>
        )}
        {state === 'streaming' && isRunning && tty !== undefined && (
          <span className="proc-input" data-testid="proc-input">
            {tty
              ? 'runs in a terminal: click it and type to send keystrokes'
              : 'read-only: not a terminal (no input once started)'}
          </span>
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
  const agentName = useStore((s) => selectedAgent(s)?.name);
  if (!open) return null;
  const current = procs.find((p) => p.pid === pid);
  return (
    <SidePanel
      className="procs"
      title="Processes"
      detail={agentName && <span className="dim">of {agentName}</span>}
      closeTitle="Close (Ctrl+Shift+P)"
      onClose={() => useStore.setState({ procsOpen: false })}
    >
      {!session || !agent ? (
        <p className="empty">Select an agent to see its background processes.</p>
      ) : procs.length === 0 ? (
        <p className="empty">
          No background processes. An agent starts one with a tool call that has{' '}
          <code>&quot;background&quot;: true</code>; it shows here with its live output.
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
                    (
                      e.currentTarget.parentElement?.querySelector(`[data-pid="${next.pid}"]`) as HTMLElement | null
                    )?.focus();
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
          {current ? (
            <ProcOutput key={`${session}/${agent}/${current.pid}`} session={session} agent={agent} proc={current} />
          ) : (
            <p className="empty">Pick a process to see its output.</p>
          )}
        </>
      )}
    </SidePanel>
  );
}
