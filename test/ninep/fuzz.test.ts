/**
 * Fuzzes a live 9P server over a real Unix socket, in this process, while a well-behaved client keeps using
 * it on its own connection. Raw sockets send (a) random frames with honest size headers, (b) mutations of
 * valid requests and (c) garbage with lying size fields. Each raw connection ends with a sync Tversion, and
 * a model of the byte stream (the framing rules: size < 7 or > msize is fatal) says what must happen: the
 * sync is answered, or the server closes the connection, or it is still waiting for the rest of a frame.
 *
 *   FUZZ_ITERATIONS=n  frames to send (default 3000)     FUZZ_SEED=s  replay a run (printed on failure)
 * The engine lives in src/devtools/ninep-fuzz.ts; bench/fuzz.mjs runs the same loop, for longer, against the built library.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_MSIZE,
  encode,
  NOFID,
  NOTAG,
  Type,
  type Client,
  type Node as NsNode,
  type Server,
} from '../../src/ninep/index.js';
import { dial, listen, type Listener } from '../../src/ninep/node.js';
import {
  concat,
  connectionsBackTo,
  fuzzServer,
  goodClientWorks,
  newTally,
  Raw,
  Rng,
  runBatch,
  type Check,
} from '../../src/devtools/ninep-fuzz.js';

const ITERATIONS = Number(process.env.FUZZ_ITERATIONS ?? 3000);
const SEED =
  process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) >>> 0 : (Math.random() * 2 ** 32) >>> 0;
const check: Check = (got, want, what) => expect(got, what).toBe(want);

describe('fuzzing a live server', () => {
  let dir: string;
  let path: string;
  let server: Server<NsNode>;
  let listener: Listener;
  let client: Client;
  const live = new Set<Raw>();
  const crashes: unknown[] = [];
  const onCrash = (e: unknown): void => {
    crashes.push(e);
  };

  beforeAll(async () => {
    process.on('uncaughtException', onCrash);
    process.on('unhandledRejection', onCrash);
    dir = mkdtempSync(join(tmpdir(), 'ninep-fuzz-'));
    server = fuzzServer();
    path = join(dir, 'fuzz.sock');
    listener = await listen(server, { kind: 'unix', path });
    client = await dial({ kind: 'unix', path }, { uname: 'glenda' });
  });

  afterAll(async () => {
    for (const raw of live) raw.sock.destroy();
    client?.close();
    server?.close();
    await listener?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
  });

  it(
    `survives ${ITERATIONS} fuzz frames and keeps serving a good client`,
    async () => {
      const master = new Rng(SEED);
      const tally = newTally();
      const started = Date.now();
      try {
        await goodClientWorks(client, -1, check);
        expect(server.connections.size).toBe(1);
        for (let round = 0; tally.frames < ITERATIONS; round++) {
          await runBatch(path, live, master, tally);
          expect(crashes, 'uncaught exceptions or unhandled rejections in the server process').toEqual([]);
          expect(await connectionsBackTo(server, 1), 'server.connections after the fuzz sockets closed').toBe(1);
          await goodClientWorks(client, round, check);
        }
        expect(tally.outcomes.sync).toBeGreaterThan(0);
        expect(tally.outcomes.fatal).toBeGreaterThan(0);
        expect(crashes).toEqual([]);
      } catch (e) {
        const err = e instanceof Error ? e : new Error(String(e));
        err.message = `[FUZZ_SEED=${SEED}] ${err.message}`;
        console.error(`fuzz failed; reproduce with FUZZ_SEED=${SEED} FUZZ_ITERATIONS=${ITERATIONS}`);
        throw err;
      }
      const secs = (Date.now() - started) / 1000;
      console.log(
        `fuzz seed ${SEED}: ${tally.frames} frames on ${tally.sessions} connections in ${secs.toFixed(2)}s; outcomes ${JSON.stringify(tally.outcomes)}`,
      );
    },
    20_000 + ITERATIONS,
  );

  // Found by this fuzzer: an error string echoing a 64 KiB name could not be encoded, and the RangeError
  // escaped the socket's data handler. Errors are now cut to fit the frame.
  it('answers Rerror, not an uncaught exception, when the error string is too long', async () => {
    const raw = await Raw.open(path, live);
    try {
      raw.sock.write(
        concat([
          encode({ type: Type.Tversion, tag: NOTAG, msize: DEFAULT_MAX_MSIZE, version: '9P2000' }),
          encode({ type: Type.Tattach, tag: 0, fid: 0, afid: NOFID, uname: 'fuzz', aname: '' }),
          encode({ type: Type.Twalk, tag: 1, fid: 0, newfid: 1, wnames: ['x'.repeat(0xffff)] }),
        ]),
      );
      await raw.until(() => raw.replies.length >= 3 || raw.closed, 1000);
      expect(crashes).toEqual([]);
      expect(raw.replies[2]).toEqual({ type: Type.Rerror, tag: 1 });
    } finally {
      raw.sock.destroy();
      crashes.length = 0;
    }
  });
});
