/**
 * Mock LLM server: a test fixture (and a tool you can run by hand, see main.ts) that speaks the real wire protocols
 * of the providers Ollie talks to, over real HTTP, so backends built on the Vercel AI SDK are tested exactly as they
 * run against the real services. This file serves HTTP and routes each request to its protocol:
 *
 *   OpenAI chat completions  POST /v1/chat/completions, GET /v1/models                      (openai.ts)
 *   Anthropic messages       POST /v1/messages                                              (anthropic.ts)
 *   Ollama                   POST /api/chat, POST /api/show, GET /api/tags                  (ollama.ts)
 *   Gemini                   POST /v1beta/models/{model}:streamGenerateContent?alt=sse,
 *                            :generateContent, GET /v1beta/models                           (gemini.ts)
 *   GitHub Copilot           GET /copilot_internal/v2/token, POST /chat/completions,
 *                            GET /models                                                    (copilot.ts)
 *
 * GET /v1/models answers in Anthropic's shape when the request carries `anthropic-version`, else in OpenAI's.
 *
 * Replies come from one FIFO of scripted turns shared by all protocols (`script(...)`, see script.ts); an empty
 * script gives a default short text. A turn is a list of steps: content (text, reasoning, tool calls — several in
 * one step are parallel calls), usage, and faults (an HTTP error status with Retry-After, a context-overflow 400
 * with the provider's real error body, a stream cut after n chunks, a per-chunk delay). Every request is recorded,
 * with credentials redacted.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { anthropicDialect, anthropicModels } from './anthropic.js';
import { copilotAccepts, copilotDialect, copilotModels, copilotToken } from './copilot.js';
import { geminiDialect, geminiModels } from './gemini.js';
import { ollamaDialect, ollamaShow, ollamaTags } from './ollama.js';
import { openaiDialect, openaiModels } from './openai.js';
import { outputReserve, plan, promptTokens, type Plan, type Turn } from './script.js';
import { DEFAULT_MODELS, Ids, modelOf, type Dialect } from './wire.js';

export {
  DEFAULT_REPLY,
  promptTokens,
  splitArgs,
  splitText,
  type Step,
  type ToolCallSpec,
  type Turn,
} from './script.js';
export { DEFAULT_MODELS } from './wire.js';

export type Protocol = 'openai' | 'anthropic' | 'ollama' | 'gemini' | 'copilot' | 'other';

export interface RecordedRequest {
  method: string;
  /** Path and query, with a `key=` query parameter redacted. */
  path: string;
  protocol: Protocol;
  /** Lower-cased names; values of credential headers replaced by "[redacted]". */
  headers: Record<string, string>;
  /** The parsed JSON body, the raw text when it is not JSON, undefined when empty. */
  body: unknown;
  time: number;
}

export interface MockLlmOptions {
  port?: number;
  host?: string;
  /** Model ids served by the model lists. */
  models?: string[];
  /** Context length reported by Ollama's /api/show and Gemini's model list. */
  contextLength?: number;
  /** The OpenAI delta field carrying reasoning: `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter). */
  reasoningField?: 'reasoning_content' | 'reasoning';
  /** Called with each request as it is recorded. */
  onRequest?: (r: RecordedRequest) => void;
  /** Lifetime of the Copilot tokens the token endpoint issues (default 1800 s). */
  copilotTokenTtlSec?: number;
  /**
   * Enforce a context window of this many tokens, as a served model does: a chat request whose prompt (counted
   * with the o200k estimate of backend/tokens.ts) plus its requested output exceeds it is refused with the
   * provider's real context-length error, and usage reports the counted prompt. Without it only a scripted
   * `contextOverflow` step overflows.
   */
  window?: number;
  /**
   * Computes the reply to a chat request from its body (a scenario that depends on what was asked, such as
   * answering compaction requests with a summary). The FIFO is used when it returns undefined.
   */
  respond?: (body: Record<string, unknown>, protocol: Protocol) => Turn | undefined;
}

