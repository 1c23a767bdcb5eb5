import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Profiles } from '../../src/olliesrv/agent/profiles.js';
import { ToolCache } from '../../src/olliesrv/agent/toolcache.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ollie-fscache-'));
});
afterEach(() => {
  vi.useRealTimers();
  rmSync(dir, { recursive: true, force: true });
});

describe('profiles', () => {
  it('sees a profile added, removed or edited at once, also when its directory listing is reused', () => {
    const agents = join(dir, 'agents');
    mkdirSync(agents);
    writeFileSync(join(agents, 'a.json'), JSON.stringify({ prompt: 'one' }));
    // An old directory: its listing may be reused until the directory changes.
    const old = new Date(Date.now() - 60_000);
    utimesSync(agents, old, old);
    const p = new Profiles([agents]);
    expect(p.names()).toEqual(['a']);
    writeFileSync(join(agents, 'a.json'), JSON.stringify({ prompt: 'two' }));
    utimesSync(agents, old, old);
    expect(p.get('a').prompt).toBe('two');
    writeFileSync(join(agents, 'b.json'), JSON.stringify({ prompt: 'new' }));
    expect(p.names()).toEqual(['a', 'b']);
    expect(p.get('b').prompt).toBe('new');
    rmSync(join(agents, 'a.json'));
    expect(() => p.get('a')).toThrow(/no agent profile named "a"/);
  });
});

describe('tool cache key', () => {
  it('changes with the tools asked for and PATH at once, and with the .meta files within a second', () => {
    const tools = join(dir, 'tools');
    mkdirSync(tools);
    writeFileSync(join(tools, 'x.meta'), 'name x\n');
    const c = new ToolCache(join(dir, 'tools.json'), [tools]);
    const k = c.key(['x']);
    expect(c.key(['x'])).toBe(k);
    expect(c.key(['x', 'y'])).not.toBe(k);
    vi.useFakeTimers({ toFake: ['Date'] });
    writeFileSync(join(tools, 'y.meta'), 'name y\n');
    vi.setSystemTime(Date.now() + 1500);
    expect(c.key(['x'])).not.toBe(k);
  });
});
