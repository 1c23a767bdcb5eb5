/**
 * Attacks on remote sessions, against a real sshd on a loopback port (test/helpers/sshd.ts) and the real daemon:
 *
 * - an agent moves its session to a host of its choosing (`ctl remote`), or creates one there: refused (owner only);
 * - a host that is an ssh option (`-oProxyCommand=…`): refused before ssh runs;
 * - the remote toolsrv's secret on a command line, in an environment or in the log: never;
 * - the remote cache and runtime directories: 0700;
 * - a remote session's tool reaches the local daemon's socket: it has no address or token for it, and a 9P attach
 *   there is refused;
 * - on the toolsrv two sessions share, session A's agent kills session B's process, or approves B's bypass: refused.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { dial } from '../../src/ninep/node.js';
import { parseRemote, spawnRemoteToolsrv } from '../../src/olliesrv/toolclient/remote.js';
import { ToolClient } from '../../src/olliesrv/toolclient/client.js';
import { sshdAvailable, useRemoteRig } from '../helpers/sshd.js';
import { until } from '../../e2e/helpers.js';

/** A 9P attach to `sock` as `uname`, without a token, written inline for a tool to run with node. */
const attachScript = (sock: string): string =>
  `node -e '
const net=require("net");const s=net.connect(${JSON.stringify(sock)});
const str=(t)=>{const b=Buffer.from(t);const h=Buffer.alloc(2);h.writeUInt16LE(b.length);return Buffer.concat([h,b]);};
const msg=(type,body)=>{const h=Buffer.alloc(7);h.writeUInt32LE(7+body.length);h[4]=type;h.writeUInt16LE(type===100?0xffff:1,5);return Buffer.concat([h,body]);};
let buf=Buffer.alloc(0);let step=0;
s.on("error",(e)=>{console.log("ATTACH-FAILED connect",e.code);process.exit(0);});
s.on("connect",()=>{const m=Buffer.alloc(4);m.writeUInt32LE(8192);s.write(msg(100,Buffer.concat([m,str("9P2000")])));});
s.on("data",(d)=>{buf=Buffer.concat([buf,d]);while(buf.length>=4&&buf.length>=buf.readUInt32LE(0)){const n=buf.readUInt32LE(0);const t=buf[4];buf=buf.subarray(n);
 if(step===0){step=1;const f=Buffer.alloc(8);f.writeUInt32LE(0);f.writeUInt32LE(0xffffffff,4);s.write(msg(104,Buffer.concat([f.subarray(0,4),f.subarray(4),str("root"),str("")])));}
 else{console.log(t===105?"ATTACHED":"ATTACH-FAILED rerror");process.exit(0);}}});
s.on("close",()=>{console.log("ATTACH-FAILED closed");process.exit(0);});
'`;

