/**
 * A tool's own sandbox rules: the `.meta` field `"sandbox": {…}`, checked when the catalog is scanned and
 * turned into the SandboxExtra that sandboxCommand() lays over the policy for that tool alone.
 *
 *   ollieSocket   true: the tool may create Unix sockets and gets $OLLIE_ADDR (client_9p, subagent_spawn)
 *   network       {"connect_tcp": [PORT…], "bind_tcp": [PORT…]}: TCP ports the tool may connect to / bind
 *                 although the policy's network is off (web_fetch: 80 and 443); "allow_private": [HOST[:PORT],
 *                 ADDRESS[:PORT], NETWORK/PREFIX…]: the non-public hosts web_fetch may reach (none as shipped)
 *   ro, rw        ["{XDG_DATA_HOME}/ollie/NAME", …]: directories of Ollie's data dir the tool may read / read and
 *                 write (the memory tools: memory/ rw, models/ ro). Nothing else may be named: the data dir's own
 *                 files (ollie.db) stay out of reach, and so does everything the policy does not grant.
 *   env           ["NAME", …]: variables the tool keeps beyond the policy's env list (XDG_DATA_HOME, so that it
 *                 finds the directories above)
 *
 * A rule is added here, in one place: its check, its field of SandboxExtra, and its helper flags in
 * sandbox/index.ts policyArgs(). Keys this function does not know are left to other readers of the .meta
 * (filesystem rules are checked where they are applied).
 */
import { join } from 'node:path';
import { dataDir } from '../../platform/paths.js';
import { parseAllowList } from '../../tools/web/address.js';
import type { SandboxExtra } from '../sandbox/index.js';
import { MetaError } from './meta.js';

const NET_KEYS = ['connect_tcp', 'bind_tcp', 'allow_private'] as const;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function ports(v: unknown, where: string): number[] {
  if (!Array.isArray(v) || !v.every((p) => Number.isInteger(p) && p >= 1 && p <= 65535)) {
    throw new MetaError(`${where}: must be a list of TCP ports (1-65535), not ${JSON.stringify(v)}`);
  }
  return [...new Set(v as number[])];
}

const DATA_PATH = /^\{XDG_DATA_HOME\}\/ollie\/((?:[A-Za-z0-9_-][A-Za-z0-9_.-]*)(?:\/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*)$/;

/** Directories of Ollie's data dir, expanded with toolsrv's own $XDG_DATA_HOME (the dir it and its tools share). */
function dataPaths(v: unknown, where: string): string[] {
  if (!Array.isArray(v) || !v.every((p) => typeof p === 'string'))
    throw new MetaError(`${where}: must be a list of paths like "{XDG_DATA_HOME}/ollie/memory"`);
  return v.map((p: string) => {
    const m = DATA_PATH.exec(p);
    if (!m || m[1]!.split('/').includes('..'))
      throw new MetaError(
        `${where}: ${JSON.stringify(p)} is not a directory of Ollie's data dir ("{XDG_DATA_HOME}/ollie/NAME"); a tool's own rules may grant nothing else`,
      );
    return join(dataDir(), m[1]!);
  });
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
    for (const k of Object.keys(n))
      if (!(NET_KEYS as readonly string[]).includes(k))
        throw new MetaError(`sandbox.network.${k}: unknown (known: ${NET_KEYS.join(', ')})`);
    const connectTcp = n.connect_tcp === undefined ? [] : ports(n.connect_tcp, 'sandbox.network.connect_tcp');
    const bindTcp = n.bind_tcp === undefined ? [] : ports(n.bind_tcp, 'sandbox.network.bind_tcp');
    if (!connectTcp.length && !bindTcp.length)
      throw new MetaError('sandbox.network: names no port (a tool gets network access port by port)');
    let allowPrivate: string[] = [];
    if (n.allow_private !== undefined) {
      try {
        parseAllowList(n.allow_private, 'sandbox.network.allow_private');
      } catch (e) {
        throw new MetaError((e as Error).message);
      }
      allowPrivate = [...new Set(n.allow_private as string[])];
    }
    extra.network = {
      ...(connectTcp.length ? { connectTcp } : {}),
      ...(bindTcp.length ? { bindTcp } : {}),
      ...(allowPrivate.length ? { allowPrivate } : {}),
    };
  }
  for (const level of ['ro', 'rw'] as const) {
    if (v[level] === undefined) continue;
    const paths = dataPaths(v[level], `sandbox.${level}`);
    if (paths.length) extra[level] = paths;
  }
  if (v.env !== undefined) {
    if (!Array.isArray(v.env) || !v.env.every((e) => typeof e === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(e))) {
      throw new MetaError('sandbox.env: must be a list of variable names like ["XDG_DATA_HOME"]');
    }
    if (v.env.length) extra.env = [...new Set(v.env as string[])];
  }
  return extra;
}
