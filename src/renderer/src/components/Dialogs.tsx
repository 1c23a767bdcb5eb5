/** New session and new agent dialogs: key=value requests to `session/new` and `session/{s}/agent/new`. */
import { useEffect, useRef, useState, type FormEvent, type ReactNode, type RefObject } from 'react';
import { parseModels } from '../lib/parse.js';
import { act, ollie, useStore } from '../lib/store.js';

/**
 * Where the focus goes when the open dialog closes, if not back to what had it before (a dialog that created
 * something hands it to what it created). Set by a dialog just before it closes.
 */
let focusAfter: (() => HTMLElement | null | undefined) | undefined;

const FOCUSABLE =
  'button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

/**
 * A modal's keyboard: Tab and Shift+Tab cycle inside it (focus cannot leave for the page behind), Esc closes it
 * wherever the focus is, and on close the focus goes to `focusAfter`, else back to the element that had it
 * before, else to the selected row of the tree (a menu item that opened the dialog is gone by then).
 */
function useModal(box: RefObject<HTMLElement | null>, close: () => void): void {
  const closeRef = useRef(close);
  closeRef.current = close;
  useEffect(() => {
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    focusAfter = undefined;
    const onKey = (e: KeyboardEvent): void => {
      const el = box.current;
      if (!el) return;
      if (e.key === 'Escape') {
        e.preventDefault();
        e.stopPropagation();
        closeRef.current();
        return;
      }
      if (e.key !== 'Tab') return;
      const items = [...el.querySelectorAll<HTMLElement>(FOCUSABLE)];
      if (items.length === 0) return;
      const first = items[0]!;
      const last = items.at(-1)!;
      const inside = el.contains(document.activeElement);
      if (e.shiftKey && (!inside || document.activeElement === first)) {
        e.preventDefault();
        last.focus();
      } else if (!e.shiftKey && (!inside || document.activeElement === last)) {
        e.preventDefault();
        first.focus();
      }
    };
    document.addEventListener('keydown', onKey, true);
    return () => {
      document.removeEventListener('keydown', onKey, true);
      const next = focusAfter;
      focusAfter = undefined;
      // After React has rendered what the dialog's action changed (a new agent's prompt box).
      setTimeout(() => {
        const target =
          next?.() ??
          (opener?.isConnected ? opener : null) ??
          document.querySelector<HTMLElement>('.tree [aria-selected="true"]') ??
          document.getElementById('prompt-input');
        target?.focus();
      }, 0);
    };
  }, [box]);
}

function Modal({
  title,
  children,
  onSubmit,
  submitLabel = 'Create',
}: {
  title: string;
  children: ReactNode;
  onSubmit: () => Promise<void>;
  submitLabel?: string;
}) {
  const [busy, setBusy] = useState(false);
  const close = (): void => useStore.setState({ dialog: null });
  const box = useRef<HTMLFormElement>(null);
  useModal(box, close);
  const submit = async (e: FormEvent): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    await onSubmit();
    setBusy(false);
  };
  return (
    <div className="modal-back">
      <form
        ref={box}
        className="modal"
        role="dialog"
        aria-modal="true"
        aria-label={title}
        onSubmit={(e) => void submit(e)}
      >
        <h2>{title}</h2>
        {children}
        <div className="buttons">
          <button type="submit" className="primary" disabled={busy}>
            {submitLabel}
          </button>
          <button type="button" onClick={close}>
            Cancel
          </button>
        </div>
      </form>
    </div>
  );
}

function NewSession() {
  const [name, setName] = useState('');
  const [cwd, setCwd] = useState('');
  const [remote, setRemote] = useState('');
  return (
    <Modal
      title="New session"
      onSubmit={async () => {
        const r = await act('new session', () =>
          ollie.createSession({ name: name.trim(), cwd: cwd.trim(), remote: remote.trim() }),
        );
        if (r === undefined) return;
        focusAfter = () => document.querySelector<HTMLElement>(`.tree [data-session="${CSS.escape(r)}"] > .node`);
        useStore.setState({ dialog: null });
      }}
    >
      <label>
        Name <input autoFocus value={name} onChange={(e) => setName(e.target.value)} placeholder="(generated)" />
      </label>
      <label>
        Working directory{' '}
        <input
          value={cwd}
          onChange={(e) => setCwd(e.target.value)}
          placeholder={remote.trim() ? '(required: a path on that host)' : '(home)'}
        />
      </label>
      <HostInput for="tools" value={remote} onChange={setRemote} />
    </Modal>
  );
}

