/**
 * The configuration files under the root `config/`: backends.conf and sandbox.yaml as text, the default
 * profile for new agents, and the remembered bypass approvals (root `bypassrules`) with a revoke button each. olliesrv parses every write with the file's own parser and refuses a bad one with
 * `file:line: what is wrong`; the editor shows that next to the text, puts the cursor on the line, and keeps
 * the user's text so it can be fixed (the file on disk is unchanged).
 */
import { Appearance } from './Appearance.js';
import { McpServers } from './McpServers.js';
import { ListTable } from './ListTable.js';
import { maskMcp, unmaskMcp } from '../lib/mcpmask.js';
import { useCallback, useEffect, useRef, useState } from 'react';
import { errorLine, maskKeys, unmaskKeys, type BypassRule } from '../lib/parse.js';
import { act, ollie, useStore } from '../lib/store.js';

/**
 * Unsaved text per file, kept while the view is away (another view, a reconnect): leaving Settings must not
 * throw an edit away. A save or a revert drops it.
 */
const drafts = new Map<string, string>();

function ConfigEditor({
  file,
  title,
  hint,
  emptyHint,
}: {
  file: string;
  title: string;
  hint: string;
  emptyHint: string;
}) {
  const conn = useStore((s) => s.conn);
  const [saved, setSaved] = useState<string>();
  const [text, setText] = useState('');
  const [error, setError] = useState<string>();
  const [loadError, setLoadError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [ok, setOk] = useState(false);
  const area = useRef<HTMLTextAreaElement>(null);
  /** The file as read, keys in clear: what masked key lines stand for. Never rendered. */
  const raw = useRef('');

  const load = useCallback(
    async (revert = false) => {
      setError(undefined);
      setOk(false);
      if (revert) drafts.delete(file);
      try {
        const t = await ollie.readConfig(file);
        // API keys are never shown: a masked line keeps the key it had when saved (unmaskKeys).
        const shown = file === 'backends.conf' ? maskKeys(t) : file === 'mcp.json' ? maskMcp(t) : t;
        raw.current = t;
        setSaved(shown);
        setText(drafts.get(file) ?? shown);
        setLoadError(undefined);
      } catch (e) {
        setLoadError((e as Error).message);
      }
    },
    [file],
  );
  useEffect(() => {
    if (conn === 'open') void load();
  }, [conn, load]);

  /** Puts the cursor on the line the parser named, so the fix starts there. */
  const showLine = (n: number): void => {
    const el = area.current;
    if (!el) return;
    const lines = el.value.split('\n');
    const start = lines.slice(0, n - 1).reduce((a, l) => a + l.length + 1, 0);
    el.focus();
    el.setSelectionRange(start, start + (lines[n - 1]?.length ?? 0));
    // Scroll the line into view: the textarea's line height times the lines above it.
    const lh = parseFloat(getComputedStyle(el).lineHeight) || 18;
    el.scrollTop = Math.max(0, (n - 3) * lh);
  };

  const save = async (): Promise<void> => {
    setOk(false);
    if (!text.trim()) {
      setError('olliesrv never empties a configuration file: an empty save is not written.');
      return;
    }
    setBusy(true);
    try {
      await ollie.writeConfig(file, text, raw.current);
      if (file === 'backends.conf') raw.current = unmaskKeys(text, raw.current);
      if (file === 'mcp.json') raw.current = unmaskMcp(text, raw.current);
      setError(undefined);
      setOk(true);
      drafts.delete(file);
      setSaved(text.endsWith('\n') ? text : `${text}\n`);
      setText((t) => (t.endsWith('\n') ? t : `${t}\n`));
    } catch (e) {
      const msg = (e as Error).message;
      setError(msg);
      const n = errorLine(msg);
      if (n) showLine(n);
    } finally {
      setBusy(false);
    }
  };

  const dirty = saved !== undefined && text !== saved;
  const line = error ? errorLine(error) : undefined;
  const id = `cfg-${file.replace(/\W/g, '-')}`;
  return (
    <section className="cfg-file" aria-labelledby={`${id}-h`} data-file={file}>
      <h3 id={`${id}-h`}>
        {title} <code className="dim">config/{file}</code>
        {dirty && <span className="tag">modified</span>}
      </h3>
      <p className="hint">{hint}</p>
      {loadError ? (
        <p className="errmsg" role="alert">
          Cannot read config/{file}: {loadError}
        </p>
      ) : (
        <>
          {saved === '' && <p className="hint">{emptyHint}</p>}
          <textarea
            ref={area}
            aria-label={file}
            aria-invalid={error ? true : undefined}
            aria-describedby={error ? `${id}-err` : undefined}
            spellCheck={false}
            rows={14}
            value={text}
            disabled={saved === undefined}
            onChange={(e) => {
              setText(e.target.value);
              drafts.set(file, e.target.value);
              setOk(false);
            }}
            onKeyDown={(e) => {
              if ((e.ctrlKey || e.metaKey) && e.key === 's') {
                e.preventDefault();
                void save();
              }
            }}
          />
          {error && (
            <div className="field-error" role="alert" id={`${id}-err`}>
              <b>Not saved</b> — {error}
              {line !== undefined && (
                <button type="button" onClick={() => showLine(line)}>
                  Go to line {line}
                </button>
              )}
              <div className="dim">The file on disk is unchanged.</div>
            </div>
          )}
          {ok && !dirty && (
            <p className="saved" role="status">
              Saved{file === 'backends.conf' ? ' and reloaded' : ''}.
            </p>
          )}
          <div className="buttons">
            <button
              type="button"
              className="primary"
              onClick={() => void save()}
              disabled={busy || !dirty || conn !== 'open'}
              title="Save (Ctrl+S in the text)"
            >
              {busy ? 'Saving…' : 'Save'}
            </button>
            <button
              type="button"
              onClick={() => void load(true)}
              disabled={busy || conn !== 'open'}
              title="Discard the changes and read the file again"
            >
              Revert
            </button>
          </div>
        </>
      )}
    </section>
  );
}

function DefaultProfile() {
  const conn = useStore((s) => s.conn);
  const profiles = useStore((s) => s.profiles);
  const [current, setCurrent] = useState<string>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    if (conn !== 'open') return;
    void act('read default profile', () => ollie.readConfig('profile')).then(
      (t) => t !== undefined && setCurrent(t.trim()),
    );
  }, [conn]);
  const pick = async (name: string): Promise<void> => {
    try {
      await ollie.writeConfig('profile', name);
      setCurrent(name);
      setError(undefined);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <section className="cfg-file" aria-labelledby="cfg-profile-h">
      <h3 id="cfg-profile-h">
        Default profile <code className="dim">config/profile</code>
      </h3>
      <p className="hint">
        The profile a new agent gets when none is chosen (the new-agent dialog&apos;s “(default)”). Agents that exist
        keep theirs.
      </p>
      <label className="inline">
        Profile
        <select
          aria-label="Default profile"
          value={current ?? ''}
          disabled={current === undefined || conn !== 'open'}
          onChange={(e) => void pick(e.target.value)}
        >
          {current !== undefined && !profiles.includes(current) && <option value={current}>{current}</option>}
          {profiles.map((p) => (
            <option key={p} value={p}>
              {p}
            </option>
          ))}
        </select>
      </label>
      {error && (
        <div className="field-error" role="alert">
          <b>Not changed</b> — {error}
        </div>
      )}
    </section>
  );
}

