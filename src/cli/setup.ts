/**
 * `ollie setup`: add an LLM backend to backends.conf — the CLI twin of the GUI's onboarding, writing the same file
 * through the same code (olliesrv/backend/setup.ts).
 *
 *   ollie setup                                  asks on a terminal: provider, URL, key (not echoed), model
 *   ollie setup --provider openai --key-env OPENAI_API_KEY [--model M] [--name N] [--url U] [--no-default] [--no-check]
 *
 * The candidate is checked live (its model list) before anything is written; the file is written 0600 with the new
 * section commented; a daemon answering on --socket is told to reload it.
 *
 * Registered in src/cli/ollie.ts with registerSetup(program).
 */
import type { Command } from 'commander';
import { readFileSync, renameSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { CONFIG_FILE, parseBackendsConfig } from '../olliesrv/backend/config.js';
import {
  candidateConfig,
  checkCandidate,
  mergeSetup,
  PROVIDER_IDS,
  PROVIDERS,
  setupFrom,
  type ProviderId,
} from '../olliesrv/backend/setup.js';
import { configDir, defaultSocketPath } from '../platform/paths.js';
import { privateDir, writePrivateFile } from '../platform/private.js';

export interface SetupOptions {
  config: string;
  socket: string;
  provider?: string;
  name?: string;
  url?: string;
  key?: string;
  keyEnv?: string;
  model?: string;
  default: boolean;
  check: boolean;
}

export interface SetupIo {
  out: (s: string) => void;
  env: NodeJS.ProcessEnv;
  /** Asks a question on the terminal; undefined when not interactive (then every answer must come from a flag). */
  ask?: (question: string, secret?: boolean) => Promise<string>;
}

/** Does the setup; returns the path written. Throws with a message for the user on any bad answer or failed check. */
export async function runSetup(o: SetupOptions, io: SetupIo): Promise<string> {
  const ask = io.ask;
  let provider = o.provider;
  if (!provider) {
    if (!ask) throw new Error(`--provider is required when not on a terminal (one of ${PROVIDER_IDS.join(', ')})`);
    io.out(PROVIDER_IDS.map((id, i) => `  ${i + 1}. ${PROVIDERS[id].label} (${id})\n`).join(''));
    const a = (await ask('Provider [1]: ')).trim() || '1';
    provider = PROVIDER_IDS[Number(a) - 1] ?? a;
  }
  if (!(provider in PROVIDERS)) throw new Error(`unknown provider "${provider}" (one of ${PROVIDER_IDS.join(', ')})`);
  const p = PROVIDERS[provider as ProviderId];
  let url = o.url;
  if (!url && ask)
    url = (await ask(`URL [${'url' in p ? p.url : 'e.g. http://localhost:1234/v1'}]: `)).trim() || undefined;
  let key = o.key;
  let keyEnv = o.keyEnv;
  if (!key && !keyEnv && ask) {
    // Asked for keyless providers too: a local server behind a gateway may want one. Enter: the usual variable, or none.
    const envName = 'keyEnv' in p ? p.keyEnv : undefined;
    const a = (
      await ask(
        `API key (not shown; or env:VARNAME${envName ? `; Enter for env:${envName}` : '; Enter for none'}): `,
        true,
      )
    ).trim();
    if (a.startsWith('env:')) keyEnv = a.slice(4);
    else if (a) key = a;
    else keyEnv = envName;
  }
  let setup = setupFrom(
    {
      provider,
      ...(o.name ? { name: o.name } : {}),
      ...(url ? { url } : {}),
      ...(key ? { key } : {}),
      ...(keyEnv ? { keyEnv } : {}),
      ...(o.model ? { model: o.model } : {}),
      makeDefault: o.default,
    },
    'ollie setup',
  );

  if (o.check) {
    io.out(`checking ${setup.url} …\n`);
    let models: string[];
    try {
      models = (await checkCandidate(candidateConfig(setup, io.env, '--key/--key-env'))).map((m) => m.id);
    } catch (e) {
      throw new Error(`the check failed: ${(e as Error).message} (--no-check stores it anyway)`);
    }
    io.out(
      `${models.length} model${models.length === 1 ? '' : 's'}: ${models.slice(0, 12).join(', ')}${models.length > 12 ? ', …' : ''}\n`,
    );
    if (!setup.model) {
      // checkCandidate lists the type's usual model first when the provider serves it, else a local server's own.
      const preferred = models[0]!;
      const model = ask ? (await ask(`Model [${preferred}]: `)).trim() || preferred : preferred;
      setup = { ...setup, model };
    } else if (!models.includes(setup.model)) io.out(`note: ${setup.url} does not list ${setup.model}\n`);
  }

  const dir = resolve(o.config);
  const file = join(dir, CONFIG_FILE);
  let existing = '';
  try {
    existing = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const text = mergeSetup(existing, setup);
  // The whole file as the daemon will read it: a mistake elsewhere in it is reported now, not at the next start.
  parseBackendsConfig(text, file, io.env);
  privateDir(dir, 'the config directory');
  const tmp = join(dir, `.${CONFIG_FILE}.${process.pid}.tmp`);
  writePrivateFile(tmp, text);
  renameSync(tmp, file);
  io.out(`saved [${setup.name}] in ${file}${setup.makeDefault || !existing ? ' (the default backend)' : ''}\n`);

  // A running daemon reads it now; none running reads it when it starts.
  const { dial } = await import('../ninep/node.js');
  let c;
  try {
    c = await dial(`unix!${o.socket}`, { uname: userInfo().username });
  } catch {
    io.out(`no daemon on ${o.socket}: it reads the file when it starts\n`);
    return file;
  }
  try {
    io.out(`daemon: ${(await c.rdwrText('ctl', 'reload')).trim()}\n`);
  } catch (e) {
    // Typically a key = env:NAME the daemon's environment lacks: the file is right, the daemon must be told.
    throw new Error(`saved, but the daemon on ${o.socket} could not load it: ${(e as Error).message}`);
  } finally {
    c.close();
  }
  return file;
}

/** Reads a line from the terminal in raw mode, echoing nothing: what is typed never reaches the screen. */
function readSecret(question: string): Promise<string> {
  const stdin = process.stdin;
  process.stdout.write(question);
  return new Promise((resolve, reject) => {
    let typed = '';
    const done = (err?: Error): void => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stdout.write('\n');
      if (err) reject(err);
      else resolve(typed);
    };
    const onData = (chunk: Buffer): void => {
      for (const ch of chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n') return done();
        if (ch === '\u0003') return done(new Error('cancelled'));
        if (ch === '\u007f' || ch === '\b') typed = typed.slice(0, -1);
        else if (ch >= ' ') typed += ch;
      }
    };
    stdin.setRawMode(true);
    stdin.resume();
    stdin.on('data', onData);
  });
}

/** Prompts on the terminal; a secret answer is read without echo. */
function terminalAsk(): (q: string, secret?: boolean) => Promise<string> {
  return async (q, secret) => {
    if (secret) return readSecret(q);
    const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: true });
    try {
      return await rl.question(q);
    } finally {
      rl.close();
    }
  };
}

