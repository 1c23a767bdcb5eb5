/**
 * log.from: an agent's log read from a point (the last N blocks, a page before a block, everything after one),
 * through the real daemon's namespace, as the renderer opens a long session.
 */
import { userInfo } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { WINDOW, type ChatLog } from '../../src/olliesrv/agent/chatlog.js';
import { startDaemon } from '../../src/olliesrv/daemon.js';
import { until } from '../wait.js';
import { harness, parseBlocks, type Block, type Harness } from './agent-harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** An agent whose log holds `n` info blocks with contents "0" … "n-1"; returns its path and ChatLog. */
async function filled(n: number) {
  h = await harness({ tools: false });
  const a = await h.agent();
  const agent = h.daemon.agents.all().find((x) => x.id === a.aid)!;
  for (let i = 0; i < n; i++) agent.log.add('info', String(i));
  return { ...a, log: agent.log };
}

/** Reads a log.from request's reply until `until` holds for the blocks so far (or EOF); returns them. */
async function readFrom(
  c: Client,
  path: string,
  request: string,
  until: (bs: Block[]) => boolean = () => false,
): Promise<{ blocks: Block[]; eof: boolean }> {
  const abort = new AbortController();
  let text = '';
  let eof = true;
  // The empty request reads log.raw (from the start) instead.
  const opts = request ? { request, signal: abort.signal } : { signal: abort.signal };
  for await (const chunk of c.stream(request ? `${path}/log.from` : `${path}/log.raw`, opts)) {
    text += new TextDecoder().decode(chunk);
    if (text.endsWith('\n') && until(parseBlocks(text))) {
      eof = false;
      abort.abort();
      break;
    }
  }
  return { blocks: parseBlocks(text), eof };
}

const contents = (bs: Block[]) => bs.map((b) => b.content);

describe('log.from', () => {
  it('tail N gives the last N blocks, then the text so far of an open block, then live blocks', async () => {
    const a = await filled(100);
    const open = a.log.begin('assistant');
    a.log.delta(open, 'half a ');
    const seen: Block[] = [];
    const reading = readFrom(h!.c, a.path, 'tail 5', (bs) => {
      seen.splice(0, seen.length, ...bs);
      return bs.some((b) => b.content === 'live');
    });
    // The live block is added once the backlog has arrived, so it can only come through the live path.
    await until(() => seen.some((b) => b.partial), 'the backlog with the open block');
    a.log.add('info', 'live');
    const { blocks, eof } = await reading;
    expect(eof).toBe(false);
    expect(contents(blocks)).toEqual(['95', '96', '97', '98', '99', 'half a ', 'live']);
    expect(blocks[5]).toMatchObject({ id: open, partial: true });
  });

  it('before ID N pages back with no gap or duplicate, and ends; after ID gives the rest, then live', async () => {
    const a = await filled(1000);
    const { blocks: tail } = await readFrom(h!.c, a.path, 'tail 300', (bs) => bs.length === 300);
    const all = [...tail];
    for (;;) {
      const { blocks, eof } = await readFrom(h!.c, a.path, `before ${all[0]!.id} 300`);
      expect(eof).toBe(true);
      if (!blocks.length) break;
      all.unshift(...blocks);
    }
    expect(contents(all)).toEqual(Array.from({ length: 1000 }, (_, i) => String(i)));
    expect(new Set(all.map((b) => b.id)).size).toBe(1000);

    const { blocks: rest } = await readFrom(h!.c, a.path, `after ${all[989]!.id}`, (bs) => bs.length === 10);
    expect(contents(rest)).toEqual(['990', '991', '992', '993', '994', '995', '996', '997', '998', '999']);
    // Asking for more than there is gives what there is.
    expect(contents((await readFrom(h!.c, a.path, `before ${all[2]!.id} 50`)).blocks)).toEqual(['0', '1']);
  });

  it('refuses a malformed request, an unknown block and a read before any request, saying what and where', async () => {
    const a = await filled(3);
    const c = h!.c;
    await expect(readFrom(c, a.path, 'head 5')).rejects.toThrow(
      /log\.from: unknown request "head" in "head 5": expected "tail N"/,
    );
    await expect(readFrom(c, a.path, 'tail')).rejects.toThrow(/log\.from: N missing in "tail"/);
    await expect(readFrom(c, a.path, 'tail x')).rejects.toThrow(/N "x" is not a number/);
    await expect(readFrom(c, a.path, 'tail 0')).rejects.toThrow(/N 0 out of range 1\.\.10000/);
    await expect(readFrom(c, a.path, 'tail 10001')).rejects.toThrow(/N 10001 out of range/);
    await expect(readFrom(c, a.path, 'before abc')).rejects.toThrow(/N missing in "before abc"/);
    await expect(readFrom(c, a.path, 'after deadbeef')).rejects.toThrow(/log\.from: no block "deadbeef" in this log/);
    await expect(readFrom(c, a.path, 'tail 1 2')).rejects.toThrow(/wrong number of arguments/);
    const f = await c.open(`${a.path}/log.from`, 0);
    try {
      await expect(f.read(0, 100)).rejects.toThrow(/log\.from: write a request first/);
    } finally {
      await f.clunk();
    }
  });

  it('is readable by the agent itself, as log.raw is', async () => {
    const a = await filled(20);
    const view = await dial(`unix!${h!.socket}`, {
      uname: 'x',
      authData: h!.daemon.principals.agentToken(a.sid, a.aid),
    });
    try {
      const { blocks } = await readFrom(
        view,
        `session/${a.session}/agent/${a.name}`,
        'tail 2',
        (bs) => bs.length === 2,
      );
      expect(contents(blocks)).toEqual(['18', '19']);
    } finally {
      view.close();
    }
  });
});

