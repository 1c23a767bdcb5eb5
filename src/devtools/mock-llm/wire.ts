/** What the providers' wire protocols share: framed chunks, response ids, and the dialect a chat request is answered in. */
import type { Plan } from './script.js';

export const DEFAULT_MODELS = ['mock-model', 'mock-model-large'];

/** One HTTP body chunk: an SSE event or an NDJSON line, already framed. */
export type Frame = string;

export class Ids {
  private n = 0;
  next(prefix: string): string {
    return `${prefix}${(++this.n).toString().padStart(4, '0')}`;
  }
}

export const nowSec = (): number => Math.floor(Date.now() / 1000);
export const modelOf = (body: Record<string, unknown>): string =>
  typeof body.model === 'string' ? body.model : DEFAULT_MODELS[0]!;

export const sseData = (v: unknown): Frame => `data: ${typeof v === 'string' ? v : JSON.stringify(v)}\n\n`;

export const signatureOf = (thinking: string): string =>
  `mock-sig-${Buffer.from(thinking).toString('base64').slice(0, 16)}`;

/** How a provider words its errors, and what its streams are: the same for every request. */
export interface ErrorDialect {
  error(status: number, message: string | undefined, retryAfter: number | string | undefined): unknown;
  overflow(limit: number, actual?: number): unknown;
  /** The body of the 400 for a model without tool support. */
  toolUnsupported(model: string): unknown;
  streamError(message: string): Frame;
  contentType: string;
}

/** The provider's answer to one chat request. */
export interface Dialect extends ErrorDialect {
  stream(p: Plan): Frame[];
  json(p: Plan): unknown;
}
