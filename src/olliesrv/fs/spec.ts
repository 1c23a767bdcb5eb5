/**
 * The olliesrv namespace, declared once. Every file the daemon serves is a line here; `help` is generated
 * from the doc strings. Handlers are one-liners into the objects that own the data.
 */
import { build, Dir, Each, Leaf, NinepError, type Namespace } from '../../ninep/index.js';
import { compileFilter, type EventBus } from '../event/bus.js';
import type { Sessions } from '../session/registry.js';
import { parseKeyValues, splitCommand } from './kv.js';

export interface Olliesrv {
  sessions: Sessions;
  bus: EventBus;
  /** Names of the configured LLM backends. */
  backends: () => string[];
}

const SESSION_KEYS = ['name', 'cwd'] as const;

function sessionCtl(o: Olliesrv, name: string, request: string): string {
  const { cmd, args } = splitCommand(request);
  const commands: Record<string, () => string> = {
    kill: () => (o.sessions.kill(name), 'killed\n'),
    save: () => (o.sessions.save(), 'saved\n'),
    pause: () => (o.sessions.setPaused(name, true), 'paused\n'),
    resume: () => (o.sessions.setPaused(name, false), 'resumed\n'),
  };
  const run = commands[cmd];
  if (!run) throw new NinepError(`unknown command ${JSON.stringify(cmd)}; known commands: ${Object.keys(commands).join(', ')}`);
  if (args) throw new NinepError(`${cmd} takes no arguments`);
  return run();
}

export function olliesrvNamespace(o: Olliesrv, owner: string): Namespace {
  const { sessions } = o;
  const s = (ctx: { params: Readonly<Record<string, string>> }) => sessions.get(ctx.params.session!);
  return build(
    Dir('/',
      Leaf('backends', { doc: 'Names of the configured LLM backends, one per line.', read: () => o.backends().map((b) => `${b}\n`).join('') }),
      Leaf('event', {
        doc: 'Write a filter (* one segment, > the rest; several separated by spaces), then read events: "topic payload" lines.',
        rdwrStream: (_ctx, filter, signal) => o.bus.subscribe(compileFilter(filter), signal),
      }),
      Dir('session', {
        doc: 'Sessions, by name. mkdir creates one, rm kills one, mv renames one.',
        create: (_ctx, name, perm) => {
          if (!(perm & 0x80000000)) throw new NinepError('only directories (sessions) can be created here');
          sessions.create({ name });
        },
      },
        Leaf('new', {
          doc: 'Write key=value pairs (name=, cwd=) to create a session; read back its name.',
          rdwr: (_ctx, req) => `${sessions.create(parseKeyValues(req, SESSION_KEYS)).name}\n`,
        }),
        Leaf('idx', {
          doc: 'One line per session: id, name, paused, connected, remote, cwd (tab-separated).',
          read: () => sessions.all().map((x) => `${x.id}\t${x.name}\t${x.paused ? 1 : 0}\t0\t-\t${x.cwd}\n`).join(''),
        }),
        Each('session', {
          doc: 'One session.',
          list: () => sessions.names(),
          has: (_ctx, name) => sessions.has(name),
          key: (_ctx, name) => sessions.get(name).id,
          rename: (ctx, newName) => void sessions.rename(ctx.params.session!, newName),
          remove: (ctx) => sessions.kill(ctx.params.session!),
        },
          Leaf('id', { doc: 'The immutable session UUID.', read: (ctx) => `${s(ctx).id}\n` }),
          Leaf('name', {
            doc: 'The session name; write to rename (the directory moves).',
            text: { get: (ctx) => `${s(ctx).name}\n`, set: (ctx, v) => void sessions.rename(ctx.params.session!, v.trim()) },
          }),
          Leaf('cwd', { doc: 'The session working directory.', read: (ctx) => `${s(ctx).cwd}\n` }),
          Leaf('env', {
            doc: 'Session environment: KEY=value lines. Writing replaces it.',
            text: { get: (ctx) => s(ctx).env, set: (ctx, v) => sessions.setEnv(ctx.params.session!, v) },
          }),
          Leaf('plan', {
            doc: 'The session plan, a markdown checklist. Writing replaces it.',
            text: { get: (ctx) => s(ctx).plan, set: (ctx, v) => sessions.setPlan(ctx.params.session!, v) },
          }),
          Leaf('ctl', {
            doc: 'Write a command, read its result: kill, save (checkpoint to disk), pause, resume.',
            rdwr: (ctx, req) => sessionCtl(o, ctx.params.session!, req),
          }),
        ),
      ),
    ),
    { uid: owner, help: true },
  );
}
