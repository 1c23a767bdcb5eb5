/** The 9P console: every file operation the GUI performed, as the `ollie-9p` command that replays it. */
import { useEffect, useRef } from 'react';
import { useStore } from '../lib/store.js';
import { CopyButton } from './CopyButton.js';

export function Console() {
  const open = useStore((s) => s.consoleOpen);
  const entries = useStore((s) => s.console);
  const end = useRef<HTMLDivElement>(null);
  // Braces matter: Chromium's scrollIntoView returns a promise, and an effect may only return a cleanup function.
  useEffect(() => {
    end.current?.scrollIntoView({ block: 'end' });
  }, [entries, open]);
  if (!open) return null;
  return (
    <section className="console" aria-label="9P console">
      <header>
        <b>9P console</b> — each GUI action as a shell command
        <CopyButton text={entries.map((e) => e.command).join('\n')} label="Copy all" />
        <button type="button" onClick={() => useStore.setState({ console: [] })}>
          Clear
        </button>
        <button type="button" aria-label="Close console" onClick={() => useStore.setState({ consoleOpen: false })}>
          ✕
        </button>
      </header>
      <div className="console-lines">
        {entries.map((e) => (
          <div key={e.seq} className={e.error ? 'err' : ''}>
            <code>$ {e.command}</code>
            {e.count && e.count > 1 ? (
              <span className="count" title={`made ${e.count} times; shown once`}>
                ×{e.count}
              </span>
            ) : null}
            {e.error && <span className="errmsg"> → {e.error}</span>}
            <CopyButton text={e.command} />
          </div>
        ))}
        <div ref={end} />
      </div>
    </section>
  );
}