/**
 * A field for an ssh host (empty: this machine). For a session's tools (`tools`) it offers the Host aliases of the
 * daemon's ssh config, where the ssh runs; for "Connect to" (`daemon`), those of this machine's.
 */
const HOST_FIELDS = {
  tools: { label: 'Run tools on', aria: 'Run tools on (an ssh host)', list: 'ssh-hosts' },
  daemon: { label: 'Host', aria: 'Host (ssh: [user@]host[:port][!/path/to.sock])', list: 'connect-hosts' },
} as const;

function HostInput(p: {
  for: keyof typeof HOST_FIELDS;
  value: string;
  onChange: (value: string) => void;
  autoFocus?: boolean;
}): ReactNode {
  const f = HOST_FIELDS[p.for];
  const localHosts = useStore((s) => s.localHosts);
  const [daemonHosts, setDaemonHosts] = useState<string[]>([]);
  const forTools = p.for === 'tools';
  useEffect(() => {
    if (!forTools) return;
    let live = true;
    void ollie.api?.readOr('sshhosts', '').then((t) => live && setDaemonHosts(t.split('\n').filter(Boolean)));
    return () => {
      live = false;
    };
  }, [forTools]);
  return (
    <label>
      {f.label}{' '}
      <input
        autoFocus={p.autoFocus}
        value={p.value}
        onChange={(e) => p.onChange(e.target.value)}
        list={f.list}
        placeholder="(this machine)"
        aria-label={f.aria}
      />
      <datalist id={f.list}>
        {(forTools ? daemonHosts : localHosts).map((h) => (
          <option key={h} value={h} />
        ))}
      </datalist>
    </label>
  );
}

function NewAgent({ session }: { session: string }) {
  const backends = useStore((s) => s.backends);
  const profiles = useStore((s) => s.profiles);
  const sname = useStore((s) => s.sessions[session]?.name ?? session);
  const [f, setF] = useState({ name: '', cwd: '', backend: '', model: '', agent: '' });
  const [models, setModels] = useState<{ backend: string; model: string }[]>([]);
  useEffect(() => {
    // `models` asks every backend once (then olliesrv caches it): fill the suggestions when it answers.
    let live = true;
    void ollie.api?.readOr('models', '').then((t) => live && setModels(parseModels(t)));
    return () => {
      live = false;
    };
  }, []);
  const backend = f.backend || backends.find((b) => b.isDefault)?.name || '';
  const field = (k: keyof typeof f) => ({
    value: f[k],
    onChange: (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value }),
  });
  return (
    <Modal
      title={`New agent in ${sname}`}
      onSubmit={async () => {
        const r = await act('new agent', () => ollie.createAgent(session, f));
        if (r === undefined) return;
        // Made to be talked to: the prompt box.
        focusAfter = () => document.getElementById('prompt-input');
        useStore.setState({ dialog: null });
      }}
    >
      <label>
        Name <input autoFocus {...field('name')} placeholder="(generated)" />
      </label>
      <label>
        Working directory <input {...field('cwd')} placeholder="(the session's)" />
      </label>
      <label>
        Backend
        <select {...field('backend')}>
          <option value="">(default)</option>
          {backends.map((b) => (
            <option key={b.name} value={b.name}>
              {b.name} ({b.type}
              {b.model ? `, ${b.model}` : ''})
            </option>
          ))}
        </select>
      </label>
      <label>
        Model{' '}
        <input
          {...field('model')}
          list="models"
          placeholder={backends.find((b) => b.name === backend)?.model || "(the backend's default)"}
        />
        <datalist id="models">
          {models
            .filter((m) => m.backend === backend)
            .map((m) => (
              <option key={m.model} value={m.model} />
            ))}
        </datalist>
      </label>
      <label>
        Profile
        <select {...field('agent')}>
          <option value="">(default)</option>
          {profiles.map((p) => (
            <option key={p}>{p}</option>
          ))}
        </select>
      </label>
      {backends.length === 0 && (
        <p className="hint">
          No LLM backend is configured: the agent is made, but cannot answer until one is set up (Settings → Set up a
          backend…, or `ollie setup`); it then uses the default.
        </p>
      )}
    </Modal>
  );
}

