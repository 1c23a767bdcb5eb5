/**
 * The OpenAPI 3.1 document of the gateway, generated from the declared namespace: one path per declared file or
 * directory (internal ones left out), one operation per thing the declaration says it can do.
 */
import type { DeclaredNode } from '../ninep/index.js';
import { describeField, type Field, type KeyValues } from '../formats/index.js';
import type { Format } from './formats.js';

type Json = Record<string, unknown>;

const str = { type: 'string' };

/** A declared field as JSON Schema: always a string (the file's text), null when the declaration says none is `-`. */
function fieldSchema(f: Field): Json {
  const d = describeField(f);
  return f.optional ? { type: ['string', 'null'], description: d } : { type: 'string', description: d };
}

/** One object per record or file: one key per declared column or key, all present. */
function objectOf(fields: readonly Field[], extra?: KeyValues['extra']): Json {
  return {
    type: 'object',
    properties: Object.fromEntries(fields.map((c) => [c.name, fieldSchema(c)])),
    ...(extra ? { patternProperties: { [extra.pattern.source]: { type: 'string', description: extra.doc } } } : {}),
  };
}

export function schemaOf(f: Format | undefined): Json | undefined {
  if (!f) return undefined;
  switch (f.kind) {
    case 'tsv':
      return {
        type: 'array',
        items: { ...objectOf(f.columns), required: f.columns.map((c) => c.name), additionalProperties: false },
      };
    case 'kv':
      return { ...objectOf(f.keys, f.extra), additionalProperties: false };
    case 'env':
      return { type: 'object', additionalProperties: str };
    case 'lines':
      return { type: 'array', items: str };
    case 'jsonl':
      return {
        type: 'array',
        items: {
          type: 'object',
          required: [...f.keys],
          properties: Object.fromEntries([...f.keys, ...f.optionalKeys].map((k) => [k, {}])),
        },
      };
    case 'events':
      return {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            topic: str,
            payload: {
              oneOf: f.kinds.map((k) => ({
                ...objectOf(k.payload.columns),
                title: k.topic,
                required: k.payload.columns.map((c) => c.name),
              })),
            },
          },
        },
      };
    case 'status':
      return {
        type: 'object',
        properties: { status: { type: 'string', enum: [...f.words, ''] }, summary: str },
        required: ['status', 'summary'],
      };
    case 'json':
      return {};
    default:
      return undefined;
  }
}

const DIR_ENTRY = {
  type: 'array',
  items: {
    type: 'object',
    properties: { name: str, dir: { type: 'boolean' }, mode: str, length: { type: 'integer' } },
  },
};

function content(f: Format | undefined, stream: boolean): Json {
  if (stream) {
    const line = f && ['jsonl', 'events', 'tsv', 'lines'].includes(f.kind) ? 'application/x-ndjson' : 'text/plain';
    return { [line]: { schema: str }, 'text/event-stream': { schema: str } };
  }
  const s = schemaOf(f);
  return s ? { 'application/json': { schema: s }, 'text/plain': { schema: str } } : { 'text/plain': { schema: str } };
}

const ERRORS = {
  '401': { description: 'no or wrong token' },
  '404': { description: 'no such file (or withheld)' },
  '400': {
    description: 'the server refused the request; the body says why',
    content: { 'application/json': { schema: { type: 'object', properties: { error: str } } } },
  },
};

export function openApi(root: DeclaredNode, formats: Readonly<Record<string, Format>>, serverUrl: string): Json {
  const paths: Json = {};
  const visit = (n: DeclaredNode, params: string[]): void => {
    if (n.internal) return;
    const ps = n.param !== undefined ? [...params, n.param] : params;
    const parameters = ps.map((p) => ({ name: p, in: 'path', required: true, schema: str }));
    const f = formats[n.pattern];
    const doc = `${n.doc ?? ''}${f ? `\n\nFormat: ${f.describe()}` : ''}`;
    const ops: Json = {};
    const streaming = n.read === 'stream' || n.read === 'rdwrStream';
    if (n.read === 'list') {
      ops.get = {
        summary: `list ${n.pattern}`,
        description: doc,
        responses: {
          '200': { description: 'the entries', content: { 'application/json': { schema: DIR_ENTRY } } },
          ...ERRORS,
        },
      };
    } else if (n.read) {
      const query = [
        { name: 'raw', in: 'query', required: false, description: "the file's text as it is, never JSON", schema: str },
      ];
      if (n.read === 'rdwrStream')
        query.push({
          name: 'request',
          in: 'query',
          required: false,
          description: 'written before streaming (e.g. an event filter)',
          schema: str,
        });
      ops.get = {
        summary: streaming
          ? `stream ${n.pattern}`
          : n.read === 'blockOnce'
            ? `read ${n.pattern} (blocks until there is a value)`
            : `read ${n.pattern}`,
        description: doc,
        parameters: query,
        responses: {
          '200': {
            description: streaming
              ? 'streamed until the file ends or the client goes (chunked, or SSE with Accept: text/event-stream)'
              : 'the content',
            content: content(f, streaming),
          },
          ...ERRORS,
        },
      };
    }
    if (n.write) {
      const reply = n.write === 'rdwr' || n.write === 'rdwrStream';
      ops.post = {
        summary:
          n.write === 'rdwr'
            ? `write a request to ${n.pattern}, get its reply`
            : n.write === 'rdwrStream'
              ? `write a request to ${n.pattern}, then stream`
              : `write ${n.pattern}`,
        description: doc,
        requestBody: { required: true, content: { 'text/plain': { schema: str } } },
        responses: reply
          ? {
              '200': { description: 'the reply read on the same fid', content: content(f, n.write === 'rdwrStream') },
              ...ERRORS,
            }
          : { '204': { description: n.write === 'text' ? 'the value was replaced' : 'written' }, ...ERRORS },
      };
    }
    if (n.removable)
      ops.delete = {
        summary: `remove ${n.pattern}`,
        description: doc,
        responses: { '204': { description: 'removed' }, ...ERRORS },
      };
    if (n.renamable) {
      ops.patch = {
        summary: `rename ${n.pattern}`,
        requestBody: {
          required: true,
          content: {
            'application/json': { schema: { type: 'object', properties: { name: str }, required: ['name'] } },
            'text/plain': { schema: str },
          },
        },
        responses: {
          '200': {
            description: 'renamed',
            content: { 'application/json': { schema: { type: 'object', properties: { name: str, path: str } } } },
          },
          ...ERRORS,
        },
      };
    }
    if (Object.keys(ops).length) paths[n.pattern] = { ...(parameters.length ? { parameters } : {}), ...ops };
    for (const c of n.children) visit(c, ps);
  };
  visit(root, []);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Ollie HTTP gateway',
      version: '1',
      description: 'REST over the Ollie 9P namespace: GET reads, POST writes, DELETE removes, PATCH renames.',
    },
    servers: [{ url: serverUrl }],
    security: [{ bearer: [] }, { token: [] }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'the token printed by `ollie serve --http`' },
        token: { type: 'apiKey', in: 'query', name: 'token' },
      },
    },
    paths,
  };
}