export function registerSetup(program: Command): void {
  program
    .command('setup')
    .description('add an LLM backend to backends.conf (asks on a terminal; flags for scripts), checked live first')
    .option('--provider <id>', `one of ${PROVIDER_IDS.join(', ')}`)
    .option('--name <name>', "section name (default: the provider's)")
    .option('--url <url>', 'API base URL (default: the provider\'s; required for "compatible")')
    .option('--key <key>', 'API key, stored in the 0600 file (prefer --key-env: a flag shows in ps and shell history)')
    .option('--key-env <VAR>', 'environment variable the daemon reads the key from')
    .option('--model <model>', "default model (default: the provider's usual one if it lists it, else its first)")
    .option('--no-default', 'do not make it the default backend')
    .option('--no-check', 'store it without listing its models first')
    .option('--config <dir>', 'configuration directory', configDir())
    .option('--socket <path>', 'the daemon to reload', defaultSocketPath())
    .action(async (o: SetupOptions) => {
      try {
        await runSetup(o, {
          out: (s) => process.stdout.write(s),
          env: process.env,
          ...(process.stdin.isTTY && process.stdout.isTTY ? { ask: terminalAsk() } : {}),
        });
      } catch (e) {
        process.stderr.write(`ollie setup: ${(e as Error).message}\n`);
        process.exitCode = 1;
      }
    });
}