/** The agent's cfg (backend, model, profile, cwd, generation parameters) as editable key=value lines. */
function AgentCfg({ session, agent }: { session: string; agent: string }) {
  const name = useStore((s) => s.agents[session]?.find((a) => a.id === agent)?.name ?? agent);
  const [text, setText] = useState<string>();
  useEffect(() => {
    void act('read cfg', () => ollie.readCfg(session, agent)).then((t) => setText(t ?? ''));
  }, [session, agent]);
  return (
    <Modal
      title={`Settings of ${name}`}
      submitLabel="Apply"
      onSubmit={async () => {
        const r = await act('cfg', () => ollie.writeCfg(session, agent, text ?? ''));
        if (r || text === undefined) useStore.setState({ dialog: null });
      }}
    >
      <label>
        key=value, one per line (backend, model, profile, cwd, temperature, maxTokens, maxSteps, compactAt, …)
        <textarea
          aria-label="cfg"
          rows={10}
          value={text ?? ''}
          onChange={(e) => setText(e.target.value)}
          disabled={text === undefined}
        />
      </label>
      <p className="hint">Changes apply when the agent is idle; while it works olliesrv refuses them and says why.</p>
    </Modal>
  );
}

/** Asks before a kill, which cannot be undone; Cancel has the focus, so Enter alone never kills. */
function ConfirmKill({ session, agent }: { session: string; agent?: string }) {
  const sname = useStore((s) => s.sessions[session]?.name ?? session);
  const aname = useStore((s) => (agent ? (s.agents[session]?.find((a) => a.id === agent)?.name ?? agent) : undefined));
  const close = (): void => useStore.setState({ dialog: null });
  const box = useRef<HTMLDivElement>(null);
  useModal(box, close);
  const kill = async (): Promise<void> => {
    // What it was opened on goes away: the session's row (or, for a session, the tree's first) takes the focus.
    focusAfter = () =>
      agent
        ? document.querySelector<HTMLElement>(`.tree [data-session="${CSS.escape(sname)}"] > .node`)
        : document.querySelector<HTMLElement>('.tree .node');
    close();
    await act(
      'kill',
      async () => void (agent ? await ollie.killAgent(session, agent) : await ollie.sessionCtl(session, 'kill')),
    );
  };
  const title = agent ? `Kill agent ${aname}?` : `Kill session ${sname}?`;
  return (
    <div className="modal-back">
      <div ref={box} className="modal" role="alertdialog" aria-modal="true" aria-label={title}>
        <h2>{title}</h2>
        <p>
          {agent
            ? 'Its turn stops, its background processes end, and it leaves the tree. This cannot be undone; its history stays readable from Search.'
            : 'Every agent of the session stops, its processes end, and the session is removed with its history. This cannot be undone.'}
        </p>
        <div className="buttons">
          <button type="button" className="danger" onClick={() => void kill()}>
            Kill
          </button>
          <button type="button" autoFocus onClick={close}>
            Cancel
          </button>
        </div>
      </div>
    </div>
  );
}

/**
 * "Connect to…": this machine's daemon, or another machine's reached over ssh (`HOST` or `user@HOST:PORT`, a Host
 * alias of this machine's ssh config offered, and `!/path/to.sock` for a daemon on another socket there). The
 * owner's side checks the address and dials; the GUI's store then follows that daemon.
 */
function ConnectTo() {
  const daemon = useStore((s) => s.daemon);
  const [host, setHost] = useState(daemon.slice(4));
  const go = (to: string): void => {
    useStore.setState({ dialog: null });
    if (to !== daemon) ollie.switchDaemon(to);
  };
  return (
    <Modal title="Connect to" submitLabel="Connect" onSubmit={async () => go(host.trim() ? `ssh!${host.trim()}` : '')}>
      <p>
        Connected to <strong data-testid="connected-daemon">{daemon ? daemon.slice(4) : 'this machine'}</strong>.
      </p>
      <HostInput for="daemon" value={host} onChange={setHost} autoFocus />
      <button type="button" onClick={() => go('')} disabled={!daemon}>
        This machine
      </button>
    </Modal>
  );
}

export function Dialogs() {
  const d = useStore((s) => s.dialog);
  if (!d) return null;
  if (d.kind === 'new-session') return <NewSession />;
  if (d.kind === 'new-agent') return <NewAgent session={d.session} />;
  if (d.kind === 'agent-cfg') return <AgentCfg session={d.session} agent={d.agent} />;
  if (d.kind === 'confirm-kill') return <ConfirmKill session={d.session} agent={d.agent} />;
  if (d.kind === 'connect-to') return <ConnectTo />;
  return null;
}