function BypassRules() {
  const conn = useStore((s) => s.conn);
  // A request approved elsewhere may have added a rule: re-read when one resolves (its count drops).
  const pending = useStore((s) => Object.keys(s.pending).length);
  const [rules, setRules] = useState<BypassRule[]>();
  const [error, setError] = useState<string>();
  const load = useCallback(async () => {
    try {
      setRules(await ollie.bypassRules());
      setError(undefined);
    } catch (e) {
      setError((e as Error).message);
    }
  }, []);
  useEffect(() => {
    if (conn === 'open') void load();
  }, [conn, pending, load]);
  const revoke = async (id: string): Promise<void> => {
    try {
      await ollie.revokeBypassRule(id);
    } catch (e) {
      setError((e as Error).message);
    }
    await load();
  };
  return (
    <section className="cfg-file" aria-labelledby="cfg-rules-h">
      <h3 id="cfg-rules-h">
        Remembered approvals <code className="dim">bypassrules</code>
      </h3>
      <p className="hint">
        Commands allowed to run outside the sandbox without asking: “prefix” rules cover the same words with more
        arguments (never with other commands, pipes or redirections added), “exact” ones only that command. Revoked, the
        next such request asks again.
      </p>
      {error && (
        <div className="field-error" role="alert">
          {error}
        </div>
      )}
      {rules && (
        <ListTable
          className="bypass-rules"
          aria-label="Remembered approvals"
          columns={['Tool', 'Match', 'Rule', 'Scope', 'Created', '']}
          items={rules}
          empty="None."
          row={(r) => (
            <tr key={r.id} data-rule={r.id}>
              <td>{r.tool}</td>
              <td>{r.kind}</td>
              <td className="rule">{r.rule}</td>
              <td>{r.scope}</td>
              <td>{r.created ? new Date(r.created).toLocaleString() : ''}</td>
              <td>
                <button
                  type="button"
                  className="danger"
                  disabled={conn !== 'open'}
                  onClick={() => void revoke(r.id)}
                  aria-label={`Revoke ${r.rule}`}
                >
                  Revoke
                </button>
              </td>
            </tr>
          )}
        />
      )}
    </section>
  );
}

