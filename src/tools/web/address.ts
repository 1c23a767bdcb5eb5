/**
 * Which addresses web_fetch may connect to. The sandbox lets web_fetch reach TCP 80 and 443 on any address
 * (Landlock filters by port, not by address), so without this a model could point it at the machine itself
 * (127.0.0.1, [::1], localhost), at the LAN, or at a cloud's metadata service (169.254.169.254), and read what
 * answers. Every address web_fetch connects to — a literal in the URL or each address a name resolves to, on
 * every redirect hop — is classified here; anything but a global unicast address is refused unless the
 * tool's `allow_private` rule names the host, the address or a network containing it.
 *
 * Addresses are compared as 128-bit numbers, IPv4 as its IPv4-mapped IPv6 form, so `::ffff:127.0.0.1` is the
 * same address as `127.0.0.1`. IPv6 forms that embed an IPv4 address (mapped, translated, NAT64, 6to4, Teredo)
 * are judged by the address they embed as well.
 */
import { isIP } from 'node:net';

/**
 * The variable toolsrv gives a tool with a network rule: its rule's `allow_private` as a JSON list, `[]` when
 * it names none. Always set by toolsrv (sandboxed, the helper's --env-set overrides any inherited value), so
 * the .meta is the only source.
 */
export const ALLOW_PRIVATE_ENV = 'OLLIE_WEB_ALLOW_PRIVATE';

const MAPPED = 0xffff_0000_0000n;

/** An address as a 128-bit number (IPv4 as ::ffff:a.b.c.d), or undefined when `s` is not an IP address. */
export function parseIp(s: string): bigint | undefined {
  const a = s.startsWith('[') && s.endsWith(']') ? s.slice(1, -1) : s;
  const v = isIP(a);
  if (v === 4) return MAPPED | v4(a);
  if (v === 6) return v6(a);
  return undefined;
}

function v4(s: string): bigint {
  return s.split('.').reduce((n, p) => (n << 8n) | BigInt(Number(p)), 0n);
}

