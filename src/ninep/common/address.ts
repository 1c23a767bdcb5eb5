/** Dial strings in Plan 9 style: `unix!/path/to/sock`, `tcp!host!port`; a bare path means a Unix socket. */
export type Address = { kind: 'unix'; path: string } | { kind: 'tcp'; host: string; port: number };

export function parseAddress(s: string): Address {
  const parts = s.split('!');
  if (parts.length === 1) {
    if (!s) throw new Error('empty address');
    return { kind: 'unix', path: s };
  }
  const [net, a, b] = parts;
  if (net === 'unix' && parts.length === 2 && a) return { kind: 'unix', path: a };
  if (net === 'tcp' && parts.length === 3 && a && b) {
    const port = Number(b);
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new Error(`bad port in address ${JSON.stringify(s)}`);
    return { kind: 'tcp', host: a, port };
  }
  throw new Error(`bad address ${JSON.stringify(s)}: expected unix!/path or tcp!host!port`);
}

export function formatAddress(a: Address): string {
  return a.kind === 'unix' ? `unix!${a.path}` : `tcp!${a.host}!${a.port}`;
}
