/** Prompt commands' limits and environment, through the real sandbox helper (agent/promptcmd.ts). */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  configKeysToDisarm,
  runPromptCommands,
  type PromptCommandOptions,
} from '../../src/olliesrv/agent/promptcmd.js';
import { loadPolicy, readOnlyPolicy } from '../../src/toolsrv/sandbox/index.js';
import { policyContext } from '../toolsrv/sandbox-helpers.js';

let dir = '';
let opts: PromptCommandOptions;
const ollie = { OLLIE_DATA: '/nonexistent/data', OLLIE_SESSION_ID: 's1', OLLIE_UNAME: 'a1', OLLIE_AGENT_NAME: 'alpha' };

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ollie-promptcmd-'));
  mkdirSync(join(dir, 'ws'));
  opts = {
    configDir: join(dir, 'config'),
    dataDir: join(dir, 'data'),
    runtimeDir: join(dir, 'run'),
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: dir,
      LANG: 'C.UTF-8',
      SECRET_KEY: 'sk-123',
      LD_PRELOAD: '/nope.so',
    },
  };
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('runPromptCommands', () => {
  it('concatenates stdout in order and reports a failing command as a warning', async () => {
    const r = await runPromptCommands(
      ['echo one', 'echo two; echo oops >&2; exit 3', 'echo three'],
      join(dir, 'ws'),
      ollie,
      opts,
    );
    expect(r.text).toBe('one\ntwo\nthree\n');
    expect(r.warnings).toEqual(['prompt command "echo two; echo oops >&2; exit 3" failed: oops']);
  });

  it("gives the daemon's few variables, Ollie's and hardened git, nothing else", async () => {
    const r = await runPromptCommands(['env | sort'], join(dir, 'ws'), ollie, opts);
    const names = r.text
      .split('\n')
      .filter(Boolean)
      .map((l) => l.slice(0, l.indexOf('=')));
    expect(names).toContain('OLLIE_AGENT_NAME');
    expect(names).toContain('GIT_CONFIG_COUNT');
    expect(r.text).toContain(`PWD=${join(dir, 'ws')}\n`);
    expect(r.text).toContain('GIT_CONFIG_KEY_0=core.fsmonitor\nGIT_CONFIG_KEY_1');
    expect(names).not.toContain('SECRET_KEY');
    expect(names).not.toContain('LD_PRELOAD');
  });

  it('a command that exits 121 itself is a failing command, not a sandbox failure', async () => {
    const r = await runPromptCommands(['echo mine; exit 121'], join(dir, 'ws'), ollie, opts);
    expect(r.text).toBe('mine\n');
    expect(r.warnings).toEqual(['prompt command "echo mine; exit 121" failed: exit status 121']);
  });

  it('kills the whole process group at the timeout, background children included', async () => {
    const started = Date.now();
    const r = await runPromptCommands(['echo before; sleep 30 & sleep 30; echo after'], join(dir, 'ws'), ollie, {
      ...opts,
      timeoutMs: 300,
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(r.text).toBe('before\n');
    expect(r.warnings[0]).toMatch(/was stopped: timed out after 300 ms/);
  });

  it('cuts the output at the cap and stops the command', async () => {
    const r = await runPromptCommands(['yes'], join(dir, 'ws'), ollie, { ...opts, maxOutput: 1000 });
    expect(r.text.length).toBe(1000);
    expect(r.warnings[0]).toMatch(/was stopped: its output passed 1000 bytes/);
  });
});

describe('readOnlyPolicy', () => {
  it('keeps what was readable, makes writable paths read-only, leaves only the private tmp and /dev/null writable, no network', () => {
    const base = loadPolicy(policyContext(dir, { home: dir }));
    const ro = readOnlyPolicy(
      {
        ...base,
        filesystem: { ...base.filesystem, rwx: ['/opt/x'] },
        network: { enabled: true, bindTcp: [], connectTcp: [443], unix: true },
      },
      { ro: ['/extra'] },
    );
    expect(ro.filesystem.rw.sort()).toEqual([join(dir, 'tmp'), '/dev/null'].sort());
    expect(ro.filesystem.rwx).toEqual([]);
    expect(ro.filesystem.ro).toContain(join(dir, 'ws'));
    expect(ro.filesystem.ro).toContain('/extra');
    expect(ro.filesystem.rox).toContain('/opt/x');
    expect(ro.filesystem.deny).toEqual(base.filesystem.deny);
    expect(ro.network).toEqual({ enabled: false, bindTcp: [], connectTcp: [], unix: false });
  });
});

describe('configKeysToDisarm', () => {
  it("takes the repository's program-naming keys, not the owner's global ones", () => {
    const out = [
      'global',
      'filter.lfs.process',
      'local',
      'filter.ev.clean',
      'local',
      'user.name',
      'worktree',
      'alias.st',
      'local',
      'diff.x y.textconv',
      'local',
      'pager.log',
      '',
    ].join('\0');
    expect(configKeysToDisarm(out)).toEqual(['filter.ev.clean', 'alias.st', 'diff.x y.textconv', 'pager.log']);
  });
});
