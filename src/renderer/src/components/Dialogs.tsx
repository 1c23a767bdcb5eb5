/** New session and new agent dialogs: key=value requests to `session/new` and `session/{s}/agent/new`. */
import { useEffect, useState, type FormEvent, type ReactNode } from 'react';
import { parseModels } from '../lib/parse.js';
import { act, ollie, useStore } from '../lib/store.js';

function Modal({ title, children, onSubmit, submitLabel = 'Create' }: { title: string; children: ReactNode; onSubmit: () => Promise<void>; submitLabel?: string }) {
  const [busy, setBusy] = useState(false);
  const close = (): void => useStore.setState({ dialog: null });
  const submit = async (e: FormEvent): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    await onSubmit();
    setBusy(false);
  };
  return (
    <div className="modal-back" onKeyDown={(e) => e.key === 'Escape' && close()}>
      <form className="modal" role="dialog" aria-modal="true" aria-label={title} onSubmit={(e) => void submit(e)}>
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
  return (
    <Modal
      title="New session"
      onSubmit={async () => {
        const r = await act('new session', () => ollie.createSession({ name: name.trim(), cwd: cwd.trim() }));
        if (r !== undefined) useStore.setState({ dialog: null });
      }}
    >
      <label>
        Name <input autoFocus value={name} onChange={(e) => setName(e.target.value)} placeholder="(generated)" />
      </label>
      <label>
        Working directory <input value={cwd} onChange={(e) => setCwd(e.target.value)} placeholder="(home)" />
      </label>
    </Modal>
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
  const field = (k: keyof typeof f) => ({ value: f[k], onChange: (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value }) });
  return (
    <Modal
      title={`New agent in ${sname}`}
      onSubmit={async () => {
        const r = await act('new agent', () => ollie.createAgent(session, f));
        if (r !== undefined) useStore.setState({ dialog: null });
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
              {b.name} ({b.type}{b.model ? `, ${b.model}` : ''})
            </option>
          ))}
        </select>
      </label>
      <label>
        Model <input {...field('model')} list="models" placeholder={backends.find((b) => b.name === backend)?.model || "(the backend's default)"} />
        <datalist id="models">
          {models.filter((m) => m.backend === backend).map((m) => (
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
      {backends.length === 0 && <p className="hint">No LLM backend is configured: the agent is made, but cannot answer until one is set up (Settings → Set up a backend…, or `ollie setup`); it then uses the default.</p>}
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
        <textarea aria-label="cfg" rows={10} value={text ?? ''} onChange={(e) => setText(e.target.value)} disabled={text === undefined} />
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
  const kill = async (): Promise<void> => {
    close();
    await act('kill', async () => void (agent ? await ollie.killAgent(session, agent) : await ollie.sessionCtl(session, 'kill')));
  };
  const title = agent ? `Kill agent ${aname}?` : `Kill session ${sname}?`;
  return (
    <div className="modal-back" onKeyDown={(e) => e.key === 'Escape' && close()}>
      <div className="modal" role="alertdialog" aria-modal="true" aria-label={title}>
        <h2>{title}</h2>
        <p>
          {agent
            ? 'Its turn stops, its background processes end, and it is removed with its history. This cannot be undone.'
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

export function Dialogs() {
  const d = useStore((s) => s.dialog);
  if (!d) return null;
  if (d.kind === 'new-session') return <NewSession />;
  if (d.kind === 'new-agent') return <NewAgent session={d.session} />;
  if (d.kind === 'agent-cfg') return <AgentCfg session={d.session} agent={d.agent} />;
  if (d.kind === 'confirm-kill') return <ConfirmKill session={d.session} agent={d.agent} />;
  return null;
}
