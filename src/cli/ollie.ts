#!/usr/bin/env -S node --max-semi-space-size=2
/**
 * `ollie`: runs the daemons. `ollie serve` runs olliesrv in the foreground.
 *
 * The shebang's flag: a daemon streams many small short-lived objects (SSE chunks, 9P frames); a 2 MB young
 * generation collects them as fast and keeps the peak RSS about 20 MB lower (bench/agent-loop.mjs).
 */
import { Command, InvalidArgumentError } from 'commander';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import { dirname, join, resolve } from 'node:path';
import { formatAddress, type Address } from '../ninep/index.js';
import { run, type RunOptions } from './run.js';
import type { FrontDoor } from '../platform/front-door.js';
import { configDir, dataDir, defaultSocketPath } from '../platform/paths.js';
import { registerModels } from './models.js';
import { registerSetup } from './setup.js';
import { registerMcp } from './mcp.js';
import { trustDisplay } from './trust-display.js';

function parseHostPort(v: string): Address & { kind: 'tcp' } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(v);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port < 0 || port > 65535) throw new InvalidArgumentError('expected HOST:PORT, e.g. 127.0.0.1:5640');
  return { kind: 'tcp', host: m[1] ?? (m[2] || '127.0.0.1'), port };
}

/** The package's version: src/cli/ and dist/cli/ are both two levels below the package root. */
const version = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

const program = new Command('ollie')
  .description('Ollie: a runtime for AI coding agents, served as a 9P filesystem.')
  .version(version, '-V, --version');

