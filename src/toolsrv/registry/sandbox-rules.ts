/**
 * A tool's own sandbox rules: the `.meta` field `"sandbox": {…}`, checked when the catalog is scanned and
 * turned into the SandboxExtra that sandboxCommand() lays over the policy for that tool alone.
 *
 *   ollieSocket   true: the tool may create Unix sockets and gets $OLLIE_ADDR (client_9p, subagent_spawn)
 *   network       {"connect_tcp": [PORT…], "bind_tcp": [PORT…]}: TCP ports the tool may connect to / bind
 *                 although the policy's network is off (web_fetch: 80 and 443)
 *
 * A rule is added here, in one place: its check, its field of SandboxExtra, and its helper flags in
 * sandbox/index.ts policyArgs(). Keys this function does not know are left to other readers of the .meta
 * (filesystem rules are checked where they are applied).
 */
import type { SandboxExtra } from '../sandbox/index.js';
import { MetaError } from './meta.js';

const NET_KEYS = ['connect_tcp', 'bind_tcp'] as const;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function ports(v: unknown, where: string): number[] {
  if (!Array.isArray(v) || !v.every((p) => Number.isInteger(p) && p >= 1 && p <= 65535)) {
    throw new MetaError(`${where}: must be a list of TCP ports (1-65535), not ${JSON.stringify(v)}`);
  }
  return [...new Set(v as number[])];
}

/** The SandboxExtra of a .meta's `sandbox` value (undefined: none). Throws MetaError on anything unknown. */
export function parseToolSandbox(v: unknown): SandboxExtra {
  if (v === undefined) return {};
  if (!isObject(v)) throw new MetaError('sandbox: must be an object like {"ollieSocket": true}');
  const extra: SandboxExtra = {};
  if (v.ollieSocket !== undefined) {
    if (typeof v.ollieSocket !== 'boolean') throw new MetaError('sandbox.ollieSocket: must be true or false');
    if (v.ollieSocket) extra.allowOllieSocket = true;
  }
  if (v.network !== undefined) {
    const n = v.network;
    if (!isObject(n)) throw new MetaError('sandbox.network: must be an object like {"connect_tcp": [443]}');
    for (const k of Object.keys(n)) if (!(NET_KEYS as readonly string[]).includes(k)) throw new MetaError(`sandbox.network.${k}: unknown (known: ${NET_KEYS.join(', ')})`);
    const connectTcp = n.connect_tcp === undefined ? [] : ports(n.connect_tcp, 'sandbox.network.connect_tcp');
    const bindTcp = n.bind_tcp === undefined ? [] : ports(n.bind_tcp, 'sandbox.network.bind_tcp');
    if (!connectTcp.length && !bindTcp.length) throw new MetaError('sandbox.network: names no port (a tool gets network access port by port)');
    extra.network = { ...(connectTcp.length ? { connectTcp } : {}), ...(bindTcp.length ? { bindTcp } : {}) };
  }
  return extra;
}
