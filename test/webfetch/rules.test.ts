/** Per-tool sandbox rules: the .meta's `sandbox` value checked, and the helper flags it adds to a policy. */
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { Confinement } from '../../src/toolsrv/exec/confine.js';
import { parseToolSandbox } from '../../src/toolsrv/registry/sandbox-rules.js';
import { loadPolicy, policyArgs, type SandboxPolicy } from '../../src/toolsrv/sandbox/index.js';
import { makeWorld, writePolicy, type World } from '../toolsrv/sandbox-helpers.js';

let w: World;
beforeEach(() => {
  w = makeWorld();
});
afterEach(() => w.cleanup());

/** The network flags of the helper's command line. */
const netFlags = (p: SandboxPolicy, extra = {}): string[] => {
  const a = policyArgs(p, extra);
  const out: string[] = [];
  a.forEach((x, i) => {
    if (x === '--no-net') out.push(x);
    if (x === '--net-connect' || x === '--net-bind') out.push(`${x} ${a[i + 1]}`);
  });
  return out;
};

describe('parseToolSandbox', () => {
  test('ollieSocket and network rules', () => {
    expect(parseToolSandbox(undefined)).toEqual({});
    expect(parseToolSandbox({ ollieSocket: true })).toEqual({ allowOllieSocket: true });
    expect(parseToolSandbox({ network: { connect_tcp: [80, 443, 443] } })).toEqual({
      network: { connectTcp: [80, 443] },
    });
    expect(parseToolSandbox({ network: { bind_tcp: [8080] } })).toEqual({ network: { bindTcp: [8080] } });
  });

  test('mistakes are reported', () => {
    expect(() => parseToolSandbox([])).toThrow('sandbox: must be an object like {"ollieSocket": true}');
    expect(() => parseToolSandbox({ ollieSocket: 'yes' })).toThrow('sandbox.ollieSocket: must be true or false');
    expect(() => parseToolSandbox({ network: { connect_tcp: [0] } })).toThrow(
      'sandbox.network.connect_tcp: must be a list of TCP ports (1-65535), not [0]',
    );
    expect(() => parseToolSandbox({ network: { udp: [53] } })).toThrow(
      'sandbox.network.udp: unknown (known: connect_tcp, bind_tcp, allow_private)',
    );
    expect(() => parseToolSandbox({ network: {} })).toThrow(
      'sandbox.network: names no port (a tool gets network access port by port)',
    );
    expect(() => parseToolSandbox({ network: { connect_tcp: [443], allow_private: ['ok.host', 'bad host'] } })).toThrow(
      'sandbox.network.allow_private[1]: "bad host" is not a host, host:port, address or network (not a valid host name)',
    );
    expect(() => parseToolSandbox({ network: { connect_tcp: [443], allow_private: '10.0.0.0/8' } })).toThrow(
      'sandbox.network.allow_private: must be a list of',
    );
  });

  test('allow_private: kept as written, for the tool', () => {
    expect(
      parseToolSandbox({
        network: { connect_tcp: [443], allow_private: ['localhost:8000', '10.0.0.0/8', 'localhost:8000'] },
      }),
    ).toEqual({
      network: { connectTcp: [443], allowPrivate: ['localhost:8000', '10.0.0.0/8'] },
    });
  });
});

describe('allow_private reaches the tool from its rule alone', () => {
  const envSets = (p: SandboxPolicy, extra = {}): string[] =>
    policyArgs(p, extra).filter((x, i, a) => a[i - 1] === '--env-set' && x.startsWith('OLLIE_WEB_ALLOW_PRIVATE='));

  test('sandboxed: --env-set with the list, [] when the rule names none, nothing for a tool without a network rule', () => {
    const p = loadPolicy(w);
    expect(envSets(p, { network: { connectTcp: [443], allowPrivate: ['localhost:8000'] } })).toEqual([
      'OLLIE_WEB_ALLOW_PRIVATE=["localhost:8000"]',
    ]);
    expect(envSets(p, { network: { connectTcp: [443] } })).toEqual(['OLLIE_WEB_ALLOW_PRIVATE=[]']);
    expect(envSets(p)).toEqual([]);
  });

  test('unsandboxed (--yolo, an approved bypass): the inherited value is replaced too', async () => {
    const c = await Confinement.create({ yolo: true, dirs: w, toolDirs: [], log: () => undefined });
    const inherited = { PATH: '/usr/bin', OLLIE_WEB_ALLOW_PRIVATE: '["0.0.0.0/0"]' };
    expect(
      c.wrap(['web_fetch'], w.cwd, inherited, { unconfined: false, sandbox: { network: { connectTcp: [443] } } }),
    ).toEqual({ file: 'web_fetch', args: [], env: { PATH: '/usr/bin', OLLIE_WEB_ALLOW_PRIVATE: '[]' } });
    expect(c.wrap(['other'], w.cwd, inherited, { unconfined: true })).toEqual({
      file: 'other',
      args: [],
      env: { PATH: '/usr/bin' },
    });
  });
});

describe('the network rule in the helper flags', () => {
  test('with the network off, a tool with a rule gets exactly its ports; others none', () => {
    const p = loadPolicy(w);
    expect(netFlags(p)).toEqual(['--no-net']);
    expect(netFlags(p, { network: { connectTcp: [80, 443] } })).toEqual(['--net-connect 80', '--net-connect 443']);
  });

  test('with port lists, the union; with the network open, nothing changes', () => {
    writePolicy(w, 'network:\n  enabled: true\n  connect_tcp: [8080]\n');
    expect(netFlags(loadPolicy(w), { network: { connectTcp: [443] } })).toEqual([
      '--net-connect 8080',
      '--net-connect 443',
    ]);
    writePolicy(w, 'network:\n  enabled: true\n');
    expect(netFlags(loadPolicy(w), { network: { connectTcp: [443] } })).toEqual([]);
  });
});
