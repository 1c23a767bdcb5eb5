/** A list shown as a table: a header row of column names, a row an item, or a hint when the list is empty. */
import type { ReactNode } from 'react';

export function ListTable<T>(p: {
  className: string;
  'aria-label'?: string;
  /** The header row; '' for a column without a name (e.g. of buttons). */
  columns: string[];
  items: T[];
  /** What the hint says when there are no items. */
  empty: string;
  /** An item's `<tr>`, with its key. */
  row: (item: T) => ReactNode;
}): ReactNode {
  if (p.items.length === 0) return <p className="hint">{p.empty}</p>;
  return (
    <table className={p.className} aria-label={p['aria-label']}>
      <thead>
        <tr>
          {p.columns.map((c, i) => (
            <th key={i}>{c}</th>
          ))}
        </tr>
      </thead>
      <tbody>{p.items.map(p.row)}</tbody>
    </table>
  );
}
