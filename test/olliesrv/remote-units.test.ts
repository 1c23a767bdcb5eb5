/** Parsing what names a remote host: `remote=` values and the Host aliases of an ssh config. */
import { describe, expect, it } from 'vitest';
import { parseRemote, shq, sshConfigHosts } from '../../src/olliesrv/toolclient/remote.js';

describe('remote hosts', () => {
  it('parses [user@]host[:port] and aliases', () => {
    expect(parseRemote('build')).toEqual({ label: 'build', dest: 'build' });
    expect(parseRemote(' me@build.example:2222 ')).toEqual({
      label: 'me@build.example:2222',
      dest: 'me@build.example',
      port: 2222,
    });
    expect(parseRemote('[::1]:22')).toEqual({ label: '[::1]:22', dest: '::1', port: 22 });
    expect(parseRemote('_deploy@10.0.0.5')).toEqual({ label: '_deploy@10.0.0.5', dest: '_deploy@10.0.0.5' });
  });

  it('refuses what ssh would take as an option or a shell would expand, naming the value', () => {
    for (const bad of [
      '-oProxyCommand=id',
      '-p',
      'me@-oX',
      'a b',
      'h;id',
      '$(id)',
      'h:0',
      'h:70000',
      '',
      'a/b',
      'h`id`',
    ]) {
      expect(() => parseRemote(bad), bad).toThrow(/remote "/);
    }
  });

  it('lists the Host aliases of an ssh config, without patterns', () => {
    const conf = [
      'Host build build2 # two',
      '  HostName b.example',
      'host *.corp !x',
      'Host ci',
      'Match all',
      'Host -evil ok?',
    ].join('\n');
    expect(sshConfigHosts(conf)).toEqual(['build', 'build2', 'ci']);
  });

  it('quotes for the remote shell', () => {
    expect(shq("it's")).toBe(`'it'\\''s'`);
  });
});
