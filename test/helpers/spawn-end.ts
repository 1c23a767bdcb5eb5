/**
 * The end of a process started through the spawner's client (src/platform/spawner.ts), as its handlers hear it:
 * its exit and the end of its output, in either order, or its loss; each noted in `events` as the tests compare
 * them (`exit CODE SIGNAL[ LIMIT]`, `closed`, `lost WHY`).
 */
import type { SpawnedHandlers } from '../../src/platform/spawner.js';

/** The handlers, and `ended`: resolved once both the exit and the end of output came, or the process was lost. */
export function endOf(events: string[]): {
  ended: Promise<void>;
  handlers: Pick<SpawnedHandlers, 'exited' | 'closed' | 'lost'>;
} {
  let resolveEnd!: () => void;
  const ended = new Promise<void>((resolve) => (resolveEnd = resolve));
  let exited = false;
  let closed = false;
  return {
    ended,
    handlers: {
      exited: (code, signal, limit) => {
        events.push(`exit ${code} ${signal}${limit ? ` ${limit}` : ''}`);
        exited = true;
        if (closed) resolveEnd();
      },
      closed: () => {
        events.push('closed');
        closed = true;
        if (exited) resolveEnd();
      },
      lost: (why) => {
        events.push(`lost ${why}`);
        resolveEnd();
      },
    },
  };
}
