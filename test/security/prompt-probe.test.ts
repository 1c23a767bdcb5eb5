/**
 * Second review of prompt commands (src/olliesrv/agent/promptcmd.ts): the programs a repository names under
 * names of its own (diff.external, drivers, aliases) are found by a sandboxed `git config` probe and overridden.
 * The probe's output is capped like a command's; a .git/config the agent pads past the cap got the probe killed,
 * and the commands then ran with nothing overridden: a prompt command's `git diff` ran the repository's
 * diff.external. Real helper, real git, runPromptCommands as the daemon calls it.
 */
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runPromptCommands } from '../../src/olliesrv/agent/promptcmd.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("prompt commands: the probe of the repository's programs", () => {
  it("a .git/config padded past the probe's output cap does not get its diff.external run", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ollie-sec-probe-'));
    dirs.push(dir);
    const ws = join(dir, 'ws');
    const home = join(dir, 'home');
    mkdirSync(ws);
    mkdirSync(home);
    const git = (...a: string[]): string =>
      execFileSync('git', a, { cwd: ws, env: { ...process.env, HOME: home, GIT_CONFIG_NOSYSTEM: '1' } }).toString();
    git('init', '-q');
    writeFileSync(join(ws, 'a.txt'), 'one\n');
    git('add', 'a.txt');
    git('-c', 'user.name=x', '-c', 'user.email=x@x', 'commit', '-qm', 'one');
    writeFileSync(join(ws, 'a.txt'), 'two\n');
    // What the model writes with its shell: a program for every diff, and 70,000 keys of padding.
    appendFileSync(
      join(ws, '.git', 'config'),
      `[diff]\n\texternal = "echo PWNED-BY-DIFF-EXTERNAL; true"\n[pad]\n${Array.from({ length: 70_000 }, (_, i) => `\tk${i} = x\n`).join('')}`,
    );
    const opts = {
      configDir: join(dir, 'config'),
      dataDir: join(dir, 'data'),
      runtimeDir: join(dir, 'run'),
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home },
    };
    const r = await runPromptCommands(['git diff'], ws, {}, opts);
    expect(r.text + r.warnings.join('\n')).not.toContain('PWNED-BY-DIFF-EXTERNAL');
    expect(r.text).toMatch(
      /prompt command was not run: the repository's git configuration could not be read to disarm the programs it names \(reading it its output passed \d+ bytes\)/,
    );
    // Without the padding the probe finds diff.external and git diff runs the built-in diff.
    writeFileSync(
      join(ws, '.git', 'config'),
      '[core]\n\trepositoryformatversion = 0\n\tbare = false\n[diff]\n\texternal = "echo PWNED-BY-DIFF-EXTERNAL; true"\n',
    );
    const clean = await runPromptCommands(['git diff'], ws, {}, opts);
    expect(clean.warnings.join('\n') + clean.text).not.toMatch(/was not run/);
    expect(clean.text).not.toContain('PWNED');
  }, 60_000);
});