program
  .command('serve')
  .description('run olliesrv in the foreground')
  .option('--socket <path>', 'Unix socket to serve on', defaultSocketPath())
  .option(
    '--tcp <host:port>',
    'also serve on TCP (loopback unless a host is given), to clients presenting the owner token (owner.token beside the socket)',
    parseHostPort,
  )
  .option('--config <dir>', 'configuration directory', configDir())
  .option('--data <dir>', 'data directory (ollie.db)', dataDir())
  .option(
    '--ui',
    'also serve the web UI on 127.0.0.1 (prints its URL, with its token; both kept across restarts, so an open page reconnects)',
  )
  .option(
    '--ui-port <n>',
    'port of the loopback HTTP server (web UI and gateway; default: the last one if free, else any free port)',
    (v) => Number.parseInt(v, 10),
  )
  .option('--yolo', 'run tools WITHOUT the sandbox (loudly logged)')
  .option(
    '--http [port]',
    'also serve the HTTP gateway (REST over the namespace) at /api on the loopback HTTP server the web UI uses, behind the same token',
  )
  .option('--shared-toolsrv', 'one toolsrv for all sessions (path locks hold across sessions)')
  .option('--no-tools', 'start no toolsrv: agents run without tools')
  .action(
    async (o: {
      socket: string;
      tcp?: Address & { kind: 'tcp' };
      config: string;
      data: string;
      ui?: boolean;
      uiPort?: number;
      yolo?: boolean;
      sharedToolsrv?: boolean;
      tools: boolean;
    }) => {
      let daemon;
      try {
        const { startDaemon } = await import('../olliesrv/daemon.js');
        daemon = await startDaemon({
          socket: resolve(o.socket),
          tcp: o.tcp,
          configDir: resolve(o.config),
          dataDir: resolve(o.data),
          toolsrv: o.tools && { yolo: o.yolo, shared: o.sharedToolsrv },
        });
      } catch (e) {
        process.stderr.write(`ollie serve: ${(e as Error).message}\n`);
        process.exit(1);
      }
      // A library's stray rejection must not take every client's sessions down with it: log it and keep serving.
      process.on('unhandledRejection', (e) =>
        process.stderr.write(`ollie: internal error (still serving): ${(e as Error)?.stack ?? String(e)}\n`),
      );
      for (const a of daemon.addresses) process.stdout.write(`ollie: serving 9P on ${formatAddress(a)}\n`);
      const http = (o as { http?: string | true }).http;
      const httpPort = typeof http === 'string' ? Number.parseInt(http, 10) : undefined;
      const ui = o.ui || o.uiPort !== undefined;
      let door: FrontDoor | undefined;
      if (ui || http !== undefined) {
        try {
          // The web UI and the gateway share one loopback server, token and port: they cannot be given two ports.
          if (o.uiPort !== undefined && httpPort !== undefined && o.uiPort !== httpPort)
            throw new Error(
              `--ui-port ${o.uiPort} and --http ${httpPort} name two ports; the web UI and the gateway share one`,
            );
          // Imported only when asked for: they are a fifth of the CLI's start-up.
          const { startRememberedFrontDoor } = await import('../platform/front-door.js');
          door = await startRememberedFrontDoor({
            port: o.uiPort ?? httpPort,
            stateFile: join(dirname(o.socket), 'webui.json'),
          });
          if (ui) {
            const { mountWebUi, webUiUrl } = await import('../webui/server.js');
            mountWebUi(door, { server: daemon.server });
            process.stdout.write(`ollie: web UI at ${webUiUrl(door)}\n`);
          }
          if (http !== undefined) {
            const { mountHttpGateway } = await import('../gateway/http.js');
            // Closed with the daemon: server.close() ends its 9P connection, the door's close its listener.
            const gw = await mountHttpGateway(door, { server: daemon.server });
            process.stdout.write(
              `ollie: HTTP gateway at ${gw.url}/ (token ${door.token}; curl -H "Authorization: Bearer ${door.token}" ${gw.url}/session/idx)\n`,
            );
          }
        } catch (e) {
          process.stderr.write(`ollie serve: ${ui ? 'web UI' : 'HTTP gateway'}: ${(e as Error).message}\n`);
          await door?.close();
          await daemon.close();
          process.exit(1);
        }
      }
      let stopping = false;
      const stop = (sig: string): void => {
        if (stopping) return;
        stopping = true;
        process.stderr.write(`ollie: ${sig}, shutting down\n`);
        Promise.all([door?.close(), daemon.close()]).then(
          () => process.exit(0),
          (e: unknown) => {
            process.stderr.write(`ollie: shutdown failed: ${(e as Error).message}\n`);
            process.exit(1);
          },
        );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
    },
  );

program
  .command('run')
  .description(
    'run one prompt headless: stream the reply to stdout, tool calls to stderr; exit 0 when the turn ends well',
  )
  .argument('<prompt...>', 'the prompt (several words are joined with spaces)')
  .option('-a, --addr <addr>', 'use a running olliesrv (unix!/path or tcp!host!port) instead of starting one')
  .option('--backend <name>', 'backend (default: the configured default)')
  .option('--model <name>', "model (default: the backend's)")
  .option('--agent <profile>', 'agent profile', 'default')
  .option('--cwd <dir>', 'working directory of the agent', process.cwd())
  .option('--config <dir>', 'configuration directory', configDir())
  .option('--data <dir>', 'keep the session in this data directory (default: a throwaway one)')
  .option('--yolo', 'run tools without the sandbox, and approve bypass requests')
  .option('--reasoning', "print the model's reasoning to stderr")
  .action(async (words: string[], o: RunOptions) => {
    try {
      process.exitCode = await run(words.join(' '), o);
    } catch (e) {
      process.stderr.write(`ollie run: ${(e as Error).message}\n`);
      process.exitCode = 1;
    }
    // One turn, then out (once stdout and stderr are written): nothing the closed daemon may have left behind
    // keeps us, e.g. a toolsrv connection still being opened when the turn ended (the first request does not
    // wait for toolsrv, so a quick turn can end first; the daemon then reconnects to a new toolsrv).
    await Promise.all([process.stdout, process.stderr].map((s) => new Promise((r) => s.write('', r))));
    process.exit();
  });

program
  .command('trust')
  .description(
    "trust a project's .ollie-sandbox.yaml (or, named by its path, its .ollie-hooks.json or .mcp.json) as it is now (it applies only while unchanged); on a terminal it shows the file and asks first; --untrust forgets it, --list lists",
  )
  .argument('[path]', 'the project directory, its .ollie-sandbox.yaml, its .ollie-hooks.json or its .mcp.json', '.')
  .option('--config <dir>', 'configuration directory (where trusted-projects is kept)', configDir())
  .option('--sha <sha256>', 'trust the file only if its SHA-256 is this (the bytes you read), without asking')
  .option('--yes', 'do not show the file and ask, even on a terminal')
  .option('--untrust', 'forget the file instead')
  .option('--list', 'list the trusted files: sha256, path')
  .action(
    async (path: string, o: { config: string; sha?: string; yes?: boolean; untrust?: boolean; list?: boolean }) => {
      const { applyTrustCommands, listTrusted, projectPolicy, trust } = await import('../toolsrv/public.js');
      try {
        const dir = resolve(o.config);
        if (o.list) process.stdout.write(listTrusted(dir));
        else if (o.untrust) process.stdout.write(applyTrustCommands(dir, `untrust ${resolve(path)}`));
        else {
          let sha = o.sha;
          if (sha === undefined && !o.yes && process.stdin.isTTY) {
            // What the owner is shown is what gets trusted: the hash of these bytes pins the trust, so an agent
            // that rewrites the file while the owner reads it gets a refusal, not its version trusted.
            const shown = projectPolicy(path);
            const d = trustDisplay(shown.file, shown.sha, shown.bytes);
            process.stdout.write(d.text);
            if (!(await confirm(d.question))) {
              process.stderr.write('ollie trust: nothing trusted\n');
              process.exitCode = 1;
              return;
            }
            sha = shown.sha;
          }
          process.stdout.write(`trusted ${trust(dir, resolve(path), sha)}\n`);
        }
      } catch (e) {
        process.stderr.write(`ollie trust: ${(e as Error).message}\n`);
        process.exitCode = 1;
      }
    },
  );

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

registerModels(program);
registerSetup(program);
registerMcp(program);

await program.parseAsync();
