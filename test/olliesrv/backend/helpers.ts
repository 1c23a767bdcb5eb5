import { createServer } from 'node:net';
import type { BackendConfig } from '../../../src/olliesrv/backend/config.js';
import { createBackend } from '../../../src/olliesrv/backend/pool.js';
import type {
  Backend,
  BackendType,
  Message,
  StreamEvent,
  StreamRequest,
  ToolSpec,
} from '../../../src/olliesrv/backend/types.js';
import type { MockLlm } from '../../../src/devtools/mock-llm/server.js';

export const TYPES: BackendType[] = ['openai', 'anthropic', 'ollama', 'gemini', 'copilot'];

/** The base URL each type is configured with to reach the mock (as a user would write it for the real service). */
export function urlFor(type: BackendType, base: string): string {
  switch (type) {
    case 'openai':
    case 'anthropic':
      return `${base}/v1`;
    case 'gemini':
      return `${base}/v1beta`;
    case 'ollama':
    case 'copilot':
      return base;
  }
}

export const SECRET = 'sk-test-secret-0123456789';

export function backendFor(type: BackendType, mock: Pick<MockLlm, 'url'>, over: Partial<BackendConfig> = {}): Backend {
  return createBackend({
    name: `mock-${type}`,
    type,
    url: urlFor(type, mock.url),
    key: SECRET,
    model: 'mock-model',
    compactionModel: 'mock-model',
    headers: {},
    source: 'test',
    ...over,
  });
}

export interface Collected {
  events: StreamEvent[];
  error?: unknown;
  text: string;
  reasoning: string;
}

export async function collect(it: AsyncIterable<StreamEvent>, onEvent?: (e: StreamEvent) => void): Promise<Collected> {
  const events: StreamEvent[] = [];
  let error: unknown;
  try {
    for await (const e of it) {
      events.push(e);
      onEvent?.(e);
    }
  } catch (e) {
    error = e;
  }
  const text = events.map((e) => (e.type === 'text' ? e.delta : '')).join('');
  const reasoning = events.map((e) => (e.type === 'reasoning' ? e.delta : '')).join('');
  return { events, error, text, reasoning };
}

export const TOOLS: ToolSpec[] = [
  {
    name: 'read',
    description: 'Read a file',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string' }, n: { type: 'integer' } },
      required: ['path'],
      additionalProperties: false,
    },
  },
  {
    name: 'ls',
    description: 'List a directory',
    parameters: {
      type: 'object',
      properties: { dir: { type: 'string' }, deep: { type: 'object' } },
      required: ['dir'],
    },
  },
];

export const SYSTEM = 'You are a careful coding agent. Mind the sandbox.';

export function request(over: Partial<StreamRequest> = {}, messages?: Message[]): StreamRequest {
  return {
    messages: messages ?? [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Look at a.txt please.' },
    ],
    tools: TOOLS,
    ...over,
  };
}

/** A local port nobody listens on. */
export async function deadPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** The recorded chat requests (not discovery or token calls). */
export function chatRequests(mock: MockLlm): MockLlm['requests'] {
  return mock.requests.filter((r) => r.method === 'POST' && /chat|messages|generatecontent/i.test(r.path));
}
