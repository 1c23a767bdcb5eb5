/** A panel docked at the right of the chat (processes, review): a titled header with a close button. */
import type { ReactNode } from 'react';

export function SidePanel(p: {
  /** The panel's class, for its own parts' styles. */
  className: string;
  title: string;
  /** What follows the title in the header. */
  detail?: ReactNode;
  /** The close button's tooltip (e.g. with its shortcut). */
  closeTitle: string;
  onClose: () => void;
  children: ReactNode;
}): ReactNode {
  return (
    <aside className={`side-panel ${p.className}`} aria-label={p.title}>
      <header>
        <b>{p.title}</b>
        {p.detail}
        <button type="button" aria-label={`Close ${p.title.toLowerCase()}`} title={p.closeTitle} onClick={p.onClose}>
          ✕
        </button>
      </header>
      {p.children}
    </aside>
  );
}