export interface MockLlm {
  url: string;
  port: number;
  /** Append turns to the FIFO. */
  script(...turns: Turn[]): void;
  /** Turns not yet consumed. */
  pending(): number;
  requests: RecordedRequest[];
  /** Copilot tokens issued so far, oldest first; the chat endpoint accepts only these (empty it to revoke them). */
  copilotTokens: string[];
  close(): Promise<void>;
}

export const DEFAULT_CONTEXT_LENGTH = 32768;

const REDACT = new Set(['authorization', 'x-api-key', 'x-goog-api-key', 'api-key', 'proxy-authorization']);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function protocolOf(path: string): Protocol {
  if (path.startsWith('/v1/messages')) return 'anthropic';
  if (path.startsWith('/v1/')) return 'openai';
  if (path.startsWith('/api/')) return 'ollama';
  if (path.startsWith('/v1beta/')) return 'gemini';
  if (path.startsWith('/copilot_internal/') || path === '/chat/completions' || path === '/models') return 'copilot';
  return 'other';
}

export async function startMockLlm(opts: MockLlmOptions = {}): Promise<MockLlm> {
  const host = opts.host ?? '127.0.0.1';
  const models = opts.models ?? DEFAULT_MODELS;
  const contextLength = opts.contextLength ?? DEFAULT_CONTEXT_LENGTH;
  const reasoningField = opts.reasoningField ?? 'reasoning_content';
  const copilotTtl = opts.copilotTokenTtlSec ?? 1800;
  const copilotTokens: string[] = [];
  const queue: Turn[] = [];
  const requests: RecordedRequest[] = [];
  const ids = new Ids();
  const sockets = new Set<Socket>();

  const sendJson = (res: ServerResponse, status: number, v: unknown, headers: Record<string, string> = {}): void => {
    const text = JSON.stringify(v);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  };

  /** Run a chat request of any dialect: faults first, then the body, streamed or whole. */
  const chat = async (
    res: ServerResponse,
    body: Record<string, unknown>,
    streaming: boolean,
    d: Dialect,
    protocol: Protocol,
  ): Promise<void> => {
    let counted: number | undefined;
    if (opts.window !== undefined) {
      counted = promptTokens(body);
      if (counted + outputReserve(body) > opts.window) return sendJson(res, 400, d.overflow(opts.window, counted));
    }
    const turn = opts.respond?.(body, protocol) ?? queue.shift();
    return serve(res, plan(turn, body, counted), body, streaming, d);
  };

  const serve = async (
    res: ServerResponse,
    p: Plan,
    body: Record<string, unknown>,
    streaming: boolean,
    d: Dialect,
  ): Promise<void> => {
    if (p.delayMs && !streaming) await sleep(p.delayMs);
    if (p.error) {
      const headers: Record<string, string> = {};
      if (p.error.retryAfter !== undefined) headers['retry-after'] = String(p.error.retryAfter);
      if (p.error.retryAfterMs !== undefined) headers['retry-after-ms'] = String(p.error.retryAfterMs);
      return sendJson(res, p.error.status, d.error(p.error.status, p.error.message, p.error.retryAfter), headers);
    }
    if (p.overflow) return sendJson(res, 400, d.overflow(contextLength));
    if (p.toolUnsupported) return sendJson(res, 400, d.toolUnsupported(modelOf(body)));
    if (!streaming) {
      if (p.cutAfter !== undefined) {
        res.socket?.destroy();
        return;
      }
      return sendJson(res, 200, d.json(p));
    }
    res.writeHead(200, { 'content-type': d.contentType, 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.flushHeaders();
    let written = 0;
    let frames = d.stream(p);
    if (p.streamError) frames = [...frames.slice(0, p.streamError.afterChunks), d.streamError(p.streamError.message)];
    for (const frame of frames) {
      if (p.cutAfter !== undefined && written >= p.cutAfter) {
        // Let what was written reach the client, then drop the connection without finishing the response.
        await new Promise<void>((r) => res.write('', () => r()));
        res.socket?.destroy();
        return;
      }
      if (p.delayMs) await sleep(p.delayMs);
      if (res.destroyed || res.socket?.destroyed) return;
      res.write(frame);
      written++;
    }
    res.end();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://mock');
    const raw = await readBody(req);
    let body: unknown = undefined;
    if (raw !== '') {
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
    }
    const auth = req.headers.authorization ?? '';
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (v === undefined) continue;
      headers[k] = REDACT.has(k) ? '[redacted]' : Array.isArray(v) ? v.join(', ') : v;
    }
    if (url.searchParams.has('key')) url.searchParams.set('key', '[redacted]');
    const path = url.pathname + (url.search ? decodeURIComponent(url.search) : '');
    const protocol = protocolOf(url.pathname);
    const rec: RecordedRequest = { method: req.method ?? 'GET', path, protocol, headers, body, time: Date.now() };
    requests.push(rec);
    opts.onRequest?.(rec);

    const b: Record<string, unknown> =
      body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
    const method = req.method ?? 'GET';
    const route = `${method} ${url.pathname}`;

    // OpenAI
    if (route === 'POST /v1/chat/completions')
      return chat(res, b, b.stream === true, openaiDialect(b, ids, reasoningField), protocol);
    if (route === 'GET /v1/models' && req.headers['anthropic-version'] !== undefined)
      return sendJson(res, 200, anthropicModels(models));
    if (route === 'GET /v1/models') return sendJson(res, 200, openaiModels(models));

    // GitHub Copilot: a GitHub token (`Authorization: token …`) buys a short-lived Copilot token, which the chat
    // endpoint (OpenAI dialect) accepts as a Bearer.
    if (route === 'GET /copilot_internal/v2/token') {
      if (!/^token \S+/.test(auth))
        return sendJson(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
      const issued = copilotToken(copilotTokens.length + 1, copilotTtl, req.headers.host ?? host);
      copilotTokens.push(issued.token);
      return sendJson(res, 200, issued.body);
    }
    if (route === 'POST /chat/completions' || route === 'GET /models') {
      const bearer = /^Bearer (.+)$/.exec(auth)?.[1];
      if (!copilotAccepts(bearer, copilotTokens))
        return sendJson(res, 401, {
          error: { message: 'unauthorized: token expired or invalid', type: 'invalid_request_error' },
        });
      if (route === 'GET /models') return sendJson(res, 200, copilotModels(models, contextLength));
      return chat(res, b, b.stream === true, copilotDialect(b, ids, reasoningField), protocol);
    }

    // Anthropic
    if (route === 'POST /v1/messages') return chat(res, b, b.stream === true, anthropicDialect(b, ids), protocol);

    // Ollama (stream defaults to true, as in Ollama)
    if (route === 'POST /api/chat') return chat(res, b, b.stream !== false, ollamaDialect(b, ids), protocol);
    if (route === 'POST /api/show') {
      const name = typeof b.model === 'string' ? b.model : typeof b.name === 'string' ? b.name : '';
      if (!models.includes(name)) return sendJson(res, 404, { error: `model '${name}' not found` });
      return sendJson(res, 200, ollamaShow(name, contextLength));
    }
    if (route === 'GET /api/tags') return sendJson(res, 200, ollamaTags(models));

    // Gemini
    const gm = /^\/v1beta\/models\/([^:/]+):(streamGenerateContent|generateContent)$/.exec(url.pathname);
    if (method === 'POST' && gm) {
      const model = decodeURIComponent(gm[1]!);
      return chat(res, { ...b, model }, gm[2] === 'streamGenerateContent', geminiDialect(model, ids), protocol);
    }
    if (route === 'GET /v1beta/models') return sendJson(res, 200, geminiModels(models, contextLength));

    sendJson(res, 404, { error: { message: `mock LLM: no route for ${route}`, type: 'not_found' } });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: `mock LLM: ${(e as Error).message}` } });
      else res.destroy();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://${host}:${port}`,
    port,
    requests,
    copilotTokens,
    script: (...turns) => void queue.push(...turns),
    pending: () => queue.length,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
