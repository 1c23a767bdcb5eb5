/**
 * How the HTTP gateway renders files as JSON. The 9P namespace serves text; the formats below are what the files'
 * doc strings promise, and each is turned into JSON only when the content parses as promised (otherwise the text
 * goes out as it is). The table is keyed by the declared path patterns; test/gateway checks every key against the
 * declared tree, so a renamed file cannot leave a stale entry behind.
 */
export type Format =
  /** Tab-separated records, one per line; fields beyond the last column stay in the last one. */
  | { kind: 'tsv'; columns: string[] }
  /** key=value lines; blank lines and # comments are skipped. */
  | { kind: 'kv' }
  /** One JSON value. */
  | { kind: 'json' }
  /** One JSON value per line (the chat log). */
  | { kind: 'jsonl' }
  /** "topic payload" lines (the event file). */
  | { kind: 'events' }
  /** One item per line. */
  | { kind: 'lines' }
  /** A status word on the first line, then optional summary lines (goalstatus). */
  | { kind: 'status' };

const tsv = (...columns: string[]): Format => ({ kind: 'tsv', columns });
const A = '/session/{session}/agent/{agent}';

/** The formats of olliesrv's files (src/olliesrv/fs/spec.ts), by pattern. */
export const OLLIESRV_FORMATS: Readonly<Record<string, Format>> = {
  '/backends': tsv('name', 'type', 'url', 'model'),
  '/models': tsv('backend', 'model', 'context', 'error'),
  '/config/providers': tsv('id', 'label', 'type', 'url', 'key_env', 'key'),
  '/config/check': tsv('model', 'context'),
  '/agents': { kind: 'lines' },
  '/event': { kind: 'events' },
  '/session/idx': tsv('id', 'name', 'paused', 'connected', 'remote', 'cwd'),
  '/session/{session}/env': { kind: 'kv' },
  '/bypassrules': tsv('id', 'tool', 'kind', 'rule', 'scope', 'created'),
  '/session/{session}/bypass': tsv('id', 'agent', 'tool', 'cwd', 'cmd', 'reason', 'remember', 'rule'),
  '/session/{session}/goalstatus': { kind: 'status' },
  '/session/{session}/goalwait': { kind: 'status' },
  '/session/{session}/agent/idx': tsv('session', 'id', 'name', 'parent', 'depth', 'state', 'last'),
  '/session/{session}/ended/idx': tsv('session', 'id', 'name', 'parent', 'depth', 'ended', 'how', 'last'),
  '/session/{session}/ended/{ended}/log.raw': { kind: 'jsonl' },
  '/session/{session}/ended/{ended}/block': { kind: 'json' },
  [`${A}/queue`]: { kind: 'json' },
  [`${A}/log.raw`]: { kind: 'jsonl' },
  [`${A}/log.from`]: { kind: 'jsonl' },
  [`${A}/block`]: { kind: 'json' },
  [`${A}/cfg`]: { kind: 'kv' },
  [`${A}/stats`]: { kind: 'kv' },
};

const lines = (text: string): string[] => text.split('\n').filter((l) => l !== '');

/** One line of a line-oriented format as JSON (streams render line by line). */
export function renderLine(f: Format, line: string): unknown {
  switch (f.kind) {
    case 'jsonl':
      return JSON.parse(line) as unknown;
    case 'events': {
      const sp = line.indexOf(' ');
      return sp === -1 ? { topic: line, payload: '' } : { topic: line.slice(0, sp), payload: line.slice(sp + 1) };
    }
    case 'tsv': {
      const fields = line.split('\t');
      const cols = f.columns;
      const o: Record<string, string> = {};
      for (let i = 0; i < Math.min(fields.length, cols.length); i++) o[cols[i]!] = fields[i]!;
      if (fields.length > cols.length) o[cols[cols.length - 1]!] = fields.slice(cols.length - 1).join('\t');
      return o;
    }
    default:
      return line;
  }
}

/** The whole content as JSON, or undefined when it does not parse as the format says (it then goes out as text). */
export function render(f: Format, text: string): unknown {
  try {
    switch (f.kind) {
      case 'json':
        return JSON.parse(text) as unknown;
      case 'kv': {
        const o: Record<string, string> = {};
        for (const l of lines(text)) {
          if (l.trimStart().startsWith('#')) continue;
          const eq = l.indexOf('=');
          if (eq < 1) return undefined;
          o[l.slice(0, eq).trim()] = l.slice(eq + 1);
        }
        return o;
      }
      case 'status': {
        const [status = '', ...rest] = text.split('\n');
        return { status: status.trim(), summary: rest.join('\n').trim() };
      }
      default:
        return lines(text).map((l) => renderLine(f, l));
    }
  } catch {
    return undefined;
  }
}

/** Whether a stream of this format is cut into lines (each rendered as JSON) rather than passed through as bytes. */
export const lineFormat = (f: Format | undefined): boolean => f !== undefined && ['jsonl', 'events', 'tsv', 'lines'].includes(f.kind);
