/**
 * Sessions → agents → sub-agents, with a state dot per agent and ⚠ while an approval waits. Everything here
 * is live from the event stream. Double-click renames; right-click (or the Menu key) opens the context menu.
 */
import { useEffect, useRef, useState, type KeyboardEvent, type MouseEvent } from 'react';
import type { AgentInfo } from '../lib/parse.js';
import { act, agentPath, ollie, sessionPath, useStore } from '../lib/store.js';

interface Menu {
  x: number;
  y: number;
  session: string;
  agent?: string;
}

function Rename({ value, onDone }: { value: string; onDone: (v?: string) => void }) {
  const [v, setV] = useState(value);
  const ref = useRef<HTMLInputElement>(null);
  useEffect(() => {
    ref.current?.select();
  }, []);
  const key = (e: KeyboardEvent): void => {
    if (e.key === 'Enter') onDone(v.trim() && v.trim() !== value ? v.trim() : undefined);
    if (e.key === 'Escape') onDone();
    e.stopPropagation();
  };
  return <input ref={ref} className="rename" aria-label="New name" value={v} onChange={(e) => setV(e.target.value)} onKeyDown={key} onBlur={() => onDone()} />;
}

/** An idle agent whose last turn failed shows red, not green: idle says it can take a prompt, not that all went well. */
const failed = (a: AgentInfo): boolean => (a.state === 'idle' || !!a.ended) && a.last === 'error';
const dotOf = (a: AgentInfo): string => (failed(a) ? 'error' : a.state);
const dotTitle = (a: AgentInfo): string => (failed(a) ? `${a.ended ?? 'idle'}, last turn failed` : a.ended ?? a.state);

function pendingOf(agent: AgentInfo, pending: ReturnType<typeof useStore.getState>['pending']): number {
  return Object.values(pending).filter((p) => p.session === agent.session && p.agent === agent.id).length;
}

export function SessionTree() {
  const order = useStore((s) => s.sessionOrder);
  const sessions = useStore((s) => s.sessions);
  const agents = useStore((s) => s.agents);
  const pending = useStore((s) => s.pending);
  const selected = useStore((s) => s.selected);
  const collapsed = useStore((s) => s.collapsed);
  const [renaming, setRenaming] = useState<string>();
  const [menu, setMenu] = useState<Menu>();

  useEffect(() => {
    if (!menu) return;
    const close = (): void => setMenu(undefined);
    window.addEventListener('click', close);
    window.addEventListener('blur', close);
    return () => {
      window.removeEventListener('click', close);
      window.removeEventListener('blur', close);
    };
  }, [menu]);

  const openMenu = (e: MouseEvent, session: string, agent?: string): void => {
    e.preventDefault();
    setMenu({ x: e.clientX, y: e.clientY, session, agent });
  };
  /** Is this row's subtree folded? An ended agent's is, until opened: its own sub-agents are history. */
  const isCollapsed = (id: string, ended?: string): boolean => collapsed[id] ?? !!ended;
  const toggle = (id: string, ended?: string): void => useStore.setState((s) => ({ collapsed: { ...s.collapsed, [id]: !(s.collapsed[id] ?? !!ended) } }));

  /** Sub-agents hide with a collapsed parent. */
  const hiddenBy = (list: AgentInfo[], a: AgentInfo): boolean => {
    let p = a.parent;
    while (p) {
      const parent = list.find((x) => x.id === p);
      if (isCollapsed(p, parent?.ended)) return true;
      p = parent?.parent ?? '';
    }
    return false;
  };

  /**
   * What the tree shows of a session: its live agents, and the ended sub-agents under a parent it shows (finished
   * work stays where it happened). A killed top-level agent leaves the tree; Search still finds its history.
   */
  const shownAgents = (all: AgentInfo[]): AgentInfo[] => {
    const kept = new Set<string>();
    return all.filter((a) => {
      const keep = !a.ended || (a.depth > 0 && kept.has(a.parent));
      if (keep) kept.add(a.id);
      return keep;
    });
  };

  if (order.length === 0) return <div className="tree empty">No sessions yet. Create one with + (Ctrl+N).</div>;
  return (
    <nav
      className="tree"
      aria-label="Sessions"
      onKeyDown={(e) => {
        // Arrow keys move between rows, Left/Right collapse and expand (the twisty of the focused row).
        const nodes = [...e.currentTarget.querySelectorAll<HTMLElement>('.node')];
        const at = nodes.indexOf(document.activeElement as HTMLElement);
        if (at === -1 || (e.target as HTMLElement).tagName === 'INPUT') return;
        if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
          e.preventDefault();
          nodes[Math.max(0, Math.min(nodes.length - 1, at + (e.key === 'ArrowDown' ? 1 : -1)))]?.focus();
        } else if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
          const twisty = nodes[at]!.querySelector<HTMLButtonElement>('button.twisty');
          const open = twisty?.getAttribute('aria-label') === 'Collapse' || twisty?.textContent === '▾';
          if (twisty && open === (e.key === 'ArrowLeft')) {
            e.preventDefault();
            twisty.click();
          }
        }
      }}
    >
      <ul role="tree">
        {order.map((sid) => {
          const s = sessions[sid]!;
          const list = shownAgents(agents[sid] ?? []);
          const sPending = Object.values(pending).filter((p) => p.session === sid).length;
          return (
            <li key={sid} role="treeitem" aria-expanded={!collapsed[sid]} data-session={s.name}>
              <div
                className={`node session${selected.session === sid && !selected.agent ? ' selected' : ''}${s.paused ? ' paused' : ''}`}
                tabIndex={0}
                onClick={() => ollie.select({ session: sid })}
                onDoubleClick={() => setRenaming(sid)}
                onContextMenu={(e) => openMenu(e, sid)}
                onKeyDown={(e) => {
                  if (e.key === 'F2') setRenaming(sid);
                  if (e.key === 'Enter') ollie.select({ session: sid });
                }}
              >
                <button type="button" className="twisty" aria-label={collapsed[sid] ? 'Expand' : 'Collapse'} onClick={(e) => (e.stopPropagation(), toggle(sid))}>
                  {list.length ? (collapsed[sid] ? '▸' : '▾') : '·'}
                </button>
                {sPending > 0 && <span className="warn" title={`${sPending} approval(s) pending`}>⚠</span>}
                {renaming === sid ? (
                  <Rename value={s.name} onDone={(v) => (setRenaming(undefined), v && void act('rename', () => ollie.renameSession(sid, v)))} />
                ) : (
                  <span className="label">{s.name}</span>
                )}
                {s.paused && <span className="tag">paused</span>}
                <button type="button" className="add" title="New agent" aria-label={`New agent in ${s.name}`} onClick={(e) => (e.stopPropagation(), useStore.setState({ dialog: { kind: 'new-agent', session: sid } }))}>+</button>
              </div>
              {!collapsed[sid] && list.length > 0 && (
                <ul role="group">
                  {list.filter((a) => !hiddenBy(list, a)).map((a) => {
                    const key = `${sid}/${a.id}`;
                    const hasKids = list.some((x) => x.parent === a.id);
                    const n = pendingOf(a, pending);
                    return (
                      <li key={a.id} role="treeitem" data-agent={a.name} data-state={a.state} data-last={a.last} data-ended={a.ended}>
                        <div
                          className={`node agent${a.ended ? ' ended' : ''}${selected.session === sid && selected.agent === a.id ? ' selected' : ''}`}
                          style={{ paddingLeft: `${1.2 + a.depth * 1}rem` }}
                          tabIndex={0}
                          onClick={() => ollie.select({ session: sid, agent: a.id })}
                          onDoubleClick={() => setRenaming(key)}
                          onContextMenu={(e) => openMenu(e, sid, a.id)}
                          onKeyDown={(e) => {
                            if (e.key === 'F2') setRenaming(key);
                            if (e.key === 'Enter') ollie.select({ session: sid, agent: a.id });
                          }}
                        >
                          {hasKids ? (
                            <button type="button" className="twisty" aria-label="Toggle sub-agents" onClick={(e) => (e.stopPropagation(), toggle(a.id, a.ended))}>
                              {isCollapsed(a.id, a.ended) ? '▸' : '▾'}
                            </button>
                          ) : (
                            <span className="twisty" />
                          )}
                          {n > 0 && <span className="warn" title={`${n} approval(s) pending`}>⚠</span>}
                          {renaming === key ? (
                            <Rename value={a.name} onDone={(v) => (setRenaming(undefined), v && void act('rename', () => ollie.renameAgent(sid, a.id, v)))} />
                          ) : (
                            <span className="label">{a.name}</span>
                          )}
                          {a.ended ? (
                            <span className="tag ended" title={`${a.ended}; its history is read-only`}>
                              {a.ended}
                            </span>
                          ) : null}
                          <span className={`dot state-${dotOf(a)}`} title={dotTitle(a)} aria-label={`state ${dotTitle(a)}`} />
                        </div>
                      </li>
                    );
                  })}
                </ul>
              )}
            </li>
          );
        })}
      </ul>
      {menu && <ContextMenu menu={menu} onRename={(k) => setRenaming(k)} />}
    </nav>
  );
}

