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
  /** The row it was opened on: focus goes back there when the menu closes. */
  row?: HTMLElement;
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
  return (
    <input
      ref={ref}
      className="rename"
      aria-label="New name"
      value={v}
      onChange={(e) => setV(e.target.value)}
      onKeyDown={key}
      onBlur={() => onDone()}
    />
  );
}

/** An idle agent whose last turn failed shows red, not green: idle says it can take a prompt, not that all went well. */
const failed = (a: AgentInfo): boolean => (a.state === 'idle' || !!a.ended) && a.last === 'error';
const dotOf = (a: AgentInfo): string => (failed(a) ? 'error' : a.state);
const dotTitle = (a: AgentInfo): string =>
  failed(a) ? `${a.ended ?? 'idle'}, last turn failed` : (a.ended ?? a.state);

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
  /** The row that holds the tree's one tab stop (roving tabindex): the last focused, else the selected, else the first. */
  const [current, setCurrent] = useState<string>();

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
    const row = e.currentTarget as HTMLElement;
    // A contextmenu event from the keyboard (Menu key) has no pointer position: open it at the row.
    if (e.clientX === 0 && e.clientY === 0) return openMenuAt(row, session, agent);
    setMenu({ x: e.clientX, y: e.clientY, session, agent, row });
  };
  /** Shift+F10 or the Menu key on a row: the menu under the row, its first item focused. */
  const openMenuAt = (row: HTMLElement, session: string, agent?: string): void => {
    const r = row.getBoundingClientRect();
    setMenu({ x: r.left + 16, y: r.bottom, session, agent, row });
  };
  const menuKey = (e: KeyboardEvent, session: string, agent?: string): boolean => {
    if (!((e.key === 'F10' && e.shiftKey) || e.key === 'ContextMenu')) return false;
    e.preventDefault();
    openMenuAt(e.currentTarget as HTMLElement, session, agent);
    return true;
  };
  /** Is this row's subtree folded? An ended agent's is, until opened: its own sub-agents are history. */
  const isCollapsed = (id: string, ended?: string): boolean => collapsed[id] ?? !!ended;
  const toggle = (id: string, ended?: string): void =>
    useStore.setState((s) => ({ collapsed: { ...s.collapsed, [id]: !(s.collapsed[id] ?? !!ended) } }));

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
  const selectedKey = selected.session
    ? selected.agent
      ? `${selected.session}/${selected.agent}`
      : selected.session
    : undefined;
  const rowKeys = order.flatMap((sid) => [
    sid,
    ...(collapsed[sid] ? [] : shownAgents(agents[sid] ?? []).map((a) => `${sid}/${a.id}`)),
  ]);
  const tabStop = [current, selectedKey].find((k) => k && rowKeys.includes(k)) ?? rowKeys[0];
  return (
    <nav
      className="tree"
      aria-label="Sessions"
      onKeyDown={(e) => {
        // Arrow keys move between rows (Home/End to the ends); Right expands a row, Left collapses it, or goes to
        // its parent row when it has nothing to collapse.
        const nodes = [...e.currentTarget.querySelectorAll<HTMLElement>('.node')];
        const at = nodes.indexOf(document.activeElement as HTMLElement);
        if (at === -1 || (e.target as HTMLElement).tagName === 'INPUT') return;
        const go = (i: number): void => nodes[Math.max(0, Math.min(nodes.length - 1, i))]?.focus();
        if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
          e.preventDefault();
          go(at + (e.key === 'ArrowDown' ? 1 : -1));
        } else if (e.key === 'Home' || e.key === 'End') {
          e.preventDefault();
          go(e.key === 'Home' ? 0 : nodes.length - 1);
        } else if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
          const row = nodes[at]!;
          const twisty = row.querySelector<HTMLButtonElement>('button.twisty');
          const expanded = row.getAttribute('aria-expanded');
          if (twisty && expanded === (e.key === 'ArrowLeft' ? 'true' : 'false')) {
            e.preventDefault();
            twisty.click();
          } else if (e.key === 'ArrowLeft') {
            const level = Number(row.getAttribute('aria-level'));
            for (let i = at - 1; i >= 0; i--) {
              if (Number(nodes[i]!.getAttribute('aria-level')) < level) {
                e.preventDefault();
                nodes[i]!.focus();
                break;
              }
            }
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
            <li key={sid} role="none" data-session={s.name}>
              <div
                className={`node session${selected.session === sid && !selected.agent ? ' selected' : ''}${s.paused ? ' paused' : ''}`}
                role="treeitem"
                aria-level={1}
                aria-expanded={list.length ? !collapsed[sid] : undefined}
                aria-selected={selected.session === sid && !selected.agent}
                aria-label={`${s.name}${s.remote ? `, on ${s.remote}${s.connected ? '' : ', not connected'}` : ''}${s.paused ? ', paused' : ''}${sPending ? `, ${sPending} approval(s) pending` : ''}`}
                tabIndex={tabStop === sid ? 0 : -1}
                onFocus={(e) => e.target === e.currentTarget && setCurrent(sid)}
                onClick={() => ollie.select({ session: sid })}
                onDoubleClick={() => setRenaming(sid)}
                onContextMenu={(e) => openMenu(e, sid)}
                onKeyDown={(e) => {
                  if (e.target !== e.currentTarget || menuKey(e, sid)) return;
                  if (e.key === 'F2') setRenaming(sid);
                  if (e.key === 'Enter') ollie.select({ session: sid });
                }}
              >
                <button
                  type="button"
                  className="twisty"
                  tabIndex={-1}
                  aria-label={collapsed[sid] ? 'Expand' : 'Collapse'}
                  onClick={(e) => (e.stopPropagation(), toggle(sid))}
                >
                  {list.length ? (collapsed[sid] ? '▸' : '▾') : '·'}
                </button>
                {sPending > 0 && (
                  <span className="warn" title={`${sPending} approval(s) pending`}>
                    ⚠
                  </span>
                )}
                {renaming === sid ? (
                  <Rename
                    value={s.name}
                    onDone={(v) => (setRenaming(undefined), v && void act('rename', () => ollie.renameSession(sid, v)))}
                  />
                ) : (
                  <span className="label">{s.name}</span>
                )}
                {s.remote && (
                  <span
                    className={`conn-dot${s.connected ? ' up' : ''}`}
                    data-testid="conn-dot"
                    title={`tools on ${s.remote}: ${s.connected ? 'connected' : 'not connected'}`}
                  >
                    ●
                  </span>
                )}
                {s.paused && <span className="tag">paused</span>}
                <button
                  type="button"
                  className="add"
                  tabIndex={-1}
                  title="New agent (Ctrl+Shift+N)"
                  aria-label={`New agent in ${s.name}`}
                  onClick={(e) => (
                    e.stopPropagation(),
                    useStore.setState({ dialog: { kind: 'new-agent', session: sid } })
                  )}
                >
                  +
                </button>
              </div>
              {!collapsed[sid] && list.length > 0 && (
                <ul role="group">
                  {list
                    .filter((a) => !hiddenBy(list, a))
                    .map((a) => {
                      const key = `${sid}/${a.id}`;
                      const hasKids = list.some((x) => x.parent === a.id);
                      const n = pendingOf(a, pending);
                      return (
                        <li
                          key={a.id}
                          role="none"
                          data-agent={a.name}
                          data-state={a.state}
                          data-last={a.last}
                          data-ended={a.ended}
                        >
                          <div
                            className={`node agent${a.ended ? ' is-ended' : ''}${selected.session === sid && selected.agent === a.id ? ' selected' : ''}`}
                            style={{ paddingLeft: `${1.2 + a.depth * 1}rem` }}
                            role="treeitem"
                            aria-level={2 + a.depth}
                            aria-expanded={hasKids ? !isCollapsed(a.id, a.ended) : undefined}
                            aria-selected={selected.session === sid && selected.agent === a.id}
                            aria-label={`${a.name}, ${dotTitle(a)}${n ? `, ${n} approval(s) pending` : ''}`}
                            tabIndex={tabStop === key ? 0 : -1}
                            onFocus={(e) => e.target === e.currentTarget && setCurrent(key)}
                            onClick={() => ollie.select({ session: sid, agent: a.id })}
                            onDoubleClick={() => setRenaming(key)}
                            onContextMenu={(e) => openMenu(e, sid, a.id)}
                            onKeyDown={(e) => {
                              if (e.target !== e.currentTarget || menuKey(e, sid, a.id)) return;
                              if (e.key === 'F2') setRenaming(key);
                              if (e.key === 'Enter') ollie.select({ session: sid, agent: a.id });
                            }}
                          >
                            {hasKids ? (
                              <button
                                type="button"
                                className="twisty"
                                tabIndex={-1}
                                aria-label="Toggle sub-agents"
                                onClick={(e) => (e.stopPropagation(), toggle(a.id, a.ended))}
                              >
                                {isCollapsed(a.id, a.ended) ? '▸' : '▾'}
                              </button>
                            ) : (
                              <span className="twisty" />
                            )}
                            {n > 0 && (
                              <span className="warn" title={`${n} approval(s) pending`}>
                                ⚠
                              </span>
                            )}
                            {renaming === key ? (
                              <Rename
                                value={a.name}
                                onDone={(v) => (
                                  setRenaming(undefined),
                                  v && void act('rename', () => ollie.renameAgent(sid, a.id, v))
                                )}
                              />
                            ) : (
                              <span className="label">{a.name}</span>
                            )}
                            {a.ended ? (
                              <span className="tag ended-tag" title={`${a.ended}; its history is read-only`}>
                                {a.ended}
                              </span>
                            ) : null}
                            <span
                              className={`dot state-${dotOf(a)}`}
                              title={dotTitle(a)}
                              aria-label={`state ${dotTitle(a)}`}
                            />
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
      {menu && <ContextMenu menu={menu} onRename={(k) => setRenaming(k)} onClose={() => setMenu(undefined)} />}
    </nav>
  );
}

/**
 * The row's menu. Its first item takes the focus (so it works from the keyboard as from the mouse): ↑/↓, Home/End
 * move, Enter or Space runs an item, Esc or Tab closes it and gives the focus back to the row.
 */
function ContextMenu({
  menu,
  onRename,
  onClose,
}: {
  menu: Menu;
  onRename: (key: string) => void;
  onClose: () => void;
}) {
  const s = useStore((st) => st.sessions[menu.session]);
  const list = useRef<HTMLUListElement>(null);
  useEffect(() => {
    list.current?.querySelector<HTMLElement>('[role="menuitem"]')?.focus();
  }, []);
  if (!s) return null;
  const path = menu.agent ? agentPath(menu.session, menu.agent) : sessionPath(menu.session);
  // An ended agent is a record: it can be read, not run, renamed or configured.
  const ended = menu.agent
    ? useStore.getState().agents[menu.session]?.find((a) => a.id === menu.agent)?.ended
    : undefined;
  const items: [string, () => void][] = ended
    ? [
        ['Open', () => ollie.select({ session: menu.session, agent: menu.agent })],
        ['Copy 9P path', () => void navigator.clipboard?.writeText(`/${path}`)],
      ]
    : menu.agent
      ? [
          ['Open', () => ollie.select({ session: menu.session, agent: menu.agent })],
          ['Rename', () => onRename(`${menu.session}/${menu.agent}`)],
          [
            'Settings…',
            () => useStore.setState({ dialog: { kind: 'agent-cfg', session: menu.session, agent: menu.agent! } }),
          ],
          ['Stop turn', () => void act('stop', () => ollie.agentCtl(menu.session, menu.agent!, 'stop'))],
          [
            'Kill agent…',
            () => useStore.setState({ dialog: { kind: 'confirm-kill', session: menu.session, agent: menu.agent! } }),
          ],
          ['Copy 9P path', () => void navigator.clipboard?.writeText(`/${path}`)],
        ]
      : [
          ['New agent…', () => useStore.setState({ dialog: { kind: 'new-agent', session: menu.session } })],
          ['Rename', () => onRename(menu.session)],
          [
            s.paused ? 'Resume' : 'Pause',
            () =>
              void act(s.paused ? 'resume' : 'pause', () =>
                ollie.sessionCtl(menu.session, s.paused ? 'resume' : 'pause'),
              ),
          ],
          ['Kill session…', () => useStore.setState({ dialog: { kind: 'confirm-kill', session: menu.session } })],
          ['Copy 9P path', () => void navigator.clipboard?.writeText(`/${path}`)],
        ];
  const close = (refocus: boolean): void => {
    onClose();
    if (refocus) menu.row?.focus();
  };
  const onKey = (e: KeyboardEvent<HTMLUListElement>): void => {
    const all = [...e.currentTarget.querySelectorAll<HTMLElement>('[role="menuitem"]')];
    const at = all.indexOf(document.activeElement as HTMLElement);
    const go = (i: number): void => all[(i + all.length) % all.length]?.focus();
    e.stopPropagation();
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      go(at + (e.key === 'ArrowDown' ? 1 : -1));
    } else if (e.key === 'Home' || e.key === 'End') {
      e.preventDefault();
      go(e.key === 'Home' ? 0 : all.length - 1);
    } else if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      const item = items[at];
      // Back to the row first: an item that opens a dialog takes the focus from there, and gives it back there.
      close(true);
      item?.[1]();
    } else if (e.key === 'Escape' || e.key === 'Tab') {
      e.preventDefault();
      close(true);
    }
  };
  return (
    <ul
      ref={list}
      className="menu"
      role="menu"
      aria-label={menu.agent ? 'Agent' : 'Session'}
      style={{ left: menu.x, top: menu.y }}
      onKeyDown={onKey}
    >
      {items.map(([label, run]) => (
        <li key={label} role="menuitem" tabIndex={-1} onClick={run}>
          {label}
        </li>
      ))}
    </ul>
  );
}
