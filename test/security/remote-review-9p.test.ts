/**
 * A hostile 9P server (a remote host's toolsrv, or the daemon behind `-a ssh!HOST`: whoever controls that account
 * controls what answers) against our 9P client, which the local daemon and CLIs use:
 *
 * - it grants an msize far above the one asked for (4 GiB), then sends a reply frame that claims 1 GiB and
 *   trickles its body: the client must refuse the grant (9P: the server may only lower msize) and never buffer
 *   more than the msize it asked for, instead of holding the local daemon's memory until it falls over;
 * - it streams a line that never ends (the bypass queue and proc/interrupts the daemon follows are line streams):
 *   lines() fails past its bound (16 MiB by default) instead of growing.
 */
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Type, encode, lines } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { rmrf, tempDir } from '../../e2e/helpers.js';

describe('a hostile 9P server against our client', () => {
  let dir: string;
  let server: net.Server;
  let sock: string;
  let trickled = 0;

  beforeAll(async () => {
    dir = tempDir('ollie-sec-9p-hostile-');
    sock = join(dir, 'hostile.sock');
    server = net.createServer((s) => {
      s.on('error', () => undefined);
      let got = 0;
      s.on('data', (d) => {
        got += d.length;
        // The Tversion: answer with a huge msize. Anything after it: a frame claiming 1 GiB, then its body slowly.
        if (got === d.length) {
          s.write(encode({ type: Type.Rversion, tag: 0xffff, msize: 0xffffffff, version: '9P2000' }));
          return;
        }
        const head = Buffer.alloc(7);
        head.writeUInt32LE(1 << 30, 0);
        head[4] = Type.Rattach;
        head.writeUInt16LE(0, 5);
        s.write(head);
        const chunk = Buffer.alloc(1 << 20);
        const more = (): void => {
          if (s.destroyed) return;
          if (trickled >= 64) return void s.end();
          trickled++;
          s.write(chunk, () => setImmediate(more));
        };
        more();
      });
    });
    await new Promise<void>((r) => server.listen(sock, r));
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    rmrf(dir);
  });

  it('refuses an msize above the one it asked for, and no frame bigger than that is buffered', async () => {
    const err = await dial(`unix!${sock}`, { uname: 'me', msize: 65536 + 24 }).then(
      (c) => (c.close(), undefined),
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(err!.message).toMatch(/msize/);
    // It gave up at the frame's header (or at the grant), not after taking in the body.
    expect(trickled).toBeLessThan(64);
  }, 30_000);
});

describe('a hostile stream against lines()', () => {
  it("a line that never ends (a remote toolsrv's bypass queue) fails past the bound instead of growing", async () => {
    let sent = 0;
    async function* endless(): AsyncGenerator<Uint8Array> {
      const chunk = new Uint8Array(1 << 20).fill(0x61);
      // Sixty-four MiB without a newline, then one: the old code held it all and yielded it.
      for (; sent < 64; sent++) yield chunk;
      yield new TextEncoder().encode('\n');
    }
    const got: string[] = [];
    await expect(
      (async () => {
        for await (const l of lines(endless(), 4 << 20)) got.push(l);
      })(),
    ).rejects.toThrow(/a line of more than/);
    expect(got).toEqual([]);
    expect(sent).toBeLessThanOrEqual(5);
  });
});
