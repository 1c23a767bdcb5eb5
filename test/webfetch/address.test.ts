/** web_fetch's address rules: which addresses are not public, and the allow_private entries that let them through. */
import { describe, expect, test } from 'vitest';
import {
  coversAddress,
  isLocalhostName,
  namesHost,
  parseAllowEntry,
  parseAllowList,
  parseIp,
  whyNotPublicAddress,
} from '../../src/tools/web/address.js';

describe('whyNotPublicAddress', () => {
  test.each([
    ['127.0.0.1', 'a loopback address'],
    ['127.255.0.9', 'a loopback address'],
    ['0.0.0.0', 'a "this network" address (0.0.0.0/8 reaches the local machine)'],
    ['0.1.2.3', 'a "this network" address (0.0.0.0/8 reaches the local machine)'],
    ['10.1.2.3', 'a private address'],
    ['172.16.0.1', 'a private address'],
    ['172.31.255.255', 'a private address'],
    ['192.168.1.1', 'a private address'],
    ['169.254.169.254', 'a link-local address (where cloud metadata services answer)'],
    ['100.64.0.1', 'a shared (carrier-grade NAT) address'],
    ['100.127.255.254', 'a shared (carrier-grade NAT) address'],
    ['224.0.0.251', 'a multicast address'],
    ['239.255.255.250', 'a multicast address'],
    ['240.0.0.1', 'a reserved address'],
    ['255.255.255.255', 'the broadcast address'],
    ['192.0.0.170', 'an IETF protocol address'],
    ['::1', 'a loopback address'],
    ['::', 'the unspecified address'],
    ['fc00::1', 'a unique local (private) address'],
    ['fd12:3456::1', 'a unique local (private) address'],
    ['fe80::1', 'a link-local address'],
    ['fe80::1%eth0', 'a link-local address'],
    ['ff02::1', 'a multicast address'],
    ['::ffff:127.0.0.1', 'an IPv4-mapped address of 127.0.0.1, a loopback address'],
    ['::ffff:7f00:1', 'an IPv4-mapped address of 127.0.0.1, a loopback address'],
    [
      '[::ffff:a9fe:a9fe]',
      'an IPv4-mapped address of 169.254.169.254, a link-local address (where cloud metadata services answer)',
    ],
    ['::127.0.0.1', 'an IPv4-compatible address (deprecated; it reaches IPv4 hosts)'],
    ['::7f00:1', 'an IPv4-compatible address (deprecated; it reaches IPv4 hosts)'],
    ['::8.8.8.8', 'an IPv4-compatible address (deprecated; it reaches IPv4 hosts)'],
    ['::ffff:0:7f00:1', 'an IPv4-translated address of 127.0.0.1, a loopback address'],
    ['64:ff9b::10.0.0.1', 'a NAT64 address of 10.0.0.1, a private address'],
    ['64:ff9b::7f00:1', 'a NAT64 address of 127.0.0.1, a loopback address'],
    ['64:ff9b:1::1', 'a local-use NAT64 address'],
    ['2002:7f00:1::', 'a 6to4 address of 127.0.0.1, a loopback address'],
    ['2002:c0a8:101::1', 'a 6to4 address of 192.168.1.1, a private address'],
    // Teredo: server 65.54.227.120, client 127.0.0.1 stored inverted (0x80ff:0xfffe).
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'a Teredo address of 127.0.0.1, a loopback address'],
    ['2001:db8::1', 'a documentation address'],
    ['100::1', 'a discard-only address'],
    ['fec0::1', 'a site-local address (deprecated)'],
  ])('%s is %s', (addr, why) => {
    expect(whyNotPublicAddress(addr)).toBe(why);
  });

  test.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
    '2a00:1450:4001:80b::200e',
  ])('%s is public', (addr) => {
    expect(whyNotPublicAddress(addr)).toBeUndefined();
  });

  test('names are not addresses', () => {
    expect(whyNotPublicAddress('example.com')).toBe('not an IP address');
  });
});

