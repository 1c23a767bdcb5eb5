/**
 * An agent's `checkpoint/` directory (docs/checkpoints.md), declared here and mounted by spec.ts.
 *
 * Who may reach it: the owner reads everything and marks files reviewed (rewinding is `ctl rewind ID`, which
 * only the owner may give); a session's workflow reads; an agent reads its own `idx`, `info`, `files` and
 * `diff` (what its rounds changed, in files its sandbox let it write), never another agent's, and writes
 * nothing here.
 */
import * as F from '../../formats/olliesrv.js';
import { Dir, Each, Leaf, NinepError, type ContentFormat, type Ctx } from '../../ninep/index.js';
import type { Agent } from '../agent/agent.js';
import { onAgent, type Scope } from '../auth/access.js';
import type { Checkpoints } from '../checkpoint/service.js';

const reads = ['walk', 'read'] as const;

function guard<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw e instanceof NinepError ? e : new NinepError((e as Error).message);
  }
}

/** An async handler's errors as 9P errors. */
async function settle(fn: () => Promise<string>): Promise<string> {
  try {
    return await fn();
  } catch (e) {
    throw e instanceof NinepError ? e : new NinepError((e as Error).message);
  }
}

export function checkpointDir(checkpoints: Checkpoints | undefined, ag: (ctx: Ctx) => Agent, scope: Scope) {
  const cp = (): Checkpoints => {
    if (!checkpoints) throw new NinepError('checkpoints are off in this daemon');
    return checkpoints;
  };
  const selfReads = onAgent(scope, { session: reads, agent: { self: reads } });
  const ownerOnly = onAgent(scope, { session: reads, agent: {} });
  /** A file of one checkpoint, computed when read, that the agent may read too. */
  const roundLeaf = (
    name: string,
    doc: string,
    format: ContentFormat,
    read: (c: Checkpoints, a: Agent, id: string) => Promise<string>,
  ) =>
    Leaf(name, {
      doc,
      format,
      access: selfReads,
      blockOnce: (ctx) => settle(() => read(cp(), ag(ctx), ctx.params.checkpoint!)),
    });
  return Dir(
    'checkpoint',
    {
      doc: "Checkpoints of the agent's writable roots, taken around each tool round that can write. ctl rewind ID restores one.",
      access: selfReads,
    },
    Leaf('idx', {
      doc: 'One line per checkpoint, oldest first, tab-separated: id, turn, time (ISO 8601), files changed by its round, bytes it added to the store. A rewind is a checkpoint too (listed last): rewinding to it undoes it.',
      format: F.CHECKPOINT_IDX,
      access: selfReads,
      read: (ctx) => guard(() => cp().idx(ag(ctx))),
    }),
    Each(
      'checkpoint',
      {
        doc: 'One checkpoint, by id.',
        access: selfReads,
        list: (ctx) => (checkpoints ? checkpoints.list(ag(ctx)).map((c) => String(c.id)) : []),
        has: (ctx, id) => !!checkpoints && checkpoints.list(ag(ctx)).some((c) => String(c.id) === id),
      },
      Leaf('info', {
        doc: 'key=value: id, turn, time, kind (round or rewind), changed, bytes, done (1 once its round ended), target and note (a rewind), reviewed (how many files are marked).',
        format: F.CHECKPOINT_INFO,
        access: selfReads,
        read: (ctx) => guard(() => cp().info(ag(ctx), ctx.params.checkpoint!)),
      }),
      roundLeaf(
        'files',
        'The files its round changed, one per line: A (added), D (deleted), M (modified) or T (type changed), a tab, the path (relative to the working directory when inside it); a directory tracked as a whole (checkpoint.whole) is one line, "DIR/ (whole: N files changed, M bytes)".',
        F.CHECKPOINT_FILES,
        (c, a, id) => c.files(a, id),
      ),
      roundLeaf(
        'diff',
        'What its round changed as a unified diff, file by file (binary and large files as one line, a directory tracked as a whole as a summary).',
        F.TEXT('a unified diff, file by file'),
        (c, a, id) => c.diff(a, id),
      ),
      Leaf('reviewed', {
        doc: "The paths the owner marked reviewed, one per line. Write PATH (or +PATH) to mark, -PATH to unmark. The owner's.",
        format: F.REVIEWED,
        access: ownerOnly,
        read: (ctx) => guard(() => cp().reviewed(ag(ctx), ctx.params.checkpoint!)),
        write: async (ctx, data) => {
          try {
            await cp().markReviewed(ag(ctx), ctx.params.checkpoint!, new TextDecoder().decode(data));
          } catch (e) {
            throw e instanceof NinepError ? e : new NinepError((e as Error).message);
          }
        },
      }),
    ),
  );
}