/** The root `sandbox` file as olliesrv serves it (src/olliesrv/config/files.ts SandboxReport). */
interface SandboxReport {
  summary: string;
  yolo: boolean;
  abi: number;
  enforces: string[];
  reason?: string;
  filter?: { arch?: string; refusedAbis?: string; refuses?: string[]; byArgument?: string[]; unavailable?: string };
  capabilities?: { root: boolean; held: boolean; drops: string[]; securebits?: string[]; unavailable?: string };
  containment?: string[];
  limits?: string[];
}

/** What the sandbox applies to tools on this machine, read-only: the kernel decides it, not a setting. */
function SandboxStatus() {
  const conn = useStore((s) => s.conn);
  const [report, setReport] = useState<SandboxReport>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    if (conn !== 'open') return;
    ollie.readSandbox().then(
      (t) => {
        setReport(JSON.parse(t) as SandboxReport);
        setError(undefined);
      },
      (e: unknown) => setError((e as Error).message),
    );
  }, [conn]);
  const unavailable =
    report && (report.yolo || report.abi === 0 || report.filter?.unavailable || report.capabilities?.unavailable);
  const row = (name: string, value: string | undefined) =>
    value ? (
      <>
        <dt>{name}</dt>
        <dd>{value}</dd>
      </>
    ) : null;
  return (
    <section className="cfg-file" aria-labelledby="sandbox-status-h" data-file="sandbox">
      <h3 id="sandbox-status-h">
        Sandbox on this machine <code className="dim">sandbox</code>
        {unavailable && <span className="tag">{report?.yolo ? 'off' : 'unavailable'}</span>}
      </h3>
      {error && (
        <p className="errmsg" role="alert">
          Cannot read sandbox: {error}
        </p>
      )}
      {report && (
        <>
          <p className={unavailable ? 'errmsg' : 'hint'} role="status">
            {report.summary}
          </p>
          {!report.yolo && (
            <dl className="sandbox-status">
              {row('Landlock', report.abi ? `ABI ${report.abi}: ${report.enforces.join(', ')}` : report.reason)}
              {row('System calls refused', report.filter?.refuses?.join(', ') ?? report.filter?.unavailable)}
              {row('Checked by argument', report.filter?.byArgument?.join(', '))}
              {row('Other ABIs refused', report.filter?.refusedAbis)}
              {row(
                'Capabilities dropped',
                report.capabilities &&
                  [...report.capabilities.drops, ...(report.capabilities.securebits ? ['securebits locked'] : [])].join(
                    ', ',
                  ),
              )}
              {row('Containment', report.containment?.join(', ') || undefined)}
              {row('Limits', report.limits?.join(', ') || undefined)}
            </dl>
          )}
        </>
      )}
    </section>
  );
}

export function Settings() {
  return (
    <section className="settings-view" aria-label="Settings">
      <h2>Settings</h2>
      <p className="hint">
        These are olliesrv&apos;s configuration files; any 9P client edits the same ones. A save is checked by the
        parser that reads the file and lands only when it parses.
      </p>
      <Appearance />
      <DefaultProfile />
      <p>
        <button type="button" onClick={() => useStore.setState({ view: 'setup' })}>
          Set up a backend…
        </button>{' '}
        <span className="hint">pick a provider, check it live, save it — no INI to write.</span>
      </p>
      <ConfigEditor
        file="backends.conf"
        title="LLM backends"
        hint="One INI section per backend (type, url, key, model); [default] names the default. Saved, it is reloaded at once. Keys show as •••••••• and are kept as they are unless you type a new one."
        emptyHint="No backends.conf yet: agents cannot answer until one backend is configured (Set up a backend…)."
      />
      <SandboxStatus />
      <ConfigEditor
        file="sandbox.yaml"
        title="Sandbox policy"
        hint="What tools may read, write and reach. Applies to tool servers started after the save (new sessions)."
        emptyHint="No sandbox.yaml in the config directory: the shipped default policy applies. Saving writes one."
      />
      <ConfigEditor
        file="mcp.json"
        title="MCP servers"
        hint='{"mcpServers": {NAME: {"command", "args", "env"} or {"type": "http"|"sse", "url", "headers"}}}; saved, running sessions restart their servers (docs/mcp.md).'
        emptyHint="No mcp.json: no MCP servers but the ones a trusted project .mcp.json declares."
      />
      <McpServers />
      <BypassRules />
    </section>
  );
}
