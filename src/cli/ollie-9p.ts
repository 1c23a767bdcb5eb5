#!/usr/bin/env node
/**
 * `ollie-9p`: a 9P client for the shell. Reads stream (a file that blocks, like log.raw, is followed until
 * it ends); writes take stdin; rdwr writes stdin and prints the reply read on the same fid, as it is read.
 */
import { dialOllie } from '../platform/dial.js';
import { Command } from 'commander';
import { basename, dirname } from 'node:path';
import { Client, DMDIR, modeString, OREAD, ORDWR, OTRUNC, OWRITE, type Stat } from '../ninep/index.js';
import { defaultAddress } from '../platform/paths.js';

const program = new Command('ollie-9p')
  .description('Read and write files of a 9P server (olliesrv by default).')
  .option(
    '-a, --addr <addr>',
    'server address: unix!/path, tcp!host!port, or ssh![user@]host[:port][!/remote.sock] (a daemon on another machine, over ssh)',
    defaultAddress(),
  );

async function withClient<T>(fn: (c: Client) => Promise<T>): Promise<T> {
  const c = await dialOllie(program.opts<{ addr: string }>().addr);
  try {
    return await fn(c);
  } finally {
    c.close();
  }
}

async function readStdin(): Promise<Uint8Array> {
  const parts: Buffer[] = [];
  for await (const chunk of process.stdin) parts.push(chunk as Buffer);
  return Buffer.concat(parts);
}

// A reader that went away (`ollie-9p read BIG | head`) is the normal end of a pipeline, not an error: stop quietly,
// as 0 (the server clunks our fids when the connection drops). Anything else on stdout is reported without a trace.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code !== 'EPIPE') process.stderr.write(`ollie-9p: stdout: ${e.message}\n`);
  process.exit(e.code === 'EPIPE' ? 0 : 1);
});

/** Writes to stdout, waiting when the pipe is full, so a slow reader slows the stream instead of buffering it. */
function out(data: Uint8Array | string): Promise<void> {
  return new Promise((resolve) => (process.stdout.write(data) ? resolve() : process.stdout.once('drain', resolve)));
}

function longLine(st: Stat): string {
  const date = new Date(st.mtime * 1000).toISOString().slice(0, 16).replace('T', ' ');
  return `${modeString(st.mode)} ${st.uid} ${st.gid} ${String(st.length).padStart(8)} ${date} ${st.name}\n`;
}

/** Ends the stream on SIGINT: the pending read is flushed and the fid clunked before exiting. */
function interruptible(): AbortSignal {
  const ac = new AbortController();
  process.once('SIGINT', () => ac.abort(new Error('interrupted')));
  return ac.signal;
}

async function stream(c: Client, path: string, request?: string | Uint8Array): Promise<void> {
  const signal = interruptible();
  try {
    for await (const chunk of c.stream(path, { request, signal })) await out(chunk);
  } catch (e) {
    if (!signal.aborted) throw e;
  }
}

program
  .command('ls')
  .description('list directories (or show files)')
  .option('-l', 'long listing')
  .argument('[path...]')
  .action((paths: string[], o: { l?: boolean }) =>
    withClient(async (c) => {
      for (const p of paths.length ? paths : ['/']) {
        for (const st of await c.ls(p)) await out(o.l ? longLine(st) : `${st.name}${st.mode & DMDIR ? '/' : ''}\n`);
      }
    }),
  );

program
  .command('read')
  .description('print files; blocking files are followed until they end')
  .argument('<path...>')
  .action((paths: string[]) =>
    withClient(async (c) => {
      for (const p of paths) await stream(c, p);
    }),
  );

program
  .command('write')
  .description('write stdin to a file (truncating it)')
  .argument('<path>')
  .action((path: string) =>
    withClient(async (c) => {
      const f = await c.open(path, OWRITE | OTRUNC);
      try {
        let offset = 0;
        // Each chunk of stdin is written as it comes (a plain file or a stream sees it at once); a file that takes a
        // message whole (prompt, fifo, peer/*) takes all of it as one, at the clunk.
        for await (const chunk of process.stdin) {
          const buf = chunk as Buffer;
          for (let i = 0; i < buf.length; i += f.iounit) offset += await f.write(offset, buf.subarray(i, i + f.iounit));
        }
      } finally {
        await f.clunk();
      }
    }),
  );

program
  .command('rdwr')
  .description(
    'write stdin as one request, print the reply read on the same fid (as it comes: a streaming file is followed until it ends or ^C)',
  )
  .argument('<path>')
  .action(async (path: string) => {
    // stdin is read before dialling, so a slow producer holds no fid open.
    const request = await readStdin();
    await withClient((c) => stream(c, path, request));
  });

program
  .command('rdwrs')
  .description('write a request (e.g. an event filter), then stream the replies until interrupted')
  .argument('<path>')
  .argument('[request]', 'the request', '')
  .action((path: string, request: string) =>
    withClient(async (c) => {
      await stream(c, path, request);
    }),
  );

program
  .command('stat')
  .description("show a file's directory entry and qid")
  .argument('<path...>')
  .action((paths: string[]) =>
    withClient(async (c) => {
      for (const p of paths) {
        const st = await c.stat(p);
        await out(
          `${longLine(st).trimEnd()} qid=(${st.qid.path.toString(16)} ${st.qid.vers} ${st.qid.type.toString(16)})\n`,
        );
      }
    }),
  );

program
  .command('create')
  .description('create a file, or a directory with -d')
  .option('-d', 'create a directory')
  .option('-m, --mode <octal>', 'permission bits', '')
  .argument('<path...>')
  .action((paths: string[], o: { d?: boolean; mode: string }) =>
    withClient(async (c) => {
      const perm = o.mode ? parseInt(o.mode, 8) : o.d ? 0o755 : 0o644;
      if (Number.isNaN(perm) || perm < 0 || perm > 0o777) throw new Error(`bad mode ${o.mode}`);
      for (const p of paths) await (await c.create(p, (o.d ? DMDIR : 0) | perm, o.d ? OREAD : ORDWR)).clunk();
    }),
  );

program
  .command('rm')
  .description('remove files')
  .argument('<path...>')
  .action((paths: string[]) =>
    withClient(async (c) => {
      for (const p of paths) await c.remove(p);
    }),
  );

program
  .command('mv')
  .description('rename a file within its directory')
  .argument('<path>')
  .argument('<newpath>')
  .action((path: string, to: string) =>
    withClient(async (c) => {
      const target = to.includes('/') ? to.replace(/\/+$/, '') : `${dirname(path)}/${to}`;
      if (dirname(target) !== dirname(path.replace(/\/+$/, '')))
        throw new Error('mv can only rename within a directory');
      await c.rename(path, basename(target));
    }),
  );

try {
  await program.parseAsync();
} catch (e) {
  process.stderr.write(`ollie-9p: ${(e as Error).message}\n`);
  process.exitCode = 1;
}
