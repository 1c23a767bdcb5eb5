/**
 * The HTTP gateway against a real olliesrv (mock LLM, no toolsrv): auth, every verb, JSON shapes, streaming
 * (chunked and SSE), errors, and the OpenAPI document; withheld paths against a small namespace of its own.
 */
import { request } from 'node:http';
import { userInfo } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, Dir, Each, Leaf, Server } from '../../src/ninep/index.js';
import { startHttpGateway, type HttpGateway } from '../../src/gateway/http.js';
import { harness, type Harness } from '../olliesrv/agent-harness.js';

let h: Harness;
let gw: HttpGateway;
const TOKEN = 'test-token-0123456789';

beforeAll(async () => {
  h = await harness({ tools: false });
  gw = await startHttpGateway({ server: h.daemon.server, token: TOKEN });
});
afterAll(async () => {
  await gw.close();
  await h.close();
});

const auth = { authorization: `Bearer ${TOKEN}` };
const call = (path: string, init: RequestInit = {}): Promise<Response> =>
  fetch(`${gw.url}${path}`, { ...init, headers: { ...auth, ...(init.headers as Record<string, string> | undefined) } });

/** Reads a streaming response until `done` says enough, then cancels it. */
async function readUntil(res: Response, done: (text: string) => boolean, timeoutMs = 10000): Promise<string> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = '';
  const timer = setTimeout(() => void reader.cancel(), timeoutMs);
  try {
    while (!done(text)) {
      const r = await reader.read();
      if (r.done) break;
      text += dec.decode(r.value, { stream: true });
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => undefined);
  }
  return text;
}