describe('allow_private entries', () => {
  test('hosts, addresses with and without ports, networks', () => {
    expect(parseAllowEntry('Docs.Internal.')).toEqual({ name: 'docs.internal' });
    expect(parseAllowEntry('localhost:8000')).toEqual({ name: 'localhost', port: 8000 });
    expect(parseAllowEntry('127.0.0.1:8080')).toEqual({ ip: parseIp('127.0.0.1'), port: 8080 });
    expect(parseAllowEntry('[::1]:8080')).toEqual({ ip: parseIp('::1'), port: 8080 });
    expect(parseAllowEntry('fd00::5')).toEqual({ ip: parseIp('fd00::5') });
    expect(parseAllowEntry('10.0.0.0/8')).toEqual({ net: parseIp('10.0.0.0'), bits: 104 });
  });

  test('mistakes name the entry and what is wrong', () => {
    expect(() => parseAllowList('10.0.0.0/8', 'sandbox.network.allow_private')).toThrow(
      'sandbox.network.allow_private: must be a list of hosts, host:port, addresses or networks like ["docs.internal", "127.0.0.1:8000", "10.0.0.0/8"]',
    );
    expect(() => parseAllowList(['ok.host', 'bad host'], 'sandbox.network.allow_private')).toThrow(
      'sandbox.network.allow_private[1]: "bad host" is not a host, host:port, address or network (not a valid host name)',
    );
    expect(() => parseAllowList(['10.0.0.0/33'], 'x')).toThrow(
      'x[0]: "10.0.0.0/33" is not a host, host:port, address or network (a network is ADDRESS/PREFIX, like 10.0.0.0/8 or fd00::/8)',
    );
    expect(() => parseAllowList(['host:0'], 'x')).toThrow(
      'x[0]: "host:0" is not a host, host:port, address or network (port 0 is not 1-65535)',
    );
    expect(() => parseAllowList(['[host]:80'], 'x')).toThrow('brackets hold an IPv6 address');
    expect(() => parseAllowList([''], 'x')).toThrow('x[0]: "" is not a host, host:port, address or network (empty)');
    expect(() => parseAllowList([42], 'x')).toThrow('x[0]: 42 is not a host, host:port, address or network (empty)');
  });

  test('matching: a name with its port, an address whatever its spelling, a network', () => {
    const allow = parseAllowList(['docs.internal:8000', '127.0.0.1:9000', '10.0.0.0/8', 'fd00::/8'], 'x');
    expect(namesHost(allow, 'DOCS.internal.', 8000)).toBe(true);
    expect(namesHost(allow, 'docs.internal', 8001)).toBe(false);
    expect(namesHost(allow, 'evil.docs.internal', 8000)).toBe(false);
    expect(coversAddress(allow, parseIp('127.0.0.1')!, 9000)).toBe(true);
    expect(coversAddress(allow, parseIp('::ffff:7f00:1')!, 9000)).toBe(true);
    expect(coversAddress(allow, parseIp('127.0.0.1')!, 9001)).toBe(false);
    expect(coversAddress(allow, parseIp('127.0.0.2')!, 9000)).toBe(false);
    expect(coversAddress(allow, parseIp('10.200.3.4')!, 1)).toBe(true);
    expect(coversAddress(allow, parseIp('11.0.0.1')!, 80)).toBe(false);
    expect(coversAddress(allow, parseIp('fdab::1')!, 80)).toBe(true);
    expect(coversAddress(allow, parseIp('fe80::1')!, 80)).toBe(false);
  });

  test('localhost names', () => {
    expect(isLocalhostName('localhost')).toBe(true);
    expect(isLocalhostName('LOCALHOST.')).toBe(true);
    expect(isLocalhostName('api.localhost')).toBe(true);
    expect(isLocalhostName('localhost.example.com')).toBe(false);
    expect(isLocalhostName('notlocalhost')).toBe(false);
  });
});
