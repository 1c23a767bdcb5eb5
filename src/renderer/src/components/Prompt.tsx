/**
 * The prompt box. Enter sends, Shift+Enter is a newline. `/cmd args` goes to the agent's ctl (with completion
 * of the ctl commands), `!cmd` is sent as a prompt (the daemon runs it through toolsrv). While the agent works,
 * prompts queue here, visible and editable, and go out in order each time it is idle again. Stop writes
 * `stop` to ctl; Inject adds the text to the running turn.
 */
import { useMemo, useRef, useState, type KeyboardEvent } from 'react';
import { ctlCompletions } from '../lib/parse.js';
import { act, agentKey, ollie, selectedAgent, useStore } from '../lib/store.js';
import { CopyButton } from './CopyButton.js';

const EMPTY: string[] = [];

export function Prompt() {
  const { session, agent } = useStore((s) => s.selected);
  const info = useStore(selectedAgent);
  const queue = useStore((s) => (session && agent ? s.queue[agentKey(session, agent)] : undefined) ?? EMPTY);
  const [text, setText] = useState('');
  const [pick, setPick] = useState(0);
  const [editing, setEditing] = useState<number>();
  /** The last `/cmd`'s reply: kept until closed (a reply may be 100 lines, like /systemprompt). */
  const [reply, setReply] = useState<{ command: string; text: string }>();
  const box = useRef<HTMLTextAreaElement>(null);
  const busy = !!info && info.state !== 'idle';

  const completions = useMemo(() => {
    const m = /^\/(\w*)$/.exec(text);
    if (!m) return [];
    return ctlCompletions(m[1]!);
  }, [text]);

  // An ended agent's log is a record: nothing to send it.
  if (!session || !agent || !info || info.ended) return null;

  const send = async (): Promise<void> => {
    const t = text.trim();
    if (!t) return;
    setText('');
    if (t.startsWith('/')) {
      // `/cmd` typed as a prompt is the same as writing `cmd` to ctl (as the daemon treats a `/cmd` prompt).
      const command = t.split(/\s/)[0]!;
      const out = await act(command, () => ollie.agentCommand(session, agent, t.slice(1)));
      if (out !== undefined) setReply({ command: t, text: out.trimEnd() || `${command} done` });
      return;
    }
    await act('prompt', () => ollie.submit(session, agent, t));
  };

  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>): void => {
    if (completions.length > 0) {
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        setPick((p) => (p + (e.key === 'ArrowDown' ? 1 : completions.length - 1)) % completions.length);
        return;
      }
      if (e.key === 'Tab' || (e.key === 'Enter' && !e.shiftKey && completions[pick]?.name !== text.slice(1))) {
        e.preventDefault();
        setText(`/${completions[Math.min(pick, completions.length - 1)]!.name} `);
        setPick(0);
        return;
      }
    }
    if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void send();
    }
  };

  const editQueue = (i: number, v: string | undefined): void => {
    const next = [...queue];
    if (v === undefined || v.trim() === '') next.splice(i, 1);
    else next[i] = v;
    void act('queue', () => ollie.setQueue(session, agent, next));
  };

  const closeReply = (): void => {
    setReply(undefined);
    box.current?.focus();
  };

  return (
    <div className="prompt">
      {reply && (
        <section
          className="cmd-reply"
          aria-label={`Reply to ${reply.command}`}
          onKeyDown={(e) => e.key === 'Escape' && closeReply()}
        >
          <div className="cmd-reply-head">
            <code>{reply.command}</code>
            <CopyButton text={reply.text} />
            <button type="button" aria-label="Close the reply" onClick={closeReply}>
              ✕
            </button>
          </div>
          <pre tabIndex={0}>{reply.text}</pre>
        </section>
      )}
      {queue.length > 0 && (
        <ol className="queue" aria-label="Queued prompts">
          {queue.map((q, i) => (
            <li key={i}>
              {editing === i ? (
                <input
                  autoFocus
                  aria-label="Edit queued prompt"
                  defaultValue={q}
                  onBlur={(e) => (editQueue(i, e.target.value), setEditing(undefined))}
                  onKeyDown={(e) => {
                    if (e.key === 'Enter') (e.target as HTMLInputElement).blur();
                    if (e.key === 'Escape') setEditing(undefined);
                  }}
                />
              ) : (
                <span className="queued" onClick={() => setEditing(i)} title="Click to edit">
                  {q}
                </span>
              )}
              <button type="button" aria-label="Remove queued prompt" onClick={() => editQueue(i, undefined)}>
                ✕
              </button>
            </li>
          ))}
        </ol>
      )}
      {completions.length > 0 && (
        <ul className="completions" role="listbox" aria-label="Commands">
          {completions.map((c, i) => (
            <li
              key={c.name}
              role="option"
              aria-selected={i === pick}
              className={i === pick ? 'picked' : ''}
              onMouseDown={(e) => (e.preventDefault(), setText(`/${c.name} `), box.current?.focus())}
            >
              <b>/{c.usage}</b> <span>{c.help}</span>
            </li>
          ))}
        </ul>
      )}
      <div className="prompt-row">
        <textarea
          ref={box}
          id="prompt-input"
          aria-label="Prompt"
          placeholder={
            busy
              ? 'The agent is working: Enter queues, Inject adds to the running turn'
              : 'Prompt — Enter sends, Shift+Enter newline, / commands, !cmd runs a shell command'
          }
          value={text}
          rows={Math.min(8, Math.max(2, text.split('\n').length))}
          onChange={(e) => (setText(e.target.value), setPick(0))}
          onKeyDown={onKey}
        />
        <div className="prompt-buttons">
          <button type="button" className="primary" onClick={() => void send()} disabled={!text.trim()}>
            {busy ? 'Queue' : 'Send'}
          </button>
          <button
            type="button"
            onClick={() =>
              void act('inject', () => ollie.agentCtl(session, agent, 'inject', text.trim())).then(
                (r) => r !== undefined && setText(''),
              )
            }
            disabled={!busy || !text.trim()}
            title="Add this text to the running turn"
          >
            Inject
          </button>
          <button
            type="button"
            className="danger"
            onClick={() => void act('stop', () => ollie.agentCtl(session, agent, 'stop'))}
            disabled={!busy}
            title="Stop the turn (Ctrl+.)"
          >
            Stop
          </button>
        </div>
      </div>
    </div>
  );
}
