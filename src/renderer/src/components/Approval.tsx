/**
 * The approval dialog: one pending bypass request at a time (from any agent, sub-agents included), with
 * everything needed to decide — tool, exact command, cwd, agent, session, the sandbox's reason. Keyboard:
 * A approve once, S for this session, P always for the pattern (editable), D or Escape deny, Tab moves.
 */
import { useEffect, useRef, useState } from 'react';
import { act, ollie, useStore } from '../lib/store.js';

/** A first guess at an "always" pattern: the command's program followed by a wildcard. */
export function defaultPattern(cmd: string): string {
  const first = cmd.trim().split(/\s+/)[0] ?? '';
  return first ? `${first} *` : '*';
}

export function Approval() {
  const id = useStore((s) => s.approving);
  const p = useStore((s) => (s.approving ? s.pending[s.approving] : undefined));
  const count = useStore((s) => Object.keys(s.pending).length);
  const session = useStore((s) => (p ? s.sessions[p.session] : undefined));
  const agent = useStore((s) => (p ? s.agents[p.session]?.find((a) => a.id === p.agent) : undefined));
  const [pattern, setPattern] = useState('');
  const [busy, setBusy] = useState(false);
  const first = useRef<HTMLButtonElement>(null);

  useEffect(() => {
    if (p) setPattern(defaultPattern(p.cmd));
    first.current?.focus();
    // Only a different request resets the pattern; edits to it must survive re-renders.
  }, [p?.id]);

  if (!id || !p) return null;
  const decide = async (decision: 'approve' | 'deny', remember?: string): Promise<void> => {
    setBusy(true);
    await act(decision, () => ollie.resolve(id, decision, remember));
    setBusy(false);
  };
  const onKey = (e: React.KeyboardEvent): void => {
    if ((e.target as HTMLElement).tagName === 'INPUT') {
      if (e.key === 'Enter') void decide('approve', `always:${pattern}`);
      if (e.key === 'Escape') void decide('deny');
      return;
    }
    const k = e.key.toLowerCase();
    if (k === 'a') void decide('approve');
    else if (k === 's') void decide('approve', 'session');
    else if (k === 'p') void decide('approve', `always:${pattern}`);
    else if (k === 'd' || e.key === 'Escape') void decide('deny');
    else return;
    e.preventDefault();
  };

  return (
    <div className="modal-back">
      <div className="modal approval" role="alertdialog" aria-modal="true" aria-labelledby="approval-title" onKeyDown={onKey}>
        <h2 id="approval-title">
          Approval needed{count > 1 ? ` (1 of ${count})` : ''}
        </h2>
        <p className="hint">An agent wants to run a command outside the sandbox.</p>
        <dl>
          {p.tool && (
            <>
              <dt>Tool</dt>
              <dd>{p.tool}</dd>
            </>
          )}
          <dt>Command</dt>
          <dd>
            <pre className="cmd" data-testid="approval-cmd">{p.cmd}</pre>
          </dd>
          <dt>Directory</dt>
          <dd>
            <code>{p.cwd}</code>
          </dd>
          <dt>Agent</dt>
          <dd>
            {agent?.name ?? p.agent}
            {agent && agent.depth > 0 ? ' (sub-agent)' : ''}
          </dd>
          <dt>Session</dt>
          <dd>{session?.name ?? p.session}</dd>
          {p.reason && (
            <>
              <dt>Reason</dt>
              <dd>{p.reason}</dd>
            </>
          )}
        </dl>
        <label className="pattern">
          Always allow commands matching
          <input value={pattern} onChange={(e) => setPattern(e.target.value)} aria-label="Pattern" />
        </label>
        <div className="buttons">
          <button ref={first} type="button" className="primary" disabled={busy} onClick={() => void decide('approve')}>
            <u>A</u>pprove once
          </button>
          <button type="button" disabled={busy} onClick={() => void decide('approve', 'session')}>
            For this <u>s</u>ession
          </button>
          <button type="button" disabled={busy || !pattern.trim()} onClick={() => void decide('approve', `always:${pattern.trim()}`)}>
            Always for <u>p</u>attern
          </button>
          <button type="button" className="danger" disabled={busy} onClick={() => void decide('deny')}>
            <u>D</u>eny
          </button>
        </div>
      </div>
    </div>
  );
}
