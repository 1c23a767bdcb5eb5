/**
 * GitHub Copilot: the configured GitHub token (an OAuth token from Copilot's device flow, `gho_…`) is exchanged at
 * `GET {url}/copilot_internal/v2/token` (Authorization: `token …`) for a short-lived Copilot token, which is then a
 * Bearer for an OpenAI-compatible chat endpoint at the returned `endpoints.api`. The token is cached until shortly
 * before its `expires_at`; concurrent requests share one exchange.
 *
 * The chat endpoint wants to know which editor integration calls it; these headers are what Copilot's own clients
 * send, and `headers` in backends.conf overrides any of them.
 */
import type { BackendConfig } from './config.js';
import { BackendError, classifyError } from './errors.js';
import { OpenAIBackend, type OpenAIEndpoint } from './openai.js';
import { DISCOVERY_TIMEOUT_MS } from './sdk.js';
import type { StreamEvent, StreamRequest } from './types.js';

export const COPILOT_HEADERS: Readonly<Record<string, string>> = {
  'Editor-Version': 'vscode/1.99.3',
  'Editor-Plugin-Version': 'copilot-chat/0.26.7',
  'Copilot-Integration-Id': 'vscode-chat',
  'User-Agent': 'GitHubCopilotChat/0.26.7',
  'Openai-Intent': 'conversation-edits',
};

/** Renew this long before the token expires, so that a request never leaves with a token about to lapse. */
const EXPIRY_MARGIN_MS = 60_000;

interface CopilotToken {
  token: string;
  expiresAtMs: number;
  api: string;
}

export class CopilotBackend extends OpenAIBackend {
  private token: CopilotToken | undefined;
  private pending: Promise<CopilotToken> | undefined;
  /** Token exchanges made (for tests and `stats`). */
  exchanges = 0;

  constructor(cfg: BackendConfig) {
    super(cfg);
  }

  private headers(): Record<string, string> {
    return { ...COPILOT_HEADERS, ...this.config.headers };
  }

  private async exchange(): Promise<CopilotToken> {
    if (!this.config.key)
      throw new BackendError(
        this.name,
        'no GitHub token: set "key" in backends.conf (or GH_COPILOT_TOKEN / GITHUB_TOKEN)',
      );
    this.exchanges++;
    let res: Response;
    try {
      res = await fetch(`${this.url}/copilot_internal/v2/token`, {
        headers: { ...this.headers(), accept: 'application/json', authorization: `token ${this.config.key}` },
        signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS),
      });
    } catch (e) {
      throw classifyError(this.name, e);
    }
    const text = await res.text();
    if (!res.ok) {
      const headers: Record<string, string> = {};
      res.headers.forEach((v, k) => (headers[k] = v));
      throw classifyError(
        this.name,
        Object.assign(new Error(`Copilot token exchange failed: HTTP ${res.status}`), {
          name: 'AI_APICallError',
          statusCode: res.status,
          responseHeaders: headers,
          responseBody: text,
          requestBodyValues: undefined,
        }),
      );
    }
    let body: { token?: unknown; expires_at?: unknown; endpoints?: { api?: unknown } };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      throw new BackendError(this.name, 'Copilot token exchange: the answer is not JSON');
    }
    if (typeof body.token !== 'string' || typeof body.expires_at !== 'number')
      throw new BackendError(this.name, 'Copilot token exchange: no token/expires_at in the answer');
    const api =
      typeof body.endpoints?.api === 'string'
        ? body.endpoints.api.replace(/\/+$/, '')
        : 'https://api.githubcopilot.com';
    return { token: body.token, expiresAtMs: body.expires_at * 1000, api };
  }

  /** A valid Copilot token, exchanging the GitHub token when there is none or it is about to expire. */
  async copilotToken(now = Date.now()): Promise<CopilotToken> {
    if (this.token && this.token.expiresAtMs - EXPIRY_MARGIN_MS > now) return this.token;
    if (!this.pending) {
      this.pending = this.exchange().then(
        (t) => {
          this.token = t;
          this.pending = undefined;
          return t;
        },
        (e: unknown) => {
          this.pending = undefined;
          throw e;
        },
      );
    }
    return this.pending;
  }

  /** Forget the token (the chat endpoint refused it); the next request exchanges again. */
  invalidateToken(): void {
    this.token = undefined;
  }

  protected override async endpoint(): Promise<OpenAIEndpoint> {
    const t = await this.copilotToken();
    return { baseURL: t.api, apiKey: t.token, headers: this.headers() };
  }

  /** Copilot bills a premium request per user-initiated turn; tool rounds are the agent's. */
  protected override requestHeaders(req: StreamRequest): Record<string, string> {
    return { 'X-Initiator': req.messages.at(-1)?.role === 'tool' ? 'agent' : 'user' };
  }

  override stream(req: StreamRequest): AsyncIterable<StreamEvent> {
    return this.streamRefreshing(req);
  }

  /**
   * A cached token can be revoked before its expiry (sign-out, seat change): when the chat endpoint refuses it
   * before anything was streamed, exchange again and resend once. A fresh token refused is a real auth error.
   */
  private async *streamRefreshing(req: StreamRequest): AsyncGenerator<StreamEvent, void, undefined> {
    const hadToken = this.token !== undefined;
    let yielded = false;
    try {
      for await (const ev of super.stream(req)) {
        yielded = true;
        yield ev;
      }
    } catch (e) {
      if (!(e instanceof BackendError && e.status === 401)) throw e;
      this.invalidateToken();
      if (!hadToken || yielded || req.signal?.aborted) throw e;
      yield* super.stream(req);
    }
  }

  protected override fallbackContext(): number {
    return 128_000;
  }
}
