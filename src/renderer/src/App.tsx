/**
 * The window: session tree | chat + prompt (or search, or settings) with the processes panel beside the chat,
 * status bar, 9P console, dialogs. Shortcuts work in both modes.
 */
import { useEffect } from 'react';
import { Approval } from './components/Approval.js';
import { Chat } from './components/Chat.js';
import { Console } from './components/Console.js';
import { Dialogs } from './components/Dialogs.js';
import { Processes } from './components/Processes.js';
import { Review, useReview } from './components/Review.js';
import { Prompt } from './components/Prompt.js';
import { Search } from './components/Search.js';
import { Onboarding } from './components/Onboarding.js';
import { Settings } from './components/Settings.js';
import { SessionTree } from './components/SessionTree.js';
import { StatusBar } from './components/StatusBar.js';
import { act, ollie, useStore, type View } from './lib/store.js';

/** Commands shared by the keyboard, the Electron menu and notifications (`open-agent SID AID`). */
export function runCommand(command: string): void {
  const [name, ...args] = command.split(' ');
  const s = useStore.getState();
  const { session, agent } = s.selected;
  switch (name) {
    case 'new-session':
      useStore.setState({ dialog: { kind: 'new-session' } });
      break;
    case 'connect-to':
      useStore.setState({ dialog: { kind: 'connect-to' } });
      break;
    case 'new-agent':
      if (session) useStore.setState({ dialog: { kind: 'new-agent', session } });
      break;
    case 'stop':
      if (session && agent) void act('stop', () => ollie.agentCtl(session, agent, 'stop'));
      break;
    case 'toggle-console':
      useStore.setState({ consoleOpen: !s.consoleOpen });
      break;
    case 'focus-prompt':
      document.getElementById('prompt-input')?.focus();
      break;
    case 'approvals':
      useStore.setState({ approving: s.approving ?? Object.keys(s.pending)[0] });
      break;
    case 'search':
    case 'settings':
      // The same key again goes back to the chat.
      useStore.setState({ view: s.view === name ? 'chat' : name });
      break;
    case 'chat':
      useStore.setState({ view: 'chat' });
      break;
    case 'toggle-procs':
      useStore.setState({ procsOpen: !s.procsOpen, view: 'chat' });
      if (!s.procsOpen && session && agent) void ollie.reloadProcs(session, agent);
      break;
    case 'open-agent':
      if (args[0]) ollie.select({ session: args[0], agent: args[1] });
      break;
    default:
      break;
  }
}

const KEYS: Record<string, string> = {
  'ctrl+n': 'new-session',
  'ctrl+shift+n': 'new-agent',
  'ctrl+.': 'stop',
  'ctrl+`': 'toggle-console',
  'ctrl+l': 'focus-prompt',
  'ctrl+shift+a': 'approvals',
  'ctrl+shift+f': 'search',
  'ctrl+,': 'settings',
  'ctrl+shift+p': 'toggle-procs',
};

const VIEWS: { view: View; label: string; keys: string }[] = [
  { view: 'chat', label: 'Chat', keys: '' },
  { view: 'search', label: 'Search', keys: 'Ctrl+Shift+F' },
  { view: 'settings', label: 'Settings', keys: 'Ctrl+,' },
];

function Toolbar() {
  const view = useStore((s) => s.view);
  const procsOpen = useStore((s) => s.procsOpen);
  const live = useStore((s) => s.procs.filter((p) => p.status === 'running').length);
  const all = useStore((s) => s.procs.length);
  const reviewOpen = useReview((s) => s.open);
  return (
    <nav className="toolbar" aria-label="Views">
      <div role="tablist" aria-label="Main view">
        {VIEWS.map((v) => (
          <button
            key={v.view}
            type="button"
            role="tab"
            aria-selected={view === v.view}
            title={v.keys ? `${v.label} (${v.keys})` : v.label}
            onClick={() => runCommand(v.view)}
          >
            {v.label}
          </button>
        ))}
      </div>
      <button
        type="button"
        className={procsOpen ? 'on' : ''}
        aria-pressed={procsOpen}
        title="Background processes of the selected agent (Ctrl+Shift+P)"
        onClick={() => runCommand('toggle-procs')}
      >
        Processes{all > 0 ? ` (${live > 0 ? `${live} running` : all})` : ''}
      </button>
      <button
        type="button"
        className={reviewOpen ? 'on' : ''}
        aria-pressed={reviewOpen}
        title="What the selected agent's tools changed, round by round, with Rewind and Undo"
        onClick={() => useReview.setState({ open: !reviewOpen })}
      >
        Review
      </button>
    </nav>
  );
}

