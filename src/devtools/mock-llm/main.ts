#!/usr/bin/env node
/**
 * Run the mock LLM server by hand:
 *   node dist/devtools/mock-llm/main.js [--port N] [--host H] [--script turns.json] [--context N] [--window N] [--models a,b]
 * --window N refuses prompts over N tokens with each provider's real context-length error.
 * turns.json is a JSON array of turns (each an array of steps, see server.ts). Serves until Ctrl-C.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startMockLlm, type Turn } from './server.js';

function fail(msg: string): never {
  process.stderr.write(`mock-llm: ${msg}\n`);
  process.exit(2);
}

const { values } = (() => {
  try {
    return parseArgs({
      options: {
        port: { type: 'string', default: '0' },
        host: { type: 'string', default: '127.0.0.1' },
        script: { type: 'string' },
        context: { type: 'string' },
        window: { type: 'string' },
        models: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    return fail((e as Error).message);
  }
})();

if (values.help) {
  process.stdout.write(
    'usage: mock-llm [--port N] [--host H] [--script turns.json] [--context N] [--window N] [--models a,b]\n',
  );
  process.exit(0);
}

const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`bad --port: ${values.port}`);
const contextLength = values.context !== undefined ? Number(values.context) : undefined;
if (contextLength !== undefined && !(contextLength > 0)) fail(`bad --context: ${values.context}`);
const window = values.window !== undefined ? Number(values.window) : undefined;
if (window !== undefined && !(Number.isInteger(window) && window > 0))
  fail(`bad --window: ${values.window} (a positive number of tokens)`);

let turns: Turn[] = [];
if (values.script !== undefined) {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(values.script, 'utf8'));
  } catch (e) {
    fail(`${values.script}: ${(e as Error).message}`);
  }
  if (!Array.isArray(parsed) || !parsed.every((t) => Array.isArray(t)))
    fail(`${values.script}: expected a JSON array of turns (arrays of steps)`);
  turns = parsed as Turn[];
}

const mock = await startMockLlm({
  port,
  host: values.host,
  contextLength,
  ...(window !== undefined ? { window } : {}),
  models: values.models?.split(',').filter(Boolean),
  onRequest: (r) => process.stdout.write(`${new Date(r.time).toISOString()} ${r.method} ${r.path}\n`),
}).catch((e: unknown) => fail((e as Error).message));
mock.script(...turns);
process.stdout.write(`mock-llm: listening on ${mock.url} (${turns.length} scripted turn(s); then default replies)\n`);
process.stdout.write(
  `  OpenAI    ${mock.url}/v1   Anthropic ${mock.url}/v1   Ollama ${mock.url}   Gemini ${mock.url}/v1beta   Copilot ${mock.url}\n`,
);

const stop = (sig: string): void => {
  process.stderr.write(`mock-llm: ${sig}, shutting down\n`);
  void mock.close().then(() => process.exit(0));
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
