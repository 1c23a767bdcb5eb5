import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lines, sharedSecretResponder, type Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { startToolsrv, type Toolsrv, type ToolsrvOptions } from '../../src/toolsrv/server.js';
import type { BypassRequest, ProcResult } from '../../src/toolsrv/protocol.js';

export interface ToolFile {
  meta: Record<string, unknown> | string;
  /** An executable script written next to the .meta. */
  script?: string;
}

/** Writes tools into `dir` (created if needed). */
export function writeTools(dir: string, tools: Record<string, ToolFile>): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, t] of Object.entries(tools)) {
    writeFileSync(join(dir, `${name}.meta`), typeof t.meta === 'string' ? t.meta : JSON.stringify(t.meta));
    if (t.script !== undefined) {
      writeFileSync(join(dir, name), t.script);
      chmodSync(join(dir, name), 0o755);
    }
  }
}

/** A few tools most tests use. */
export const BASIC: Record<string, ToolFile> = {
  sh: {
    // A meta-only tool: the cmd reads the JSON arguments on stdin. With jq on the host (a variant) it starts in
    // a millisecond; without, node does the JSON.
    meta: {
      description: 'run a command',
      args: {
        type: 'object',
        properties: { command: { type: 'string' } },
        required: ['command'],
        additionalProperties: false,
      },
      cmd: `eval "$(${JSON.stringify(process.execPath)} -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>process.stdout.write(JSON.parse(s).command))')"`,
      variants: [{ binary: 'jq', cmd: 'eval "$(jq -r .command)"' }],
    },
  },
  echoargs: {
    meta: {
      description: 'prints its JSON arguments',
      scope: 'read',
      args: { type: 'object', properties: { x: { type: 'number' } } },
    },
    script: '#!/bin/sh\ncat\n',
  },
  writer: {
    meta: {
      description: 'holds a path',
      scope: 'write',
      pathArg: 'path',
      args: { type: 'object', properties: { path: { type: 'string' }, ms: { type: 'number' } }, required: ['path'] },
    },
    script: '#!/bin/sh\nsleep 0.2\necho done\n',
  },
};

export interface Env {
  dir: string;
  toolsDir: string;
  ts: Toolsrv;
  secret: string;
  client(aname?: string, secret?: string): Promise<Client>;
  call(c: Client, req: unknown, signal?: AbortSignal): Promise<ProcResult>;
  close(): Promise<void>;
}

/** An in-process toolsrv (yolo unless told otherwise) on a socket in a fresh private directory. */
export async function startEnv(
  tools: Record<string, ToolFile> = BASIC,
  opts: Partial<ToolsrvOptions> = {},
  userTools?: Record<string, ToolFile>,
): Promise<Env> {
  const dir = mkdtempSync(join(tmpdir(), 'toolsrv-test-'));
  const toolsDir = join(dir, 'tools');
  writeTools(toolsDir, tools);
  // User tools (as in $XDG_CONFIG_HOME/ollie/tools) come first and override.
  if (userTools) {
    writeTools(join(dir, 'user-tools'), userTools);
    opts = { toolDirs: [join(dir, 'user-tools'), toolsDir], ...opts };
  }
  const secret = randomBytes(16).toString('hex');
  const ts = await startToolsrv({
    socket: join(dir, 'run', 't.sock'),
    secret,
    toolDirs: [toolsDir],
    cwd: dir,
    yolo: true,
    log: () => undefined,
    ...opts,
  });
  const clients: Client[] = [];
  return {
    dir,
    toolsDir,
    ts,
    secret,
    async client(aname = 'agent1', s = secret) {
      const c = await dial(
        { kind: 'unix', path: ts.socket },
        { uname: 'tester', aname, authenticate: sharedSecretResponder(s) },
      );
      clients.push(c);
      return c;
    },
    async call(c, req, signal) {
      return JSON.parse(await c.rdwrText('proc/new', JSON.stringify(req), signal)) as ProcResult;
    },
    async close() {
      for (const c of clients) c.close();
      await ts.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Makes a call that asks to leave the sandbox (`ask`) and returns the request the owner is shown for it in
 * bypass/pending, the owner's client to answer it with, and the call, still waiting for that answer.
 */
export async function askOwner<T>(
  env: Env,
  ask: () => Promise<T>,
): Promise<{ ctl: Client; req: BypassRequest; call: Promise<T> }> {
  const ctl = await env.client('');
  const ac = new AbortController();
  try {
    const pending = (async () => {
      for await (const line of lines(ctl.stream('bypass/pending', { signal: ac.signal })))
        return JSON.parse(line) as BypassRequest;
      throw new Error('bypass/pending ended without a request');
    })();
    const call = ask();
    return { ctl, req: await pending, call };
  } finally {
    ac.abort();
  }
}

/** A status file's `key=value` lines as an object (a value may hold `=`). */
export const keyValues = (text: string): Record<string, string> =>
  Object.fromEntries(
    text
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );

/** Whether `pid` runs (a zombie, dead but not yet reaped, does not). */
export const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export { until } from '../wait.js';