function ContextMenu({ menu, onRename }: { menu: Menu; onRename: (key: string) => void }) {
  const s = useStore((st) => st.sessions[menu.session]);
  if (!s) return null;
  const path = menu.agent ? agentPath(menu.session, menu.agent) : sessionPath(menu.session);
  const items: [string, () => void][] = menu.agent
    ? [
        ['Open', () => ollie.select({ session: menu.session, agent: menu.agent })],
        ['Rename', () => onRename(`${menu.session}/${menu.agent}`)],
        ['Settings…', () => useStore.setState({ dialog: { kind: 'agent-cfg', session: menu.session, agent: menu.agent! } })],
        ['Stop turn', () => void act('stop', () => ollie.agentCtl(menu.session, menu.agent!, 'stop'))],
        ['Kill agent…', () => useStore.setState({ dialog: { kind: 'confirm-kill', session: menu.session, agent: menu.agent! } })],
        ['Copy 9P path', () => void navigator.clipboard?.writeText(`/${path}`)],
      ]
    : [
        ['New agent…', () => useStore.setState({ dialog: { kind: 'new-agent', session: menu.session } })],
        ['Rename', () => onRename(menu.session)],
        [s.paused ? 'Resume' : 'Pause', () => void act(s.paused ? 'resume' : 'pause', () => ollie.sessionCtl(menu.session, s.paused ? 'resume' : 'pause'))],
        ['Kill session…', () => useStore.setState({ dialog: { kind: 'confirm-kill', session: menu.session } })],
        ['Copy 9P path', () => void navigator.clipboard?.writeText(`/${path}`)],
      ];
  return (
    <ul className="menu" role="menu" style={{ left: menu.x, top: menu.y }}>
      {items.map(([label, run]) => (
        <li key={label} role="menuitem" tabIndex={-1} onClick={run}>
          {label}
        </li>
      ))}
    </ul>
  );
}
