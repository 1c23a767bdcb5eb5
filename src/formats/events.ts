/**
 * The `event` file: "topic payload" lines. Each kind of topic declares its payload as records (tab-separated,
 * escaped), so that a client reads an event's fields by name and a field with spaces or tabs round-trips.
 */
import { FormatError, type DeclaredFormat, type Input } from './format.js';
import { Records, type Row } from './records.js';

export interface EventKind {
  /** The topic with its variable segments as {session} and {agent}, e.g. session.{session}.agent.{agent}.state */
  readonly topic: string;
  readonly payload: Records;
}

export interface ParsedEvent {
  topic: string;
  /** The payload as written (escaped). */
  payload: string;
  /** session.{session}.… */
  session?: string;
  /** session.{session}.agent.{agent}.… */
  agent?: string;
  /** What happened: new, kill, rename, state, bypass.request, … */
  kind: string;
}

export class Events implements DeclaredFormat {
  readonly kind = 'events';
  constructor(readonly kinds: EventKind[]) {}

  /** The declared payload of a topic (by its kind and whether it is an agent's), if declared. */
  payloadOf(topic: string): Records | undefined {
    const e = this.split(topic, '');
    const pattern =
      e.agent !== undefined
        ? `session.{session}.agent.{agent}.${e.kind}`
        : e.session !== undefined
          ? `session.{session}.${e.kind}`
          : e.kind;
    return this.kinds.find((k) => k.topic === pattern)?.payload;
  }

  /** The payload of `topic` with these fields, as bus publishers write it. */
  payload(topic: string, fields: Readonly<Record<string, Input>> = {}): string {
    const p = this.payloadOf(topic);
    if (!p) throw new FormatError(`event topic ${topic} is not declared`);
    return p.formatRow(fields);
  }

  formatLine(topic: string, payload: Readonly<Record<string, Input>> = {}): string {
    const p = this.payloadOf(topic);
    if (!p) throw new FormatError(`event topic ${topic} is not declared`);
    const text = p.formatRow(payload);
    return text ? `${topic} ${text}` : topic;
  }

  /** A line cut into topic and payload, the topic's segments named. */
  split(line: string, payload?: string): ParsedEvent {
    const sp = line.indexOf(' ');
    const topic = sp === -1 ? line : line.slice(0, sp);
    const pl = payload ?? (sp === -1 ? '' : line.slice(sp + 1));
    const t = topic.split('.');
    if (t[0] === 'session' && t.length >= 3) {
      if (t[2] === 'agent' && t.length >= 5)
        return { topic, payload: pl, session: t[1], agent: t[3], kind: t.slice(4).join('.') };
      return { topic, payload: pl, session: t[1], kind: t.slice(2).join('.') };
    }
    return { topic, payload: pl, kind: topic };
  }

  /**
   * The payload's fields by name; undefined for a topic not declared (a newer daemon's) or a payload that does not
   * read as declared, so that one odd event never stops a client's handling of the stream.
   */
  fields(e: ParsedEvent): Row | undefined {
    const p = this.payloadOf(e.topic);
    if (!p) return undefined;
    if (!p.columns.length) return e.payload === '' ? {} : undefined;
    try {
      return p.parseRow(e.payload);
    } catch {
      return undefined;
    }
  }

  describe(): string {
    return `"topic payload" lines; payloads are tab-separated: ${this.kinds.map((k) => `${k.topic} [${k.payload.columns.map((c) => c.name).join(', ')}]`).join('; ')}.`;
  }
}
