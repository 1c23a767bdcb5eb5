/**
 * The approval panel: one pending bypass request at a time (from any agent, sub-agents included), with
 * everything needed to decide — tool, the whole command, cwd, agent, session, the sandbox's reason, and the
 * exact rule that "for this session" or "always" would store (olliesrv computes it from the request; nobody
 * types one).
 *
 * A request can arrive while the person is typing a prompt, so the panel never takes focus: no autofocus, no
 * modal backdrop over the prompt box, and no key approves (Enter in the prompt box sends the prompt). Deny
 * comes first and is the default look; approving takes a click, or deliberately tabbing to a button. The
 * approve buttons are armed only ARM_MS after a request shows, so a click aimed at whatever was under the
 * pointer cannot land on one, and each request gets a fresh panel, so a button focused for the previous
 * request is not focused for the next. After a decision, focus goes back where it was. Escape inside the
 * panel denies.
 */
import { useEffect, useRef, useState } from 'react';
import { visibleCommand, type Pending } from '../lib/parse.js';
import { act, ollie, useStore } from '../lib/store.js';

const ARM_MS = 600;

export function Approval() {
  const p = useStore((s) => (s.approving ? s.pending[s.approving] : undefined));
  // Shown once the session's bypass file has been read: the event alone lacks the tool and the rule.
  if (!p?.remember) return null;
  return <ApprovalPanel key={p.id} p={p} />;
}

function Command({ cmd }: { cmd: string }) {
  return (
    <pre className="cmd" data-testid="approval-cmd">
      {visibleCommand(cmd).map((part, i) =>
        typeof part === 'string' ? (
          part
        ) : (
          <span key={i} className="hidden-char" title={part.title}>
            {part.mark}
          </span>
        ),
      )}
    </pre>
  );
}

function ApprovalPanel({ p }: { p: Pending }) {
  const count = useStore((s) => Object.keys(s.pending).length);
  const session = useStore((s) => s.sessions[p.session]);
  const agent = useStore((s) => s.agents[p.session]?.find((a) => a.id === p.agent));
  const [armed, setArmed] = useState(false);
  const [busy, setBusy] = useState(false);
  const panel = useRef<HTMLDivElement>(null);
  // Where the person was when the request came (the prompt box, usually): focus returns there afterwards.
  const back = useRef<Element | null>(document.activeElement);

  useEffect(() => {
    const t = setTimeout(() => setArmed(true), ARM_MS);
    return () => clearTimeout(t);
  }, []);

  const decide = async (decision: 'approve' | 'deny', remember?: 'session' | 'always'): Promise<void> => {
    setBusy(true);
    const el = back.current;
    await act(decision, () => ollie.resolve(p.id, decision, remember));
    setBusy(false);
    if (el instanceof HTMLElement && el.isConnected && !panel.current?.contains(el)) el.focus();
  };
  const onKey = (e: React.KeyboardEvent): void => {
    if (e.key !== 'Escape') return;
    e.preventDefault();
    void decide('deny');
  };
  const canRemember = p.remember !== 'once';
  // A PreToolUse hook's "ask" (toolsrv words its reason so): the call stays in the sandbox, approved once at a time.
  const hookAsk = p.reason?.startsWith('a hook asks for your approval') === true;
  // A bypass a hook also asks about is approved once at a time too.
  const hookAsked = p.reason?.includes('a hook asks for your approval') === true;

  return (
    <div
      ref={panel}
      className="approval-panel approval"
      role="dialog"
      aria-modal="false"
      aria-labelledby="approval-title"
      onKeyDown={onKey}
    >
      <h2 id="approval-title">Approval needed{count > 1 ? ` (1 of ${count})` : ''}</h2>
      <p className="hint">
        {hookAsk
          ? 'A hook asks you to approve this call before it runs (inside the sandbox).'
          : 'An agent wants to run a command outside the sandbox.'}
      </p>
      <dl>
        {p.tool && (
          <>
            <dt>Tool</dt>
            <dd>{p.tool}</dd>
          </>
        )}
        <dt>Command</dt>
        <dd>
          <Command cmd={p.cmd} />
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
        <dt>Rule</dt>
        <dd data-testid="approval-rule">
          {p.remember === 'prefix' && (
            <>
              <code className="rule">{p.rule}</code> and the same command with more arguments (options only after{' '}
              <code>--</code>), for {p.tool ?? 'this tool'}; never with other commands, pipes or redirections added
            </>
          )}
          {p.remember === 'exact' && (
            <>
              exactly <code className="rule">{p.rule}</code>, for {p.tool ?? 'this tool'}, nothing added
            </>
          )}
          {p.remember === 'once' &&
            (hookAsked
              ? 'none: what a hook asks is approved once at a time'
              : 'none: this command holds a newline, a control or an invisible character, so it can only be approved once')}
        </dd>
      </dl>
      <div className="buttons">
        <button type="button" className="primary" disabled={busy} onClick={() => void decide('deny')}>
          Deny
        </button>
        <button type="button" disabled={busy || !armed} onClick={() => void decide('approve')}>
          Approve once
        </button>
        <button
          type="button"
          disabled={busy || !armed || !canRemember}
          onClick={() => void decide('approve', 'session')}
          title="Store the rule above for this session"
        >
          Allow for this session
        </button>
        <button
          type="button"
          className="danger"
          disabled={busy || !armed || !canRemember}
          onClick={() => void decide('approve', 'always')}
          title="Store the rule above for every session, until revoked in Settings"
        >
          Always allow
        </button>
      </div>
    </div>
  );
}
