/**
 * Review: a tool process that leaves toolsrv's process tree (double fork / setsid, so that it is reparented to
 * init or the nearest subreaper) is no longer a "descendant" of a confined root, and the Unix socket serves it
 * as the owner.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/toolsrv/sandbox/index.js';
import { harness, type Harness } from '../olliesrv/agent-harness.js';

const ATTACKER = { description: 'attacker', prompt: 'You are a test agent.', autoLoad: ['shell'], maxSteps: 20 };
let h: Harness | undefined;
let restore: (() => unknown) | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
  restore?.();
  restore = undefined;
});

describe('review: confinement by ancestry', () => {
  it('a sandboxed tool allowed Unix sockets that detaches from toolsrv is not served as the owner', async () => {
    const policy = readFileSync(join(PACKAGE_ROOT, 'data', 'sandbox.yaml'), 'utf8').replace(/unix: false/, 'unix: true');
    const xdg = mkdtempSync(join(tmpdir(), 'ollie-xdg-'));
    mkdirSync(join(xdg, 'ollie'));
    writeFileSync(join(xdg, 'ollie', 'sandbox.yaml'), policy);
    const saved = process.env.XDG_CONFIG_HOME;
    process.env.XDG_CONFIG_HOME = xdg;
    restore = () => (saved === undefined ? delete process.env.XDG_CONFIG_HOME : (process.env.XDG_CONFIG_HOME = saved));
    h = await harness({ profiles: { attacker: ATTACKER } });
    writeFileSync(join(h.configDir, 'sandbox.yaml'), policy);
    const a = await h.agent({ profile: 'attacker' });
    const probe = join(h.dir, 'probe.mjs');
    mkdirSync(join(h.dir, 'ws'));
    const out = join(h.dir, 'ws', 'probe.out');
    const ninep = join(PACKAGE_ROOT, 'dist', 'ninep', 'node.js');
    writeFileSync(probe, [
      "import { spawn } from 'node:child_process';",
      "import { writeFileSync } from 'node:fs';",
      `import { dial } from ${JSON.stringify(ninep)};`,
      'const [addr, outFile, stage] = process.argv.slice(2);',
      "if (stage !== 'detached') {",
      // Leave toolsrv's tree: a new session (out of the process group toolsrv kills) whose parent exits at once.
      "  spawn(process.execPath, [process.argv[1], addr, outFile, 'detached'], { detached: true, stdio: 'ignore' }).unref();",
      '  process.exit(0);',
      '}',
            'const start = process.ppid;',
      // Wait until reparented (to init or a subreaper), then dial the daemon.
      'for (let i = 0; i < 200 && process.ppid === start; i++) await new Promise((r) => setTimeout(r, 10));',
      'try {',
      "  const c = await dial(addr, { uname: 'whoever' });",
      "  writeFileSync(outFile, 'ATTACHED ppid=' + process.ppid + ' backends.conf=' + JSON.stringify(await c.readText('config/backends.conf')));",
      '  c.close();',
      '} catch (e) { writeFileSync(outFile, `REFUSED ${e.message}`); }',
      'process.exit(0);',
      '',
    ].join('\n'));
    h.mock.script([{ toolCalls: [{ name: 'shell', args: { command: `node ${probe} unix!${h.socket} ${out}` } }] }], [{ text: 'done' }]);
    await h.turn(a.path, 'attack');
    for (let i = 0; i < 300 && !existsSync(out); i++) await new Promise((r) => setTimeout(r, 20));
    const got = readFileSync(out, 'utf8');
    expect(got).not.toMatch(/ATTACHED/);
    expect(got).toMatch(/REFUSED .*refused: pid \d+ is a process Ollie started for an agent or a workflow \(or a sandboxed one\)/);
  });
});
