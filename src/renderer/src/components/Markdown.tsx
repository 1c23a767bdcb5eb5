/**
 * Markdown for assistant text, rendered straight to React elements (never an HTML string), so model output
 * can never inject markup. Covers what models write: headings, paragraphs, lists, block quotes, fenced code
 * (highlighted lazily), rules, tables (GitHub's pipe tables, with column alignment), inline code, bold, italics,
 * links and bare URLs. A link opens outside the app (a new window the browser, or Electron's main process, hands
 * to the system browser) and only for http(s) and mailto targets: `javascript:`, `data:`, `file:` and relative
 * targets stay plain text, so a model's reply can never run code or navigate the app.
 */
import { memo, type ReactNode } from 'react';
import { Code } from './Code.js';

/** The target of a link if it is one we open (http, https, mailto), else undefined. */
export function safeHref(target: string): string | undefined {
  try {
    const u = new URL(target);
    return u.protocol === 'http:' || u.protocol === 'https:' || u.protocol === 'mailto:' ? u.href : undefined;
  } catch {
    return undefined;
  }
}

function Link({ href, children }: { href: string; children: ReactNode }) {
  const safe = safeHref(href);
  if (!safe)
    return (
      <span className="link-text" title={href}>
        {children}
      </span>
    );
  return (
    <a href={safe} target="_blank" rel="noopener noreferrer" title={safe}>
      {children}
    </a>
  );
}

function inline(text: string, key = 0): ReactNode[] {
  const out: ReactNode[] = [];
  const re =
    /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"])/g;
  let last = 0;
  let k = key;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[2] !== undefined) out.push(<code key={k++}>{m[2]}</code>);
    else if (m[3] !== undefined || m[4] !== undefined)
      out.push(<strong key={k++}>{inline(m[3] ?? m[4]!, k * 100)}</strong>);
    else if (m[5] !== undefined || m[6] !== undefined) out.push(<em key={k++}>{inline(m[5] ?? m[6]!, k * 100)}</em>);
    else if (m[7] !== undefined)
      out.push(
        <Link key={k++} href={m[8]!}>
          {inline(m[7], k * 100)}
        </Link>,
      );
    else if (m[9] !== undefined)
      out.push(
        <Link key={k++} href={m[9]}>
          {m[9]}
        </Link>,
      );
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/** The cells of a `| a | b |` row (a backslash-escaped pipe stays in its cell). */
function cells(row: string): string[] {
  const body = row
    .trim()
    .replace(/^\|/, '')
    .replace(/(?<!\\)\|$/, '');
  return body.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
}

const isRule = (row: string): boolean => cells(row).every((c) => /^:?-{1,}:?$/.test(c));

/** A pipe table: a header row, a `---|:---:` rule giving alignment, body rows. Without the rule, all rows are body. */
function Table({ rows }: { rows: string[] }) {
  const ruled = rows.length >= 2 && isRule(rows[1]!);
  const head = ruled ? cells(rows[0]!) : undefined;
  const align = ruled
    ? cells(rows[1]!).map((c) =>
        c.startsWith(':') && c.endsWith(':')
          ? 'center'
          : c.endsWith(':')
            ? 'right'
            : c.startsWith(':')
              ? 'left'
              : undefined,
      )
    : [];
  const body = (ruled ? rows.slice(2) : rows).map(cells);
  return (
    <div className="table-wrap">
      <table>
        {head && (
          <thead>
            <tr>
              {head.map((c, j) => (
                <th key={j} style={{ textAlign: align[j] }}>
                  {inline(c)}
                </th>
              ))}
            </tr>
          </thead>
        )}
        <tbody>
          {body.map((r, i) => (
            <tr key={i}>
              {r.map((c, j) => (
                <td key={j} style={{ textAlign: align[j] }}>
                  {inline(c)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export const Markdown = memo(function Markdown({ text, streaming }: { text: string; streaming?: boolean }) {
  const lines = text.split('\n');
  const out: ReactNode[] = [];
  let i = 0;
  let k = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = /^\s*(```+|~~~+)\s*([\w+#.-]*)/.exec(line);
    if (fence) {
      const close = fence[1]!;
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i]!.trim().startsWith(close)) body.push(lines[i++]!);
      const open = i >= lines.length;
      i++;
      out.push(<Code key={k++} code={body.join('\n')} format={fence[2] || undefined} streaming={streaming && open} />);
      continue;
    }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) {
      const level = Math.min(h[1]!.length + 2, 6);
      const H = `h${level}` as 'h3';
      out.push(<H key={k++}>{inline(h[2]!)}</H>);
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      out.push(<hr key={k++} />);
      i++;
      continue;
    }
    if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const items: string[] = [];
      while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i]!)) {
        let item = lines[i]!.replace(/^\s*([-*+]|\d+[.)])\s+/, '');
        i++;
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]!) && !/^\s*([-*+]|\d+[.)])\s+/.test(lines[i]!))
          item += ` ${lines[i++]!.trim()}`;
        items.push(item);
      }
      const L = ordered ? 'ol' : 'ul';
      out.push(
        <L key={k++}>
          {items.map((it, j) => (
            <li key={j}>{inline(it.replace(/^\[( |x)\]\s*/i, (_m, x: string) => (x === ' ' ? '☐ ' : '☑ ')))}</li>
          ))}
        </L>,
      );
      continue;
    }
    if (/^\s*>/.test(line)) {
      const q: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i]!)) q.push(lines[i++]!.replace(/^\s*>\s?/, ''));
      out.push(<blockquote key={k++}>{inline(q.join(' '))}</blockquote>);
      continue;
    }
    if (/^\s*\|.*\|\s*$/.test(line)) {
      const rows: string[] = [];
      while (i < lines.length && /^\s*\|/.test(lines[i]!)) rows.push(lines[i++]!);
      out.push(<Table key={k++} rows={rows} />);
      continue;
    }
    if (line.trim() === '') {
      i++;
      continue;
    }
    const para: string[] = [];
    while (
      i < lines.length &&
      lines[i]!.trim() !== '' &&
      !/^\s*(```|~~~|#{1,6}\s|>|[-*+]\s|\d+[.)]\s|\|)/.test(lines[i]!)
    )
      para.push(lines[i++]!);
    if (para.length === 0) para.push(lines[i++]!);
    out.push(<p key={k++}>{inline(para.join('\n'))}</p>);
  }
  return <div className="md">{out}</div>;
});