function v6(s: string): bigint {
  let t = s.replace(/%.*$/, '');
  // An embedded dotted IPv4 tail (::ffff:127.0.0.1) becomes two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(t);
  if (dotted) {
    const n = Number(v4(dotted[1]!));
    t = `${t.slice(0, -dotted[1]!.length)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = t.includes('::') ? (t.split('::') as [string, string]) : [t, undefined];
  const hs = head ? head.split(':') : [];
  const ts = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = tail === undefined ? hs : [...hs, ...Array<string>(8 - hs.length - ts.length).fill('0'), ...ts];
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

const v4Text = (n: bigint): string => [24n, 16n, 8n, 0n].map((s) => Number((n >> s) & 0xffn)).join('.');

interface Range {
  net: bigint;
  bits: number;
  what: string;
}

const range = (cidr: string, what: string): Range => {
  const [a, b] = cidr.split('/') as [string, string];
  const v = isIP(a);
  return { net: parseIp(a)!, bits: Number(b) + (v === 4 ? 96 : 0), what };
};

const inRange = (n: bigint, r: { net: bigint; bits: number }): boolean =>
  r.bits === 0 || n >> BigInt(128 - r.bits) === r.net >> BigInt(128 - r.bits);

/** IPv4 ranges that are not the public internet (RFC 6890 and friends). */
const V4: Range[] = [
  range('0.0.0.0/8', 'a "this network" address (0.0.0.0/8 reaches the local machine)'),
  range('10.0.0.0/8', 'a private address'),
  range('100.64.0.0/10', 'a shared (carrier-grade NAT) address'),
  range('127.0.0.0/8', 'a loopback address'),
  range('169.254.0.0/16', 'a link-local address (where cloud metadata services answer)'),
  range('172.16.0.0/12', 'a private address'),
  range('192.0.0.0/24', 'an IETF protocol address'),
  range('192.0.2.0/24', 'a documentation address'),
  range('192.168.0.0/16', 'a private address'),
  range('198.18.0.0/15', 'a benchmarking address'),
  range('198.51.100.0/24', 'a documentation address'),
  range('203.0.113.0/24', 'a documentation address'),
  range('224.0.0.0/4', 'a multicast address'),
  range('255.255.255.255/32', 'the broadcast address'),
  range('240.0.0.0/4', 'a reserved address'),
];

/** IPv6 ranges that are not the public internet, and those that embed an IPv4 address to judge. */
const V6: Range[] = [
  range('::/128', 'the unspecified address'),
  range('::1/128', 'a loopback address'),
  range('::/96', 'an IPv4-compatible address (deprecated; it reaches IPv4 hosts)'),
  range('64:ff9b:1::/48', 'a local-use NAT64 address'),
  range('100::/64', 'a discard-only address'),
  range('2001:db8::/32', 'a documentation address'),
  range('::/8', 'a reserved address'),
  range('fc00::/7', 'a unique local (private) address'),
  range('fe80::/10', 'a link-local address'),
  range('fec0::/10', 'a site-local address (deprecated)'),
  range('ff00::/8', 'a multicast address'),
];

/**
 * Forms that carry an IPv4 address: where it sits (bit offset from the right), whether it is inverted, and
 * whether a public one makes the whole address public (the well-known NAT64 prefix lies inside the reserved
 * ::/8 below, yet reaches the public IPv4 address it embeds).
 */
const EMBEDS: Array<Range & { shift: bigint; invert?: boolean; passes?: boolean }> = [
  { ...range('::ffff:0:0/96', 'an IPv4-mapped address'), shift: 0n, passes: true },
  { ...range('::ffff:0:0:0/96', 'an IPv4-translated address'), shift: 0n },
  { ...range('64:ff9b::/96', 'a NAT64 address'), shift: 0n, passes: true },
  { ...range('2002::/16', 'a 6to4 address'), shift: 80n },
  // Teredo: the server's IPv4 address in bits 32-63, the client's inverted in the last 32.
  { ...range('2001::/32', 'a Teredo address'), shift: 64n },
  { ...range('2001::/32', 'a Teredo address'), shift: 0n, invert: true },
];

/**
 * Why `n` is not a public address, or undefined when it is one. `spelledV6`: the address was written as IPv6
 * (an IPv4-mapped one is then described as such).
 */
export function whyNotPublic(n: bigint, spelledV6 = false): string | undefined {
  if (n >> 32n === 0xffffn && !spelledV6) return v4Why(n & 0xffff_ffffn);
  for (const e of EMBEDS) {
    if (!inRange(n, e)) continue;
    let inner = (n >> e.shift) & 0xffff_ffffn;
    if (e.invert) inner ^= 0xffff_ffffn;
    const why = v4Why(inner);
    if (why) return `${e.what} of ${v4Text(inner)}, ${why}`;
    if (e.passes) return undefined;
  }
  return V6.find((r) => inRange(n, r))?.what;
}

/** whyNotPublic of an address as written (a URL's host, a resolver's answer). */
export const whyNotPublicAddress = (s: string): string | undefined => {
  const n = parseIp(s);
  return n === undefined ? 'not an IP address' : whyNotPublic(n, isIP(s.replace(/^\[(.*)\]$/, '$1')) === 6);
};

function v4Why(inner: bigint): string | undefined {
  return V4.find((r) => inRange(MAPPED | inner, r))?.what;
}

/** One entry of `allow_private`: a host name, an address or a network, with a port for the first two if named. */
export type AllowEntry =
  { name: string; port?: number } | { ip: bigint; port?: number } | { net: bigint; bits: number };

const NAME = /^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** Parses an `allow_private` entry: `host`, `host:port`, `10.0.0.5`, `10.0.0.5:8080`, `[fd00::1]:8080`, `10.0.0.0/8`, `fd00::/8`. */
export function parseAllowEntry(s: string): AllowEntry {
  const bad = (why: string): never => {
    throw new Error(`${JSON.stringify(s)} is not a host, host:port, address or network (${why})`);
  };
  const port = (p: string): number => {
    const n = Number(p);
    return /^\d+$/.test(p) && n >= 1 && n <= 65535 ? n : bad(`port ${p} is not 1-65535`);
  };
  if (typeof s !== 'string' || !s) return bad('empty');
  if (s.includes('/')) {
    const [a, b, ...rest] = s.split('/');
    const v = isIP(a!);
    if (!v || rest.length || !/^\d+$/.test(b!) || Number(b) > (v === 4 ? 32 : 128))
      return bad(`a network is ADDRESS/PREFIX, like 10.0.0.0/8 or fd00::/8`);
    const bits = Number(b) + (v === 4 ? 96 : 0);
    return { net: parseIp(a!)!, bits };
  }
  const bracket = /^\[([^\]]+)\](?::(.*))?$/.exec(s);
  if (bracket) {
    if (isIP(bracket[1]!) !== 6) return bad('brackets hold an IPv6 address');
    return { ip: parseIp(bracket[1]!)!, ...(bracket[2] !== undefined && { port: port(bracket[2]) }) };
  }
  if (isIP(s)) return { ip: parseIp(s)! };
  const m = /^([^:]+)(?::([^:]*))?$/.exec(s);
  if (!m) return bad('an IPv6 address with a port is written [ADDRESS]:PORT');
  const host = m[1]!.toLowerCase().replace(/\.$/, '');
  const p = m[2] !== undefined ? { port: port(m[2]) } : {};
  if (isIP(host)) return { ip: parseIp(host)!, ...p };
  if (!NAME.test(host)) return bad('not a valid host name');
  return { name: host, ...p };
}

/** Parses the list, naming the entry that is wrong. */
export function parseAllowList(list: unknown, where: string): AllowEntry[] {
  if (!Array.isArray(list))
    throw new Error(
      `${where}: must be a list of hosts, host:port, addresses or networks like ["docs.internal", "127.0.0.1:8000", "10.0.0.0/8"]`,
    );
  return list.map((s, i) => {
    try {
      return parseAllowEntry(s as string);
    } catch (e) {
      throw new Error(`${where}[${i}]: ${(e as Error).message}`);
    }
  });
}

/** The host as compared with allow-list names: lower case, no brackets, no trailing dot. */
export const normalHost = (h: string): string =>
  h
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');

/** Does the allow-list name this host (and port)? Then whatever it resolves to may be reached. */
export const namesHost = (allow: AllowEntry[], host: string, port: number): boolean =>
  allow.some((e) => 'name' in e && e.name === normalHost(host) && (e.port === undefined || e.port === port));

/** Does the allow-list name this address (with this port), or a network that contains it? */
export const coversAddress = (allow: AllowEntry[], addr: bigint, port: number): boolean =>
  allow.some((e) =>
    'ip' in e ? e.ip === addr && (e.port === undefined || e.port === port) : 'net' in e ? inRange(addr, e) : false,
  );

/** `localhost` and `*.localhost` are the machine itself whatever a resolver says (RFC 6761). */
export const isLocalhostName = (host: string): boolean => {
  const h = normalHost(host);
  return h === 'localhost' || h.endsWith('.localhost');
};
