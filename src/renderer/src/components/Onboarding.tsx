/**
 * Setting up an LLM backend without writing INI: pick a provider (root `config/providers`), give its URL and key,
 * check it live (`config/check` lists its models; nothing is stored), then save (`config/backend`: olliesrv merges a
 * commented section into backends.conf, 0600, and reloads). The key is typed into a password field, sent only in
 * those two writes, shown masked in the 9P console, and never read back.
 */
import { useEffect, useId, useState } from 'react';
import type { ProviderInfo } from '../lib/parse.js';
import { ollie, useStore } from '../lib/store.js';

type KeyMode = 'key' | 'env';

export function Onboarding() {
  const conn = useStore((s) => s.conn);
  const first = useStore((s) => s.backends.length === 0);
  const [providers, setProviders] = useState<ProviderInfo[]>([]);
  const [loadError, setLoadError] = useState<string>();
  const [id, setId] = useState('');
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [keyMode, setKeyMode] = useState<KeyMode>('key');
  const [key, setKey] = useState('');
  const [keyEnv, setKeyEnv] = useState('');
  const [makeDefault, setMakeDefault] = useState(true);
  const [models, setModels] = useState<{ id: string; context?: number }[]>();
  const [model, setModel] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState<'check' | 'save'>();
  const [saved, setSaved] = useState<string>();
  const uid = useId();

  useEffect(() => {
    if (conn !== 'open') return;
    ollie.providers().then(
      (ps) => {
        setProviders(ps);
        setLoadError(undefined);
      },
      (e: unknown) => setLoadError((e as Error).message),
    );
  }, [conn]);

  const provider = providers.find((p) => p.id === id);
  /** Any change to what was checked makes the check stale: the models listed belonged to the old answers. */
  const changed =
    <T,>(set: (v: T) => void) =>
    (v: T) => {
      set(v);
      setModels(undefined);
      setError(undefined);
      setSaved(undefined);
    };
  const pick = (p: ProviderInfo): void => {
    changed(setId)(p.id);
    setUrl(p.url ?? '');
    setKeyEnv(p.keyEnv ?? '');
    setKeyMode('key');
    setKey('');
  };

  const fields = (): Record<string, string | undefined> => ({
    provider: id,
    name: name.trim() || undefined,
    url: url.trim() || undefined,
    key: keyMode === 'key' ? key.trim() || undefined : undefined,
    key_env: keyMode === 'env' ? keyEnv.trim() || undefined : undefined,
    model: model || undefined,
    default: first || makeDefault ? 'yes' : 'no',
  });

  const check = async (): Promise<void> => {
    setBusy('check');
    setError(undefined);
    setSaved(undefined);
    try {
      const ms = await ollie.checkBackend({ ...fields(), model: undefined });
      setModels(ms);
      setModel(ms[0]?.id ?? '');
    } catch (e) {
      setModels(undefined);
      setError((e as Error).message);
    } finally {
      setBusy(undefined);
    }
  };

  const save = async (): Promise<void> => {
    setBusy('save');
    setError(undefined);
    try {
      setSaved(await ollie.setupBackend(fields()));
      // The key has done its job: it is in the file now, and need not stay in the page.
      setKey('');
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(undefined);
    }
  };

  return (
    <section className="settings-view onboarding" aria-labelledby={`${uid}-h`}>
      <h2 id={`${uid}-h`}>Set up an LLM backend</h2>
      <p className="hint">
        {first ? 'No backend is configured yet: agents need one to answer. ' : ''}
        Pick a provider, check it (its models are listed live; nothing is stored), then save: olliesrv adds it to
        backends.conf (readable by you only) and uses it at once. <code>ollie setup</code> does the same from a
        terminal.
      </p>
      {loadError && (
        <p className="errmsg" role="alert">
          Cannot read config/providers: {loadError}
        </p>
      )}
      <fieldset className="providers">
        <legend>Provider</legend>
        {providers.map((p) => (
          <label key={p.id} className={p.id === id ? 'picked' : undefined}>
            <input type="radio" name={`${uid}-provider`} value={p.id} checked={p.id === id} onChange={() => pick(p)} />
            {p.label}
          </label>
        ))}
      </fieldset>
      {provider && (
        <form
          className="setup-form"
          onSubmit={(e) => {
            e.preventDefault();
            void (models ? save() : check());
          }}
        >
          <label>
            URL
            <input
              value={url}
              onChange={(e) => changed(setUrl)(e.target.value)}
              placeholder={provider.url ?? 'http://localhost:1234/v1'}
              required={!provider.url}
              spellCheck={false}
            />
          </label>
          <div className="key-mode" role="radiogroup" aria-label="Where the key is kept">
            <label>
              <input
                type="radio"
                name={`${uid}-keymode`}
                checked={keyMode === 'key'}
                onChange={() => changed(setKeyMode)('key')}
              />
              API key{provider.needsKey ? '' : ' (optional)'}
            </label>
            <label>
              <input
                type="radio"
                name={`${uid}-keymode`}
                checked={keyMode === 'env'}
                onChange={() => changed(setKeyMode)('env')}
              />
              From an environment variable of the daemon
            </label>
          </div>
          {keyMode === 'key' ? (
            <label>
              API key
              <input
                type="password"
                autoComplete="off"
                value={key}
                onChange={(e) => changed(setKey)(e.target.value)}
                placeholder={provider.needsKey ? '' : '(none)'}
                spellCheck={false}
              />
            </label>
          ) : (
            <label>
              Variable name
              <input
                value={keyEnv}
                onChange={(e) => changed(setKeyEnv)(e.target.value)}
                placeholder="OPENAI_API_KEY"
                spellCheck={false}
              />
            </label>
          )}
          <label>
            Name in backends.conf
            <input
              value={name}
              onChange={(e) => changed(setName)(e.target.value)}
              placeholder={provider.id === 'compatible' ? 'local' : provider.id}
              spellCheck={false}
            />
          </label>
          {!first && (
            <label className="inline">
              <input type="checkbox" checked={makeDefault} onChange={(e) => setMakeDefault(e.target.checked)} /> Make it
              the default backend
            </label>
          )}
          {error && (
            <div className="field-error" role="alert">
              <b>{models ? 'Not saved' : 'Check failed'}</b> — {error}
            </div>
          )}
          {models && (
            <>
              <p className="saved" role="status">
                Reachable: {models.length} model{models.length === 1 ? '' : 's'}.
              </p>
              <label>
                Model
                <select value={model} onChange={(e) => setModel(e.target.value)}>
                  {models.map((m) => (
                    <option key={m.id} value={m.id}>
                      {m.id}
                      {m.context ? ` (${Math.round(m.context / 1024)}k)` : ''}
                    </option>
                  ))}
                </select>
              </label>
            </>
          )}
          {saved && (
            <p className="saved" role="status">
              {saved.replace(/^saved/, 'Saved')}. Next: a session (+ in the tree, or Ctrl+N), then an agent in it.
            </p>
          )}
          <div className="buttons">
            <button
              type="button"
              className={models ? undefined : 'primary'}
              onClick={() => void check()}
              disabled={!!busy || conn !== 'open'}
            >
              {busy === 'check' ? 'Checking…' : 'Check'}
            </button>
            <button
              type="button"
              className={models ? 'primary' : undefined}
              onClick={() => void save()}
              disabled={!models || !!busy || !!saved || conn !== 'open'}
              title={models ? undefined : 'Check it first'}
            >
              {busy === 'save' ? 'Saving…' : 'Save'}
            </button>
            {saved && (
              <button type="button" onClick={() => useStore.setState({ dialog: { kind: 'new-session' } })}>
                New session
              </button>
            )}
          </div>
        </form>
      )}
    </section>
  );
}