describe('auth', () => {
  it('refuses requests without the token, with a wrong one, for another Host or Origin', async () => {
    const none = await fetch(`${gw.url}/session/idx`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expect(((await none.json()) as { error: string }).error).toContain('token');
    expect((await fetch(`${gw.url}/session/idx`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    expect((await fetch(`${gw.url}/openapi.json`)).status).toBe(401);
    expect((await fetch(`${gw.url}/session/idx?token=${TOKEN}`)).status).toBe(200);
    expect((await call('/session/idx')).status).toBe(200);
    expect((await call('/session/idx', { headers: { origin: 'http://evil.example' } })).status).toBe(403);
    // fetch() will not send another Host: a raw request does (what a DNS-rebound name would carry).
    const status = await new Promise<number>((resolve, reject) => {
      const r = request(`${gw.url}/session/idx`, { headers: { ...auth, host: `evil.example:${gw.port}` } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      r.on('error', reject);
      r.end();
    });
    expect(status).toBe(403);
  });

  it('makes a new random token on every start', async () => {
    const a = await startHttpGateway({ server: h.daemon.server });
    const b = await startHttpGateway({ server: h.daemon.server });
    try {
      expect(a.token).toMatch(/^[0-9a-f]{64}$/);
      expect(a.token).not.toBe(b.token);
      expect((await fetch(`${a.url}/session/idx`, { headers: { authorization: `Bearer ${b.token}` } })).status).toBe(
        401,
      );
      expect(a.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api$/);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('verbs', () => {
  it('POST to a control file returns its reply; GET renders idx files as JSON, ?raw=1 as text', async () => {
    const r = await call('/session/new', { method: 'POST', body: `name=alpha cwd=${h.dir}` });
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('alpha\n');
    const idx = (await (await call('/session/idx')).json()) as Array<Record<string, string>>;
    const row = idx.find((x) => x.name === 'alpha')!;
    expect(row).toMatchObject({ name: 'alpha', paused: '0', connected: '0', remote: null, cwd: h.dir });
    expect(row.id).toMatch(/^[0-9a-f-]{36}$/);
    const raw = await call('/session/idx?raw=1');
    expect(raw.headers.get('content-type')).toContain('text/plain');
    expect(await raw.text()).toContain(`\talpha\t0\t0\t-\t${h.dir}\n`);
  });

  it('GET on a directory lists it as JSON', async () => {
    const list = (await (await call('/session/alpha')).json()) as Array<{ name: string; dir: boolean; mode: string }>;
    expect(list.map((e) => e.name)).toEqual(
      expect.arrayContaining(['id', 'name', 'cwd', 'env', 'plan', 'ctl', 'agent']),
    );
    expect(list.find((e) => e.name === 'agent')).toMatchObject({ dir: true });
    expect(list.find((e) => e.name === 'ctl')).toMatchObject({ dir: false });
    const root = (await (await call('/')).json()) as Array<{ name: string }>;
    expect(root.map((e) => e.name)).toEqual(expect.arrayContaining(['session', 'event', 'ctl', 'help']));
  });

  it('POST replaces a text file (204); key=value files read as JSON objects', async () => {
    const w = await call('/session/alpha/env', { method: 'POST', body: 'A=1\n# note\nB=two words\n' });
    expect(w.status).toBe(204);
    expect(await (await call('/session/alpha/env')).json()).toEqual({ A: '1', B: 'two words' });
    expect((await call('/session/alpha/plan', { method: 'POST', body: '- [ ] one\n' })).status).toBe(204);
    expect((await call('/session/alpha/plan', { method: 'POST', body: '- [x] two\n' })).status).toBe(204);
    const plan = await call('/session/alpha/plan');
    expect(plan.headers.get('content-type')).toContain('text/plain');
    expect(await plan.text()).toBe('- [x] two\n');
  });

  it('agents: POST agent/new, GET agent/idx, cfg and stats as JSON', async () => {
    const name = (
      await (await call('/session/alpha/agent/new', { method: 'POST', body: 'name=bob agent=test' })).text()
    ).trim();
    expect(name).toBe('bob');
    const idx = (await (await call('/session/alpha/agent/idx')).json()) as Array<Record<string, string>>;
    expect(idx).toEqual([expect.objectContaining({ name: 'bob', parent: null, depth: '0', state: 'idle' })]);
    expect(await (await call('/session/alpha/agent/bob/cfg')).json()).toMatchObject({
      backend: 'mock',
      profile: 'test',
    });
    expect(await (await call('/session/alpha/agent/bob/stats')).json()).toMatchObject({
      requests: '0',
      context_length: '100000',
    });
    expect(await (await call('/session/alpha/agent/bob/queue')).json()).toEqual([]);
  });

  it('PATCH renames, DELETE removes', async () => {
    await call('/session/new', { method: 'POST', body: 'name=gamma' });
    const p = await call('/session/gamma', {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'delta' }),
    });
    expect(p.status).toBe(200);
    expect(await p.json()).toEqual({ name: 'delta', path: '/session/delta' });
    expect(await (await call('/session/delta/name')).text()).toBe('delta\n');
    expect((await call('/session/gamma/name')).status).toBe(404);
    // The name as text works too.
    expect((await call('/session/delta', { method: 'PATCH', body: 'epsilon' })).status).toBe(200);
    const d = await call('/session/epsilon', { method: 'DELETE' });
    expect(d.status).toBe(204);
    expect((await call('/session/epsilon/id')).status).toBe(404);
    expect(h.daemon.sessions.has('epsilon')).toBe(false);
  });

  it('names are URL-decoded path elements; a name cannot smuggle a slash', async () => {
    expect(await (await call('/session/new', { method: 'POST', body: 'name=café' })).text()).toBe('café\n');
    expect(await (await call('/session/caf%C3%A9/name')).text()).toBe('café\n');
    expect((await call('/session/caf%C3%A9', { method: 'DELETE' })).status).toBe(204);
    expect((await call('/session/a%2Fb/name')).status).toBe(400);
    expect((await call('/session/%E0%A4%A/name')).status).toBe(400);
  });

  it("refuses verbs a file does not have (405 with Allow) and passes on the server's errors", async () => {
    const g = await call('/session/alpha/agent/bob/prompt');
    expect(g.status).toBe(405);
    expect(g.headers.get('allow')).toBe('POST');
    const p = await call('/session/idx', { method: 'POST', body: 'x' });
    expect(p.status).toBe(405);
    expect(p.headers.get('allow')).toBe('GET');
    expect((await call('/session/alpha/id', { method: 'DELETE' })).status).toBe(405);
    expect((await call('/session/alpha/id', { method: 'PUT', body: 'x' })).status).toBe(405);
    const bad = await call('/session/new', { method: 'POST', body: 'bogus=1' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toContain('valid keys: name, cwd');
    const missing = await call('/session/nope/plan');
    expect(missing.status).toBe(404);
    expect((await call('/no/such/thing')).status).toBe(404);
  });
});

describe('streaming', () => {
  it('streams log.raw as NDJSON while a turn runs, and the events as server-sent events', async () => {
    h.mock.script([{ text: 'streamed reply' }]);
    const sid = (await (await call('/session/alpha/id')).text()).trim();
    const events = await call(`/event?request=${encodeURIComponent(`session.${sid}.agent.*.state`)}`, {
      headers: { accept: 'text/event-stream' },
    });
    expect(events.status).toBe(200);
    expect(events.headers.get('content-type')).toContain('text/event-stream');
    const log = await call('/session/alpha/agent/bob/log.raw');
    expect(log.headers.get('content-type')).toBe('application/x-ndjson');
    const logText = readUntil(log, (t) => t.includes('"streamed reply"'));
    const evText = readUntil(events, (t) => (t.match(/^data: /gm) ?? []).length >= 2 && t.includes('idle'));
    await new Promise((r) => setTimeout(r, 100));
    expect((await call('/session/alpha/agent/bob/prompt', { method: 'POST', body: 'hello' })).status).toBe(204);
    const lines = (await logText)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { role: string; content: string; partial?: boolean });
    expect(lines[0]).toMatchObject({ role: 'user', content: 'hello' });
    expect(lines.at(-1)).toMatchObject({ role: 'assistant', content: 'streamed reply' });
    const sse = (await evText).split('\n\n').filter(Boolean);
    const data = sse.map((e) => {
      expect(e.startsWith('data: ')).toBe(true);
      return JSON.parse(e.slice(6)) as { topic: string; payload: { state: string } };
    });
    // The payload as its declaration names its fields.
    expect(data[0]).toEqual({
      topic: expect.stringMatching(new RegExp(`^session\\.${sid}\\.agent\\.[^.]+\\.state$`)),
      payload: { state: 'thinking' },
    });
    expect(data.at(-1)!.payload).toEqual({ state: 'idle' });
  });

  it('streams log.from from the request in ?request= as NDJSON: the last blocks, then live', async () => {
    const log = h.daemon.agents.get('alpha', 'bob').log;
    log.add('info', 'the last block');
    const res = await call(`/session/alpha/agent/bob/log.from?request=${encodeURIComponent('tail 1')}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-ndjson');
    const text = readUntil(res, (t) => t.includes('a live block'));
    await new Promise((r) => setTimeout(r, 100));
    log.add('info', 'a live block');
    const lines = (await text)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { role: string; content: string });
    expect(lines.map((l) => l.content)).toEqual(['the last block', 'a live block']);
  });

  it('POST on a streaming control file writes the body as the request, then streams; a client that leaves is let go', async () => {
    const res = await call('/event', { method: 'POST', body: 'session.*.new' });
    expect(res.status).toBe(200);
    const got = readUntil(res, (t) => t.includes('zeta'));
    await new Promise((r) => setTimeout(r, 100));
    await call('/session/new', { method: 'POST', body: 'name=zeta' });
    const line = JSON.parse((await got).split('\n')[0]!) as { topic: string; payload: { name: string } };
    expect(line.topic).toMatch(/^session\.[0-9a-f-]+\.new$/);
    expect(line.payload).toEqual({ name: 'zeta' });
    // The cancelled streams were flushed and clunked: the gateway's connection holds no open event subscription.
    await new Promise((r) => setTimeout(r, 100));
    expect(await (await call('/session/idx')).json()).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'zeta' })]),
    );
  });

  it('a blocking read (goalwait) answers when the value changes, as JSON', async () => {
    const pending = call('/session/alpha/goalwait');
    await new Promise((r) => setTimeout(r, 100));
    expect(
      (await call('/session/alpha/goalstatus', { method: 'POST', body: 'blocked\nno tests to run\n' })).status,
    ).toBe(204);
    expect(await (await pending).json()).toEqual({ status: 'blocked', summary: 'no tests to run' });
    expect(await (await call('/session/alpha/goalstatus')).json()).toEqual({
      status: 'blocked',
      summary: 'no tests to run',
    });
  });

  it("template files (an agent's peers) are reached by name", async () => {
    await call('/session/alpha/agent/new', { method: 'POST', body: 'name=carol agent=test' });
    expect(
      await (await call('/session/alpha/agent/bob/ctl', { method: 'POST', body: 'peeradd carol' })).text(),
    ).toContain('carol');
    const list = (await (await call('/session/alpha/agent/bob/peer')).json()) as Array<{ name: string }>;
    expect(list.map((e) => e.name)).toEqual(['carol']);
    expect((await call('/session/alpha/agent/bob/peer/carol')).status).toBe(405);
    expect((await call('/session/alpha/agent/bob/peer/nobody', { method: 'POST', body: 'hi' })).status).toBe(404);
  });
});

describe('the declaration', () => {
  it('serves an OpenAPI document generated from the namespace', async () => {
    const doc = (await (await call('/openapi.json')).json()) as {
      openapi: string;
      paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>>;
      components: { securitySchemes: Record<string, unknown> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.components.securitySchemes)).toEqual(['bearer', 'token']);
    expect(Object.keys(doc.paths['/session/idx']!)).toEqual(['get']);
    expect(doc.paths['/session/new']).toHaveProperty('post');
    expect(doc.paths['/session/{session}']).toHaveProperty('delete');
    expect(doc.paths['/session/{session}']).toHaveProperty('patch');
    const log = doc.paths['/session/{session}/agent/{agent}/log.raw']!;
    expect(Object.keys(log.get!.responses['200']!.content!)).toEqual(['application/x-ndjson', 'text/event-stream']);
    expect(doc.paths['/session/{session}/agent/{agent}/prompt']).toHaveProperty('post');
    expect(doc.paths['/session/{session}/agent/{agent}/prompt']).not.toHaveProperty('get');
    expect(doc.paths['/session/{session}/agent/{agent}/prompt']).toHaveProperty('parameters', [
      { name: 'session', in: 'path', required: true, schema: { type: 'string' } },
      { name: 'agent', in: 'path', required: true, schema: { type: 'string' } },
    ]);
  });

  it('withholds internal files and directories: 404 as if absent, not listed, not in the OpenAPI document', async () => {
    let secret = 'untouched';
    const ns = build(
      Dir(
        '/',
        Leaf('visible', { read: () => 'hello\n' }),
        Leaf('secret', {
          internal: true,
          read: () => 'hidden\n',
          write: (_c, d) => void (secret = new TextDecoder().decode(d)),
        }),
        Dir('private', { internal: true }, Leaf('inner', { read: () => 'x' })),
        Dir(
          'items',
          {},
          Each(
            'item',
            { list: () => ['a', 'b'], remove: () => undefined },
            Leaf('value', { read: (ctx) => `${ctx.params.item}\n` }),
          ),
        ),
      ),
      { uid: userInfo().username },
    );
    const server = new Server({ fs: ns });
    const g = await startHttpGateway({ server: server as Server<unknown>, token: TOKEN, formats: {} });
    try {
      const get = (p: string, init: RequestInit = {}) => fetch(`${g.url}${p}`, { ...init, headers: auth });
      expect(await (await get('/visible')).text()).toBe('hello\n');
      expect(await (await get('/items/b/value')).text()).toBe('b\n');
      for (const p of ['/secret', '/private', '/private/inner']) {
        const r = await get(p);
        expect(r.status, p).toBe(404);
        expect(((await r.json()) as { error: string }).error).toBe(`file not found: ${p}`);
      }
      expect((await get('/secret', { method: 'POST', body: 'overwritten' })).status).toBe(404);
      expect(secret).toBe('untouched');
      const names = ((await (await get('/')).json()) as Array<{ name: string }>).map((e) => e.name);
      expect(names.sort()).toEqual(['items', 'visible']);
      const doc = (await (await get('/openapi.json')).json()) as { paths: Record<string, unknown> };
      expect(Object.keys(doc.paths).sort()).toEqual([
        '/',
        '/items',
        '/items/{item}',
        '/items/{item}/value',
        '/visible',
      ]);
    } finally {
      await g.close();
      server.close();
    }
  });
});
