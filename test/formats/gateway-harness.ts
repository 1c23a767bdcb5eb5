/** A real daemon (mock LLM, no toolsrv) with the HTTP gateway in front of it, for one describe block. */
import { afterAll, beforeAll } from 'vitest';
import { startHttpGateway, type HttpGateway } from '../../src/gateway/http.js';
import { harness, type Harness } from '../olliesrv/agent-harness.js';

export interface GatewayHarness {
  h: Harness;
  gw: HttpGateway;
  /** GET a path through the gateway, as JSON. */
  json<T = unknown>(path: string): Promise<T>;
}

/** Starts both before the block's tests and stops them after; the returned object fills in once started. */
export function withGateway(): GatewayHarness {
  const token = `formats-${Math.random().toString(36).slice(2)}-token`;
  const g = {
    json: async <T>(path: string): Promise<T> =>
      (await fetch(`${g.gw.url}${path}`, { headers: { authorization: `Bearer ${token}` } })).json() as Promise<T>,
  } as GatewayHarness;
  beforeAll(async () => {
    g.h = await harness({ tools: false });
    g.gw = await startHttpGateway({ server: g.h.daemon.server, token });
  });
  afterAll(async () => {
    await g.gw?.close();
    await g.h?.close();
  });
  return g;
}