export function App() {
  const notice = useStore((s) => s.notice);
  const conn = useStore((s) => s.conn);
  const pending = useStore((s) => Object.keys(s.pending).length);
  const noBackend = useStore((s) => s.conn === 'open' && s.backends.length === 0 && s.loaded);
  const view = useStore((s) => s.view);
  const procsOpen = useStore((s) => s.procsOpen);

  useEffect(() => {
    ollie.start();
    window.ollie?.onCommand(runCommand);
    const onKey = (e: KeyboardEvent): void => {
      // Esc leaves search or settings for the chat, unless a dialog (which handles Esc itself) is open.
      const st = useStore.getState();
      if (e.key === 'Escape' && !e.defaultPrevented && st.view !== 'chat' && !st.dialog && !st.approving) {
        runCommand('chat');
        return;
      }
      if (!(e.ctrlKey || e.metaKey)) return;
      const combo = `ctrl+${e.shiftKey ? 'shift+' : ''}${e.key.toLowerCase()}`;
      const cmd = KEYS[combo];
      if (!cmd) return;
      e.preventDefault();
      runCommand(cmd);
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, []);

  useEffect(() => {
    document.title = pending > 0 ? `(${pending}) Ollie` : 'Ollie';
  }, [pending]);

  useEffect(() => {
    if (!notice) return;
    const t = setTimeout(() => useStore.setState({ notice: undefined }), notice.error ? 8000 : 3000);
    return () => clearTimeout(t);
  }, [notice]);

  return (
    <div className="app">
      <aside className="side">
        <header className="side-head">
          <b>Ollie</b>
          <button
            type="button"
            title="New session (Ctrl+N)"
            aria-label="New session"
            onClick={() => runCommand('new-session')}
            disabled={conn !== 'open'}
          >
            +
          </button>
          <button
            type="button"
            title="9P console (Ctrl+`)"
            aria-label="Toggle 9P console"
            onClick={() => runCommand('toggle-console')}
          >
            9P
          </button>
        </header>
        <SessionTree />
      </aside>
      <main className="main">
        {conn === 'down' && <div className="banner error">olliesrv is unreachable; reconnecting…</div>}
        {noBackend && (
          <div className="banner warn" role="note">
            No LLM backend is configured: agents cannot answer.{' '}
            <button type="button" className="link" onClick={() => useStore.setState({ view: 'setup' })}>
              Set up a backend
            </button>{' '}
            (or <code>ollie setup</code> in a terminal).
          </div>
        )}
        <Toolbar />
        {view === 'search' ? (
          <Search />
        ) : view === 'settings' ? (
          <Settings />
        ) : view === 'setup' ? (
          <Onboarding />
        ) : (
          <>
            <div className={`work${procsOpen ? ' with-procs' : ''}`}>
              <Chat />
              <Processes />
              <Review />
            </div>
            <Prompt />
          </>
        )}
        <Console />
      </main>
      <StatusBar />
      {notice && (
        <div
          className={`notice${notice.error ? ' error' : ''}`}
          role={notice.error ? 'alert' : 'status'}
          onClick={() => useStore.setState({ notice: undefined })}
        >
          {notice.text}
        </div>
      )}
      <Dialogs />
      <Approval />
    </div>
  );
}