describe('a long log backed by the store', () => {
  it('keeps only a window in memory, and serves log.raw, log.from, block and log from SQLite behind it, across a restart', async () => {
    const n = 2 * WINDOW + 500;
    const a = await filled(n);
    // The window was trimmed as the log grew: the oldest blocks live in the store only.
    expect(a.log.resident).toBeLessThan(2 * WINDOW);
    expect(a.log.length).toBe(n);
    const all = Array.from({ length: n }, (_, i) => String(i));

    const check = async (c: Client, log: ChatLog) => {
      expect(log.resident).toBeLessThanOrEqual(2 * WINDOW);
      // log.raw from the start: every block once, in order, the store's pages then the window.
      const raw = readFrom(c, a.path, '', (bs) => bs.length >= n);
      expect(contents((await raw).blocks)).toEqual(all);
      // A page that straddles the window's edge, and one far behind it.
      const { blocks: tail } = await readFrom(c, a.path, 'tail 1', (bs) => bs.length === 1);
      expect(contents(tail)).toEqual([String(n - 1)]);
      const ids = (await raw).blocks.map((b) => b.id);
      const edge = n - log.resident;
      expect(contents((await readFrom(c, a.path, `before ${ids[edge + 5]} 10`)).blocks)).toEqual(
        all.slice(edge - 5, edge + 5),
      );
      expect(contents((await readFrom(c, a.path, `before ${ids[20]} 10`)).blocks)).toEqual(all.slice(10, 20));
      expect(contents((await readFrom(c, a.path, `after ${ids[n - 4]}`, (bs) => bs.length === 3)).blocks)).toEqual(
        all.slice(n - 3),
      );
      expect(JSON.parse(await c.rdwrText(`${a.path}/block`, ids[3]!))).toMatchObject({ content: '3' });
    };
    await check(h!.c, a.log);
    const text = await h!.c.readText(`${a.path}/log`);

    // Restarted: the agent comes back with its tail in memory, not its whole log.
    const opts = {
      socket: h!.socket,
      dataDir: h!.dataDir,
      configDir: h!.configDir,
      toolsrv: false as const,
      skills: false as const,
      log: () => undefined,
    };
    h!.c.close();
    await h!.daemon.close();
    const daemon = await startDaemon(opts);
    const c = await dial(`unix!${h!.socket}`, { uname: userInfo().username });
    try {
      const log = daemon.agents.all().find((x) => x.id === a.aid)!.log;
      expect(log.resident).toBe(WINDOW);
      await check(c, log);
      // The plain-text log is the same: the window's blocks and, as they are small, older ones from the store.
      expect(await c.readText(`${a.path}/log`)).toBe(text);
      // New blocks follow on from the stored ones.
      log.add('info', 'after restart');
      expect(contents((await readFrom(c, a.path, 'tail 2', (bs) => bs.length === 2)).blocks)).toEqual([
        String(n - 1),
        'after restart',
      ]);
    } finally {
      c.close();
      await daemon.close();
    }
  });
});
