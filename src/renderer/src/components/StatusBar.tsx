/** Backend/model, tokens, context % (split by part on hover), last-turn and session cost, compaction, connection. From `stats` and `cfg`. */
import { ollie, selectedAgent, useStore } from '../lib/store.js';

const num = (v: string | undefined): string =>
  v === undefined || v === '' ? '–' : Number.isFinite(Number(v)) ? Number(v).toLocaleString() : v;
const money = (v: string | undefined): string =>
  v === undefined || v === '' || !Number.isFinite(Number(v)) ? '–' : `$${Number(v).toFixed(4)}`;

/** The next request by part, as `stats` splits it (olliesrv's token account), for the tooltip. */
function contextSplit(stats: Record<string, string>): string {
  if (stats.context_system === undefined) return 'context estimate / context length';
  const parts: Array<[string, string]> = [
    ['system prompt', 'context_system'],
    ['tool schemas', 'context_tools'],
    ['history', 'context_history'],
    ['skills and hints', 'context_skills'],
    ['attachments', 'context_attachments'],
  ];
  return `next request ~${num(stats.context_estimate)} tokens of a ${num(stats.context_length)}-token window:\n${parts.map(([label, k]) => `${label} ${num(stats[k])}`).join('\n')}\n(counted tokens; × ${stats.estimate_factor ?? '1'} from the provider's reports)`;
}

export function StatusBar() {
  const conn = useStore((s) => s.conn);
  const err = useStore((s) => s.connError);
  const retry = useStore((s) => s.retryIn);
  const daemon = useStore((s) => s.daemon);
  const stats = useStore((s) => s.stats);
  const cfg = useStore((s) => s.cfg);
  const agent = useStore(selectedAgent);
  const pending = useStore((s) => Object.keys(s.pending).length);
  const backends = useStore((s) => s.backends);
  const pct = stats.percent ?? stats.context_percent;
  // What the next request uses: an agent whose backend is no longer configured follows the default (with its model).
  const own = backends.some((b) => b.name === cfg.backend);
  const backend = (own ? cfg.backend : backends.find((b) => b.isDefault)?.name) || '';
  // An empty model means the backend's default one.
  const model = (own && cfg.model) || backends.find((b) => b.name === backend)?.model || '';
  return (
    <footer className="status" role="status">
      <span className={`conn conn-${conn}`} data-testid="conn">
        {conn === 'open'
          ? '● connected'
          : conn === 'connecting'
            ? '○ connecting…'
            : `✕ daemon unreachable${err ? ` (${err})` : ''}${retry ? `, retrying in ${retry}s` : ''}`}
      </span>
      <button
        type="button"
        data-testid="daemon"
        title="The daemon this window talks to: Connect to…"
        onClick={() => useStore.setState({ dialog: { kind: 'connect-to' } })}
      >
        {daemon ? `on ${daemon.slice(4)}` : 'on this machine'}
      </button>
      {conn === 'down' && (
        <button type="button" onClick={() => ollie.reconnectNow()}>
          Reconnect now
        </button>
      )}
      {agent && (
        <>
          <span title="backend / model">
            {backend || '–'} / {model || '–'}
          </span>
          <span title="input / output / cached tokens">
            tokens {num(stats.input_tokens ?? stats.input)} in · {num(stats.output_tokens ?? stats.output)} out ·{' '}
            {num(stats.cached_tokens ?? stats.cached)} cached
          </span>
          <span title={contextSplit(stats)} data-testid="context">
            context {pct !== undefined ? `${pct}%` : '–'}
            {stats.context_estimate !== undefined &&
              ` · ~${num(stats.context_estimate)} of ${num(stats.context_length)}`}
            {pct !== undefined && <meter min={0} max={100} value={Number(pct) || 0} low={60} high={75} optimum={10} />}
          </span>
          <span title="cost of the last turn / the session">
            cost {money(stats.cost_last_turn ?? stats.cost_turn)} turn · {money(stats.cost_session ?? stats.cost)}{' '}
            session
          </span>
          {agent.state === 'compacting' && <span className="compacting">compacting…</span>}
        </>
      )}
      {pending > 0 && (
        <button
          type="button"
          className="warn"
          onClick={() => useStore.setState((s) => ({ approving: s.approving ?? Object.keys(s.pending)[0] }))}
        >
          ⚠ {pending} pending approval{pending > 1 ? 's' : ''}
        </button>
      )}
    </footer>
  );
}
