/**
 * Trusting a project file by the bytes the owner read. `trust PATH` trusts whatever is on disk when it runs, so
 * an agent that rewrites `.ollie-sandbox.yaml` while the owner reads it gets its own version trusted. With the
 * SHA-256 of what the owner read (`trust PATH SHA` to `config/trust`, `ollie trust --sha`, or the file shown and
 * confirmed on a terminal), a file that changed in between is refused and nothing is trusted. Real olliesrv,
 * toolsrv and helper; the mock LLM scripts the agent's rewrite.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { TOOLSRV_ENTRY } from '../../src/olliesrv/toolclient/spawn.js';
import { landlockStatus } from '../../src/toolsrv/sandbox/index.js';
import { readTrusted, sha256 } from '../../src/toolsrv/sandbox/trust.js';
import { testHarness } from '../olliesrv/agent-harness.js';
import { testDir } from '../helpers/temp-dir.js';
import { results, script, sh } from './scripted-calls.js';
import { OLLIE, trustOnPty } from './trust-pty.js';

const ready = landlockStatus().abi >= 6 && existsSync(TOOLSRV_ENTRY);

describe.skipIf(!ready)('the owner trusts the bytes read, not what the agent wrote meanwhile', () => {
  test('config/trust with the SHA of the read file: refused after the agent rewrites it, accepted when unchanged', async () => {
    const h = await testHarness();
    const file = join(h.dir, '.ollie-sandbox.yaml');
    writeFileSync(file, 'filesystem:\n  deny: ["{CWD}/secrets"]\n');
    const read = sha256(readFileSync(file));
    const a = await h.agent();
    // While the owner reads, the agent (whose workspace holds the file) widens it.
    h.mock.script(...script(sh(`printf 'filesystem:\\n  rw: ["/"]\\n' > .ollie-sandbox.yaml && echo rewritten`)));
    expect(results(await h.turn(a.path, 'go'))[0]).toContain('rewritten');
    await expect(h.c.write('config/trust', `trust ${h.dir} ${read}\n`)).rejects.toThrow(
      /has changed since you read it: its SHA-256 is [0-9a-f]{64}, not [0-9a-f]{64}; read it again, nothing was trusted/,
    );
    expect(readTrusted(h.configDir).has(file)).toBe(false);
    expect(await h.c.readText('config/trust')).not.toContain(file);

    // The same line for the bytes now on disk, once the owner has read them, trusts them.
    const now = sha256(readFileSync(file));
    await h.c.write('config/trust', `trust ${h.dir} ${now}\n`);
    expect(readTrusted(h.configDir).get(file)).toBe(now);
  }, 60_000);
});

describe.skipIf(!ready)('a directory named like "PATH SHA"', () => {
  test('"trust DIR" for a directory the agent named "evil SHA" is refused, not read as evil pinned to SHA', async () => {
    const h = await testHarness();
    const proj = join(h.dir, 'proj');
    mkdirSync(proj);
    const a = await h.agent();
    // The agent writes its own policy file into proj/evil (no checkpoints: its changes cannot be rewound), then a harmless one into "proj/evil <its SHA-256>",
    // which it asks the owner to review and trust.
    h.mock.script(
      ...script(
        sh(
          [
            'cd proj && mkdir evil',
            `printf 'checkpoint:\\n  skip: ["**"]\\n' > evil/.ollie-sandbox.yaml`,
            's=$(sha256sum evil/.ollie-sandbox.yaml | cut -c1-64)',
            'mkdir "evil $s"',
            `printf 'filesystem:\\n  deny: ["{CWD}/secrets"]\\n' > "evil $s/.ollie-sandbox.yaml"`,
            'echo "$s"',
          ].join(' && '),
        ),
      ),
    );
    const sha = results(await h.turn(a.path, 'go'))[0]!.trim();
    expect(sha).toMatch(/^[0-9a-f]{64}$/);
    const reviewed = join(proj, `evil ${sha}`);
    await expect(h.c.write('config/trust', `trust ${reviewed}\n`)).rejects.toThrow(
      /could mean it or .*evil with SHA-256/,
    );
    expect(readTrusted(h.configDir).has(join(proj, 'evil', '.ollie-sandbox.yaml'))).toBe(false);
    // Named with the SHA-256 of what the owner read, the directory itself is trusted.
    const file = join(reviewed, '.ollie-sandbox.yaml');
    const read = sha256(readFileSync(file));
    await h.c.write('config/trust', `trust ${reviewed} ${read}\n`);
    expect(readTrusted(h.configDir).get(file)).toBe(read);
    expect(readTrusted(h.configDir).has(join(proj, 'evil', '.ollie-sandbox.yaml'))).toBe(false);
  }, 60_000);
});

describe('ollie trust --sha', () => {
  test('trusts only a file with those bytes, and says why it refuses', () => {
    const dir = testDir('ollie-sec-trust-pin-');
    const cfg = join(dir, 'config');
    const file = join(dir, '.ollie-sandbox.yaml');
    writeFileSync(file, 'network:\n  enabled: false\n');
    const read = sha256(readFileSync(file));
    writeFileSync(file, 'network:\n  enabled: true\n');
    const refused = spawnSync(process.execPath, [OLLIE, 'trust', dir, '--config', cfg, '--sha', read], {
      encoding: 'utf8',
    });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('has changed since you read it');
    expect(existsSync(join(cfg, 'trusted-projects'))).toBe(false);

    const now = sha256(readFileSync(file));
    const ok = spawnSync(process.execPath, [OLLIE, 'trust', dir, '--config', cfg, '--sha', now], {
      encoding: 'utf8',
    });
    expect(ok.stderr).toBe('');
    expect(ok.stdout).toBe(`trusted ${now}\t${file}\n`);
    expect(readTrusted(cfg).get(file)).toBe(now);
  });

  test('on a terminal, the bytes shown are the bytes trusted: a rewrite before the answer is refused', async () => {
    const dir = testDir('ollie-sec-trust-tty-');
    const cfg = join(dir, 'config');
    const file = join(dir, '.ollie-sandbox.yaml');
    writeFileSync(file, 'filesystem:\n  deny: ["{CWD}/secrets"]\n');
    const r = await trustOnPty([dir, '--config', cfg], () => {
      // What the owner saw is the deny rule; an agent widens the file before the owner says yes.
      writeFileSync(file, 'filesystem:\n  rw: ["/"]\n');
      return 'y';
    });
    expect(r.out).toContain('deny: ["{CWD}/secrets"]');
    expect(r.out).toContain('has changed since you read it');
    expect(r.code).toBe(1);
    expect(existsSync(join(cfg, 'trusted-projects'))).toBe(false);
  }, 30_000);
});
