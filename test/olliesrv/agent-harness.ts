/**
 * A real olliesrv (its own socket, data and config dirs), the mock LLM over real HTTP, a real toolsrv per session,
 * and a 9P client: what agent tests run against.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import type { Client } from '../../src/ninep/index.js';
import { dial } from '../../src/ninep/node.js';
import { startMockLlm, type MockLlm, type MockLlmOptions, type Turn } from '../../src/devtools/mock-llm/server.js';
import { startDaemon, type Daemon } from '../../src/olliesrv/daemon.js';
import { retryDelay } from '../../src/olliesrv/backend/retry.js';

import type { Block } from '../../src/olliesrv/agent/chatlog.js';
import { until } from '../wait.js';
export type { Block };

export interface Harness {
  dir: string;
  daemon: Daemon;
  mock: MockLlm;
  c: Client;
  socket: string;
  configDir: string;
  dataDir: string;
  /** Creates a session and an agent (profile `test` unless given); returns the agent's 9P path. */
  agent(opts?: {
    profile?: string;
    session?: string;
    backend?: string;
  }): Promise<{ session: string; name: string; path: string; sid: string; aid: string }>;
  /** Sends a prompt and waits until the agent is idle again; returns the blocks of the whole log. */
  turn(path: string, prompt: string, timeoutMs?: number): Promise<Block[]>;
  blocks(path: string): Promise<Block[]>;
  waitState(path: string, state: string, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export const TEST_PROFILE = {
  description: 'test agent',
  prompt: 'You are a test agent.',
  autoLoad: ['shell', 'file_read'],
  maxSteps: 20,
};

export function writeConfig(configDir: string, mockUrl: string, extraProfiles: Record<string, unknown> = {}): void {
  mkdirSync(join(configDir, 'agents'), { recursive: true });
  writeFileSync(
    join(configDir, 'backends.conf'),
    `[default]\nbackend = mock\n\n[mock]\ntype = openai\nurl = ${mockUrl}/v1\nkey = test-key\nmodel = gpt-4o\ncontext = 100000\n\n` +
      `[claude]\ntype = anthropic\nurl = ${mockUrl}/v1\nkey = test-key\nmodel = claude-sonnet-4-5\ncontext = 200000\n\n` +
      `[tiny]\ntype = openai\nurl = ${mockUrl}/v1\nkey = test-key\nmodel = gpt-4o-mini\ncontext = 1000\n\n` +
      `[small]\ntype = openai\nurl = ${mockUrl}/v1\nkey = test-key\nmodel = gpt-4o-mini\ncontext = 4000\n`,
  );
  for (const [name, p] of Object.entries({ test: TEST_PROFILE, ...extraProfiles }))
    writeFileSync(join(configDir, 'agents', `${name}.json`), JSON.stringify(p));
}

export function parseBlocks(text: string): Block[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Block);
}

export interface HarnessOptions {
  turns?: Turn[];
  profiles?: Record<string, unknown>;
  tools?: boolean;
  toolDirs?: string[];
  mock?: MockLlmOptions;
}

/**
 * A harness for the running test, closed when the test ends (passed or failed), after its afterEach hooks. Call it
 * inside a test: each test gets its own daemon and no test file keeps one in a variable to close.
 */
export async function testHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const h = await harness(opts);
  onTestFinished(() => h.close());
  return h;
}

export async function harness(opts: HarnessOptions = {}): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), 'ollie-agents-'));
  const mock = await startMockLlm(opts.mock);
  if (opts.turns) mock.script(...opts.turns);
  const configDir = join(dir, 'config');
  const dataDir = join(dir, 'data');
  writeConfig(configDir, mock.url, opts.profiles);
  const socket = join(dir, 'run', 'ollie.sock');
  const daemon = await startDaemon({
    socket,
    dataDir,
    configDir,
    toolsrv: opts.tools === false ? false : { ...(opts.toolDirs && { toolDirs: opts.toolDirs }) },
    toolCacheFile: join(dir, 'cache', 'tools.json'),
    // Skill and tool-hint matching adds context blocks to prompts; it has its own tests (test/skills).
    skills: false,
    log: () => undefined,
    // The real policy, with waits a hundred times shorter.
    retryDelay: (e, n) => {
      const d = retryDelay(e, n, () => 0.5);
      return d === null ? null : d / 100;
    },
  });
  const c = await dial(`unix!${socket}`, { uname: userInfo().username });
  const h: Harness = {
    dir,
    daemon,
    mock,
    c,
    socket,
    configDir,
    dataDir,
    async agent(o = {}) {
      const session = o.session ?? (await c.rdwrText('session/new', `cwd=${dir}`)).trim();
      const name = (
        await c.rdwrText(
          `session/${session}/agent/new`,
          `agent=${o.profile ?? 'test'}${o.backend ? ` backend=${o.backend}` : ''}`,
        )
      ).trim();
      const path = `session/${session}/agent/${name}`;
      return {
        session,
        name,
        path,
        sid: (await c.readText(`session/${session}/id`)).trim(),
        aid: (await c.readText(`${path}/id`)).trim(),
      };
    },
    async turn(path, prompt, timeoutMs = 20000) {
      const aid = (await c.readText(`${path}/id`)).trim();
      const agent = daemon.agents.all().find((a) => a.id === aid)!;
      const done = agent.nextTurn();
      await c.write(`${path}/prompt`, prompt);
      await Promise.race([
        done,
        new Promise((_, rej) => setTimeout(() => rej(new Error(`turn did not end within ${timeoutMs} ms`)), timeoutMs)),
      ]);
      return h.blocks(path);
    },
    async blocks(path) {
      const aid = (await c.readText(`${path}/id`)).trim();
      return daemon.agents
        .all()
        .find((a) => a.id === aid)!
        .log.blocks();
    },
    async waitState(path, state, timeoutMs = 10000) {
      await until(
        async () => (await c.readText(`${path}/state`)).trim() === state,
        `${path} to reach state ${state}`,
        timeoutMs,
      );
    },
    async close() {
      c.close();
      await daemon.close();
      await mock.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return h;
}
