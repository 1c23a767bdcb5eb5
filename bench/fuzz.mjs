#!/usr/bin/env node
/**
 * bench/fuzz: the fuzz loop of test/ninep/fuzz.test.ts, for longer, against the built library (dist/ninep);
 * the engine is src/devtools/ninep-fuzz.ts, built to dist/devtools/ninep-fuzz.js.
 * A server in this process on a Unix socket; raw sockets send random frames, mutated requests and lying
 * size fields, each connection ending with a sync Tversion whose fate a model of the byte stream predicts;
 * a good client on its own connection must keep working throughout. Any failure prints the seed.
 * Usage: node bench/fuzz.mjs [frames=100000] [seed]   (needs `npm run build:node`)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dial, listen } from '../dist/ninep/node.js';
import {
  connectionsBackTo,
  fuzzServer,
  goodClientWorks,
  newTally,
  Rng,
  runBatch,
} from '../dist/devtools/ninep-fuzz.js';

const ITERATIONS = Number(process.argv[2] ?? 100_000);
const SEED = process.argv[3] !== undefined ? Number(process.argv[3]) >>> 0 : (Math.random() * 2 ** 32) >>> 0;

function fail(msg) {
  console.error(`FAIL: ${msg}\nreproduce with: node bench/fuzz.mjs ${ITERATIONS} ${SEED}`);
  process.exit(1);
}
process.on('uncaughtException', (e) => fail(`uncaught exception in the server process: ${e?.stack ?? e}`));
process.on('unhandledRejection', (e) => fail(`unhandled rejection in the server process: ${e?.stack ?? e}`));

const dir = mkdtempSync(join(tmpdir(), 'ninep-fuzz-'));
const path = join(dir, 'fuzz.sock');
const server = fuzzServer();
const listener = await listen(server, { kind: 'unix', path });
const client = await dial({ kind: 'unix', path }, { uname: 'glenda' });
const live = new Set();
const master = new Rng(SEED);
const tally = newTally();
console.log(`fuzzing with ${ITERATIONS} frames, seed ${SEED}`);
const started = performance.now();
let lastReport = started;
try {
  await goodClientWorks(client, -1);
  for (let round = 0; tally.frames < ITERATIONS; round++) {
    await runBatch(path, live, master, tally);
    const open = await connectionsBackTo(server, 1);
    if (open !== 1) throw new Error(`server.connections is ${open} after the fuzz sockets closed, want 1`);
    await goodClientWorks(client, round);
    if (performance.now() - lastReport > 2000) {
      lastReport = performance.now();
      console.log(`  ${tally.frames} frames, ${Math.round(tally.frames / ((lastReport - started) / 1000))}/s`);
    }
  }
} catch (e) {
  fail(e?.stack ?? String(e));
}
const secs = (performance.now() - started) / 1000;
await goodClientWorks(client, 'final').catch((e) => fail(e.message));
console.log(
  `${tally.frames} frames on ${tally.sessions} connections in ${secs.toFixed(2)}s: ${Math.round(tally.frames / secs)} iterations/s`,
);
console.log(`outcomes: ${JSON.stringify(tally.outcomes)}`);
console.log('good client still works: read, rdwr, template walk and stream all answered correctly');
for (const raw of live) raw.sock.destroy();
client.close();
server.close();
await listener.close();
rmSync(dir, { recursive: true, force: true });
