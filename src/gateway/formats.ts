/**
 * How the HTTP gateway renders files as JSON. The 9P namespace serves text; each file's format is declared on its
 * Leaf (src/formats, put there by the daemon's spec) and found on the declared tree, so the gateway reads every file
 * through the same declaration the daemon writes it with: one JSON key per column or declared key. Content that does
 * not parse as declared goes out as text.
 */
import type { DeclaredNode } from '../ninep/index.js';
import type { AnyFormat } from '../formats/index.js';

export type Format = AnyFormat;

/** The declared formats of a namespace's files, by path pattern (internal files left out, as the gateway does). */
export function formatsOf(root: DeclaredNode): Record<string, Format> {
  const out: Record<string, Format> = {};
  const visit = (n: DeclaredNode): void => {
    if (n.internal) return;
    if (n.format) out[n.pattern] = n.format as Format;
    for (const c of n.children) visit(c);
  };
  visit(root);
  return out;
}

/** One line of a line-oriented format as JSON (streams render line by line). */
export function renderLine(f: Format, line: string): unknown {
  switch (f.kind) {
    case 'jsonl':
      return f.parseLine(line);
    case 'events': {
      const e = f.split(line);
      return { topic: e.topic, payload: f.fields(e) ?? e.payload };
    }
    case 'tsv':
      return f.parseRow(line);
    default:
      return line;
  }
}

/** The whole content as JSON, or undefined when it does not parse as the format says (it then goes out as text). */
export function render(f: Format, text: string): unknown {
  try {
    switch (f.kind) {
      case 'json':
      case 'jsonl':
      case 'tsv':
      case 'kv':
      case 'env':
      case 'lines':
      case 'status':
        return f.parse(text);
      case 'events':
        return text
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => renderLine(f, l));
      default:
        return undefined;
    }
  } catch {
    return undefined;
  }
}

/** Whether a stream of this format is cut into lines (each rendered as JSON) rather than passed through as bytes. */
export const lineFormat = (f: Format | undefined): boolean =>
  f !== undefined && ['jsonl', 'events', 'tsv', 'lines'].includes(f.kind);