describe.skipIf(!sshdAvailable())('remote sessions: attacks', () => {
  const logs: string[] = [];
  const r = useRemoteRig({ prefix: 'ollie-sec-remote-', log: (m) => void logs.push(m) });

  beforeAll(async () => {
    for (const s of ['a', 'b']) {
      mkdirSync(join(r.sshd.remoteHome, s));
      await r.remoteSession(s, join(r.sshd.remoteHome, s));
    }
  });

  const agent = (s: string) => r.agent(`session/${s}/agent/coder`);
  /** A turn of session s's agent; the tool results of this turn. */
  const turn = async (s: string): Promise<string[]> => {
    const a = await agent(s);
    const before = a.log.blocks().length;
    const done = a.nextTurn();
    await r.c.write(`session/${s}/agent/coder/prompt`, 'go');
    await done;
    return a.log
      .blocks()
      .slice(before)
      .filter((b) => b.role === 'tool')
      .map((b) => b.content);
  };

  it('an agent cannot move its session to another host, nor create a remote session', async () => {
    const sid = (await r.c.readText('session/a/id')).trim();
    const aid = (await agent('a')).id;
    const view = await dial(`unix!${r.sock}`, { uname: 'x', authData: r.daemon.principals.agentToken(sid, aid) });
    try {
      await expect(view.write('session/a/ctl', 'remote attacker.example')).rejects.toThrow();
      await expect(view.write('session/a/ctl', 'remote -')).rejects.toThrow();
      await expect(view.rdwrText('session/new', `name=evil cwd=/tmp remote=attacker.example`)).rejects.toThrow();
    } finally {
      view.close();
    }
    expect((await r.c.readText('session/a/ctl').catch(() => '')) || '').not.toContain('attacker');
    expect(await r.c.rdwrText('session/a/ctl', 'remote')).toBe(`${r.sshd.host}\n`);
    expect(r.daemon.sessions.has('evil')).toBe(false);
  });

  it('a host that is an ssh option is refused before ssh runs', async () => {
    const marker = join(r.dir, 'pwned');
    for (const bad of [
      `-oProxyCommand=touch ${marker}`,
      '-oProxyCommand=sh',
      'a b',
      'host;touch x',
      '$(id)',
      '-Fconfig',
    ]) {
      expect(() => parseRemote(bad)).toThrow(/expected \[user@\]host/);
      await expect(r.c.rdwrText('session/new', `name=x cwd=/tmp remote="${bad}"`)).rejects.toThrow();
      await expect(r.c.rdwrText('session/a/ctl', `remote ${bad}`)).rejects.toThrow();
    }
    expect(existsSync(marker)).toBe(false);
    expect(await r.c.rdwrText('session/a/ctl', 'remote')).toBe(`${r.sshd.host}\n`);
  });

  it('the secret is on no command line, in no environment and in no log; the remote dirs are 0700', async () => {
    const own: string[] = [];
    const p = await spawnRemoteToolsrv({
      remote: parseRemote(r.sshd.host),
      ssh: { configFile: r.sshd.sshConfig },
      runtimeDir: join(r.dir, 'rt'),
      log: (m) => void own.push(m),
    });
    try {
      const hits: string[] = [];
      for (const pid of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
        for (const f of ['cmdline', 'environ']) {
          try {
            if (readFileSync(`/proc/${pid}/${f}`, 'latin1').includes(p.secret)) hits.push(`${pid}/${f}`);
          } catch {
            // gone, or not ours to read
          }
        }
      }
      expect(hits).toEqual([]);
      expect([...own, ...logs].some((l) => l.includes(p.secret))).toBe(false);
      const cache = join(r.sshd.remoteHome, '.cache', 'ollie', 'remote');
      expect(statSync(cache).mode & 0o777).toBe(0o700);
      expect(statSync(join(r.sshd.remoteHome, 'run', `ollie-remote-${process.getuid!()}`)).mode & 0o777).toBe(0o700);
      for (const d of readdirSync(cache)) expect(statSync(join(cache, d)).mode & 0o077).toBe(0);
      // The forwarded socket here is in the private runtime directory.
      expect(statSync(join(r.dir, 'rt')).mode & 0o777).toBe(0o700);
      // The toolsrv there reports its own sandbox (the remote kernel's Landlock ABI), and only the secret opens it.
      const tc = await ToolClient.connect(p, 'probe');
      const info = await tc.info();
      expect(info.landlockAbi).toBeGreaterThan(0);
      expect(info.pid).not.toBe(p.pid);
      await tc.close();
      await expect(ToolClient.connect({ socket: p.socket, secret: 'x'.repeat(64) }, 'probe')).rejects.toThrow(
        /authentication failed/,
      );
    } finally {
      await p.stop();
    }
  }, 60_000);

  it("a remote session's tool has no way into the local daemon", async () => {
    r.mock.script(
      [
        {
          toolCalls: [
            { name: 'shell', args: { command: 'env | grep "^OLLIE_" | cut -d= -f1 | sort | tr "\\n" " "; echo END' } },
          ],
        },
      ],
      [{ toolCalls: [{ name: 'shell', args: { command: attachScript(r.sock) } }] }],
      [{ text: 'done' }],
    );
    const [env, attach] = await turn('a');
    expect(env).toMatch(/END/);
    expect(env).not.toMatch(/OLLIE_TOKEN|OLLIE_ADDR/);
    expect(attach).toMatch(/ATTACH-FAILED|EACCES|EPERM|denied/);
    expect(attach).not.toMatch(/\bATTACHED\b/);
  }, 60_000);

  it("on the shared toolsrv, session A cannot kill session B's process nor approve its bypass", async () => {
    const bWork = join(r.sshd.remoteHome, 'b');
    const bAgent = await agent('b');
    // B: a background process that runs until the test lets it go (a foreground shell call would hold the
    // toolsrv's global lock, which A's call then waits for: locks hold across the sessions of a host). Its end
    // comes back to B as a prompt, and B then asks to leave the sandbox (the mock answers requests in order).
    r.mock.script(
      [
        {
          toolCalls: [
            {
              name: 'shell',
              args: { command: 'while [ ! -e go ]; do sleep 0.05; done; echo b-survived', background: true },
            },
          ],
        },
      ],
      [{ text: 'started' }],
    );
    await turn('b');
    // B's shell, as this machine (the remote's kernel) numbers it.
    const pid = await until(
      () =>
        readdirSync('/proc')
          .filter((x) => /^\d+$/.test(x))
          .map(Number)
          .find((p) => {
            try {
              return (
                readlinkSync(`/proc/${p}/cwd`) === bWork && readFileSync(`/proc/${p}/comm`, 'latin1').trim() === 'bash'
              );
            } catch {
              return false;
            }
          }),
      "B's process",
      30_000,
    );
    r.mock.script(
      [
        {
          toolCalls: [
            {
              name: 'shell',
              args: {
                command: `kill -9 ${pid}; echo rc=$?; cat /proc/${pid}/environ >/dev/null 2>&1 && echo env-visible || echo env-hidden`,
              },
            },
          ],
        },
      ],
      [{ text: 'tried' }],
      [{ toolCalls: [{ name: 'shell', args: { command: 'echo b-bypass', bypass: true } }] }],
      [{ text: 'b done' }],
    );
    const [kill] = await turn('a');
    expect(kill).toMatch(/rc=[1-9]/);
    // Refused by the sandbox (Landlock's signal scope), and B's environment is not A's to read (nor is its memory).
    expect(kill).toMatch(/Operation not permitted/);
    expect(kill).toContain('env-hidden');
    expect(() => process.kill(pid!, 0)).not.toThrow();
    const bDone = bAgent.nextTurn();
    writeFileSync(join(bWork, 'go'), '');
    const line = await until(
      async () => (await r.c.readText('session/b/bypass')).trim() || undefined,
      "B's bypass request",
      30_000,
    );
    const id = line!.split('\t')[0]!;
    expect(await r.c.readText('session/a/bypass')).toBe('');
    await expect(r.c.write('session/a/bypass', `${id} approve`)).rejects.toThrow(/no pending bypass request/);
    expect((await r.c.readText('session/b/bypass')).split('\t')[0]).toBe(id);
    await r.c.write('session/b/bypass', `${id} deny`);
    await bDone;
    const bTools = bAgent.log
      .blocks()
      .filter((b) => b.role === 'tool')
      .map((b) => b.content);
    expect(bAgent.log.blocks().some((b) => b.content.includes('b-survived'))).toBe(true);
    expect(bTools.some((t) => t.includes('b-bypass') && !/denied/i.test(t))).toBe(false);
    // Both sessions were served by the one toolsrv there.
    const toolsrvs = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes(r.sshd.remoteHome) && l.includes('toolsrv/main.js') && !l.includes('ssh '));
    expect(toolsrvs).toHaveLength(1);
  }, 90_000);
});
