/**
 * The bypass queue: a call that asks to run outside the sandbox waits here until a person approves or denies
 * it (through olliesrv, which follows bypass/pending and writes bypass/resolve). There is no timeout: a
 * request leaves the queue only when it is resolved or its call is cancelled, and both are announced on the
 * feed so every follower drops it. Remembering approvals is olliesrv's business (it auto-approves); the
 * remember argument of a resolution is accepted here and only logged.
 */
import { Feed } from '../../platform/queue.js';
import type { BypassRequest, BypassResolution } from '../protocol.js';

interface Waiting {
  req: BypassRequest;
  settle: (approved: boolean) => void;
}

export class BypassBroker {
  private readonly waiting = new Map<string, Waiting>();
  private readonly feed = new Feed<string>();
  private next = 1;

  constructor(private readonly log: (m: string) => void = () => undefined) {}

  /** Queues a request and waits for its resolution: true when approved. Rejects when `signal` aborts. */
  request(req: Omit<BypassRequest, 'id'>, signal: AbortSignal): Promise<boolean> {
    signal.throwIfAborted();
    const full: BypassRequest = { id: String(this.next++), ...req };
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        if (!this.waiting.delete(full.id)) return;
        this.announce({ id: full.id, agent: full.agent, resolved: 'cancelled' });
        reject(signal.reason as Error);
      };
      this.waiting.set(full.id, {
        req: full,
        settle: (ok) => {
          signal.removeEventListener('abort', onAbort);
          resolve(ok);
        },
      });
      signal.addEventListener('abort', onAbort, { once: true });
      this.feed.push(`${JSON.stringify(full)}\n`);
    });
  }

  /** Applies a `ID approve|deny [remember]` line. Throws for an unknown id or a bad decision. */
  resolveLine(line: string): void {
    const [id, decision, remember, ...rest] = line.trim().split(/\s+/);
    if (!id || (decision !== 'approve' && decision !== 'deny') || rest.length) {
      throw new Error(`expected "ID approve|deny [once|session|always]", got ${JSON.stringify(line.trim())}`);
    }
    this.resolve(id, decision, remember);
  }

  resolve(id: string, decision: 'approve' | 'deny', remember?: string): void {
    const w = this.waiting.get(id);
    if (!w) throw new Error(`no pending bypass request ${id} (resolved already, or its call was cancelled)`);
    this.waiting.delete(id);
    this.log(
      `bypass ${id} (${w.req.agent}: ${w.req.cmd}) ${decision === 'approve' ? 'approved' : 'denied'}${remember ? ` [${remember}]` : ''}`,
    );
    this.announce({ id, agent: w.req.agent, resolved: decision });
    w.settle(decision === 'approve');
  }

  private announce(r: BypassResolution): void {
    this.feed.push(`${JSON.stringify(r)}\n`);
  }

  pending(): BypassRequest[] {
    return [...this.waiting.values()].map((w) => w.req);
  }

  /** bypass/pending: every request still waiting, then new requests and resolutions as they happen. */
  follow(signal: AbortSignal): AsyncGenerator<string> {
    return this.feed.follow(signal, () => this.pending().map((r) => `${JSON.stringify(r)}\n`));
  }

  close(): void {
    this.feed.close();
  }
}
